"""autonvtx's own recordings (Chrome traces) as report input: NVTX ranges only, no GPU work."""
from __future__ import annotations

import re
from dataclasses import dataclass

from autonvtx.recorder.trace import read_chrome_trace
from autonvtx.report.export import RangeRow
from autonvtx.report.labels import Labels

_RANK_LABEL = re.compile(r"^rank (\d+)\b")


@dataclass
class Recorded:
    """The ranges of a trace in the sweep's form, the labels for its ids, and what to say."""

    ranges: list[RangeRow]
    labels: Labels
    notes: list[str]
    processes: int


def read_recording(path: str) -> Recorded:
    recordings = read_chrome_trace(path)
    domains: dict[str, int] = {"": 0}
    processes: dict[int, str] = {}
    threads: dict[int, str] = {}
    ranks: dict[int, int] = {}
    rows: list[RangeRow] = []
    open_ranges = 0
    for recording in recordings:
        pid = recording.pid & 0xFFFFFF
        processes[pid << 24] = recording.display_name
        match = _RANK_LABEL.match(recording.label)
        if match:
            ranks[pid << 24] = int(match.group(1))
        for tid, name in recording.thread_names.items():
            threads[(pid << 24) | (tid & 0xFFFFFF)] = name
        for r in recording.ranges:
            domain = domains.setdefault(r.domain, len(domains))
            rows.append(((pid << 24) | (r.tid & 0xFFFFFF), r.start_ns, r.end_ns, int(r.kind == "startend"), domain, r.name))
            open_ranges += r.is_open
    rows.sort(key=lambda row: (row[1], -row[2]))
    notes = [
        "an autonvtx recording holds NVTX ranges only (the recorder sees no CUDA activity): CPU time per range, "
        "no GPU time; for GPU time per range profile with `nsys profile -t cuda,nvtx autonvtx run ...` "
        "and report on the export"
    ]
    if open_ranges:
        notes.append(f"{open_ranges} range(s) were still open when their process wrote the trace: counted to that moment")
    labels = Labels(processes, threads, ranks, {domain_id: name for name, domain_id in domains.items() if domain_id})
    return Recorded(rows, labels, notes, len(recordings))
