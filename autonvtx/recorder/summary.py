"""Range statistics per (domain, name), like ``nsys stats -r nvtx_sum``, as text, CSV or JSON."""
from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import IO, Union

from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.recorder.trace import write_atomically

StrPath = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class RangeStats:
    """Statistics of every range sharing one domain and name, times in nanoseconds."""

    domain: str
    name: str
    count: int
    total_ns: int
    self_ns: int  # total minus the time spent in ranges nested directly inside
    mean_ns: float
    median_ns: float
    min_ns: int
    max_ns: int
    stddev_ns: float  # sample standard deviation (n - 1), as nsys reports it; 0 for one instance
    percent: float  # share of the sum of all totals
    open_count: int  # instances still open when the process exited
    wall_percent: float = 0.0  # share of the recorded wall time (first event to last write)

    @property
    def label(self) -> str:
        """How the table names the range: ``domain:name``, or the bare name in the default domain."""
        return f"{self.domain}:{self.name}" if self.domain else self.name


def summarize(recordings: Iterable[ProcessRecording]) -> list[RangeStats]:
    """Per-(domain, name) statistics over all ranges, the largest total time first.

    Self time subtracts the time of the push/pop ranges nested directly inside a push/pop
    range on the same thread, whatever their domain: a PyTorch ``aten::mm`` inside
    ``Trainer.step`` is time ``Trainer.step`` spent elsewhere. Start/end ranges may overlap
    anything and cross threads, so they neither have children nor count as one
    (their self time is their total).
    """
    recordings = list(recordings)
    durations: dict[tuple[str, str], list[int]] = {}
    self_times: dict[tuple[str, str], int] = {}
    open_counts: dict[tuple[str, str], int] = {}
    for rec in recordings:
        for r, self_ns in _self_times(rec.ranges):
            key = (r.domain, r.name)
            group = durations.get(key)
            if group is None:
                group = durations[key] = []
                self_times[key] = 0
                open_counts[key] = 0
            group.append(r.end_ns - r.start_ns)
            self_times[key] += self_ns
            if r.is_open:
                open_counts[key] += 1
    grand_total = sum(sum(group) for group in durations.values())
    wall = _wall_ns(recordings)
    stats = [
        _stats(domain, name, group, self_times[(domain, name)], open_counts[(domain, name)], grand_total, wall)
        for (domain, name), group in durations.items()
    ]
    stats.sort(key=lambda s: (-s.total_ns, s.domain, s.name))
    return stats


def _self_times(ranges: Sequence[Range]) -> list[tuple[Range, int]]:
    """Each range with its self time: its duration less that of its direct children."""
    result: list[tuple[Range, int]] = []
    pushes: list[Range] = []
    for r in ranges:
        if r.kind == "push":
            pushes.append(r)
        else:
            result.append((r, r.end_ns - r.start_ns))
    # Per thread in start order, parents before their children (the longer first on ties).
    pushes.sort(key=lambda r: (r.tid, r.start_ns, -r.end_ns))
    child_ns = [0] * len(pushes)
    stack: list[tuple[int, int]] = []  # (index into pushes, end) of the enclosing ranges
    previous_tid: int | None = None
    for index, r in enumerate(pushes):
        if r.tid != previous_tid:
            stack.clear()
            previous_tid = r.tid
        start, end = r.start_ns, r.end_ns
        while stack and stack[-1][1] <= start:
            stack.pop()
        if stack:
            parent, parent_end = stack[-1]
            # Push/pop ranges on one thread nest by construction; clip anyway, so a
            # damaged recording yields odd numbers rather than negative self times.
            child_ns[parent] += (end if end < parent_end else parent_end) - start
        stack.append((index, end))
    for r, children in zip(pushes, child_ns):
        own = r.end_ns - r.start_ns - children
        result.append((r, own if own > 0 else 0))
    return result


def _wall_ns(recordings: Sequence[ProcessRecording]) -> int:
    """The recorded wall time: from the first range's start to the last range's end."""
    starts = [r.start_ns for rec in recordings for r in rec.ranges]
    ends = [r.end_ns for rec in recordings for r in rec.ranges]
    return max(ends) - min(starts) if starts else 0


def _stats(domain: str, name: str, durations: list[int], self_ns: int, open_count: int, grand_total: int,
           wall: int = 0) -> RangeStats:
    durations.sort()
    count = len(durations)
    total = sum(durations)
    middle = count // 2
    median = float(durations[middle]) if count % 2 else (durations[middle - 1] + durations[middle]) / 2
    if count > 1:
        # Exact integer sums: float accumulation over millions of values drifts, and the
        # statistics module's exact arithmetic is far too slow here.
        spread = count * sum(d * d for d in durations) - total * total
        stddev = math.sqrt(spread / (count * (count - 1)))
    else:
        stddev = 0.0
    return RangeStats(
        domain=domain,
        name=name,
        count=count,
        total_ns=total,
        self_ns=self_ns,
        mean_ns=total / count,
        median_ns=median,
        min_ns=durations[0],
        max_ns=durations[-1],
        stddev_ns=stddev,
        percent=100.0 * total / grand_total if grand_total else 0.0,
        open_count=open_count,
        wall_percent=100.0 * total / wall if wall else 0.0,
    )


def summary_notes(recordings: Iterable[ProcessRecording]) -> list[str]:
    """Lines telling the reader what the numbers may miss: lost events, open ranges, stray pops."""
    recordings = list(recordings)
    notes: list[str] = []
    dropped = sum(r.dropped_events for r in recordings)
    if dropped:
        notes.append(
            f"{count_text(dropped, 'event was', 'events were')} dropped when the recorder's memory bound was hit; "
            "the counts are low (raise AUTONVTX_RECORD_LIMIT_MB)"
        )
    still_open = sum(1 for rec in recordings for r in rec.ranges if r.is_open)
    if still_open:
        notes.append(f"{count_text(still_open, 'range was', 'ranges were')} still open at exit (timed up to the moment the recording was written)")
    unmatched = sum(r.unmatched_pops for r in recordings)
    if unmatched:
        notes.append(f"{count_text(unmatched, 'pop or range end', 'pops or range ends')} had no open range to close (ignored)")
    return notes


def count_text(number: int, singular: str, plural: str) -> str:
    return f"{number:,} {singular if number == 1 else plural}"


# Rendering

_TEXT_COLUMNS = ("Time %", "% Wall", "Total", "Self", "Instances", "Mean", "Median", "Min", "Max", "StdDev", "Range")


def format_duration(ns: float) -> str:
    """A duration in the largest unit that keeps it >= 1: ``812 ns``, ``3.250 us``, ``1.204 s``.

    One unit per cell, as ``timeit`` and hyperfine print: a table spans sub-microsecond
    helpers and minute-long loops, and any single unit either rounds the short ones to zero
    or buries the long ones in digits. Exact nanoseconds are in the CSV and JSON forms.
    ASCII "us", so that no terminal or log encoding mangles it.
    """
    magnitude = abs(ns)
    if magnitude >= 1e9:
        return f"{ns / 1e9:,.3f} s"
    if magnitude >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if magnitude >= 1e3:
        return f"{ns / 1e3:.3f} us"
    return f"{ns:.0f} ns"


def format_text(stats: Sequence[RangeStats], *, notes: Sequence[str] = ()) -> str:
    """An aligned table, largest total first, then one ``Note:`` line per note."""
    rows = [
        (
            f"{s.percent:.1f}",
            f"{s.wall_percent:.1f}",
            format_duration(s.total_ns),
            format_duration(s.self_ns),
            f"{s.count:,}" + (f" ({s.open_count:,} open)" if s.open_count else ""),
            format_duration(s.mean_ns),
            format_duration(s.median_ns),
            format_duration(s.min_ns),
            format_duration(s.max_ns),
            format_duration(s.stddev_ns),
            s.label,
        )
        for s in stats
    ]
    widths = [max([len(header)] + [len(row[i]) for row in rows]) for i, header in enumerate(_TEXT_COLUMNS)]
    last = len(_TEXT_COLUMNS) - 1

    def line(cells: Sequence[str]) -> str:
        # Numbers right-aligned, the range name left-aligned and unpadded.
        return "  ".join(cell if i == last else cell.rjust(widths[i]) for i, cell in enumerate(cells)).rstrip()

    out = [line(_TEXT_COLUMNS), line(["-" * w for w in widths])]
    out.extend(line(row) for row in rows)
    if not rows:
        out.append("(no ranges recorded)")
    if notes:
        out.append("")
        out.extend(f"Note: {note}" for note in notes)
    return "\n".join(out) + "\n"


_FIELDS = tuple(f.name for f in fields(RangeStats))


def format_csv(stats: Sequence[RangeStats]) -> str:
    """One header row (the RangeStats field names), then one row per range, times in ns."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_FIELDS)
    for s in stats:
        writer.writerow([getattr(s, name) for name in _FIELDS])
    return buffer.getvalue()


def format_json(stats: Sequence[RangeStats], *, notes: Sequence[str] = ()) -> str:
    """``{"ranges": [{field: value, ...}, ...], "notes": [...]}``, times in ns."""
    return json.dumps({"ranges": [asdict(s) for s in stats], "notes": list(notes)}, indent=2) + "\n"


def write_summary(stats: Sequence[RangeStats], destination: StrPath, *, notes: Sequence[str] = ()) -> None:
    """Write the table to stderr (``"-"``) or to a file whose extension picks the form.

    ``.csv`` and ``.json`` get those forms, anything else the text table. Files are
    written atomically. Stderr, because stdout belongs to the program that was run.
    """
    target = os.fspath(destination)
    if target == "-":
        sys.stderr.write(format_text(stats, notes=notes))
        sys.stderr.flush()
        return
    extension = os.path.splitext(target)[1].lower()
    if extension == ".csv":
        text = format_csv(stats)
    elif extension == ".json":
        text = format_json(stats, notes=notes)
    else:
        text = format_text(stats, notes=notes)

    def write(stream: IO[str]) -> None:
        stream.write(text)

    write_atomically(target, write)
