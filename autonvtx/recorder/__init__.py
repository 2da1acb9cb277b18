"""The native NVTX recorder and the trace and summary written from what it saw."""

from __future__ import annotations

import os

LIBRARY_NAME = "libautonvtx_recorder.so"


def library_path() -> str | None:
    """Absolute path of the built recorder library, or None when this installation has none.
    (Here rather than in `native`: asking whether a tool is ours loads no ctypes, issue 24.)"""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
    return path if os.path.isfile(path) else None
