"""Capture windows: cudaProfilerStart()/Stop() through the CUDA runtime the process already
loaded (PyTorch, CuPy and Numba load one), and what each window did, for the exit report."""

from __future__ import annotations

import ctypes
import os
from typing import Any


def loaded_cudart() -> str | None:
    """The path of a CUDA runtime library mapped into this process, or None. Read from
    /proc/self/maps: autonvtx never loads one itself (that would start CUDA in a process
    that does not use it)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rpartition(" ")[2].strip()
                if "libcudart" in os.path.basename(path) and os.path.isfile(path):
                    return path
    except OSError:
        return None
    return None


def _profiler_function(name: str) -> Any:
    path = loaded_cudart()
    if path is None:
        return None
    # RTLD_NOLOAD: take the copy already mapped, never load a second one.
    mode = getattr(os, "RTLD_NOLOAD", 4) | getattr(os, "RTLD_LOCAL", 0)
    try:
        library = ctypes.CDLL(path, mode=mode)
        function = getattr(library, name)
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int
    function.argtypes = []
    return function


class CaptureWindow:
    """The window [start, stop) of one region: called by regions.c as `window(opening, index)`
    at the start of iteration `start` (before its capture range opens) and of iteration
    `stop` (after it closed)."""

    def __init__(self, label: str, start: int, stop: int) -> None:
        self.label = label
        self.start, self.stop = start, stop
        self.notes: list[str] = []
        self.opened = self.closed = False

    def __call__(self, opening: bool, index: int) -> None:
        function = _profiler_function("cudaProfilerStart" if opening else "cudaProfilerStop")
        if opening:
            self.opened = True
        else:
            self.closed = True
        verb = "opened" if opening else "closed"
        if function is None:
            cuda = "no CUDA runtime loaded in this process: cudaProfiler{} not called".format(
                "Start" if opening else "Stop"
            )
        else:
            status = function()
            cuda = f"cudaProfiler{'Start' if opening else 'Stop'}() returned {status}"
        self.notes.append(f"{self.label}: capture window {verb} at iteration {index} ({cuda})")

    def exit_lines(self, iterations: int) -> list[str]:
        """What the exit report says about this window (a warning when it never opened)."""
        if not self.opened:
            return [
                f"warning: {self.label}: capture window [{self.start}, {self.stop}) never opened:"
                f" {iterations} iteration{'' if iterations == 1 else 's'} ran in process {os.getpid()}"
            ]
        return []
