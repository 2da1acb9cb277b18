"""What changed between runs, per range: both sides' numbers, the change, and whether it is beyond noise."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import fmean

from autonvtx.report.compare.gather import CPU, GPU, INSTANCES, KERNELS, MEMOPS, Measures, Summary, name_matches
from autonvtx.report.compare.noise import NOISE_MODEL, TEST_NAME, achieved_confidence, compare_runs, smallest_p
from autonvtx.stats.model import DIFF_SORTS, check_sort

# unclear: no real change, and the interval cannot rule out one larger than --min-change.
VERDICTS = ("slower", "faster", "unclear", "same", "new", "gone")
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
    """How to judge a change: the test's level, the smallest change that matters, the one-run threshold."""

    alpha: float = 0.01
    noise_pct: float = 5.0  # one run on a side: a change within this percentage is noise
    min_change_pct: float = 5.0  # same: the interval rules out a change beyond this percentage
    confidence: float = 0.95  # of the ratio's interval


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
    ratio: float | None  # new / base (Hodges-Lehmann where tested); None when base is 0
    p_value: float | None  # None: no test (a side with one run, or new/gone)
    interval: tuple[float, float] | None  # confidence interval of the ratio (0 / inf: unbounded)

    @property
    def group(self) -> str:
        return self.key[0]

    @property
    def name(self) -> str:
        return self.key[-1]

    @property
    def path(self) -> tuple[str, ...]:
        return self.key[1:]

    # The view's row protocol (`stats.view.ViewRow`).
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
        """The change in percent, from the ratio (robust to an outlier run where the ratio was tested)."""
        return None if self.ratio is None else 100.0 * (self.ratio - 1.0)


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
    def tested(self) -> bool:
        return len(self.base_files) >= 2 and len(self.new_files) >= 2

    @property
    def test(self) -> str:
        if self.tested:
            options = self.options
            runs = (len(self.base_files), len(self.new_files))
            achieved = achieved_confidence(*runs, options.confidence)
            exact = f" (exact: {100 * achieved:.3g}% with {runs[0]} and {runs[1]} runs)" if achieved else ""
            return (
                f"{TEST_NAME}; slower/faster when p < {options.alpha:g}; same when the ratio's "
                f"{100 * options.confidence:g}% interval{exact} lies within {options.min_change_pct:g}% of 1; "
                "unclear otherwise"
            )
        return (
            f"no test (one run on a side): a change beyond {self.options.noise_pct:g}% counts as real; "
            "give several runs per side for a test against run-to-run noise"
        )

    @property
    def noise_model(self) -> str:
        if self.tested:
            return NOISE_MODEL
        return f"assumed: a run varies by less than {self.options.noise_pct:g}% (one run on a side measures no noise)"

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
    """Rows for every range on either side, in no particular order (`stats.view.arrange` with
    `diff_order` orders them)."""
    base, repeated_base = distinct_runs(base)
    new, repeated_new = distinct_runs(new)
    has_gpu = all(s.has_gpu for s in base) and all(s.has_gpu for s in new)
    tables_base = [s.paths if tree else s.ranges for s in base]
    tables_new = [s.paths if tree else s.ranges for s in new]
    keys = set().union(*tables_base, *tables_new)
    rows = [
        _row(key, [t.get(key) for t in tables_base], [t.get(key) for t in tables_new], has_gpu, options) for key in keys
    ]
    notes = _copy_notes("BASE", repeated_base) + _copy_notes("NEW", repeated_new)
    if sorted(map(_measured, base), key=repr) == sorted(map(_measured, new), key=repr):
        notes.append("BASE and NEW hold the same measurements (the same runs): nothing changed")
    notes += _notes(base, new, has_gpu) + _power_notes(len(base), len(new), options)
    return Diff([s.path for s in base], [s.path for s in new], options, has_gpu, tree, by, rows, notes)


def _notes(base: Sequence[Summary], new: Sequence[Summary], has_gpu: bool) -> list[str]:
    if has_gpu or not any(s.has_gpu for s in (*base, *new)):
        return []
    return [
        "GPU data on one side only: CPU time compared; capture both sides with `autonvtx profile` on a machine "
        "with a CUDA GPU (nsys itself: --trace=cuda,nvtx) to compare GPU time"
    ]


def _measured(summary: Summary) -> tuple[object, ...]:
    return (sorted(summary.ranges.items()), sorted(summary.paths.items()))


def distinct_runs(summaries: Sequence[Summary]) -> tuple[list[Summary], list[tuple[str, str]]]:
    """The runs of one side with copies left out, and (copy, original) for each one left out.

    Two real runs never agree to the nanosecond on every range: a file that repeats another's
    measurements is a copy, and counting it again would fake a run's worth of certainty.
    """
    kept: list[Summary] = []
    seen: dict[str, str] = {}
    repeated = []
    for summary in summaries:
        found = repr(_measured(summary))
        if found in seen:
            repeated.append((summary.path, seen[found]))
            continue
        seen[found] = summary.path
        kept.append(summary)
    return kept, repeated


def _copy_notes(side: str, repeated: list[tuple[str, str]]) -> list[str]:
    return [
        f"{side}: {copy} repeats the measurements of {original} (a copy?): counted once" for copy, original in repeated
    ]


def _power_notes(runs_base: int, runs_new: int, options: DiffOptions) -> list[str]:
    """Too few runs for the test's level: say so, since no row can then be slower or faster."""
    if runs_base < 2 or runs_new < 2:
        return []
    smallest = smallest_p(runs_base, runs_new)
    if smallest < options.alpha:
        return []
    return [
        f"with {runs_base} and {runs_new} runs the smallest p-value possible is {smallest:.3g}, not below "
        f"--alpha {options.alpha:g}: no change can be called real (slower/faster); give 5 runs or more per side "
        "(5 and 5: 0.0079), or raise --alpha"
    ]


def _side(found: list[Measures | None], metric: int) -> Side:
    runs = len(found)
    present = [m for m in found if m is not None]

    def mean(index: int) -> float:
        return sum(m[index] for m in present) / runs if runs else 0.0

    totals = tuple(float(m[metric]) if m is not None else 0.0 for m in found)
    return Side(runs, len(present), mean(INSTANCES), mean(CPU), mean(GPU), mean(KERNELS), mean(MEMOPS), totals)


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
    tested = compare_runs(list(base.totals), list(new.totals), options.confidence)
    if tested is None:
        threshold = max(options.noise_pct, options.min_change_pct)
        real = base_mean > 0 and abs(change) * 100.0 > threshold * base_mean
        verdict = ("slower" if change > 0 else "faster") if real else "same"
        return DiffRow(key, metric, base, new, verdict, change, ratio, None, None)
    if sorted(base.totals) == sorted(new.totals):
        # The same measurements on both sides (copies of the same runs): nothing changed.
        return DiffRow(key, metric, base, new, "same", change, 1.0, 1.0, (1.0, 1.0))
    interval = None if tested.low is None or tested.high is None else (tested.low, tested.high)
    if tested.ratio is not None:
        ratio = tested.ratio
    verdict = _verdict(tested.p_value < options.alpha, ratio if ratio is not None else 1.0 + change, interval, options)
    return DiffRow(key, metric, base, new, verdict, change, ratio, tested.p_value, interval)


def _verdict(real: bool, ratio: float, interval: tuple[float, float] | None, options: DiffOptions) -> str:
    """slower/faster: beyond noise, unless the interval shows it smaller than --min-change; same: the
    interval rules out a change beyond --min-change; unclear: neither."""
    margin = options.min_change_pct / 100.0
    within = interval is not None and 1.0 - margin <= interval[0] and interval[1] <= 1.0 + margin
    if within:
        return "same"
    if real:
        return "slower" if ratio > 1.0 else "faster"
    return "unclear"


_RANK = {"slower": 0, "faster": 0, "new": 1, "gone": 1, "unclear": 2, "same": 3}


def check_diff_sort(sort: str | None) -> str:
    if sort is None:
        return "change"
    check_sort(sort, SORT_KEYS, "a diff of runs")
    return sort


def diff_order(sort: str) -> Callable[[DiffRow], tuple[object, ...]]:
    """The view's sort key for a diff's rows (`stats.view.arrange`): by default real changes
    first, largest first; then ranges that appeared or vanished; then the rest."""
    if sort == "name":
        return lambda r: r.key
    column = _COLUMNS.get(sort)
    if column is not None:
        return lambda r: (-max(getattr(r.base, column), getattr(r.new, column)), r.key)
    return lambda r: (_RANK[r.verdict], -abs(r.change_ns), r.key)


def over_limit(diff: Diff, pct: float) -> list[DiffRow]:
    """Rows beyond noise that slowed by more than pct percent (--fail-over)."""
    return [row for row in diff.rows if row.verdict == "slower" and (row.change_pct is None or row.change_pct > pct)]


def unsure_over(diff: Diff, pct: float) -> list[DiffRow]:
    """Unclear rows whose interval reaches a slowdown beyond pct percent: the gate cannot rule it out."""
    return [
        row
        for row in diff.rows
        if row.verdict == "unclear" and (row.interval is None or row.interval[1] > 1.0 + pct / 100.0)
    ]
