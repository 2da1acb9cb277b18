"""The wrap engine's coroutine and async generator functions on Python 3.12+: ranged through
their code objects, as the code engine ranges every function, and not replaced.

Behind a wrapper a coroutine cannot be ranged for 60 ns a resumption on 3.12+ (docs/costs.md,
"Coroutines and exceptions"): the wrapper is a C callable, so the interpreter cannot push the
function's frame inline, making the coroutine from C enters the interpreter, and the proxy's
resumption enters it again through tp_iternext, its return value in a StopIteration. The code
engine's sys.monitoring callbacks range the frames themselves, with nothing between the caller
and the function. Counted in instructions (callgrind, 3.12 and 3.13), a coroutine awaited once
costs 1,310-1,330 more behind the wrapper, 550-580 more ranged through its code (3.11's wrapper:
590); an async generator's step 5,040-5,270 more behind the wrapper's driver, 580 through its
code. The function keeps its identity (no `__wrapped__`; `is`, pickling and `inspect` see it as
it is): the contract's "wrapping is invisible" at its most invisible. 3.10 and 3.11 keep the
wrapper (their `await` enters the interpreter from C anyway, and there is no sys.monitoring)."""

from __future__ import annotations

import _thread
import types

from autonvtx import ranges
from autonvtx.forklocks import renewed_in_fork_child

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from typing import Any


class CoroutineCodes:
    """Ranges the code of the coroutine and async generator functions the wrap engine is given,
    through a `ranges.CodeMonitor` claimed on the first one (a run that selects none claims no
    sys.monitoring tool id and pays nothing). Where the monitor cannot be installed (no free tool
    id, another CodeMonitor installed, AUTONVTX_PURE_PYTHON, no native client) it says no, once
    and for good, and the engine wraps them as before."""

    def __init__(self) -> None:
        self._monitor: ranges.CodeMonitor | None = None
        self.refused: str | None = None  # why no monitor could be installed (or restore() ran)
        # Never held while the program's code runs; free again in a fork child.
        self._lock = renewed_in_fork_child(_thread.allocate_lock())

    def give_range(self, func: Any, qualname: str, message: str, domain: str, color: int, category: int) -> bool:
        """Give every run of the code of `func` (a plain coroutine or async generator function,
        selected as `qualname`) the range (domain, message, color, category): True, or False
        when the engine must wrap it."""
        code = func.__code__
        if code.co_qualname != qualname:
            # A decorator's wrapper (functools.wraps names it after the function it decorates)
            # or a factory's function known by the name it is bound to: its code serves other
            # functions too, whose ranges a wrapper each keeps apart, as before.
            return False
        monitor = self._monitor if self._monitor is not None else self._install()
        if monitor is None:
            return False
        with self._lock:
            # The first decision about a code object stands, as in the code engine.
            if not monitor.is_monitored(code):
                monitor.monitor_new(code, ranges.prepared_range(domain, message, color, category))
        return True

    def ranges_code_of(self, func: Any) -> bool:
        """Whether `func` is a function whose code this gives a range (nothing to rebind)."""
        monitor = self._monitor
        return monitor is not None and type(func) is types.FunctionType and monitor.is_monitored(func.__code__)

    def _install(self) -> ranges.CodeMonitor | None:
        with self._lock:
            if self._monitor is None and self.refused is None:
                monitor = ranges.CodeMonitor()
                self.refused = monitor.install()
                if self.refused is None:
                    self._monitor = monitor
            return self._monitor

    def restore(self) -> int:
        """Stop ranging (sys.monitoring events, ranges and tool id given back); how many code
        objects had a range. Functions met afterwards are wrapped."""
        with self._lock:
            monitor, self._monitor = self._monitor, None
            self.refused = "restored"
        if monitor is None:
            return 0
        count = monitor.monitored()
        monitor.uninstall()
        return count
