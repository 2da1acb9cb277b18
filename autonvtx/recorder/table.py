"""Range statistics rendered: an aligned (on a terminal, colored) text table, CSV or JSON."""
from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import IO, Union

from autonvtx.recorder.summary import RangeStats
from autonvtx.recorder.trace import write_atomically

StrPath = Union[str, "os.PathLike[str]"]


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


def format_text(stats: Sequence[RangeStats], *, notes: Sequence[str] = (), color: bool = False) -> str:
    """Aligned tables (one per --by group, under its title), then one ``Note:`` line per note.

    In a tree the Range column is indented by nesting. `color`: ANSI bold headers and the
    shares of time in yellow (>= 10%) and red (>= 50%), for a terminal.
    """
    groups: dict[str, list[RangeStats]] = {}
    for s in stats:
        groups.setdefault(s.group, []).append(s)
    out: list[str] = []
    for title, members in groups.items() or [("", [])]:
        if title:
            out.extend(([""] if out else []) + [_paint(f"== {title} ==", "1", color)])
        out.extend(_table(members, color))
    if notes:
        out.append("")
        out.extend(f"Note: {note}" for note in notes)
    return "\n".join(out) + "\n"


def _table(stats: Sequence[RangeStats], color: bool) -> list[str]:
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
            "  " * s.depth + s.label,
        )
        for s in stats
    ]
    widths = [max([len(header)] + [len(row[i]) for row in rows]) for i, header in enumerate(_TEXT_COLUMNS)]
    last = len(_TEXT_COLUMNS) - 1

    def line(cells: Sequence[str], paint: bool = False) -> str:
        # Numbers right-aligned, the range name left-aligned and unpadded.
        text = [cell if i == last else cell.rjust(widths[i]) for i, cell in enumerate(cells)]
        if paint:
            text[:2] = [_paint(cell, _share_color(float(value)), color) for cell, value in zip(text[:2], cells[:2])]
        return "  ".join(text).rstrip()

    out = [_paint(line(_TEXT_COLUMNS), "1", color), line(["-" * w for w in widths])]
    out.extend(line(row, paint=color) for row in rows)
    if not rows:
        out.append("(no ranges recorded)")
    return out


def _share_color(percent: float) -> str:
    return "31" if percent >= 50 else "33" if percent >= 10 else ""


def _paint(text: str, code: str, enabled: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if enabled and code else text


def use_color(stream: IO[str]) -> bool:
    """Color on a terminal only, and never with NO_COLOR set (no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


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
        sys.stderr.write(format_text(stats, notes=notes, color=use_color(sys.stderr)))
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
