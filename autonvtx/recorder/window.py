"""Capture windows applied to recordings when they are exported: only events inside a window
(a `capture` range of domain `autonvtx`, opened by a region's capture window) are kept."""
from __future__ import annotations

from typing import List, Sequence, Tuple

from autonvtx.recorder.model import ProcessRecording

CAPTURE_NAME = "capture"
CAPTURE_DOMAIN = "autonvtx"

_Window = Tuple[int, int]


def _windows(recording: ProcessRecording) -> List[_Window]:
    return [
        (r.start_ns, r.end_ns)
        for r in recording.ranges
        if r.name == CAPTURE_NAME and r.domain == CAPTURE_DOMAIN and r.kind == "startend"
    ]


def _inside(start: int, end: int, windows: Sequence[_Window]) -> bool:
    return any(low <= start and end <= high for low, high in windows)


def keep_capture_windows(recordings: Sequence[ProcessRecording]) -> List[str]:
    """Drop, in place, every range and mark outside the capture windows; thread and process
    names stay. A process uses its own windows, or every process's when it opened none (the
    clock is the host's CLOCK_MONOTONIC: one time line). Nothing changes when no process
    opened a window. Returns a note per process that lost events (nothing is lost silently)."""
    own = {id(rec): _windows(rec) for rec in recordings}
    every = sorted(w for windows in own.values() for w in windows)
    if not every:
        return []
    notes = []
    for rec in recordings:
        windows = own[id(rec)] or every
        ranges = [r for r in rec.ranges if _inside(r.start_ns, r.end_ns, windows)]
        marks = [m for m in rec.marks if _inside(m.ts_ns, m.ts_ns, windows)]
        dropped = len(rec.ranges) - len(ranges) + len(rec.marks) - len(marks)
        rec.ranges, rec.marks = ranges, marks
        if dropped:
            count = len(windows)
            notes.append(
                f"process {rec.pid}: {dropped} event{'' if dropped == 1 else 's'} outside the capture"
                f" window{'' if count == 1 else 's'} left out (capture@autonvtx)"
            )
    return notes
