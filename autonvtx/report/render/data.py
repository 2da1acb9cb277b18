"""Machine-readable renderers: CSV and JSON of the statistics model and of the report.

Every JSON document names its `schema` (a version: fields are only ever added within one);
the README's "Machine-readable output" section lists the fields. Times are integer
nanoseconds; names are exactly as recorded.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, fields
from typing import Any

from autonvtx.report.figures import Report, Row, TreeNode, Work
from autonvtx.report.render.text import label, share
from autonvtx.stats.model import RangeStats

SUMMARY_SCHEMA = "autonvtx-summary/1"
REPORT_SCHEMA = "autonvtx-report/1"
_FIELDS = tuple(f.name for f in fields(RangeStats))


def stats_csv(stats: Sequence[RangeStats]) -> str:
    """One header row (the RangeStats field names), then one row per range, times in ns."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_FIELDS)
    for s in stats:
        writer.writerow([getattr(s, name) for name in _FIELDS])
    return buffer.getvalue()


def stats_json(stats: Sequence[RangeStats], *, notes: Sequence[str] = ()) -> str:
    """``{"schema": ..., "ranges": [{field: value, ...}, ...], "notes": [...]}``, times in ns."""
    document = {"schema": SUMMARY_SCHEMA, "ranges": [asdict(s) for s in stats], "notes": list(notes)}
    return json.dumps(document, indent=2) + "\n"


_WORK_KEYS = ("kernels", "kernel_ns", "memcpy", "memcpy_bytes", "memcpy_ns", "memset", "memset_bytes", "memset_ns")


def _record(report: Report, item: Row | TreeNode) -> dict[str, Any]:
    work: Work = item.work
    record: dict[str, Any] = {"name": item.name, "domain": item.domain}
    if report.by:
        record["group"] = item.group
    record.update(
        instances=item.instances,
        cpu_ns=item.cpu_ns,
        gpu_ns=work.gpu_ns,
        gpu_share=round(share(report, work.gpu_ns), 6),
        gpu_span_ns=item.span_ns,
    )
    record.update({key: getattr(work, key) for key in _WORK_KEYS})
    return record


def _row_record(report: Report, row: Row) -> dict[str, Any]:
    record = _record(report, row)
    if row.stats is not None:
        record.update(_stats_fields(row.stats))
    record["top_kernels"] = [{"name": k.name, "count": k.count, "ns": k.ns} for k in row.top_kernels]
    return record


def _stats_fields(stats: RangeStats) -> dict[str, Any]:
    """A recording's statistics beside the report's own fields (the same figures `summary` prints)."""
    return {
        "total_ns": stats.total_ns,
        "self_ns": stats.self_ns,
        "mean_ns": stats.mean_ns,
        "median_ns": stats.median_ns,
        "min_ns": stats.min_ns,
        "max_ns": stats.max_ns,
        "stddev_ns": stats.stddev_ns,
        "percent": stats.percent,
        "wall_percent": stats.wall_percent,
        "open_count": stats.open_count,
    }


def _node_record(report: Report, node: TreeNode) -> dict[str, Any]:
    record = _record(report, node)
    if node.stats is not None:
        record.update(_stats_fields(node.stats))
    if node.start_end:
        record["start_end"] = True
    return record


# A tree's nodes are indented by depth up to this many levels, then no further: a recursion
# thousands of levels deep writes a document linear in its size, not in its depth squared.
_MAX_INDENT_LEVELS = 32


def _tree_json(report: Report, roots: Sequence[TreeNode], indent: int) -> str:
    """The tree as nested JSON objects, one line a node with its "children" last; written
    iteratively (json.dumps recurses, and a recursion thousands of calls deep is a tree
    thousands of levels deep), in time and size linear in the number of nodes."""
    parts: list[str] = []
    stack: list[tuple[TreeNode, int, bool] | str] = [
        (root, 0, i == len(roots) - 1) for i, root in reversed(list(enumerate(roots)))
    ]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        node, level, last = item
        pad = " " * (indent + 2 * min(level, _MAX_INDENT_LEVELS))
        body = json.dumps(_node_record(report, node), ensure_ascii=False)[:-1]  # without its closing brace
        comma = "" if last else ","
        if not node.children:
            parts.append(f'{pad}{body}, "children": []}}{comma}\n')
            continue
        parts.append(f'{pad}{body}, "children": [\n')
        stack.append(f"{pad}]}}{comma}\n")
        count = len(node.children)
        stack.extend((child, level + 1, i == count - 1) for i, child in reversed(list(enumerate(node.children))))
    return "".join(parts)


def report_json(report: Report, rows: Sequence[Row], tree: Sequence[TreeNode] | None = None) -> str:
    document: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "source": report.source,
        "kind": report.kind,
        "description": report.description,
        "has_gpu_data": report.has_gpu,
        "by": report.by,
        "totals": {
            name: {key: getattr(work, key) for key in _WORK_KEYS} | {"gpu_ns": work.gpu_ns}
            for name, work in (
                ("capture", report.totals.capture),
                ("outside_ranges", report.totals.outside),
                ("launch_not_captured", report.totals.unmatched),
            )
        },
        "ranges": [_row_record(report, row) for row in rows],
        "notes": list(report.notes),
    }
    text = json.dumps(document, indent=2, ensure_ascii=False)
    if tree is None:
        return text + "\n"
    return text[:-2] + ',\n  "tree": [\n' + _tree_json(report, tree, 4) + "  ]\n}\n"


def report_csv(report: Report, rows: Sequence[Row], tree: Sequence[TreeNode] | None = None) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    records: list[dict[str, Any]]
    if tree is None:
        records = []
        for row in rows:
            record = _record(report, row)
            if row.stats is not None:
                record.update(_stats_fields(row.stats))
            record["top_kernels"] = "; ".join(f"{k.name} x{k.count} {k.ns}ns" for k in row.top_kernels)
            records.append(record)
    else:
        records = []
        for root in tree:
            for path, node in _paths(root.children, ()):
                record = _node_record(report, node)
                record["depth"] = len(path) - 1
                record["path"] = " > ".join(path)
                records.append(record)
    header = list(records[0]) if records else list(_record(report, Row("", "", "")))
    writer.writerow(header)
    for record in records:
        writer.writerow([record.get(key, "") for key in header])
    return buffer.getvalue()


def _paths(nodes: Sequence[TreeNode], prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], TreeNode]]:
    """Each node with the labels from the outermost range down to it; iterative."""
    stack = [(prefix, node) for node in reversed(nodes)]
    while stack:
        above, node = stack.pop()
        path = above + (label(node.domain, node.name),)
        yield path, node
        stack.extend((path, child) for child in reversed(node.children))
