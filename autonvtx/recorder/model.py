"""What a recording holds once read back: processes, threads, ranges and marks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Payload = int | float | None
RangeKind = Literal["push", "startend"]
# How a process's recording ended, shown beside its name (a trace's track, a --by group), never
# kept inside it: "ended abnormally" (its last write was not the final one: a crash, os._exit, a
# kill), "still running" (alive when the outputs were written), "recording missing" (a child
# that announced itself and wrote nothing).
ProcessStatus = Literal["ended", "ended abnormally", "still running", "recording missing"]
PROCESS_STATUSES: tuple[ProcessStatus, ...] = ("ended", "ended abnormally", "still running", "recording missing")

# A byte that was not UTF-8 in a command line (os.fsdecode keeps it as a lone surrogate):
# no trace format can hold one, so labels show U+FFFD there, as a "replace" decoding would.
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` with every lone surrogate as U+FFFD: encodable as UTF-8 whatever bytes it came from."""
    return _SURROGATE.sub("\ufffd", text)


@dataclass(frozen=True)
class Range:
    """One NVTX range: a matched push/pop on a thread, or a start/end pair (possibly cross-thread)."""

    pid: int
    tid: int  # OS thread id that pushed / started the range
    domain: str  # "" for the core (default) domain
    name: str  # the message; "" when the event had none
    start_ns: int  # CLOCK_MONOTONIC nanoseconds
    end_ns: int
    kind: RangeKind = "push"
    category: str | None = None  # the category's registered name, else its number as text
    color: int | None = None  # 0xAARRGGBB, None when the event set no color
    payload: Payload = None
    is_open: bool = False  # still open when the process flushed; end_ns is the flush time
    end_tid: int | None = None  # for start/end ranges ended on another thread

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Mark:
    """One NVTX mark: an instant event."""

    pid: int
    tid: int
    domain: str
    name: str
    ts_ns: int
    category: str | None = None
    color: int | None = None
    payload: Payload = None


@dataclass
class ProcessRecording:
    """Everything one process's recorder saw, with ranges already matched."""

    pid: int
    ppid: int = 0
    cmdline: list[str] = field(default_factory=list)
    thread_names: dict[int, str] = field(default_factory=dict)  # OS tid -> name
    ranges: list[Range] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    dropped_events: int = 0  # events lost because the memory bound was hit
    unmatched_pops: int = 0  # pops (or ends) with no open range to close
    flush_ns: int = 0  # CLOCK_MONOTONIC time at which the recording was written
    realtime_offset_ns: int = 0  # CLOCK_REALTIME - CLOCK_MONOTONIC at flush, for cross-host merges
    label: str = ""  # how the process is named in a trace ("python train.py", "rank 1", ...)
    ended_normally: bool = True  # False: the process died (SIGKILL, os._exit) after its last spill
    discarded_events: int = 0  # older events a keep-last recording let go (by design, not lost)
    status: ProcessStatus = "ended"  # as the outputs show it; `ended_normally` is what the file says

    @property
    def display_name(self) -> str:
        if self.label:
            return valid_text(self.label)
        if self.cmdline:
            return valid_text(" ".join(self.cmdline))
        return f"pid {self.pid}"

    @property
    def track_name(self) -> str:
        """How a trace names its track: the name, with the status where it did not simply end."""
        return self.display_name if self.status == "ended" else f"{self.display_name} ({self.status})"
