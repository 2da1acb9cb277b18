"""Text renderers: the statistics table (aligned, colored on a terminal) and the GPU report's tables.

Names are printed through `printable`: a range named with terminal escape sequences shows them
escaped (``\\x1b[31m``) instead of driving the terminal. CSV and JSON keep names exactly.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import IO

from autonvtx.report.figures import Report, Row, TreeNode
from autonvtx.report.render.table import Line, build_table
from autonvtx.stats.model import RangeStats

_native_gpu_table: (
    Callable[[list[Row], int, tuple[str, ...], Callable[[str, str], str], Callable[[str], str]], str | None] | None
)
try:  # the C twin of _gpu_lines and build_table for a file or a pipe (setup.py: optional)
    from autonvtx.report._rowtext import gpu_table as _native_gpu_table
except ImportError:  # pragma: no cover - a build without it
    _native_gpu_table = None

# C0 controls, DEL and C1 controls (U+0080-U+009F: a terminal takes U+009B as CSI).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character written as a ``\\xNN`` escape."""
    if text.isprintable() or not _CONTROL.search(text):  # the first: one C pass, no control there
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_TEXT_COLUMNS = ("Time %", "% Wall", "Total", "Self", "Instances", "Mean", "Median", "Min", "Max", "StdDev", "Range")


def format_duration(ns: float) -> str:
    """A duration in the largest unit that keeps it >= 1: ``812 ns``, ``3.250 us``, ``1.204 s``.

    One unit per cell, as ``timeit`` and hyperfine print: a table spans sub-microsecond
    helpers and minute-long loops, and any single unit either rounds the short ones to zero
    or buries the long ones in digits. Exact nanoseconds are in the CSV and JSON forms.
    ASCII "us", so that no terminal or log encoding mangles it.
    """
    if ns == 0:  # most ranges of a per-name report launch no GPU work
        return "0 ns"
    if type(ns) is int and ns > 0:
        # Whole nanoseconds in integers (a per-name report writes tens of thousands): the same
        # text as the float formatting below, which only a tie (a remainder of exactly half
        # the last digit, rounded as the float's binary value says) is left to.
        if ns < 1_000:
            return f"{ns} ns"
        if ns < 1_000_000:
            return f"{ns // 1_000}.{ns % 1_000:03d} us"
        if ns < 1_000_000_000:
            whole, rest = divmod(ns, 1_000)
            if rest != 500:
                whole += rest > 500
                return f"{whole // 1_000}.{whole % 1_000:03d} ms"
        else:
            whole, rest = divmod(ns, 1_000_000)
            if rest != 500_000:
                whole += rest > 500_000
                return f"{whole // 1_000:,}.{whole % 1_000:03d} s"
    return float_duration(ns)


def float_duration(ns: float) -> str:
    """format_duration's rule in floating point: what it gives a fraction, a negative or a tie."""
    if ns == 0:
        return "0 ns"
    magnitude = abs(ns)
    if magnitude >= 1e9:
        return f"{ns / 1e9:,.3f} s"
    if magnitude >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if magnitude >= 1e3:
        return f"{ns / 1e3:.3f} us"
    return f"{ns:.0f} ns"


NO_RANGES = "no ranges recorded"


def stats_text(
    stats: Sequence[RangeStats],
    *,
    notes: Sequence[str] = (),
    color: bool = False,
    empty: str | None = None,
    width: int | None = None,
) -> str:
    """Aligned tables (one per --by group, under its title), then one ``Note:`` line per note.

    In a tree the Range column is indented by nesting. `color`: ANSI bold headers and the
    shares of time in yellow (>= 10%) and red (>= 50%), for a terminal. An empty table says
    why in place of its rows: `empty` (such as `stats.no_match_message`), else that no range was
    recorded; a note saying the same is not repeated below. `width`: a terminal's, which names
    are cut to fit (`table.build_table`); None, never cut.
    """
    groups: dict[str, list[RangeStats]] = {}
    for s in stats:
        groups.setdefault(s.group, []).append(s)
    out: list[str] = []
    for title, members in groups.items() or [("", [])]:
        if title:
            out.extend(([""] if out else []) + [_paint(group_heading(title), "1", color)])
        out.extend(_table(members, color, width))
    if not stats:
        out.append(f"({printable(empty or NO_RANGES)})")
        notes = [note for note in notes if note != empty]
    out.extend(note_lines(notes, width))
    return "\n".join(out) + "\n"


def group_heading(title: str) -> str:
    """How a --by group is headed in every text table: ``== rank 1 ==``."""
    return f"== {printable(title)} =="


def note_lines(notes: Sequence[str], width: int | None) -> list[str]:
    """A blank line, then each note as ``Note: ...``, wrapped to `width` (None: 100 columns)."""
    if not notes:
        return []
    return [""] + [
        textwrap.fill(
            printable(note),
            width or NOTE_WIDTH,
            initial_indent="Note: ",
            subsequent_indent="      ",
            break_on_hyphens=False,
            break_long_words=False,
        )
        for note in notes
    ]


def _table(stats: Sequence[RangeStats], color: bool, width: int | None) -> list[str]:
    lines = [
        Line(
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
            ),
            "  " * s.depth + printable(s.label),
        )
        for s in stats
    ]

    def paint(column: int, cell: str, aligned: str) -> str:
        # The shares of time, colored by size.
        return _paint(aligned, _share_color(float(cell)), True) if column < 2 else aligned

    return build_table(
        _TEXT_COLUMNS[:-1],
        lines,
        width=width,
        paint=paint if color else None,
        header_paint=(lambda text: _paint(text, "1", True)) if color else None,
    )


def _share_color(percent: float) -> str:
    return "31" if percent >= 50 else "33" if percent >= 10 else ""


def _paint(text: str, code: str, enabled: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if enabled and code else text


def use_color(stream: IO[str]) -> bool:
    """Color on a terminal only, and never with NO_COLOR set (no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


NOTE_WIDTH = 100  # notes of a table written to a file or a pipe wrap here


def label(domain: str, name: str) -> str:
    """How the text names a range: ``domain:name``, or the bare name in the default domain."""
    shown = name if name else "(unnamed)"
    return f"{domain}:{shown}" if domain else shown


def shown(domain: str, name: str) -> str:
    """`label`, safe for a terminal."""
    return printable(label(domain, name))


def share(report: Report, ns: int) -> float:
    total = report.totals.capture.gpu_ns
    return ns / total if total else 0.0


# Text


def _gpu_cells(report: Report, item: Row | TreeNode) -> list[str]:
    work = item.work
    gpu_ns = work.kernel_ns + work.memcpy_ns + work.memset_ns
    total = report.totals.capture.gpu_ns
    return [
        format_duration(gpu_ns),
        f"{100 * gpu_ns / total if total else 0.0:.1f}%",
        f"{work.kernels:,}",
        f"{work.memcpy + work.memset:,}",
        format_duration(item.span_ns),
    ]


def _columns(report: Report) -> list[str]:
    gpu = ["GPU time", "GPU %", "Kernels", "Mem ops", "GPU span"] if report.has_gpu else []
    return gpu + ["CPU time", "Inst", "Range"]


def _gpu_table(report: Report, lines: Sequence[Line], width: int | None) -> list[str]:
    """Aligned rows: right-aligned numbers, then the name (cut only to fit a terminal)."""
    return build_table(_columns(report)[:-1], lines, width=width)


def _row_cells(report: Report, item: Row | TreeNode) -> list[str]:
    gpu = _gpu_cells(report, item) if report.has_gpu else []
    return gpu + [format_duration(item.cpu_ns), f"{item.instances:,}"]


def _gpu_lines(report: Report, rows: Sequence[Row]) -> list[Line]:
    """`_row_cells`, `shown` and `_top_line` of each row of an export with GPU data, in one loop:
    a per-name report has tens of thousands of rows (the same cells, the same bytes), most of
    them launching nothing, so a zero is written without a call."""
    total = report.totals.capture.gpu_ns
    duration = format_duration
    new_line = tuple.__new__  # Line's fields in order, without NamedTuple's Python-level __new__
    lines: list[Line] = []
    append = lines.append
    for row in rows:
        work = row.work
        gpu_ns = work.kernel_ns + work.memcpy_ns + work.memset_ns
        span_ns = row.span_ns
        kernels, operations, instances = work.kernels, work.memcpy + work.memset, row.instances
        name = row.name or "(unnamed)"
        if row.domain:
            name = f"{row.domain}:{name}"
        if not name.isprintable():
            name = printable(name)
        cells = (
            duration(gpu_ns) if gpu_ns else "0 ns",
            f"{100 * gpu_ns / total:.1f}%" if gpu_ns and total else "0.0%",
            str(kernels) if -1000 < kernels < 1000 else f"{kernels:,}",  # str: no format spec to parse
            str(operations) if -1000 < operations < 1000 else f"{operations:,}",
            duration(span_ns) if span_ns else "0 ns",
            duration(row.cpu_ns),
            str(instances) if -1000 < instances < 1000 else f"{instances:,}",
        )
        append(new_line(Line, (cells, name, _top_line(report, row) if row.top_kernels else ())))
    return lines


def _top_line(report: Report, row: Row) -> list[str]:
    kernel_ns = row.work.kernel_ns
    if not row.top_kernels or not kernel_ns:
        return []
    parts = [f"{100 * k.ns / kernel_ns:.0f}% {printable(k.name)} (x{k.count:,})" for k in row.top_kernels[:3]]
    return ["top: " + ", ".join(parts)]


def report_text(
    report: Report,
    rows: Sequence[Row],
    tree: Sequence[TreeNode] | None = None,
    stats: Sequence[RangeStats] | None = None,
    width: int | None = None,
) -> str:
    """The report: a title, the capture's GPU totals, the table (or tree), then its notes.

    With `stats` (a recording's statistics, arranged), the table is the statistics table that
    `autonvtx summary` prints for the same trace: the same figures, by the same renderer.
    `width`: a terminal's, which names are cut to fit; None, never cut.
    """
    what = "GPU" if report.has_gpu else "CPU"
    out = [printable(f"{what} time per NVTX range: {report.source} ({report.description})")]
    out.extend(_totals_lines(report))
    if stats is not None:
        out.extend(stats_text(stats, empty=report.empty, width=width).rstrip("\n").split("\n"))
    elif tree is not None:
        out.extend(_tree_text(report, tree, width))
    else:
        out.extend(_rows_text(report, rows, width))
    out.extend(note_lines([note for note in report.notes if note != report.empty], width))
    return "\n".join(out) + "\n"


def _totals_lines(report: Report) -> list[str]:
    if not report.has_gpu:
        return [""]
    capture, outside, unmatched = report.totals.capture, report.totals.outside, report.totals.unmatched
    inside = capture.gpu_ns - outside.gpu_ns - unmatched.gpu_ns
    return [
        f"GPU work: {capture.kernels:,} kernels ({format_duration(capture.kernel_ns)}), "
        f"{capture.memcpy:,} memcpy ({_bytes(capture.memcpy_bytes)}, {format_duration(capture.memcpy_ns)}), "
        f"{capture.memset:,} memset ({format_duration(capture.memset_ns)})",
        f"launched inside ranges: {100 * share(report, inside):.1f}% of GPU time; outside every range: "
        f"{100 * share(report, outside.gpu_ns):.1f}%"
        + (f"; launch not captured: {100 * share(report, unmatched.gpu_ns):.1f}%" if unmatched.operations else ""),
        "",
    ]


def _bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def _rows_text(report: Report, rows: Sequence[Row], width: int | None) -> list[str]:
    if not rows:
        if report.empty is not None:
            return [f"({printable(report.empty)})"]
        return ["(no NVTX ranges)" if not report.by else "(no NVTX ranges in any group)"]
    out: list[str] = []
    groups: dict[str, list[Row]] = {}
    if not report.by:  # one table, whose rows' group is not read: sorted, they lie scattered in memory
        groups[""] = list(rows)
    else:
        for row in rows:
            groups.setdefault(row.group, []).append(row)
    for group, members in groups.items():
        if report.by:
            out.append(group_heading(group))
        written = _native_table(report, members) if width is None and report.has_gpu else None
        if written is not None:
            out.append(written)
        else:
            out.extend(
                _gpu_table(
                    report,
                    [Line(_row_cells(report, r), shown(r.domain, r.name), _top_line(report, r)) for r in members]
                    if not report.has_gpu
                    else _gpu_lines(report, members),
                    width,
                )
            )
        outside = report.groups_outside.get(group)
        if report.has_gpu and report.by and outside is not None and outside.operations:
            out.append(
                f"(outside every range: {outside.operations:,} GPU operations, {format_duration(outside.gpu_ns)})"
            )
        out.append("")
    return out[:-1]


def _native_table(report: Report, rows: list[Row]) -> str | None:
    """`_gpu_table(report, _gpu_lines(report, rows), None)` joined by newlines, written in C (the
    same bytes: tests/test_rowtext.py); None where the C part is missing or declines a value."""
    if _native_gpu_table is None:
        return None
    headers = tuple(_columns(report)[:-1])
    return _native_gpu_table(rows, report.totals.capture.gpu_ns, headers, shown, printable)


def _tree_text(report: Report, roots: Sequence[TreeNode], width: int | None) -> list[str]:
    out: list[str] = []
    for root in roots:
        lines = [
            Line(_row_cells(report, node), "  " * depth + shown(node.domain, node.name))
            for depth, node in walk(root.children)
        ]
        if report.by:
            out.append(group_heading(root.group))
        out.extend(_gpu_table(report, lines, width) if lines else [f"({printable(report.empty or 'no NVTX ranges')})"])
        out.append("")
    return out[:-1] if out else [f"({printable(report.empty or 'no NVTX ranges')})"]


def walk(nodes: Sequence[TreeNode], depth: int = 0) -> Iterator[tuple[int, TreeNode]]:
    """Every node under `nodes`, depth first, with its depth; iterative, for any nesting."""
    stack = [(depth, node) for node in reversed(nodes)]
    while stack:
        level, node = stack.pop()
        yield level, node
        stack.extend((level + 1, child) for child in reversed(node.children))
