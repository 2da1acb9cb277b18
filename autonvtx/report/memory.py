"""Memory per range (`--memory`): the torch plugin's memory marks joined to the range around them.

The plugin's `memory` option emits, inside each module call's range and on its thread, three
marks in the domain `MEMORY_DOMAIN` whose int64 payloads are the CUDA caching allocator's
bytes: allocated at the range's start, the peak in between, allocated at its end. Each mark
belongs to the innermost push/pop range open on its thread at its time (the first is emitted
right after the push, the last two right before the pop). Per range name: how many calls have
the figures, the most and the mean a call raised the allocation above what it started with
(`peak - start`: what the call needed on top), the mean it kept (`end - start`: tensors it
left allocated, such as activations saved for backward), and the highest peak.

Recordings (`.anr`, traces) hold the marks as `recorder.model.Mark`s; an Nsight Systems export
holds them in NVTX_EVENTS (eventType 34, the payload in int64Value).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from autonvtx.recorder.model import ProcessRecording
from autonvtx.report.render.text import format_duration
from autonvtx.stats.model import group_title, row_naming
from autonvtx.stats.view import glob_matches

# The plugin's (autonvtx.plugins.torch.memory): the observation half does not import the
# instrumentation half; tests/test_torch_memory.py holds the two equal.
MEMORY_DOMAIN = "autonvtx.memory"
AT_START = "allocated at start"
PEAK = "peak allocated"
AT_END = "allocated at end"
_SLOT = {AT_START: 0, PEAK: 1, AT_END: 2}
MARK_TYPE = 34  # NVTX_EVENTS.eventType of a mark
NO_FIGURES = (
    "no memory figures in this profile: the torch plugin's `memory` option records them, for "
    "modules run on a CUDA device (on CPU tensors it does not apply)"
)
SORTS = ("rise", "kept", "peak", "count", "name")


@dataclass
class MemoryRow:
    """One range name's memory figures (within one --by group)."""

    group: str
    domain: str
    name: str
    calls: int = 0
    total_ns: int = 0  # the time of the calls with figures (their ranges' durations)
    rise_max: int = 0
    rise_total: int = 0
    kept_total: int = 0
    peak_max: int = 0

    # The view's row protocol (`stats.view.ViewRow`): a flat row.
    view_parent = None

    @property
    def view_key(self) -> tuple[str, str, str]:
        return (self.group, self.domain, self.name)

    def view_matches(self, pattern: str) -> bool:
        return glob_matches(self.domain, self.name, pattern)

    @property
    def rise_mean(self) -> float:
        return self.rise_total / self.calls if self.calls else 0.0

    @property
    def kept_mean(self) -> float:
        return self.kept_total / self.calls if self.calls else 0.0

    def add(self, duration_ns: int, start: int, peak: int, end: int) -> None:
        self.calls += 1
        self.total_ns += duration_ns
        self.rise_max = max(self.rise_max, peak - start)
        self.rise_total += peak - start
        self.kept_total += end - start
        self.peak_max = max(self.peak_max, peak)


Sample = tuple[str, str, str, int, int, int, int]  # group, domain, name, duration, start, peak, end


def rows_of(samples: Iterable[Sample]) -> list[MemoryRow]:
    rows: dict[tuple[str, str, str], MemoryRow] = {}
    for group, domain, name, duration, start, peak, end in samples:
        row = rows.get((group, domain, name))
        if row is None:
            row = rows[group, domain, name] = MemoryRow(group, domain, name)
        row.add(duration, start, peak, end)
    return list(rows.values())


def order(sort: str | None) -> Callable[[MemoryRow], Any]:
    """The view's sort key (ascending puts the largest first); default: the largest rise."""
    if sort == "name":
        return lambda row: (row.domain, row.name)
    if sort == "count":
        return lambda row: (-row.calls, row.name)
    if sort == "kept":
        return lambda row: (-row.kept_mean, row.name)
    if sort == "peak":
        return lambda row: (-row.peak_max, row.name)
    return lambda row: (-row.rise_max, -row.rise_mean, row.name)


# A timed event of one thread, for the join: (time, 0 for a range start / 1 for a mark, end or
# -1, domain, name or message, payload).
_Event = tuple[int, int, int, str, str, int]


def _join(events: list[_Event], unjoined: list[int]) -> Iterator[tuple[str, str, int, int, int, int]]:
    """(domain, name, duration, start, peak, end) per range that got all three marks: each mark
    goes to the innermost range open at its time (a range starting at a mark's time comes first).
    Marks with no range around them, or whose range lacks one of the three (events dropped at
    the recorder's bound, a capture that began mid-call), are counted in `unjoined[0]`."""
    events.sort(key=lambda e: (e[0], e[1], -e[2]))
    # Open ranges: (end, domain, name, duration, figures).
    stack: list[tuple[int, str, str, int, list[int | None]]] = []
    for time, kind, end, domain, text, payload in events:
        while stack and stack[-1][0] < time:
            yield from _complete(stack.pop(), unjoined)
        if kind == 0:
            stack.append((end, domain, text, end - time, [None, None, None]))
        elif stack and text in _SLOT:
            stack[-1][4][_SLOT[text]] = payload
        else:
            unjoined[0] += 1
    while stack:
        yield from _complete(stack.pop(), unjoined)


def _complete(
    entry: tuple[int, str, str, int, list[int | None]], unjoined: list[int]
) -> Iterator[tuple[str, str, int, int, int, int]]:
    _, domain, name, duration, (start, peak, end) = entry
    if start is not None and peak is not None and end is not None:
        yield domain, name, duration, start, peak, end
    else:
        unjoined[0] += sum(figure is not None for figure in (start, peak, end))


def unjoined_note(count: int) -> list[str]:
    """What --memory says of marks it could not give a range (none is left out silently)."""
    if not count:
        return []
    return [
        f"{count:,} memory mark(s) had no range around them with all three figures (events dropped or "
        "outside the capture): left out of the table"
    ]


def from_recordings(recordings: Sequence[ProcessRecording], by: str | None, each: bool) -> tuple[list[MemoryRow], int]:
    """The memory rows of an autonvtx recording (names as its statistics rows show them), and
    how many marks could not be joined to a range."""
    rename = row_naming(each)
    samples: list[Sample] = []
    unjoined = [0]
    for rec in recordings:
        marks: dict[int, list[_Event]] = {}
        for m in rec.marks:
            if m.domain == MEMORY_DOMAIN and isinstance(m.payload, int):
                marks.setdefault(m.tid, []).append((m.ts_ns, 1, -1, m.domain, m.name, m.payload))
        if not marks:
            continue
        for r in rec.ranges:
            if r.kind == "push" and r.tid in marks:
                marks[r.tid].append((r.start_ns, 0, r.end_ns, r.domain, r.name, 0))
        for tid, events in marks.items():
            group = group_title(by, rec, tid)
            for domain, name, *figures in _join(events, unjoined):
                samples.append((group, domain, rename(name), *figures))  # type: ignore[arg-type]
    return rows_of(samples), unjoined[0]


def from_export(path: str, by: str | None, rename: Callable[[str], str] | None) -> tuple[list[MemoryRow], int]:
    """The memory rows of an Nsight Systems export, and how many marks could not be joined."""
    from autonvtx.report.nsys.export import NsysExport
    from autonvtx.report.nsys.labels import process_key, read_labels
    from autonvtx.report.nsys.schema import quote

    export = NsysExport(path)
    try:
        t = export.nvtx
        if t is None:
            return [], 0
        labels = read_labels(export)
        keys = labels.renumbered
        values = [t.column(c) for c in ("int64Value", "uint64Value", "int32Value", "uint32Value")]
        payload = ", ".join(f"n.{quote(c)}" for c in values if c is not None)
        if not payload:
            return [], 0
        text = t.column("text")
        text_id = t.column("textId")
        name = export.lazy_text_sql(f"n.{quote(text)}" if text else None, f"n.{quote(text_id)}" if text_id else None)
        domain = f"COALESCE(n.{quote(t.columns['domainid'])}, 0)" if "domainid" in t.columns else "0"
        sql = (
            f"SELECT n.globalTid, n.start, {domain}, {name}, COALESCE({payload}) FROM {quote(t.name)} n "
            f"WHERE n.eventType = {MARK_TYPE}"
        )
        marks: dict[int, list[_Event]] = {}
        for tid, start, domain_id, message, value in export.connection.execute(sql):
            if tid is None or value is None:
                continue
            key = keys.get((process_key(tid), domain_id), domain_id)
            if labels.domain(key) == MEMORY_DOMAIN:
                marks.setdefault(tid, []).append((start, 1, -1, MEMORY_DOMAIN, message or "", int(value)))
        if not marks:
            return [], 0
        for tid, start, end, start_end, domain_key, range_name in labels.ranges_of(export, (True, tuple(marks))):
            if not start_end:
                marks[tid].append((start, 0, end, labels.domain(domain_key), range_name or "", 0))
        group_of = labels.grouping(by if by != "gpu" else None)
        samples: list[Sample] = []
        unjoined = [0]
        for tid, events in marks.items():
            group = group_of(tid)
            for d, n, *figures in _join(events, unjoined):
                samples.append((group, d, rename(n) if rename else n, *figures))  # type: ignore[arg-type]
        return rows_of(samples), unjoined[0]
    finally:
        export.close()


def format_bytes(count: float) -> str:
    """Binary units, signed when negative: `-1.5 MiB`, `12 B`."""
    sign = "-" if count < 0 else ""
    value = abs(float(count))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    else:
        unit = "TiB"
    return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.1f} {unit}"


HEADER = ("Calls", "Time", "Max rise", "Mean rise", "Mean kept", "Peak", "Range")
_LAST = len(HEADER) - 1


def _cells(row: MemoryRow) -> tuple[str, ...]:
    label = f"{row.domain}:{row.name}" if row.domain else row.name
    return (
        str(row.calls),
        format_duration(row.total_ns),
        format_bytes(row.rise_max),
        format_bytes(row.rise_mean),
        format_bytes(row.kept_mean),
        format_bytes(row.peak_max),
        label,
    )


def memory_text(rows: Sequence[MemoryRow], notes: Sequence[str] = ()) -> str:
    """The rows as a text table (a heading per --by group), then the notes."""
    out: list[str] = []
    groups: dict[str, list[tuple[str, ...]]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(_cells(row))
    for group, lines in groups.items():
        if group:
            out.append(f"== {group} ==")
        widths = [max(len(line[i]) for line in [HEADER, *lines]) for i in range(_LAST)]
        for line in [HEADER, tuple("-" * w for w in widths) + ("-" * 5,), *lines]:
            out.append("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(line[:_LAST])) + "  " + line[_LAST])
    out.extend(f"note: {note}" for note in notes)
    return "\n".join(out) + "\n" if out else ""


def _record(row: MemoryRow) -> dict[str, Any]:
    return {
        "group": row.group,
        "domain": row.domain,
        "name": row.name,
        "calls": row.calls,
        "total_ns": row.total_ns,
        "rise_max_bytes": row.rise_max,
        "rise_mean_bytes": row.rise_mean,
        "kept_mean_bytes": row.kept_mean,
        "peak_bytes": row.peak_max,
    }


def memory_json(rows: Sequence[MemoryRow], notes: Sequence[str] = ()) -> str:
    document = {"schema": "autonvtx-memory/1", "memory": [_record(row) for row in rows], "notes": list(notes)}
    return json.dumps(document, indent=2) + "\n"


def memory_csv(rows: Sequence[MemoryRow]) -> str:
    out = io.StringIO()
    fields = [
        "group",
        "domain",
        "name",
        "calls",
        "total_ns",
        "rise_max_bytes",
        "rise_mean_bytes",
        "kept_mean_bytes",
        "peak_bytes",
    ]
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(_record(row))
    return out.getvalue()
