"""The report as one self-contained HTML page: an icicle chart of the range tree beside the table."""
from __future__ import annotations

import html
import json
from typing import Any, Sequence

from autonvtx.report.formats import label, share
from autonvtx.report.model import Report, Row, TreeNode
from autonvtx.report.page_assets import SCRIPT, STYLE

# Boxes narrower than this share of the whole cannot be seen (under a pixel on a 4K screen):
# they are folded into their parent's "hidden" count, which bounds the page's size.
_SMALLEST_SHARE = 1 / 20000
_MAX_NODES = 30000


def render_page(report: Report, rows: Sequence[Row], tree: Sequence[TreeNode], size_by: str) -> str:
    data = {
        "title": report.source,
        "description": report.description,
        "hasGpu": report.has_gpu,
        "sizeBy": size_by,
        "notes": report.notes,
        "totals": {"gpu_ns": report.totals.capture.gpu_ns, "kernels": report.totals.capture.kernels},
        "tree": _tree(tree, size_by),
        "rows": [_row(report, row) for row in rows],
    }
    # "</" inside a <script> would end it early; JSON allows "\/" for "/".
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    title = html.escape(f"autonvtx report: {report.source}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title}</title>"
        f"<style>{STYLE}</style></head><body>"
        f"<script type=\"application/json\" id=\"report-data\">{payload}</script>"
        "<header><h1 id=\"title\"></h1><div id=\"summary\"></div><div id=\"controls\"></div><ul id=\"notes\"></ul></header>"
        "<main><section id=\"chart-pane\"><div id=\"crumbs\"></div><div id=\"chart\"></div></section>"
        "<section id=\"table-pane\"><table id=\"table\"><thead></thead><tbody></tbody></table></section></main>"
        "<div id=\"tip\" hidden></div>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def _value(node: TreeNode, size_by: str) -> int:
    return node.work.gpu_ns if size_by == "gpu" else node.cpu_ns


def _tree(roots: Sequence[TreeNode], size_by: str) -> list[Any]:
    """[name, group?, gpu_ns, cpu_ns, kernels, mem ops, instances, span_ns, hidden, children]."""
    top = [child for root in roots for child in root.children] if len(roots) == 1 else list(roots)
    total = sum(_value(node, size_by) for node in top) or 1
    budget = [_MAX_NODES]

    def encode(node: TreeNode, is_group: bool) -> list[Any]:
        kept = []
        hidden = 0
        for child in node.children:
            if budget[0] <= 0 or _value(child, size_by) < total * _SMALLEST_SHARE:
                hidden += 1
                continue
            budget[0] -= 1
            kept.append(encode(child, False))
        name = node.group if is_group else label(node.domain, node.name)
        return [name, int(is_group), node.work.gpu_ns, node.cpu_ns, node.work.kernels,
                node.work.memcpy + node.work.memset, node.instances, node.span_ns, hidden, kept]

    if len(roots) == 1:
        return [encode(node, False) for node in top if _value(node, size_by) >= total * _SMALLEST_SHARE]
    return [encode(root, True) for root in roots]


def _row(report: Report, row: Row) -> list[Any]:
    top = row.top_kernels[0].name if row.top_kernels else ""
    return [label(row.domain, row.name), row.group, row.work.gpu_ns, round(100 * share(report, row.work.gpu_ns), 2),
            row.work.kernels, row.work.memcpy + row.work.memset, row.cpu_ns, row.instances, row.span_ns, top]
