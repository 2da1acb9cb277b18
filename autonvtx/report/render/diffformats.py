"""A diff as an aligned text table, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from autonvtx.report.compare.diff import Diff, DiffRow, Side
from autonvtx.report.compare.gather import describe
from autonvtx.report.render.table import Line, build_table
from autonvtx.report.render.text import format_duration, group_heading, note_lines, printable

SCHEMA = "autonvtx-diff/2"  # named as the report's are; 2: verdict "unclear", ratio_interval for interval_ns


def _signed(ns: float) -> str:
    text = format_duration(int(round(abs(ns))))
    return ("+" if ns > 0 else "-" if ns < 0 else "") + text


def _count(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def _ratio(row: DiffRow) -> str:
    return "-" if row.ratio is None else f"{row.ratio:.3f}x"


def _interval(row: DiffRow) -> str:
    if row.interval is None:
        return "-"
    low, high = row.interval
    if high == float("inf"):
        return "unbounded"
    return f"{low:.3f}-{high:.3f}"


def _p(row: DiffRow) -> str:
    if row.p_value is None:
        return "-"
    return "<0.0001" if row.p_value < 1e-4 else f"{row.p_value:.4f}"


def _metric(side: Side, metric: str) -> float:
    return side.gpu_ns if metric == "gpu" else side.cpu_ns


def _cells(row: DiffRow, has_gpu: bool) -> list[str]:
    cells = [
        row.verdict,
        row.metric.upper(),
        format_duration(int(round(_metric(row.base, row.metric)))),
        format_duration(int(round(_metric(row.new, row.metric)))),
        _signed(row.change_ns),
        _ratio(row),
        _interval(row),
        _p(row),
        f"{_count(row.base.instances)} -> {_count(row.new.instances)}",
    ]
    if has_gpu:
        cells.append(f"{_count(row.base.kernels)} -> {_count(row.new.kernels)}")
    return cells


def _name(row: DiffRow, tree: bool) -> str:
    if tree:
        return "  " * (len(row.path) - 1) + printable(row.name)
    return printable(row.name)


def format_text(diff: Diff, rows: Sequence[DiffRow], width: int | None = None) -> str:
    """The diff's table; `width`: a terminal's, which names are cut to fit (None: never cut)."""
    out = [
        f"autonvtx diff: {describe(diff.base_files)}  ->  {describe(diff.new_files)}",
        f"runs: {len(diff.base_files)} base, {len(diff.new_files)} new; times are means per run "
        f"({'GPU time where a range launched GPU work, else CPU time' if diff.has_gpu else 'CPU time'})",
        f"test: {diff.test}",
        f"noise model: {diff.noise_model}",
    ]
    counts = diff.counts()
    out.append(", ".join(f"{counts[v]} {v}" for v in counts))
    interval = f"{100 * diff.options.confidence:g}% CI"
    headers = ["Verdict", "Metric", "Base", "New", "Change", "Ratio", interval, "p", "Instances"]
    if diff.has_gpu:
        headers.append("Kernels")
    groups: dict[str, list[DiffRow]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    for group, members in groups.items():
        out.append("")
        if group:
            out.append(group_heading(group))
        lines = [Line(_cells(r, diff.has_gpu), _name(r, diff.tree)) for r in members]
        out.extend(build_table(headers, lines, width=width, left_first=True))
    if not rows:
        out.extend(["", "(no ranges)"])
    out.extend(note_lines(diff.notes, width))
    return "\n".join(out) + "\n"


def _side_record(side: Side) -> dict[str, Any]:
    return {
        "runs": side.runs,
        "present_in": side.present,
        "instances": side.instances,
        "cpu_ns": side.cpu_ns,
        "gpu_ns": side.gpu_ns,
        "kernels": side.kernels,
        "memory_ops": side.memory_ops,
        "per_run": list(side.totals),
    }


def record(diff: Diff, row: DiffRow) -> dict[str, Any]:
    found: dict[str, Any] = {"name": row.name, "verdict": row.verdict}
    if diff.by:
        found["group"] = row.group
    if diff.tree:
        found["path"] = list(row.path)
    pct = row.change_pct
    found.update(
        metric=row.metric,
        change_ns=row.change_ns,
        change_pct=None if pct is None else round(pct, 4),
        ratio=None if row.ratio is None else round(row.ratio, 6),
        p_value=row.p_value,
        ratio_interval=None if row.interval is None else [_finite(end) for end in row.interval],
        base=_side_record(row.base),
        new=_side_record(row.new),
    )
    return found


def _finite(value: float) -> float | None:
    """JSON has no infinity: an unbounded end is null."""
    return None if value == float("inf") else value


def format_json(diff: Diff, rows: Sequence[DiffRow]) -> str:
    document = {
        "schema": SCHEMA,
        "base": diff.base_files,
        "new": diff.new_files,
        "has_gpu_data": diff.has_gpu,
        "by": diff.by,
        "tree": diff.tree,
        "test": {
            "description": diff.test,
            "noise_model": diff.noise_model,
            "alpha": diff.options.alpha,
            "confidence": diff.options.confidence,
            "noise_pct_single_run": diff.options.noise_pct,
            "min_change_pct": diff.options.min_change_pct,
        },
        "counts": diff.counts(),
        "ranges": [record(diff, row) for row in rows],
        "notes": diff.notes,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


_CSV_COLUMNS = (
    "name",
    "group",
    "path",
    "verdict",
    "metric",
    "base_ns",
    "new_ns",
    "change_ns",
    "change_pct",
    "ratio",
    "p_value",
    "ratio_low",
    "ratio_high",
    "base_instances",
    "new_instances",
    "base_cpu_ns",
    "new_cpu_ns",
    "base_gpu_ns",
    "new_gpu_ns",
    "base_kernels",
    "new_kernels",
    "base_memory_ops",
    "new_memory_ops",
    "base_runs_present",
    "new_runs_present",
)


def format_csv(diff: Diff, rows: Sequence[DiffRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_CSV_COLUMNS)
    for row in rows:
        low, high = row.interval if row.interval is not None else ("", "")
        pct = row.change_pct
        writer.writerow(
            [
                row.name,
                row.group,
                " > ".join(row.path),
                row.verdict,
                row.metric,
                _metric(row.base, row.metric),
                _metric(row.new, row.metric),
                row.change_ns,
                "" if pct is None else round(pct, 4),
                "" if row.ratio is None else round(row.ratio, 6),
                "" if row.p_value is None else row.p_value,
                low,
                high,
                row.base.instances,
                row.new.instances,
                row.base.cpu_ns,
                row.new.cpu_ns,
                row.base.gpu_ns,
                row.new.gpu_ns,
                row.base.kernels,
                row.new.kernels,
                row.base.memory_ops,
                row.new.memory_ops,
                row.base.present,
                row.new.present,
            ]
        )
    return buffer.getvalue()
