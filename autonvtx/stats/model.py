"""The one statistics model of a recording: a row per range (or call path), and the view options.

Two producers fill it with the same figures: the native exporter (`_native/export.c`) at the
end of a run and in `recover`, read through `from_exporter_rows`; and its Python oracle twin
`stats_python.summarize`, which `summary`, `report` and `diff` use on saved traces (tests hold
the two equal). Every renderer (`autonvtx.report.render.render`) reads these rows, and every view
option means the same in every command: `stats.view.arrange` applies them, with `row_order`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from autonvtx.recorder.model import ProcessRecording
from autonvtx.stats.view import View, arrange, glob_matches

GROUPINGS = ("name", "class")
# --by: "gpu" only means something where GPU work was recorded (Nsight Systems exports).
BY = ("process", "rank", "thread", "gpu")
# --sort: every key any command sorts by; "cpu" and "instances" are the report's names for
# "total" and "count". Keys a source has no figures for are refused by `check_sort`.
STATS_SORTS = ("total", "self", "count", "mean", "max", "cpu", "instances", "name")
GPU_SORTS = ("gpu", "cpu", "kernels", "instances", "span", "memcpy", "name", "total", "count")
DIFF_SORTS = ("change", "name", "gpu", "cpu", "total", "kernels", "instances", "count")
SPREAD_SORTS = ("lost", "imbalance", "max", "median", "min", "instances", "count", "kernels", "name")
SORTS = tuple(dict.fromkeys(STATS_SORTS + GPU_SORTS + DIFF_SORTS + SPREAD_SORTS))
SORT_ALIASES = {"cpu": "total", "instances": "count"}
_CLASS = re.compile(r" \(([^()]+)\)$")
_RANK = re.compile(r"\brank (\d+)\b")
# A number in a range name (`name_template`): a run of ASCII digits, or a 0x hex literal, that no
# letter, digit or non-ASCII character touches (`conv2d`, `fp16`, `layer1` are words and stay),
# and that is not one end of a span `A-B` (a line span `lines 12-40` names a place, not an
# instance). The native exporter applies the same rule byte by byte (`_native/export_stats.c`).
_WORD = "A-Za-z0-9\u0080-\U0010ffff"
_NUMBER = re.compile(rf"(?<![{_WORD}])(?<![0-9]-)(?:0[xX][0-9A-Fa-f]+|[0-9]+)(?![{_WORD}])(?!-[0-9])")
NUMBER_PLACEHOLDER = "{n}"
# The shapes and dtypes a range's name ends with (autonvtx.shapes: `mm [32x128 float64, 128x64
# float64]`): one row per function unless --each, as numbers are. The exporter's rule is the same.
_DIMS_DTYPE = r"(?:scalar|[0-9]+(?:x[0-9]+)*) [A-Za-z_][A-Za-z0-9_.]*"
_SHAPES = re.compile(rf" \[{_DIMS_DTYPE}(?:, {_DIMS_DTYPE})*\]\Z")
SHAPES_PLACEHOLDER = " [{shapes}]"


@dataclass(frozen=True)
class RangeStats:
    """Statistics of every range sharing one domain and name, times in nanoseconds."""

    domain: str
    name: str
    count: int  # every instance, nested ones included
    # The time inside the row's instances, an instance nested in another of the same row on its
    # thread (recursion) counted once: cProfile's cumulative time. Start/end ranges each count.
    total_ns: int
    self_ns: int  # every instance's time minus that of the ranges nested directly inside it
    mean_ns: float  # mean, median, min, max, stddev: over every instance's own duration
    median_ns: float
    min_ns: int
    max_ns: int
    stddev_ns: float  # sample standard deviation (n - 1), as nsys reports it; 0 for one instance
    percent: float  # share of the sum of its group's rows' totals (ranges of other rows nested inside count again)
    open_count: int  # instances still open when the process exited
    wall_percent: float = 0.0  # share of the recorded wall time (first range start to last end)
    group: str = ""  # with --by: the process, rank or thread the row belongs to
    depth: int = 0  # with --tree: nesting level (0 for the outermost ranges)
    path: str = ""  # with --tree: the labels from the outermost range down, joined by " > "

    @property
    def label(self) -> str:
        """How the table names the range: ``domain:name``, or the bare name in the default domain."""
        return f"{self.domain}:{self.name}" if self.domain else self.name

    # The view's row protocol (`stats.view.ViewRow`).
    @property
    def view_key(self) -> str:
        return self.path or self.label

    @property
    def view_parent(self) -> str | None:
        return self.path.rpartition(" > ")[0] if self.depth else None

    def view_matches(self, pattern: str) -> bool:
        return glob_matches(self.domain, self.name, pattern)


@dataclass(frozen=True)
class ViewOptions:
    """What `--tree`, `--group`, `--each`, `--skip-first`, `--by`, `--sort`, `--top`, `--filter`
    (and the side tables' `--pair`, `--memory`) asked for: the one carrier of the view options.

    The same options, with the same meaning, for `run --summary`, `summary`, `report`, `diff` and
    `report --across ranks`: the command line makes one (`cli.views.view_from`), each request
    holds it, and what reads a file takes its reading options from it (`report.profile.ReportOptions`,
    `report.compare.gather.Job`). A command refuses an option its data cannot answer
    (`report.viewchecks`, `check_sort`), the same way everywhere.
    """

    tree: bool = False
    group: str = "name"
    skip_first: int = 0
    by: str | None = None
    sort: str | None = None  # None: the table's default (total for a recording's statistics)
    top: int | None = None  # per group; with --tree, children per range (and roots per group)
    filter: str | None = None  # glob over names; with --tree, what encloses a match stays
    each: bool = False  # one row per recorded name; else names differing only in numbers share one
    pair: str | None = None  # "backward": a module's forward and backward side by side (report.sideviews)
    memory: bool = False  # the torch plugin's memory figures per range instead (report.sideviews)

    @property
    def view(self) -> View:
        """What `stats.view.arrange` applies: --tree, --sort, --top, --filter."""
        return View(tree=self.tree, sort=self.sort, top=self.top, filter=self.filter)


def check_sort(sort: str, available: Sequence[str], source: str) -> None:
    """Refuse a --sort key the source has no figures for (GPU keys on a recording without GPU data,
    `self` on a diff, `imbalance` on one file): the one refusal of every command, exit status 2."""
    from autonvtx.errors import UsageError

    if sort not in available:
        raise UsageError(f"--sort: {source} has no figures for {sort!r}; expected one of {', '.join(available)}")


def name_template(name: str) -> str:
    """``step 17`` -> ``step {n}``, ``epoch 3 step 17`` -> ``epoch {n} step {n}``, ``mm [32x8
    float32]`` -> ``mm [{shapes}]``: the row a name falls in unless --each; names without a
    number or shapes stay as they are."""
    shaped = _SHAPES.search(name)
    if shaped is not None:
        return _NUMBER.sub(NUMBER_PLACEHOLDER, name[: shaped.start()]) + SHAPES_PLACEHOLDER
    return _NUMBER.sub(NUMBER_PLACEHOLDER, name)


def row_naming(each: bool) -> Callable[[str], str]:
    """The name -> row name function of a view: `name_template`, remembered per name (a recording
    repeats each name many times), or the names as recorded with --each."""
    if each:
        return lambda name: name
    seen: dict[str, str] = {}

    def named(name: str) -> str:
        row = seen.get(name)
        if row is None:
            row = seen[name] = name_template(name)
        return row

    return named


def no_match_message(pattern: str, each: bool) -> str:
    """What an empty --filter result says (naming the pattern), on every command that filters."""
    message = f"no range matches --filter '{pattern}'"
    if not each and _NUMBER.search(pattern):
        message += f" (names differing only in their numbers share one row, such as 'step {NUMBER_PLACEHOLDER}'; --each for a row per name)"
    return message


def class_name(name: str) -> str:
    """``encoder.layers.3.attn (MultiheadAttention)`` -> ``MultiheadAttention``; others unchanged."""
    match = _CLASS.search(name)
    return match.group(1) if match else name


def group_title(by: str | None, rec: ProcessRecording, tid: int = 0) -> str:
    """How a --by group is headed: ``process 42 (python train.py)``, ``rank 3``, ``thread ...``."""
    if by == "rank":
        match = _RANK.search(rec.display_name)
        return f"rank {match.group(1)}" if match else f"process {rec.pid} (no rank)"
    if by == "thread":
        return f"thread {tid} ({rec.thread_names.get(tid, '?')}) of process {rec.pid}"
    if by != "process":
        return ""
    return f"process {rec.pid} ({rec.display_name})" + ("" if rec.status == "ended" else f", {rec.status}")


def _sort_value(sort: str) -> Callable[[RangeStats], float]:
    sort = SORT_ALIASES.get(sort, sort)
    if sort == "name":
        return lambda s: 0
    return {
        "total": lambda s: s.total_ns,
        "self": lambda s: s.self_ns,
        "count": lambda s: s.count,
        "mean": lambda s: s.mean_ns,
        "max": lambda s: s.max_ns,
    }[sort]


def row_order(sort: str | None) -> Callable[[RangeStats], tuple[float, str, str]]:
    """The view's sort key for the model's rows (`stats.view.arrange`): largest figure first
    (total time where `sort` is None), ties by domain and name."""
    value = _sort_value(sort or "total")
    return lambda s: (-value(s), s.domain, s.name)


def filtered_out(every: Sequence[RangeStats], shown: Sequence[RangeStats], options: ViewOptions) -> str | None:
    """Why `shown` is empty where --filter emptied it (`no_match_message`); `every` is each row of
    the view before --filter and --top."""
    if shown or not every or options.filter is None:
        return None
    return no_match_message(options.filter, options.each)


def unshaped(options: ViewOptions) -> ViewOptions:
    """The view without --filter and --top: every row, for `filtered_out`."""
    return replace(options, filter=None, top=None)


def count_text(number: int, singular: str, plural: str) -> str:
    return f"{number:,} {singular if number == 1 else plural}"


def dropped_note(dropped: int) -> str:
    """The one note for events the recorder's memory bound dropped, and the one advice for it."""
    return (
        f"{count_text(dropped, 'event was', 'events were')} dropped when the recorder's memory bound was hit; "
        "the counts are low (raise --buffer-mb, or AUTONVTX_RECORD_LIMIT_MB where autonvtx run is not the starter)"
    )


def summary_notes(recordings: Iterable[ProcessRecording]) -> list[str]:
    """Lines telling the reader what the numbers may miss: lost events, open ranges, stray pops."""
    recordings = list(recordings)
    notes: list[str] = []
    dropped = sum(r.dropped_events for r in recordings)
    if dropped:
        notes.append(dropped_note(dropped))
    still_open = sum(1 for rec in recordings for r in rec.ranges if r.is_open)
    if still_open:
        notes.append(
            f"{count_text(still_open, 'range was', 'ranges were')} still open at exit (timed up to the moment the recording was written)"
        )
    unmatched = sum(r.unmatched_pops for r in recordings)
    if unmatched:
        notes.append(
            f"{count_text(unmatched, 'pop or range end', 'pops or range ends')} had no open range to close (ignored)"
        )
    return notes


def from_exporter_rows(
    rows: Sequence[Any],
    spans: Mapping[int, tuple[int, int]],
    titles: Mapping[int, str],
    options: ViewOptions = ViewOptions(),
) -> list[RangeStats]:
    """The model's rows from the native exporter's (`native.ExportRow`), arranged as `options` say."""
    grand_totals: dict[int, int] = {}  # Time % within the group, as % Wall is
    for r in rows:
        grand_totals[r.group] = grand_totals.get(r.group, 0) + r.total_ns
    by_index = dict(enumerate(rows))
    stats = []
    for r in rows:
        if r.count == 0:  # every instance left out by --skip-first (kept above as a tree parent)
            continue
        first, last = spans.get(r.group, (0, 0))
        wall = last - first
        path = ""
        if options.tree:
            labels, node = [], r
            while True:
                labels.append(f"{node.domain}:{node.name}" if node.domain else node.name)
                if node.parent < 0 or node.parent not in by_index:
                    break
                node = by_index[node.parent]
            path = " > ".join(reversed(labels))
        stats.append(
            RangeStats(
                domain=r.domain,
                name=r.name,
                count=r.count,
                total_ns=r.total_ns,
                self_ns=r.self_ns,
                mean_ns=r.mean_ns,
                median_ns=r.median_ns,
                min_ns=r.min_ns,
                max_ns=r.max_ns,
                stddev_ns=math.sqrt(r.variance) if r.variance > 0 else 0.0,
                percent=100.0 * r.total_ns / grand_totals[r.group] if grand_totals[r.group] else 0.0,
                open_count=r.open_count,
                wall_percent=100.0 * r.total_ns / wall if wall > 0 else 0.0,
                group=titles.get(r.group, "") if options.by else "",
                depth=r.depth if options.tree else 0,
                path=path,
            )
        )
    return arrange(stats, options.view, row_order(options.sort))
