"""Memory per module call (the torch plugin's `memory` option): the CUDA caching allocator's
allocated bytes when a module's range starts and ends, and the peak in between.

Each figure is an NVTX mark with an integer payload, in the domain `MEMORY_DOMAIN`, emitted on
the calling thread inside the module's range: `allocated at start` right after the range is
pushed, `peak allocated` and `allocated at end` right before it is popped. A range's own payload
is fixed when it starts, so the end and the peak cannot travel on it; marks carry them, and
both Nsight Systems (2022.4 exports a mark's payload in NVTX_EVENTS' int64Value) and the
recorder keep them. `autonvtx report --memory` joins each mark to the innermost range around it.

The peak between two points comes from the allocator's one peak counter: it is reset when a
range starts, and what it had reached since the enclosing range's last reset is folded into
that range's running peak first, so nested ranges each get their own peak (a per-thread stack).
The reset is visible to the program: `torch.cuda.max_memory_allocated()` reads the peak since
the latest module call began.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from typing import Any

MEMORY_DOMAIN = "autonvtx.memory"
AT_START = "allocated at start"
PEAK = "peak allocated"
AT_END = "allocated at end"
MESSAGES = (AT_START, PEAK, AT_END)
MARK_COLOR = 0xFF808080  # grey: beside the ranges, not one of them


class _Stack(threading.local):
    def __init__(self) -> None:
        # Per open range: [allocated at start, running peak, device].
        self.entries: list[list[int]] = []


class _Allocator:
    """The CUDA caching allocator's counters through torch's C functions (torch.cuda's Python
    functions flatten the whole statistics dict on every call)."""

    def __init__(self, torch: types.ModuleType) -> None:
        self._initialized: Callable[[], bool] = torch.cuda.is_initialized
        self._device: Callable[[], int] = torch._C._cuda_getDevice
        self._stats: Callable[[int], dict[str, Any]] = torch._C._cuda_memoryStats
        self._reset: Callable[[int], None] = torch._C._cuda_resetPeakMemoryStats

    def ready(self) -> bool:
        return self._initialized()

    def device(self) -> int:
        return self._device()

    def read(self, device: int) -> tuple[int, int]:
        """(allocated now, peak since the last reset) on `device`, in bytes."""
        allocated = self._stats(device)["allocated_bytes"]["all"]
        return int(allocated["current"]), int(allocated["peak"])

    def reset_peak(self, device: int) -> None:
        self._reset(device)


class MemoryMarks:
    """begin() right after a module's range is pushed, end() right before it is popped."""

    def __init__(self, allocator: Any, mark: Callable[[str, int], None], warn: Callable[[str], None]) -> None:
        self._allocator = allocator
        self._mark = mark
        self._warn = warn
        self._stack = _Stack()
        self.failures = 0

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        if self.failures == 1:  # said once: a failing counter fails on every call
            self._warn(
                f"memory: the CUDA allocator's counters failed ({type(exc).__name__}: {exc}); calls lack figures"
            )

    def begin(self) -> list[int] | None:
        """The open range's entry, or None when CUDA is not in use (yet) or the counters fail."""
        allocator = self._allocator
        try:
            if not allocator.ready():
                return None  # no CUDA context: nothing is on a GPU, and asking would create one
            device = allocator.device()
            allocated, peak = allocator.read(device)
            entries = self._stack.entries
            if entries and entries[-1][2] == device:
                # What the enclosing range reached since its last reset, before this one resets.
                entries[-1][1] = max(entries[-1][1], peak)
            allocator.reset_peak(device)
            entry = [allocated, allocated, device]
            self._mark(AT_START, allocated)
        except Exception as exc:  # counters must never break the program's forward
            self._failed(exc)
            return None
        entries.append(entry)
        return entry

    def end(self, entry: list[int]) -> None:
        entries = self._stack.entries
        try:
            while entries and entries.pop() is not entry:
                pass  # a range whose end was missed (an exception between begin and end)
            device = entry[2]
            allocated, peak = self._allocator.read(device)
            # The counter keeps this peak for the enclosing range: its next child's begin() or its
            # own end() reads it.
            self._mark(PEAK, max(entry[1], peak))
            self._mark(AT_END, allocated)
        except Exception as exc:
            self._failed(exc)


def memory_marks(torch: types.ModuleType, warn: Callable[[str], None]) -> MemoryMarks | None:
    """The memory figures of module calls, or None (with one warning) where they do not apply."""
    try:
        available = bool(torch.cuda.is_available())
    except Exception as exc:
        warn(f"memory: torch.cuda.is_available() failed ({type(exc).__name__}: {exc}); no memory figures")
        return None
    if not available:
        warn(
            "memory: no CUDA device (torch.cuda.is_available() is False): memory per range counts the CUDA "
            "caching allocator's bytes and does not apply to CPU tensors; no memory figures are recorded"
        )
        return None
    try:
        allocator = _Allocator(torch)
    except AttributeError as exc:
        warn(f"memory: this torch has no CUDA allocator counters ({exc}); no memory figures")
        return None
    return MemoryMarks(allocator, NvtxMarks().mark, warn)


class _Attributes(threading.local):
    def __init__(self) -> None:
        self.by_message: dict[str, Any] = {}


class NvtxMarks:
    """Marks in the memory domain with an int64 payload, through the `nvtx` package's C calls
    themselves: its `Domain` (and so `nvtx.mark`) is a dummy wherever the tool does not answer
    nvtxDomainIsEnabled, as Nsight Systems 2022.4 does not, although it records marks. Each
    message is registered once; the attributes are per thread, since the payload is set on
    them before each mark."""

    def __init__(self) -> None:
        from nvtx._lib import lib  # loaded already: the plugin's emitters come from it

        self._lib = lib
        self._domain = lib.DomainHandle(MEMORY_DOMAIN)
        self._strings = {m: types.SimpleNamespace(handle=lib.StringHandle(self._domain, m)) for m in MESSAGES}
        self._attributes = _Attributes()

    def mark(self, message: str, value: int) -> None:
        cache = self._attributes.by_message
        attributes = cache.get(message)
        if attributes is None:
            attributes = cache[message] = self._lib.EventAttributes(None, self._strings[message], MARK_COLOR, None, 0)
        attributes.payload = value
        self._lib.mark(attributes, self._domain)
