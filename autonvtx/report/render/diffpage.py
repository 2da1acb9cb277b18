"""A diff as one self-contained HTML page: the range tree coloured by change, beside the table."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from autonvtx.report.compare.diff import Diff, DiffRow
from autonvtx.report.compare.gather import describe
from autonvtx.report.render.shell import json_text, render_shell

_MAX_NODES = 20000
_PREFIX = re.compile(r"[^:]+:(?!:)")

# The tree beside the table; diff.js fills them.
_PANES = (
    '<main><section id="chart-pane" class="pane"><div id="tree"></div></section>'
    '<section id="table-pane" class="pane"><div id="table-caption"></div><div id="table-scroll"><table id="table">'
    "<thead></thead><tbody></tbody></table></div></section></main>"
)


def _record(row: DiffRow, with_path: bool) -> dict[str, Any]:
    base = row.base.gpu_ns if row.metric == "gpu" else row.base.cpu_ns
    new = row.new.gpu_ns if row.metric == "gpu" else row.new.cpu_ns
    pct = row.change_pct
    found: dict[str, Any] = {
        "name": row.name,
        "verdict": row.verdict,
        "metric": row.metric,
        "base": base,
        "new": new,
        "change": row.change_ns,
        "pct": None if pct is None else round(pct, 3),
        "p": row.p_value,
        "inst": f"{row.base.instances:g} \u2192 {row.new.instances:g}",
    }
    if row.group:
        found["group"] = row.group
    if with_path:
        path = list(row.key) if row.group else list(row.path)
        found["path"] = path
    return found


def shared_prefix(names: Iterable[str]) -> str:
    """The "domain:" every name opens with, if they all open with the same one (else "").

    A name's prefix runs to its first colon that is not part of "::" (aten::add has none); a
    name must keep something after it. Names with differing prefixes, or none, keep theirs.
    """
    found: str | None = None
    for name in names:
        match = _PREFIX.match(name)
        prefix = match.group(0) if match and len(name) > match.end() else ""
        if not prefix or (found is not None and prefix != found):
            return ""
        found = prefix
    return found or ""


def _drop_prefix(prefix: str, records: list[dict[str, Any]], groups: int) -> None:
    cut = len(prefix)
    for record in records:
        record["name"] = record["name"][cut:]
        if "path" in record:
            path = record["path"]
            record["path"] = path[:groups] + [part[cut:] for part in path[groups:]]


def render_diff_page(diff: Diff, rows: Sequence[DiffRow], tree_rows: Sequence[DiffRow]) -> str:
    tree = [_record(row, True) for row in tree_rows[:_MAX_NODES]]
    table = [_record(row, diff.tree) for row in rows]
    # Group names ("python3 (pid 144)") head the paths of --by pages: they are not ranges.
    groups = 1 if any(row.group for row in [*rows, *tree_rows]) else 0
    names = [r["name"] for r in table] + [part for r in tree for part in r["path"][groups:]]
    prefix = shared_prefix(names)
    if prefix:
        _drop_prefix(prefix, tree, groups)
        _drop_prefix(prefix, table, groups)
    data = {
        "base": describe(diff.base_files),
        "new": describe(diff.new_files),
        "test": diff.test,
        "counts": diff.counts(),
        "domain": prefix[:-1],
        "tree": tree,
        "rows": table,
        "notes": diff.notes,
    }
    title = f"autonvtx diff: {data['base']} -> {data['new']}"
    return render_shell("diff", title, json_text(data), _PANES)
