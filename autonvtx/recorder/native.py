"""The one ctypes binding of the native recorder library: its control functions and its exporter.

Every C structure crossing the boundary is a typed `ctypes.Structure` here (field names, not
indices); `_native/export.c` fills them as arrays of the same layout.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any, Literal

# Re-exported: where callers have always found them.
from autonvtx.recorder import LIBRARY_NAME as LIBRARY_NAME, library_path as library_path

Mode = Literal["record", "noop"]


@dataclass(frozen=True)
class FlushResult:
    """What one flush wrote."""

    events: int  # events recorded (all threads)
    dropped: int  # events lost to the memory bound
    bytes: int  # size of the file written


@dataclass(frozen=True)
class Stats:
    """The recorder's counters, read without writing anything."""

    events: int
    dropped: int
    bytes_used: int  # bytes of committed event records
    bytes_allocated: int  # bytes of buffer chunks, counted against AUTONVTX_RECORD_LIMIT_MB


class RecorderControl:
    """The recorder's control functions, through the same dlopen handle NVTX uses (same globals)."""

    def __init__(self, path: str) -> None:
        # dlopen of an already-loaded library returns its existing handle, so this sees the
        # buffers NVTX's clients write to; RTLD_GLOBAL is not needed for that.
        self.path = path
        lib = ctypes.CDLL(path)
        lib.autonvtx_recorder_flush.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)]
        lib.autonvtx_recorder_flush.restype = ctypes.c_int
        lib.autonvtx_recorder_set_mode.argtypes = [ctypes.c_int]
        lib.autonvtx_recorder_set_mode.restype = None
        lib.autonvtx_recorder_mode.argtypes = []
        lib.autonvtx_recorder_mode.restype = ctypes.c_int
        lib.autonvtx_recorder_is_attached.argtypes = []
        lib.autonvtx_recorder_is_attached.restype = ctypes.c_int
        lib.autonvtx_recorder_events.argtypes = []
        lib.autonvtx_recorder_events.restype = ctypes.c_uint64
        lib.autonvtx_recorder_stats.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
        lib.autonvtx_recorder_stats.restype = None
        lib.autonvtx_recorder_fail_exit.argtypes = [ctypes.c_int]
        lib.autonvtx_recorder_fail_exit.restype = ctypes.c_int
        self._lib = lib

    def flush(self, path: str | os.PathLike[str] | None = None) -> FlushResult:
        """Write every event so far to `path` atomically; None means $AUTONVTX_RECORD_DIR/<pid>.anr."""
        out = (ctypes.c_uint64 * 3)()
        encoded = os.fsencode(path) if path is not None else None
        rc = self._lib.autonvtx_recorder_flush(encoded, out)
        if rc != 0:
            where = os.fsdecode(encoded) if encoded is not None else "$AUTONVTX_RECORD_DIR"
            raise OSError(-rc, f"cannot write the NVTX recording: {os.strerror(-rc)}", where)
        return FlushResult(events=out[0], dropped=out[1], bytes=out[2])

    def set_mode(self, mode: Mode) -> None:
        """Switch every attached NVTX client between recording and a tool that does nothing."""
        if mode not in ("record", "noop"):
            raise ValueError(f"recorder mode must be 'record' or 'noop', not {mode!r}")
        self._lib.autonvtx_recorder_set_mode(1 if mode == "noop" else 0)

    def mode(self) -> Mode:
        return "noop" if self._lib.autonvtx_recorder_mode() else "record"

    def is_attached(self) -> bool:
        """Whether an NVTX client in this process has initialized the recorder as its tool."""
        return bool(self._lib.autonvtx_recorder_is_attached())

    def events_recorded(self) -> int:
        return int(self._lib.autonvtx_recorder_events())

    def fail_exit(self, status: int) -> bool:
        """Make this process exit with `status` where it would exit with 0, once Python has shut
        down (glibc only: False elsewhere)."""
        return bool(self._lib.autonvtx_recorder_fail_exit(status))

    def stats(self) -> Stats:
        out = (ctypes.c_uint64 * 4)()
        self._lib.autonvtx_recorder_stats(out)
        return Stats(events=out[0], dropped=out[1], bytes_used=out[2], bytes_allocated=out[3])


_control: RecorderControl | None = None


def control() -> RecorderControl:
    """The control handle (loading the library if NVTX has not); FileNotFoundError if not built."""
    global _control
    if _control is None:
        path = library_path()
        if path is None:
            raise FileNotFoundError(f"the native recorder {LIBRARY_NAME} is not built in this installation")
        _control = RecorderControl(path)
    return _control


class FileInfo(ctypes.Structure):
    """What `autonvtx_export_file` found in one recording (`uint64_t info[8]` in export.c)."""

    _fields_ = [
        ("ranges", ctypes.c_uint64),
        ("marks", ctypes.c_uint64),
        ("open_ranges", ctypes.c_uint64),
        ("unmatched_pops", ctypes.c_uint64),
        ("first_ns", ctypes.c_uint64),
        ("last_ns", ctypes.c_uint64),
        ("flush_ns", ctypes.c_uint64),
        ("ended_normally", ctypes.c_uint64),
    ]


class RowCounts(ctypes.Structure):
    """One statistics row's integers (`uint64_t out[12]` of `autonvtx_export_row`)."""

    _fields_ = [
        ("group", ctypes.c_uint64),
        ("parent_plus_one", ctypes.c_uint64),
        ("depth", ctypes.c_uint64),
        ("count", ctypes.c_uint64),
        ("total_ns", ctypes.c_uint64),
        ("self_ns", ctypes.c_uint64),
        ("min_ns", ctypes.c_uint64),
        ("max_ns", ctypes.c_uint64),
        ("open_count", ctypes.c_uint64),
        ("name_id", ctypes.c_uint64),
        ("domain_id", ctypes.c_uint64),
        ("seen", ctypes.c_uint64),
    ]


class RowFigures(ctypes.Structure):
    """One statistics row's floating-point figures (`double fout[3]`)."""

    _fields_ = [("mean_ns", ctypes.c_double), ("median_ns", ctypes.c_double), ("variance", ctypes.c_double)]


class GroupSpan(ctypes.Structure):
    """The recorded time of one statistics group (`uint64_t out[3]` of `autonvtx_export_group_spans`)."""

    _fields_ = [("group", ctypes.c_uint64), ("first_ns", ctypes.c_uint64), ("last_ns", ctypes.c_uint64)]


class Damage(ctypes.Structure):
    """What a damaged recording lost (`uint64_t out[6]` of `autonvtx_export_damage`): damage,
    then what a last write cut short by the process's end kept and lost."""

    _fields_ = [
        ("corrupt_records", ctypes.c_uint64),
        ("skipped_bytes", ctypes.c_uint64),
        ("bad_entries", ctypes.c_uint64),
        ("impossible_times", ctypes.c_uint64),
        ("cut_kept_events", ctypes.c_uint64),
        ("cut_lost_bytes", ctypes.c_uint64),
    ]


# The exporter's statistics modes (export.c's STATS_*).
STATS_FLAT, STATS_TREE, STATS_BY_THREAD, STATS_CLASS, STATS_NUMBERS = 1, 2, 4, 8, 16
TEXT_NAME, TEXT_DOMAIN = 0, 1


def _declare(lib: ctypes.CDLL, name: str, argtypes: list[Any], restype: Any) -> None:
    function = getattr(lib, name)
    function.argtypes = argtypes
    function.restype = restype


_exporter_lib: ctypes.CDLL | None = None


def exporter() -> ctypes.CDLL:
    """The library with the exporter's signatures declared (the loaded library's handle, when NVTX
    has loaded it); FileNotFoundError if not built."""
    global _exporter_lib
    if _exporter_lib is not None:
        return _exporter_lib
    path = library_path()
    if path is None:
        raise FileNotFoundError(f"the native recorder {LIBRARY_NAME} is not built in this installation")
    lib = ctypes.CDLL(path)
    handle, u64, text = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p
    _declare(lib, "autonvtx_export_new", [text, text, ctypes.c_int, u64], handle)
    _declare(lib, "autonvtx_export_file", [handle, text, u64, ctypes.POINTER(FileInfo)], ctypes.c_int)
    _declare(lib, "autonvtx_export_close", [handle], ctypes.c_int)
    _declare(lib, "autonvtx_export_rows", [handle], ctypes.c_size_t)
    _declare(
        lib,
        "autonvtx_export_row",
        [handle, ctypes.c_size_t, ctypes.POINTER(RowCounts), ctypes.POINTER(RowFigures)],
        None,
    )
    _declare(lib, "autonvtx_export_text", [handle, ctypes.c_uint32, ctypes.c_int], text)
    _declare(lib, "autonvtx_export_group_spans", [handle, ctypes.c_size_t, ctypes.POINTER(GroupSpan)], ctypes.c_size_t)
    _declare(lib, "autonvtx_export_free", [handle], None)
    _declare(lib, "autonvtx_export_outside", [handle], u64)
    _declare(lib, "autonvtx_export_damage", [handle, ctypes.POINTER(Damage)], u64)
    _exporter_lib = lib
    return lib
