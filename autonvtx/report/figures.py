"""The report's figures: a row per range name, a tree of nested ranges, and capture totals.

A row and a tree node from an autonvtx recording carry the recording's statistics
(`stats.model.RangeStats`, the one statistics model): `instances` and `cpu_ns` are then its
count and total, so `report` and `summary` show the same figures for one trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autonvtx.recorder.model import ProcessRecording
from autonvtx.stats.model import RangeStats
from autonvtx.stats.view import glob_matches


@dataclass(slots=True)  # slots: the native table writer and sort read them at fixed places
class Work:
    """GPU work: kernels, memcpys and memsets (counts, bytes, summed durations in ns)."""

    kernels: int = 0
    kernel_ns: int = 0
    memcpy: int = 0
    memcpy_bytes: int = 0
    memcpy_ns: int = 0
    memset: int = 0
    memset_bytes: int = 0
    memset_ns: int = 0

    @property
    def gpu_ns(self) -> int:
        """Everything the GPU spent on this work: kernels, copies and sets."""
        return self.kernel_ns + self.memcpy_ns + self.memset_ns

    @property
    def operations(self) -> int:
        return self.kernels + self.memcpy + self.memset

    def add(self, other: Work) -> None:
        self.kernels += other.kernels
        self.kernel_ns += other.kernel_ns
        self.memcpy += other.memcpy
        self.memcpy_bytes += other.memcpy_bytes
        self.memcpy_ns += other.memcpy_ns
        self.memset += other.memset
        self.memset_bytes += other.memset_bytes
        self.memset_ns += other.memset_ns


@dataclass(frozen=True, slots=True)
class KernelShare:
    """One kernel name's part of a range's GPU work."""

    name: str
    count: int
    ns: int


@dataclass(slots=True)
class Row:
    """One range name (within one group under --by): its instances and the work they launched.

    cpu_ns, span_ns and the work count a range name once where instances of it nest
    (recursion): time and work inside the outermost instance.
    """

    group: str
    domain: str
    name: str
    instances: int = 0
    cpu_ns: int = 0
    span_ns: int = 0
    work: Work = field(default_factory=Work)
    top_kernels: list[KernelShare] = field(default_factory=list)
    stats: RangeStats | None = None  # from an autonvtx recording: the statistics model's row

    # The view's row protocol (`stats.view.ViewRow`): a flat row, keyed by its domain and name.
    view_parent = None

    @property
    def view_key(self) -> tuple[str, str]:
        return (self.domain, self.name)

    def view_matches(self, pattern: str) -> bool:
        return glob_matches(self.domain, self.name, pattern)


@dataclass
class TreeNode:
    """One position in the nesting of ranges: a name under its enclosing names."""

    group: str
    domain: str
    name: str
    instances: int = 0
    cpu_ns: int = 0
    span_ns: int = 0
    work: Work = field(default_factory=Work)
    start_end: bool = False
    children: list[TreeNode] = field(default_factory=list)
    stats: RangeStats | None = None  # from an autonvtx recording: the statistics model's row


@dataclass
class Totals:
    """The capture as a whole: all GPU work, the part launched inside some range, the rest."""

    capture: Work = field(default_factory=Work)
    outside: Work = field(default_factory=Work)  # launched by a call outside every range
    unmatched: Work = field(default_factory=Work)  # no runtime call with its correlationId


@dataclass
class Report:
    """Everything the formats print."""

    source: str
    kind: str  # "nsys" or "autonvtx"
    description: str
    has_gpu: bool
    by: str | None
    rows: list[Row]
    tree: list[TreeNode]
    totals: Totals
    notes: list[str] = field(default_factory=list)
    groups_outside: dict[str, Work] = field(default_factory=dict)
    recordings: list[ProcessRecording] = field(default_factory=list)  # an autonvtx trace's processes
    empty: str | None = None  # why the table printed has no rows, where --filter emptied it (also a note)
    # An export's push/pop ranges per rank, (thread, start, end, label), kept from the sweep's own
    # read where ReportOptions.flat_ranges asked (the straggler's timelines: no second read).
    flat_ranges: dict[str, list[tuple[int, int, int, str]]] | None = None
