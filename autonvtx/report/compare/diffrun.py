"""`autonvtx diff`: read both sides, compare, and write the outputs asked for."""

from __future__ import annotations

from dataclasses import dataclass, field

from autonvtx.errors import UsageError
from autonvtx.report.compare.diff import (
    Diff,
    DiffOptions,
    DiffRow,
    check_diff_sort,
    compare,
    diff_order,
    over_limit,
    unsure_over,
)
from autonvtx.report.compare.gather import Job, Progress, gather, show_progress
from autonvtx.report.profile import ReportOptions
from autonvtx.report.render.render import check_output_paths, format_of, write_text_file
from autonvtx.report.render.renderers import DiffDocument, Rendering, render
from autonvtx.report.viewchecks import check_view_applies
from autonvtx.stats.model import ViewOptions
from autonvtx.stats.view import View, arrange


@dataclass(frozen=True)
class DiffRequest:
    """Everything `autonvtx diff` was asked, as the command line gave it."""

    base: tuple[str, ...]
    new: tuple[str, ...]
    view: ViewOptions = ViewOptions()  # --tree, --by, --sort (None: by the change), --top, --filter, ...
    strip_ids: bool = False
    fmt: str | None = None
    output: str | None = None
    html: str | None = None
    fail_over: float | None = None
    options: DiffOptions = DiffOptions()
    jobs: int | None = None
    scheduler: str | None = None
    progress: bool | None = None
    width: int | None = None  # the terminal's width, which names are cut to fit; None: never cut
    fail_unclear: bool = False  # --fail-over also fails on unclear rows that may have slowed beyond it


@dataclass(frozen=True)
class DiffResult:
    """What the command prints, whether --fail-over was crossed, and what it could not rule out."""

    text: str | None
    diff: Diff
    failing: list[str]
    unsure: list[str] = field(default_factory=list)  # unclear rows whose interval reaches beyond --fail-over


def produce_diff(request: DiffRequest) -> DiffResult:
    if not request.base or not request.new:
        raise UsageError("diff: expected BASE files and --against NEW files (one or more each)")
    _check_output_paths(request)
    view = request.view
    sort = check_diff_sort(view.sort)  # refused before any file is read, as the outputs are
    reading = ReportOptions(view, strip_ids=request.strip_ids, with_tree=view.tree or request.html is not None)
    jobs = [Job(path, reading) for path in (*request.base, *request.new)]
    progress = Progress(len(jobs), "reading", show_progress(request.progress))
    summaries = gather(jobs, workers=request.jobs, scheduler=request.scheduler, progress=progress)
    for summary in summaries:
        check_view_applies(summary.kind, summary.path, view)
    split = len(request.base)
    diff = compare(summaries[:split], summaries[split:], request.options, view.tree, view.by)
    rows = arrange(diff.rows, View(tree=view.tree, sort=sort, top=view.top, filter=view.filter), diff_order(sort))
    fmt = request.fmt or (format_of("-o", request.output) if request.output else "text")
    text = render("diff", fmt, DiffDocument(diff, rows), Rendering(width=request.width))
    if request.html is not None:
        whole = diff if view.tree else compare(summaries[:split], summaries[split:], request.options, True, view.by)
        tree_rows = arrange(whole.rows, View(tree=True, sort="change", filter=view.filter), diff_order("change"))
        _write(request.html, render("diff", "html", DiffDocument(diff, rows, tree_rows)))
    failing: list[str] = []
    unsure: list[str] = []
    if request.fail_over is not None:
        failing = [_named_change(row) for row in over_limit(diff, request.fail_over)]
        unsure = [_named_interval(row) for row in unsure_over(diff, request.fail_over)]
        if request.fail_unclear:
            failing, unsure = failing + unsure, []
    if request.output is not None:
        _write(request.output, text)
        return DiffResult(None, diff, failing, unsure)
    return DiffResult(text, diff, failing, unsure)


def _named_change(row: DiffRow) -> str:
    return row.name if row.change_pct is None else f"{row.name}: {row.change_pct:+.1f}%"


def _named_interval(row: DiffRow) -> str:
    if row.interval is None or row.interval[1] == float("inf"):
        return f"{row.name}: unclear, interval unbounded"
    low, high = (100.0 * (end - 1.0) for end in row.interval)
    return f"{row.name}: unclear, {low:+.1f}% to {high:+.1f}%"


def _check_output_paths(request: DiffRequest) -> None:
    check_output_paths("diff", [("-o", request.output), ("--html", request.html)], fmt=request.fmt)


def _write(path: str, text: str) -> None:
    write_text_file(path, text)
