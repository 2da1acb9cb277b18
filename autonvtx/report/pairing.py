"""A module's forward and backward side by side (`--pair backward`): rows `X` and `X [backward]`
(the torch plugin's `backward_modules`) paired into one line each, from the rows of any table:
a recording's statistics rows (`summary`, `run --summary`, `report` on a trace) or an export's
report rows (`report` on Nsight Systems' export, with the GPU time of each side)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autonvtx.report.render.text import format_duration
from autonvtx.stats.model import SHAPES_PLACEHOLDER
from autonvtx.stats.view import glob_matches

BACKWARD_SUFFIX = " [backward]"
PAIRINGS = ("backward",)
NO_PAIRS = "no backward ranges: the torch plugin's backward_modules option records them"


@dataclass(frozen=True)
class Side:
    """One side of a pair: its instances, CPU time, and GPU time where the source has it."""

    count: int
    cpu_ns: int
    gpu_ns: int | None = None

    def time(self, gpu: bool) -> int:
        return (self.gpu_ns or 0) if gpu else self.cpu_ns


@dataclass(frozen=True)
class BackwardPair:
    """One module's forward side and backward side (either may be missing), in its --by group."""

    group: str
    domain: str
    name: str
    forward: Side | None
    backward: Side | None

    # The view's row protocol (`stats.view.ViewRow`): a flat row.
    view_parent = None

    @property
    def view_key(self) -> tuple[str, str, str]:
        return (self.group, self.domain, self.name)

    def view_matches(self, pattern: str) -> bool:
        return glob_matches(self.domain, self.name, pattern)

    def ratio(self, gpu: bool = False) -> float | None:
        """Backward time over forward time, when both were recorded."""
        if self.forward is None or self.backward is None or self.forward.time(gpu) == 0:
            return None
        return self.backward.time(gpu) / self.forward.time(gpu)

    def total(self, gpu: bool = False) -> int:
        return sum(side.time(gpu) for side in (self.forward, self.backward) if side is not None)


def _side(row: Any, gpu: bool) -> Side:
    """A statistics row (count, total_ns) or a report row (instances, cpu_ns, work)."""
    if hasattr(row, "total_ns"):
        return Side(row.count, row.total_ns)
    return Side(row.instances, row.cpu_ns, row.work.gpu_ns if gpu else None)


def backward_pairs(rows: Sequence[Any], gpu: bool = False) -> list[BackwardPair]:
    """Pair each `X [backward]` row with its forward row `X` (or `X [{shapes}]`, shapes grouped),
    per group; rows of names with no backward range are left out. In the rows' order. `gpu`:
    report rows of an export with GPU work, whose GPU time each side then carries."""
    forward: dict[tuple[str, str, str], Side] = {}
    backward: dict[tuple[str, str, str], Side] = {}
    for row in rows:
        if getattr(row, "depth", 0):
            continue  # --tree rows: one flat table is paired
        if row.name.endswith(BACKWARD_SUFFIX):
            backward[row.group, row.domain, row.name[: -len(BACKWARD_SUFFIX)]] = _side(row, gpu)
        else:
            name = row.name[: -len(SHAPES_PLACEHOLDER)] if row.name.endswith(SHAPES_PLACEHOLDER) else row.name
            forward.setdefault((row.group, row.domain, name), _side(row, gpu))
    return [BackwardPair(g, d, n, forward.get((g, d, n)), side) for (g, d, n), side in backward.items()]


def has_gpu(pairs: Sequence[BackwardPair]) -> bool:
    return any(side is not None and side.gpu_ns is not None for p in pairs for side in (p.forward, p.backward))


def order(gpu: bool) -> Any:
    """The view's sort key: the largest forward plus backward first."""
    return lambda pair: (-pair.total(gpu), pair.name)


def _time(side: Side | None, gpu: bool) -> str:
    return format_duration(side.time(gpu)) if side is not None else "-"


def pairs_text(pairs: Sequence[BackwardPair], notes: Sequence[str] = ()) -> str:
    """The pairs as a text table (a heading per --by group): count and time of each side, and
    their ratio; GPU time where the rows came from an export with GPU work."""
    gpu = has_gpu(pairs)
    header = ("Fwd GPU" if gpu else "Forward", "Count", "Bwd GPU" if gpu else "Backward", "Count", "Bwd/Fwd", "Module")
    groups: dict[str, list[tuple[str, ...]]] = {}
    for pair in pairs:
        f, b = pair.forward, pair.backward
        ratio = pair.ratio(gpu)
        groups.setdefault(pair.group, []).append(
            (
                _time(f, gpu),
                str(f.count) if f else "0",
                _time(b, gpu),
                str(b.count) if b else "0",
                f"{ratio:.2f}" if ratio is not None else "-",
                f"{pair.domain}:{pair.name}" if pair.domain else pair.name,
            )
        )
    out: list[str] = []
    for group, lines in groups.items() or [("", [])]:
        if group:
            out.append(f"== {group} ==")
        widths = [max(len(row[i]) for row in [header, *lines]) for i in range(5)]
        for row in [header, tuple("-" * w for w in widths) + ("-" * len(header[5]),), *lines]:
            out.append("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row[:5])) + "  " + row[5])
    if not pairs:
        out.append(f"({NO_PAIRS})")
    out.extend(f"note: {note}" for note in notes)
    return "\n".join(out) + "\n"


def _record(pair: BackwardPair) -> dict[str, Any]:
    def side(s: Side | None) -> dict[str, Any] | None:
        if s is None:
            return None
        found: dict[str, Any] = {"count": s.count, "cpu_ns": s.cpu_ns}
        if s.gpu_ns is not None:
            found["gpu_ns"] = s.gpu_ns
        return found

    gpu = has_gpu([pair])
    return {
        "group": pair.group,
        "domain": pair.domain,
        "name": pair.name,
        "forward": side(pair.forward),
        "backward": side(pair.backward),
        "ratio": pair.ratio(gpu),
    }


def pairs_json(pairs: Sequence[BackwardPair], notes: Sequence[str] = ()) -> str:
    document = {"schema": "autonvtx-pairs/1", "pairs": [_record(p) for p in pairs], "notes": list(notes)}
    return json.dumps(document, indent=2) + "\n"


def pairs_csv(pairs: Sequence[BackwardPair]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["group", "domain", "name", "forward_count", "forward_cpu_ns", "forward_gpu_ns"]
        + ["backward_count", "backward_cpu_ns", "backward_gpu_ns", "ratio"]
    )
    for p in pairs:
        cells: list[Any] = [p.group, p.domain, p.name]
        for s in (p.forward, p.backward):
            cells += [s.count, s.cpu_ns, s.gpu_ns if s.gpu_ns is not None else ""] if s else [0, "", ""]
        ratio = p.ratio(has_gpu([p]))
        writer.writerow(cells + [f"{ratio:.4f}" if ratio is not None else ""])
    return out.getvalue()
