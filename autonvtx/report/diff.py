"""What changed between runs, per range: both sides' numbers, the change, and whether it is beyond noise."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import fmean

from autonvtx.recorder.stats import DIFF_SORTS, check_sort
from autonvtx.recorder.view import View, arrange
from autonvtx.report.gather import CPU, GPU, INSTANCES, KERNELS, MEMOPS, Measures, Summary, name_matches
from autonvtx.report.noise import TEST_NAME, welch

VERDICTS = ("slower", "faster", "same", "new", "gone")
# --sort (the view option every command shares) as diff reads it: the change by default, the
# name, or a column, by the larger of the two sides' figures.
SORT_KEYS = DIFF_SORTS
_COLUMNS = {
    "gpu": "gpu_ns",
    "cpu": "cpu_ns",
    "total": "cpu_ns",
    "kernels": "kernels",
    "instances": "instances",
    "count": "instances",
}


@dataclass(frozen=True)
class DiffOptions:
    """How to judge a change: the test's level, and the threshold used when a side has one run."""

    alpha: float = 0.01
    noise_pct: float = 5.0  # one run on a side: a change within this percentage is noise
    min_change_pct: float = 0.0  # a change beyond noise but smaller than this counts as same
    confidence: float = 0.95


@dataclass(frozen=True)
class Side:
    """One side's numbers for a range: means over its runs, and each run's total of the compared metric."""

    runs: int
    present: int  # runs in which the range occurs
    instances: float
    cpu_ns: float
    gpu_ns: float
    kernels: float
    memory_ops: float
    totals: tuple[float, ...]  # per run, of the metric the row compares


@dataclass(frozen=True)
class DiffRow:
    """One range (or one path with --tree): both sides, the change and the verdict."""

    key: tuple[str, ...]  # (group, name) or (group, outer, ..., name)
    metric: str  # "gpu" or "cpu": what the change and the test are about
    base: Side
    new: Side
    verdict: str
    change_ns: float
    ratio: float | None  # new / base; None when base is 0
    p_value: float | None  # None: no test (a side with one run, or new/gone)
    interval: tuple[float, float] | None  # confidence interval of change_ns

    @property
    def group(self) -> str:
        return self.key[0]

    @property
    def name(self) -> str:
        return self.key[-1]

    @property
    def path(self) -> tuple[str, ...]:
        return self.key[1:]

    # The view's row protocol (`recorder.view.ViewRow`).
    @property
    def view_key(self) -> tuple[str, ...]:
        return self.key

    @property
    def view_parent(self) -> tuple[str, ...] | None:
        return self.key[:-1] if len(self.key) > 2 else None

    def view_matches(self, pattern: str) -> bool:
        return name_matches(self.name, pattern)

    @property
    def change_pct(self) -> float | None:
        base = _metric_mean(self.base, self.metric)
        return None if base == 0 else 100.0 * self.change_ns / base


@dataclass
class Diff:
    """The comparison: files on each side, how it was judged, and one row per range."""

    base_files: list[str]
    new_files: list[str]
    options: DiffOptions
    has_gpu: bool  # both sides hold GPU data
    tree: bool
    by: str | None
    rows: list[DiffRow]
    notes: list[str] = field(default_factory=list)

    @property
    def test(self) -> str:
        if len(self.base_files) >= 2 and len(self.new_files) >= 2:
            return f"{TEST_NAME}; a change is real when p < {self.options.alpha:g}"
        return (
            f"no test (one run on a side): a change beyond {self.options.noise_pct:g}% counts as real; "
            "give several runs per side for a test against run-to-run noise"
        )

    def counts(self) -> dict[str, int]:
        found = {verdict: 0 for verdict in VERDICTS}
        for row in self.rows:
            found[row.verdict] += 1
        return found


def compare(
    base: Sequence[Summary],
    new: Sequence[Summary],
    options: DiffOptions = DiffOptions(),
    tree: bool = False,
    by: str | None = None,
) -> Diff:
    """Rows for every range on either side, in no particular order (see order_rows)."""
    has_gpu = all(s.has_gpu for s in base) and all(s.has_gpu for s in new)
    tables_base = [s.paths if tree else s.ranges for s in base]
    tables_new = [s.paths if tree else s.ranges for s in new]
    keys = set().union(*tables_base, *tables_new)
    rows = [
        _row(key, [t.get(key) for t in tables_base], [t.get(key) for t in tables_new], has_gpu, options) for key in keys
    ]
    notes = _notes(base, new, has_gpu)
    return Diff([s.path for s in base], [s.path for s in new], options, has_gpu, tree, by, rows, notes)


def _notes(base: Sequence[Summary], new: Sequence[Summary], has_gpu: bool) -> list[str]:
    if has_gpu or not any(s.has_gpu for s in (*base, *new)):
        return []
    return [
        "GPU data on one side only: CPU time compared; capture both sides with `autonvtx profile` on a machine "
        "with a CUDA GPU (nsys itself: --trace=cuda,nvtx) to compare GPU time"
    ]


def _side(found: list[Measures | None], metric: int) -> Side:
    runs = len(found)
    present = [m for m in found if m is not None]

    def mean(index: int) -> float:
        return sum(m[index] for m in present) / runs if runs else 0.0

    totals = tuple(float(m[metric]) if m is not None else 0.0 for m in found)
    return Side(runs, len(present), mean(INSTANCES), mean(CPU), mean(GPU), mean(KERNELS), mean(MEMOPS), totals)


def _metric_mean(side: Side, metric: str) -> float:
    return side.gpu_ns if metric == "gpu" else side.cpu_ns


def _row(
    key: tuple[str, ...],
    base_found: list[Measures | None],
    new_found: list[Measures | None],
    has_gpu: bool,
    options: DiffOptions,
) -> DiffRow:
    # GPU time where both sides have it and the range launched work on either side, else CPU time.
    uses_gpu = has_gpu and any(m is not None and m[GPU] for m in (*base_found, *new_found))
    metric = "gpu" if uses_gpu else "cpu"
    index = GPU if uses_gpu else CPU
    base = _side(base_found, index)
    new = _side(new_found, index)
    base_mean = fmean(base.totals) if base.totals else 0.0
    new_mean = fmean(new.totals) if new.totals else 0.0
    change = new_mean - base_mean
    ratio = new_mean / base_mean if base_mean else None
    if base.present == 0:
        return DiffRow(key, metric, base, new, "new", change, ratio, None, None)
    if new.present == 0:
        return DiffRow(key, metric, base, new, "gone", change, ratio, None, None)
    tested = welch(list(base.totals), list(new.totals), options.confidence)
    if tested is None:
        real = base_mean > 0 and abs(change) * 100.0 > options.noise_pct * base_mean
        return DiffRow(key, metric, base, new, _verdict(real, change, base_mean, options), change, ratio, None, None)
    real = tested.p_value < options.alpha
    return DiffRow(
        key,
        metric,
        base,
        new,
        _verdict(real, change, base_mean, options),
        change,
        ratio,
        tested.p_value,
        (tested.low, tested.high),
    )


def _verdict(real: bool, change: float, base_mean: float, options: DiffOptions) -> str:
    if not real or change == 0:
        return "same"
    if base_mean and abs(change) * 100.0 < options.min_change_pct * base_mean:
        return "same"
    return "slower" if change > 0 else "faster"


_RANK = {"slower": 0, "faster": 0, "new": 1, "gone": 1, "same": 2}


def check_diff_sort(sort: str | None) -> str:
    if sort is None:
        return "change"
    check_sort(sort, SORT_KEYS, "a diff of runs")
    return sort


def _sort_key(sort: str) -> Callable[[DiffRow], tuple[object, ...]]:
    if sort == "name":
        return lambda r: r.key
    column = _COLUMNS.get(sort)
    if column is not None:
        return lambda r: (-max(getattr(r.base, column), getattr(r.new, column)), r.key)
    # Real changes first, largest first; then ranges that appeared or vanished; then the rest.
    return lambda r: (_RANK[r.verdict], -abs(r.change_ns), r.key)


def order_rows(
    rows: Sequence[DiffRow],
    sort: str = "change",
    pattern: str | None = None,
    top: int | None = None,
    tree: bool = False,
) -> list[DiffRow]:
    """--filter, then --sort (real changes first, by size), then --top (with --tree: per parent),
    as every table's view does (`recorder.view.arrange`)."""
    return arrange(rows, View(tree=tree, sort=sort, top=top, filter=pattern), _sort_key(sort))


def over_limit(diff: Diff, pct: float) -> list[DiffRow]:
    """Rows beyond noise that slowed by more than pct percent (--fail-over)."""
    return [row for row in diff.rows if row.verdict == "slower" and (row.change_pct is None or row.change_pct > pct)]
