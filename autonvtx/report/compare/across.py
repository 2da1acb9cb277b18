"""Ranks side by side: per range, the spread of its time across ranks, the straggler, and NCCL overlap."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from autonvtx.report.compare.gather import CPU, GPU, INSTANCES, KERNELS, Measures, Overlap, Summary, name_matches
from autonvtx.report.compare.straggler import Straggler, find_straggler, from_communication
from autonvtx.report.compare.timelines import Timeline
from autonvtx.report.views import group_order

_NUMBER = re.compile(r"(\d+)")


@dataclass(frozen=True)
class RankValue:
    """One rank's part of a range: its time (of the compared metric), instances, and NCCL overlap."""

    rank: str
    ns: int
    instances: int
    kernels: int
    overlap: Overlap | None  # (communication ns, compute ns, overlapped ns), where GPU data exists


@dataclass(frozen=True)
class SpreadRow:
    """One range across ranks."""

    name: str
    metric: str  # "gpu" or "cpu"
    ranks: list[RankValue]  # ranks holding the range, in natural order

    # The view's row protocol (`stats.view.ViewRow`): one row per name, no groups.
    group = ""
    view_parent = None

    @property
    def view_key(self) -> str:
        return self.name

    def view_matches(self, pattern: str) -> bool:
        return name_matches(self.name, pattern)

    @property
    def minimum(self) -> int:
        return min(v.ns for v in self.ranks)

    @property
    def median(self) -> float:
        return float(median(v.ns for v in self.ranks))

    @property
    def maximum(self) -> int:
        return max(v.ns for v in self.ranks)

    @property
    def slowest(self) -> RankValue:
        top = self.maximum
        return next(v for v in self.ranks if v.ns == top)  # ranks are in natural order: the first on ties

    @property
    def fastest(self) -> RankValue:
        low = self.minimum
        return next(v for v in self.ranks if v.ns == low)

    @property
    def imbalance(self) -> float | None:
        """max / median: 1.0 when every rank took as long; None when the median is 0."""
        middle = self.median
        return self.maximum / middle if middle else None

    @property
    def lost_ns(self) -> float:
        """What the slowest rank took beyond the median rank: time the others wait at the next sync."""
        return self.maximum - self.median

    def is_communication(self) -> bool:
        """Most of the range's kernel time (on every rank together) is communication."""
        totals = self.overlap_totals()
        return totals is not None and totals[0] > 0 and totals[0] >= totals[1]

    def overlap_totals(self) -> Overlap | None:
        found = [v.overlap for v in self.ranks if v.overlap is not None]
        if not found:
            return None
        return (sum(o[0] for o in found), sum(o[1] for o in found), sum(o[2] for o in found))


@dataclass
class Spread:
    """The view: which ranks, from which files, and one row per range."""

    files: list[str]
    ranks: list[str]
    has_gpu: bool
    rows: list[SpreadRow]
    notes: list[str] = field(default_factory=list)

    timelines: dict[str, Timeline] = field(default_factory=dict)  # per rank: when it reached and left each range
    # Every range and rank, --filter or not: the straggler is found from the whole job (a filter
    # that hid the communication ranges once changed the method and named a wait the function).
    every_row: list[SpreadRow] = field(default_factory=list)
    every_rank: list[str] = field(default_factory=list)

    def straggler(self) -> Straggler | None:
        """The rank the others wait for, its function and why (see report.compare.straggler). With NCCL
        kernels the ranks wait on the GPU, inside the communication ranges; else in CPU ranges that
        end together. A communication range is never the function: there a rank waits, it does not work."""
        every_row = self.every_row or self.rows
        ranks = {row.name: {v.rank: float(v.ns) for v in row.ranks} for row in every_row}
        communication = {row.name for row in every_row if row.is_communication()}
        if communication:
            waits = {name: ranks[name] for name in communication}
            work = {name: found for name, found in ranks.items() if name not in communication}
            found = from_communication(waits, work, self.every_rank or self.ranks)
            if found is not None:
                return found
        return find_straggler(self.timelines, communication.__contains__)


def rank_labels(summaries: Sequence[Summary]) -> list[dict[str, str]]:
    """Per file: its group labels (as read with --by rank) -> the rank's label in the view.

    A file holding one process whose rank is unknown takes the number in its name (rep_3.sqlite:
    rank 3); labels several files share are told apart by the file's name.
    """
    mapped: list[dict[str, str]] = []
    for summary in summaries:
        groups = sorted({key[0] for key in summary.ranges}, key=group_order)
        numbers = _NUMBER.findall(os.path.basename(summary.path))
        if len(summaries) > 1 and len(groups) == 1 and not groups[0].startswith("rank ") and numbers:
            mapped.append({groups[0]: f"rank {int(numbers[-1])}"})
        else:
            mapped.append({group: group for group in groups})
    seen = Counter(label for labels in mapped for label in labels.values())
    names = Counter(os.path.basename(summary.path) for summary in summaries)
    for index, (summary, labels) in enumerate(zip(summaries, mapped)):
        name = os.path.basename(summary.path)
        where = name if names[name] == 1 else f"{name} #{index + 1}"
        for group, label in labels.items():
            if seen[label] > 1:
                labels[group] = f"{label} ({where})"
    return mapped


def _without_rank(mapped: list[dict[str, str]]) -> set[str]:
    """Labels of processes that hold no rank, where others do: left out of the view (a launcher
    captured with its ranks is not a rank; its time would make it the slowest)."""
    labels = {label for labels in mapped for label in labels.values()}
    if not any(label.startswith("rank ") for label in labels):
        return set()
    return {label for label in labels if not label.startswith("rank ")}


def spread(summaries: Sequence[Summary], pattern: str | None = None) -> Spread:
    has_gpu = any(s.has_gpu for s in summaries)
    per_name: dict[str, dict[str, tuple[Measures, Overlap | None]]] = {}
    timelines: dict[str, Timeline] = {}
    mapped = rank_labels(summaries)
    left_out = _without_rank(mapped)
    for summary, labels in zip(summaries, mapped):
        for group, timeline in summary.timelines.items():
            if group in labels and labels[group] not in left_out:
                timelines.setdefault(labels[group], Timeline()).merge(timeline)
        for (group, name), measures in summary.ranges.items():
            rank = labels[group]
            if rank in left_out:
                continue
            per_name.setdefault(name, {})[rank] = (measures, summary.overlap.get((group, name)))
    every_row = []
    for name, by_rank in per_name.items():
        uses_gpu = has_gpu and any(m[GPU] for m, _ in by_rank.values())
        index = GPU if uses_gpu else CPU
        values = [
            RankValue(rank, m[index], m[INSTANCES], m[KERNELS], o)
            for rank, (m, o) in sorted(by_rank.items(), key=lambda item: group_order(item[0]))
        ]
        every_row.append(SpreadRow(name, "gpu" if uses_gpu else "cpu", values))
    # --filter decides the rows shown and the ranks listed (those holding a row shown).
    rows = [row for row in every_row if pattern is None or name_matches(row.name, pattern)]
    ranks = {value.rank for row in rows for value in row.ranks}
    ordered = sorted(ranks, key=group_order)
    notes = []
    if left_out:
        notes.append(
            f"left out, holding no rank: {', '.join(sorted(left_out, key=group_order))} (a launcher, or a "
            "process of the job that is not one of its ranks); ranks are the processes whose launcher gave "
            "them one (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)"
        )
    if len(ordered) < 2:
        notes.append(
            f"only one rank found ({ordered[0] if ordered else 'none'}): nothing to compare across; "
            "give one export holding several processes, several rank files, or a merged trace"
        )
    every_rank = sorted({value.rank for row in every_row for value in row.ranks}, key=group_order)
    return Spread([s.path for s in summaries], ordered, has_gpu, rows, notes, timelines, every_row, every_rank)


def spread_order(sort: str | None) -> Callable[[SpreadRow], tuple[Any, ...]]:
    """The view's sort key for ranks side by side (`stats.view.arrange`); by default the time
    the slowest rank lost against the median, then the longest rank."""
    keys: dict[str, Callable[[SpreadRow], tuple[Any, ...]]] = {
        "name": lambda r: (r.name,),
        "lost": lambda r: (-r.lost_ns, -r.maximum, r.name),
        "imbalance": lambda r: (-(r.imbalance or 0.0), -r.maximum, r.name),
        "max": lambda r: (-r.maximum, r.name),
        "median": lambda r: (-r.median, r.name),
        "min": lambda r: (-r.minimum, r.name),
        "instances": lambda r: (-max(v.instances for v in r.ranks), r.name),
        "kernels": lambda r: (-max(v.kernels for v in r.ranks), r.name),
    }
    keys["count"] = keys["instances"]
    return keys[sort or "lost"]
