"""The report as an aligned text table, CSV or JSON."""
from __future__ import annotations

import csv
import io
import json
import textwrap
from typing import Any, Callable, Iterator, Sequence

from autonvtx.recorder.table import format_duration
from autonvtx.report.model import Report, Row, TreeNode, Work

WIDTH = 100  # text tables fit a 100-column terminal; longer names are cut with "..."


def label(domain: str, name: str) -> str:
    """How the text names a range: ``domain:name``, or the bare name in the default domain."""
    shown = name if name else "(unnamed)"
    return f"{domain}:{shown}" if domain else shown


def share(report: Report, ns: int) -> float:
    total = report.totals.capture.gpu_ns
    return ns / total if total else 0.0


# Text

def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def _gpu_cells(report: Report, item: Row | TreeNode) -> list[str]:
    work = item.work
    return [format_duration(work.gpu_ns), f"{100 * share(report, work.gpu_ns):.1f}%", f"{work.kernels:,}",
            f"{work.memcpy + work.memset:,}", format_duration(item.span_ns)]


def _columns(report: Report) -> list[str]:
    gpu = ["GPU time", "GPU %", "Kernels", "Mem ops", "GPU span"] if report.has_gpu else []
    return gpu + ["CPU time", "Inst", "Range"]


def _table(report: Report, lines: list[tuple[list[str], str, list[str]]]) -> list[str]:
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
    parts = [f"{100 * k.ns / row.work.kernel_ns:.0f}% {k.name} (x{k.count:,})" for k in row.top_kernels[:3]]
    return ["top: " + ", ".join(parts)]


def format_text(report: Report, rows: Sequence[Row], tree: Sequence[TreeNode] | None = None) -> str:
    out = [f"GPU time per NVTX range: {report.source} ({report.description})" if report.has_gpu
           else f"CPU time per NVTX range: {report.source} ({report.description})"]
    out.extend(_totals_lines(report))
    if tree is not None:
        out.extend(_tree_text(report, tree))
    else:
        out.extend(_rows_text(report, rows))
    if report.notes:
        out.append("")
        out.extend(textwrap.fill(note, WIDTH, initial_indent="Note: ", subsequent_indent="      ",
                                 break_on_hyphens=False) for note in report.notes)
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
        return ["(no NVTX ranges)" if not report.by else "(no NVTX ranges in any group)"]
    out: list[str] = []
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    for group, members in groups.items():
        if report.by:
            out.append(f"== {group} ==")
        out.extend(_table(report, [(_row_cells(report, r), label(r.domain, r.name), _top_line(report, r)) for r in members]))
        outside = report.groups_outside.get(group)
        if report.has_gpu and report.by and outside is not None and outside.operations:
            out.append(f"(outside every range: {outside.operations:,} GPU operations, {format_duration(outside.gpu_ns)})")
        out.append("")
    return out[:-1]


def _tree_text(report: Report, roots: Sequence[TreeNode]) -> list[str]:
    out: list[str] = []
    for root in roots:
        lines: list[tuple[list[str], str, list[str]]] = []
        for depth, node in _walk(root.children, 0):
            lines.append((_row_cells(report, node), "  " * depth + label(node.domain, node.name), []))
        if report.by:
            out.append(f"== {root.group} ==")
        out.extend(_table(report, lines) if lines else ["(no NVTX ranges)"])
        out.append("")
    return out[:-1] if out else ["(no NVTX ranges)"]


def _walk(nodes: Sequence[TreeNode], depth: int) -> Iterator[tuple[int, TreeNode]]:
    for node in nodes:
        yield depth, node
        yield from _walk(node.children, depth + 1)


# CSV and JSON

_WORK_KEYS = ("kernels", "kernel_ns", "memcpy", "memcpy_bytes", "memcpy_ns", "memset", "memset_bytes", "memset_ns")


def _record(report: Report, item: Row | TreeNode) -> dict[str, Any]:
    work: Work = item.work
    record: dict[str, Any] = {"name": item.name, "domain": item.domain}
    if report.by:
        record["group"] = item.group
    record.update(instances=item.instances, cpu_ns=item.cpu_ns, gpu_ns=work.gpu_ns,
                  gpu_share=round(share(report, work.gpu_ns), 6), gpu_span_ns=item.span_ns)
    record.update({key: getattr(work, key) for key in _WORK_KEYS})
    return record


def _row_record(report: Report, row: Row) -> dict[str, Any]:
    record = _record(report, row)
    record["top_kernels"] = [{"name": k.name, "count": k.count, "ns": k.ns} for k in row.top_kernels]
    return record


def _tree_record(report: Report, node: TreeNode) -> dict[str, Any]:
    record = _record(report, node)
    if node.start_end:
        record["start_end"] = True
    record["children"] = [_tree_record(report, child) for child in node.children]
    return record


def format_json(report: Report, rows: Sequence[Row], tree: Sequence[TreeNode] | None = None) -> str:
    document: dict[str, Any] = {
        "source": report.source,
        "kind": report.kind,
        "description": report.description,
        "has_gpu_data": report.has_gpu,
        "by": report.by,
        "totals": {name: {key: getattr(work, key) for key in _WORK_KEYS} | {"gpu_ns": work.gpu_ns}
                   for name, work in (("capture", report.totals.capture), ("outside_ranges", report.totals.outside),
                                      ("launch_not_captured", report.totals.unmatched))},
        "ranges": [_row_record(report, row) for row in rows],
        "notes": list(report.notes),
    }
    if tree is not None:
        document["tree"] = [_tree_record(report, root) for root in tree]
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def format_csv(report: Report, rows: Sequence[Row], tree: Sequence[TreeNode] | None = None) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    records: list[dict[str, Any]]
    if tree is None:
        records = []
        for row in rows:
            record = _record(report, row)
            record["top_kernels"] = "; ".join(f"{k.name} x{k.count} {k.ns}ns" for k in row.top_kernels)
            records.append(record)
    else:
        records = []
        for root in tree:
            for path, node in _paths(root.children, ()):
                record = _record(report, node)
                record["depth"] = len(path) - 1
                record["path"] = " > ".join(path)
                records.append(record)
    header = list(records[0]) if records else list(_record(report, Row("", "", "")))
    writer.writerow(header)
    for record in records:
        writer.writerow([record.get(key, "") for key in header])
    return buffer.getvalue()


def _paths(nodes: Sequence[TreeNode], prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], TreeNode]]:
    for node in nodes:
        path = prefix + (label(node.domain, node.name),)
        yield path, node
        yield from _paths(node.children, path)


FORMATTERS: dict[str, Callable[..., str]] = {"text": format_text, "csv": format_csv, "json": format_json}
