"""Text renderers: the statistics table (aligned, colored on a terminal) and the GPU report's tables.

Names are printed through `printable`: a range named with terminal escape sequences shows them
escaped (``\\x1b[31m``) instead of driving the terminal. CSV and JSON keep names exactly.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Iterator, Sequence
from typing import IO

from autonvtx.recorder.stats import RangeStats
from autonvtx.report.figures import Report, Row, TreeNode

# C0 controls, DEL and C1 controls (U+0080-U+009F: a terminal takes U+009B as CSI).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character written as a ``\\xNN`` escape."""
    if not _CONTROL.search(text):
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
    stats: Sequence[RangeStats], *, notes: Sequence[str] = (), color: bool = False, empty: str | None = None
) -> str:
    """Aligned tables (one per --by group, under its title), then one ``Note:`` line per note.

    In a tree the Range column is indented by nesting. `color`: ANSI bold headers and the
    shares of time in yellow (>= 10%) and red (>= 50%), for a terminal. An empty table says
    why in place of its rows: `empty` (such as `stats.no_match_message`), else that no range was
    recorded; a note saying the same is not repeated below.
    """
    groups: dict[str, list[RangeStats]] = {}
    for s in stats:
        groups.setdefault(s.group, []).append(s)
    out: list[str] = []
    for title, members in groups.items() or [("", [])]:
        if title:
            out.extend(([""] if out else []) + [_paint(f"== {printable(title)} ==", "1", color)])
        out.extend(_table(members, color))
    if not stats:
        out.append(f"({printable(empty or NO_RANGES)})")
        notes = [note for note in notes if note != empty]
    if notes:
        out.append("")
        out.extend(f"Note: {printable(note)}" for note in notes)
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
            "  " * s.depth + printable(s.label),
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
    return out


def _share_color(percent: float) -> str:
    return "31" if percent >= 50 else "33" if percent >= 10 else ""


def _paint(text: str, code: str, enabled: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if enabled and code else text


def use_color(stream: IO[str]) -> bool:
    """Color on a terminal only, and never with NO_COLOR set (no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


WIDTH = 100  # text tables fit a 100-column terminal; longer names are cut with "..."


def named_table(
    headers: Sequence[str], lines: Sequence[tuple[Sequence[str], str]], *, width: int, left_first: bool = False
) -> list[str]:
    """Columns of figures (right-aligned; the first left-aligned with `left_first`), then the
    range's name, cut with "..." to fit `width` columns: the header, a rule and one line a row."""
    widths = [max([len(h)] + [len(cells[i]) for cells, _ in lines]) for i, h in enumerate(headers)]
    room = max(width - sum(widths) - 2 * len(widths), 20)

    def line(cells: Sequence[str], name: str) -> str:
        padded = [c.rjust(w) for c, w in zip(cells, widths)]
        if left_first and cells:
            padded[0] = cells[0].ljust(widths[0])
        shown = name if len(name) <= room else name[: room - 3] + "..."
        return "  ".join(padded + [shown]).rstrip()

    return [line(headers, "Range"), line(["-" * w for w in widths], "-" * min(room, 40))] + [
        line(cells, name) for cells, name in lines
    ]


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


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def _gpu_cells(report: Report, item: Row | TreeNode) -> list[str]:
    work = item.work
    return [
        format_duration(work.gpu_ns),
        f"{100 * share(report, work.gpu_ns):.1f}%",
        f"{work.kernels:,}",
        f"{work.memcpy + work.memset:,}",
        format_duration(item.span_ns),
    ]


def _columns(report: Report) -> list[str]:
    gpu = ["GPU time", "GPU %", "Kernels", "Mem ops", "GPU span"] if report.has_gpu else []
    return gpu + ["CPU time", "Inst", "Range"]


def _gpu_table(report: Report, lines: list[tuple[list[str], str, list[str]]]) -> list[str]:
    """Aligned rows: right-aligned numbers, then the name cut to what the width leaves."""
    headers = _columns(report)
    widths = [max([len(h)] + [len(cells[i]) for cells, _, _ in lines]) for i, h in enumerate(headers[:-1])]
    room = max(WIDTH - sum(widths) - 2 * len(widths), 20)
    # The top-kernels line starts under the numbers: kernel names are long.
    indent = "      "

    def line(cells: Sequence[str], name: str) -> str:
        return "  ".join([c.rjust(w) for c, w in zip(cells, widths)] + [_cut(name, room)]).rstrip()

    out = [line(headers[:-1], headers[-1]), line(["-" * w for w in widths], "-" * min(room, 40))]
    for cells, name, extra in lines:
        out.append(line(cells, name))
        out.extend(indent + _cut(text, WIDTH - len(indent)) for text in extra)
    return out


def _row_cells(report: Report, item: Row | TreeNode) -> list[str]:
    gpu = _gpu_cells(report, item) if report.has_gpu else []
    return gpu + [format_duration(item.cpu_ns), f"{item.instances:,}"]


def _top_line(report: Report, row: Row) -> list[str]:
    if not row.top_kernels or not row.work.kernel_ns:
        return []
    parts = [f"{100 * k.ns / row.work.kernel_ns:.0f}% {printable(k.name)} (x{k.count:,})" for k in row.top_kernels[:3]]
    return ["top: " + ", ".join(parts)]


def report_text(
    report: Report,
    rows: Sequence[Row],
    tree: Sequence[TreeNode] | None = None,
    stats: Sequence[RangeStats] | None = None,
) -> str:
    """The report: a title, the capture's GPU totals, the table (or tree), then its notes.

    With `stats` (a recording's statistics, arranged), the table is the statistics table that
    `autonvtx summary` prints for the same trace: the same figures, by the same renderer.
    """
    what = "GPU" if report.has_gpu else "CPU"
    out = [printable(f"{what} time per NVTX range: {report.source} ({report.description})")]
    out.extend(_totals_lines(report))
    if stats is not None:
        out.extend(stats_text(stats, empty=report.empty).rstrip("\n").split("\n"))
    elif tree is not None:
        out.extend(_tree_text(report, tree))
    else:
        out.extend(_rows_text(report, rows))
    notes = [note for note in report.notes if note != report.empty]  # the table's own line says that one
    if notes:
        out.append("")
        out.extend(
            textwrap.fill(
                printable(note), WIDTH, initial_indent="Note: ", subsequent_indent="      ", break_on_hyphens=False
            )
            for note in notes
        )
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


def _rows_text(report: Report, rows: Sequence[Row]) -> list[str]:
    if not rows:
        if report.empty is not None:
            return [f"({printable(report.empty)})"]
        return ["(no NVTX ranges)" if not report.by else "(no NVTX ranges in any group)"]
    out: list[str] = []
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    for group, members in groups.items():
        if report.by:
            out.append(f"== {printable(group)} ==")
        out.extend(
            _gpu_table(
                report, [(_row_cells(report, r), shown(r.domain, r.name), _top_line(report, r)) for r in members]
            )
        )
        outside = report.groups_outside.get(group)
        if report.has_gpu and report.by and outside is not None and outside.operations:
            out.append(
                f"(outside every range: {outside.operations:,} GPU operations, {format_duration(outside.gpu_ns)})"
            )
        out.append("")
    return out[:-1]


def _tree_text(report: Report, roots: Sequence[TreeNode]) -> list[str]:
    out: list[str] = []
    for root in roots:
        lines: list[tuple[list[str], str, list[str]]] = []
        for depth, node in walk(root.children):
            lines.append((_row_cells(report, node), "  " * depth + shown(node.domain, node.name), []))
        if report.by:
            out.append(f"== {printable(root.group)} ==")
        out.extend(_gpu_table(report, lines) if lines else [f"({printable(report.empty or 'no NVTX ranges')})"])
        out.append("")
    return out[:-1] if out else [f"({printable(report.empty or 'no NVTX ranges')})"]


def walk(nodes: Sequence[TreeNode], depth: int = 0) -> Iterator[tuple[int, TreeNode]]:
    """Every node under `nodes`, depth first, with its depth; iterative, for any nesting."""
    stack = [(depth, node) for node in reversed(nodes)]
    while stack:
        level, node = stack.pop()
        yield level, node
        stack.extend((level + 1, child) for child in reversed(node.children))
