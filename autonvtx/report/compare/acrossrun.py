"""`autonvtx report FILES... --across ranks`: read the files, build the view, write it where asked."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from autonvtx.errors import UsageError
from autonvtx.report.compare.across import spread, spread_order
from autonvtx.report.compare.gather import Job, Progress, gather, show_progress
from autonvtx.report.profile import ReportOptions
from autonvtx.report.render.render import check_output_paths, format_of, write_text_file
from autonvtx.report.render.renderers import AcrossDocument, Rendering, render
from autonvtx.report.render.table import terminal_width
from autonvtx.stats.model import SPREAD_SORTS, ViewOptions, check_sort
from autonvtx.stats.view import View, arrange


@dataclass(frozen=True)
class AcrossRequest:
    """`autonvtx report FILES... --across ranks` as the command line gave it."""

    files: tuple[str, ...]
    view: ViewOptions = ViewOptions()  # --sort, --top, --filter, --each (the others are refused)
    strip_ids: bool = False
    fmt: str = "text"
    jobs: int | None = None
    scheduler: str | None = None
    progress: bool | None = None
    width: int | None = None  # the terminal's width, which names are cut to fit; None: never cut


def produce_across(request: AcrossRequest) -> str:
    view = request.view
    reading = ReportOptions(
        ViewOptions(by="rank", each=view.each), strip_ids=request.strip_ids, with_tree=False, flat_ranges=True
    )
    jobs = [Job(path, reading, overlap=True) for path in request.files]
    progress = Progress(len(jobs), "reading", show_progress(request.progress))
    summaries = gather(jobs, workers=request.jobs, scheduler=request.scheduler, progress=progress)
    spreads = spread(summaries, view.filter)
    rows = arrange(spreads.rows, View(sort=view.sort, top=view.top), spread_order(view.sort))
    return render("across", request.fmt, AcrossDocument(spreads, rows), Rendering(width=request.width))


def report_across(
    files: tuple[str, ...],
    across: str | None,
    view: ViewOptions,
    strip_ids: bool,
    fmt: str | None,
    output: str | None,
    html: str | None,
    scale: tuple[int | None, str | None, bool | None],
) -> None:
    """`report FILES... --across ranks`: check what was asked, produce, print or write."""
    if across is None:
        raise UsageError(f"report: {len(files)} files given; expected one PROFILE, or several with --across ranks")
    unsupported = (
        ("--tree", view.tree),
        ("--by", view.by),
        ("--html", html),
        ("--group", view.group != "name"),
        ("--skip-first", view.skip_first),
    )
    for option, value in unsupported:
        if value:
            raise UsageError(f"report: {option} does not go with --across ranks; expected one of them")
    check_output_paths("report", [("-o", output)], fmt=fmt)
    if view.sort is not None:
        check_sort(view.sort, SPREAD_SORTS, "the ranks side by side (--across ranks)")
    chosen = fmt or (format_of("-o", output) if output else "text")
    text = produce_across(
        AcrossRequest(
            files, view, strip_ids, chosen, *scale, width=terminal_width(sys.stdout) if output is None else None
        )
    )
    if output is None:
        sys.stdout.write(text)
    else:
        write_text_file(output, text)
