"""A module's forward and backward side by side: rows `X` and `X [backward]` (the torch plugin's
`backward_modules`) paired into one line each, from the statistics rows of a recording."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autonvtx.recorder.stats import SHAPES_PLACEHOLDER, RangeStats
from autonvtx.report.text import format_duration

BACKWARD_SUFFIX = " [backward]"


@dataclass(frozen=True)
class BackwardPair:
    """One module's forward row and backward row (either may be missing)."""

    domain: str
    name: str
    forward: RangeStats | None
    backward: RangeStats | None

    @property
    def ratio(self) -> float | None:
        """Backward time over forward time, when both were recorded."""
        if self.forward is None or self.backward is None or self.forward.total_ns == 0:
            return None
        return self.backward.total_ns / self.forward.total_ns


def backward_pairs(rows: Sequence[RangeStats]) -> list[BackwardPair]:
    """Pair each `X [backward]` row with its forward row `X` (or `X [{shapes}]`, shapes grouped),
    largest forward plus backward first; rows of names with no backward range are left out."""
    forward: dict[tuple[str, str], RangeStats] = {}
    backward: dict[tuple[str, str], RangeStats] = {}
    for row in rows:
        if row.group or row.depth:
            continue  # --by and --tree rows: one flat table is paired
        if row.name.endswith(BACKWARD_SUFFIX):
            backward[row.domain, row.name[: -len(BACKWARD_SUFFIX)]] = row
        else:
            name = row.name[: -len(SHAPES_PLACEHOLDER)] if row.name.endswith(SHAPES_PLACEHOLDER) else row.name
            forward.setdefault((row.domain, name), row)
    pairs = [BackwardPair(domain, name, forward.get((domain, name)), row) for (domain, name), row in backward.items()]
    pairs.sort(key=lambda p: -(p.backward.total_ns if p.backward else 0) - (p.forward.total_ns if p.forward else 0))
    return pairs


def pairs_text(pairs: Sequence[BackwardPair]) -> str:
    """The pairs as a text table: count and total time of each side, and their ratio."""
    header = ("Forward", "Count", "Backward", "Count", "Bwd/Fwd", "Module")
    lines = []
    for pair in pairs:
        f, b = pair.forward, pair.backward
        ratio = pair.ratio
        lines.append(
            (
                format_duration(f.total_ns) if f else "-",
                str(f.count) if f else "0",
                format_duration(b.total_ns) if b else "-",
                str(b.count) if b else "0",
                f"{ratio:.2f}" if ratio is not None else "-",
                f"{pair.domain}:{pair.name}" if pair.domain else pair.name,
            )
        )
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(5)]
    out = []
    for row in [header, tuple("-" * w for w in widths) + ("-" * len(header[5]),), *lines]:
        out.append("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row[:5])) + "  " + row[5])
    if not lines:
        out.append("(no backward ranges: the torch plugin's backward_modules option records them)")
    return "\n".join(out) + "\n"
