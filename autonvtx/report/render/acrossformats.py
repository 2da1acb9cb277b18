"""The across-ranks view as text, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from autonvtx.report.compare.across import Spread, SpreadRow
from autonvtx.report.compare.gather import describe
from autonvtx.report.render.table import Line, build_table
from autonvtx.report.render.text import format_duration, note_lines, printable

SCHEMA = "autonvtx-across-ranks/2"  # 2: the straggler names its function and why


def _overlap_cells(row: SpreadRow) -> list[str]:
    totals = row.overlap_totals()
    if totals is None or not totals[0]:
        return ["-", "-", "-"]
    comm, _compute, overlapped = totals
    return [format_duration(comm), format_duration(overlapped), format_duration(comm - overlapped)]


def _imbalance(row: SpreadRow) -> str:
    value = row.imbalance
    return "-" if value is None else f"{value:.2f}"


def format_text(view: Spread, rows: Sequence[SpreadRow], width: int | None = None) -> str:
    """The ranks side by side; `width`: a terminal's, which names are cut to fit (None: never cut)."""
    shown = ", ".join(view.ranks[:8]) + (f", ... ({len(view.ranks)} ranks)" if len(view.ranks) > 8 else "")
    out = [
        f"Across ranks: {describe(view.files)}",
        f"{len(view.ranks)} rank(s): {shown}",
        f"time per rank: {'GPU time where a range launched GPU work, else CPU time' if view.has_gpu else 'CPU time'}; "
        "imbalance = max / median; lost = max - median",
    ]
    straggler = view.straggler()
    if straggler is not None:
        function = f", `{printable(straggler.function)}`" if straggler.function else ""
        out.append(f"straggler: {straggler.rank}{function} ({printable(straggler.why)})")
    headers = ["Min", "Median", "Max", "Lost", "Imbalance", "Slowest"]
    if view.has_gpu:
        headers += ["NCCL", "Overlapped", "Exposed"]
    lines = []
    for row in rows:
        cells = [
            format_duration(row.minimum),
            format_duration(int(round(row.median))),
            format_duration(row.maximum),
            format_duration(int(round(row.lost_ns))),
            _imbalance(row),
            row.slowest.rank,
        ]
        if view.has_gpu:
            cells += _overlap_cells(row)
        lines.append(Line(cells, printable(row.name)))
    out.append("")
    out.extend(build_table(headers, lines, width=width))
    out.extend(note_lines(view.notes, width))
    return "\n".join(out) + "\n"


def record(row: SpreadRow) -> dict[str, Any]:
    totals = row.overlap_totals()
    found: dict[str, Any] = {
        "name": row.name,
        "metric": row.metric,
        "ranks": len(row.ranks),
        "min_ns": row.minimum,
        "median_ns": row.median,
        "max_ns": row.maximum,
        "lost_ns": row.lost_ns,
        "slowest_rank": row.slowest.rank,
        "fastest_rank": row.fastest.rank,
        "imbalance": None if row.imbalance is None else round(row.imbalance, 6),
    }
    if totals is not None:
        found.update(
            communication_ns=totals[0], compute_ns=totals[1], overlapped_ns=totals[2], exposed_ns=totals[0] - totals[2]
        )
    found["per_rank"] = [_rank_record(value) for value in row.ranks]
    return found


def _rank_record(value: Any) -> dict[str, Any]:
    found = {"rank": value.rank, "ns": value.ns, "instances": value.instances, "kernels": value.kernels}
    if value.overlap is not None:
        comm, compute, overlapped = value.overlap
        found.update(communication_ns=comm, compute_ns=compute, overlapped_ns=overlapped, exposed_ns=comm - overlapped)
    return found


def format_json(view: Spread, rows: Sequence[SpreadRow]) -> str:
    straggler = view.straggler()
    document = {
        "schema": SCHEMA,
        "files": view.files,
        "ranks": view.ranks,
        "has_gpu_data": view.has_gpu,
        "straggler": None
        if straggler is None
        else {
            "rank": straggler.rank,
            "function": straggler.function,
            "why": straggler.why,
            "method": straggler.method,
            "waited_ns": straggler.waited_ns,
            "late_in": straggler.late_in,
            "synchronising": straggler.synchronising,
            "sync_range": straggler.sync_range,
            "function_excess_ns": straggler.function_excess_ns,
        },
        "ranges": [record(row) for row in rows],
        "notes": view.notes,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def format_csv(view: Spread, rows: Sequence[SpreadRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = [
        "name",
        "metric",
        "ranks",
        "min_ns",
        "median_ns",
        "max_ns",
        "lost_ns",
        "slowest_rank",
        "fastest_rank",
        "imbalance",
        "communication_ns",
        "compute_ns",
        "overlapped_ns",
        "exposed_ns",
    ]
    writer.writerow(columns)
    for row in rows:
        found = record(row)
        writer.writerow(["" if found.get(column) is None else found[column] for column in columns])
    return buffer.getvalue()
