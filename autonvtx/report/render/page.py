"""The report as one self-contained HTML page: an icicle chart of the range tree beside the table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from autonvtx.report.figures import Report, Row, TreeNode
from autonvtx.report.render.shell import json_text, render_shell
from autonvtx.report.render.text import label, share

# Boxes narrower than this share of the whole cannot be seen (under a pixel on a 4K screen):
# they are folded into their parent's "hidden" count, which bounds the page's size.
_SMALLEST_SHARE = 1 / 20000
_MAX_NODES = 30000

# The chart above the table; report.js fills them.
_PANES = (
    '<main class="stacked"><section id="chart-pane"><div id="bar"><div id="crumbs"></div><div id="controls"></div>'
    '</div><div id="chart" class="pane"></div></section>'
    '<section id="table-pane" class="pane"><div id="table-caption"></div><div id="table-scroll"><table id="table">'
    "<thead></thead><tbody></tbody></table></div></section></main>"
)


def render_page(report: Report, rows: Sequence[Row], tree: Sequence[TreeNode], size_by: str) -> str:
    nodes = _tree(tree)
    table = [_row(report, row) for row in rows]
    domain = _shared_domain(rows, nodes)
    if domain:
        _drop_domain(domain, nodes, table)
    data = {
        "title": report.source,
        "description": report.description,
        "hasGpu": report.has_gpu,
        "sizeBy": size_by,
        "notes": report.notes,
        "domain": domain,
        "totals": {
            "gpu_ns": report.totals.capture.gpu_ns,
            "kernels": report.totals.capture.kernels,
            "outside_gpu_ns": report.totals.outside.gpu_ns,
        },
        "tree": None,  # written apart: see _tree_json
        "rows": table,
    }
    payload = json_text(data).replace('"tree":null', '"tree":' + _tree_json(nodes), 1)
    return render_shell("report", f"autonvtx report: {report.source}", payload, _PANES)


def _shared_domain(rows: Sequence[Row], nodes: list[Any]) -> str:
    """The one NVTX domain every range on the page is in, if there is one (else "").

    Its name would otherwise open every label ("torch:..." in a box a few words wide shows only
    that); the page says it once instead. Ranges in several domains keep their prefixes.
    """
    domains = {row.domain for row in rows}
    stack = list(nodes)
    while stack and len(domains) < 2:
        node = stack.pop()
        if not node[1]:
            domains.add(node[10])
        stack.extend(node[9])
    return domains.pop() if len(domains) == 1 else ""


def _drop_domain(domain: str, nodes: list[Any], table: list[list[Any]]) -> None:
    cut = len(domain) + 1  # "domain:"
    for row in table:
        row[0] = row[0][cut:]
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if not node[1]:
            node[0] = node[0][cut:]
        stack.extend(node[9])


def _tree(roots: Sequence[TreeNode]) -> list[Any]:
    """[name, group?, gpu_ns, cpu_ns, kernels, mem ops, instances, span_ns, hidden, children, domain].

    The domain (last, for `_shared_domain`) is not written into the page.

    The page redraws by GPU or by CPU time from the same data, so a node stays when it is large
    enough by either measure; a budget of nodes bounds the page. Built without recursion: a
    recursion thousands of calls deep is a tree as deep.
    """
    top = [child for root in roots for child in root.children] if len(roots) == 1 else list(roots)
    totals = {"gpu": sum(node.work.gpu_ns for node in top) or 1, "cpu": sum(node.cpu_ns for node in top) or 1}
    budget = _MAX_NODES

    def visible(node: TreeNode) -> bool:
        return node.work.gpu_ns >= totals["gpu"] * _SMALLEST_SHARE or node.cpu_ns >= totals["cpu"] * _SMALLEST_SHARE

    def encoded(node: TreeNode, is_group: bool) -> list[Any]:
        name = node.group if is_group else label(node.domain, node.name)
        return [
            name,
            int(is_group),
            node.work.gpu_ns,
            node.cpu_ns,
            node.work.kernels,
            node.work.memcpy + node.work.memset,
            node.instances,
            node.span_ns,
            0,
            [],
            node.domain,
        ]

    grouped = len(roots) != 1
    result = [encoded(node, grouped) for node in top if grouped or visible(node)]
    stack = list(zip([node for node in top if grouped or visible(node)], result))
    while stack:
        node, out = stack.pop()
        for child in node.children:
            if budget <= 0 or not visible(child):
                out[8] += 1
                continue
            budget -= 1
            kid = encoded(child, False)
            out[9].append(kid)
            stack.append((child, kid))
    return result


def _tree_json(nodes: list[Any]) -> str:
    """The encoded tree as JSON, without recursion (json.dumps recurses once per level)."""
    parts: list[str] = []
    stack: list[Any] = [("]",), *[(node, i == len(nodes) - 1) for i, node in reversed(list(enumerate(nodes)))], ("[",)]
    while stack:
        item = stack.pop()
        if len(item) == 1:
            parts.append(item[0])
            continue
        node, last = item
        kids = node[9]
        parts.append(json.dumps(node[:9], ensure_ascii=False, separators=(",", ":"))[:-1] + ",[")
        stack.append(("]]" if last else "]],",))
        stack.extend((kid, i == len(kids) - 1) for i, kid in reversed(list(enumerate(kids))))
    return "".join(parts)


def _row(report: Report, row: Row) -> list[Any]:
    top = row.top_kernels[0].name if row.top_kernels else ""
    return [
        label(row.domain, row.name),
        row.group,
        row.work.gpu_ns,
        round(100 * share(report, row.work.gpu_ns), 6),  # rounded once, where shown (as the chart's)
        row.work.kernels,
        row.work.memcpy + row.work.memset,
        row.cpu_ns,
        row.instances,
        row.span_ns,
        top,
    ]
