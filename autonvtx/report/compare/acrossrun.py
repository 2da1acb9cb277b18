"""`autonvtx report FILES... --across ranks`: read the files, build the view, write it where asked."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from autonvtx.errors import UsageError
from autonvtx.report.compare.across import spread, spread_order
from autonvtx.report.compare.gather import Job, Progress, gather, show_progress
from autonvtx.report.render.render import check_output_paths, format_of, write_text_file
from autonvtx.report.render.renderers import AcrossDocument, Rendering, render
from autonvtx.report.render.table import terminal_width
from autonvtx.stats.model import SPREAD_SORTS, check_sort
from autonvtx.stats.view import View, arrange


@dataclass(frozen=True)
class AcrossRequest:
    """`autonvtx report FILES... --across ranks` as the command line gave it."""

    files: tuple[str, ...]
    sort: str | None = None
    top: int | None = None
    pattern: str | None = None
    strip_ids: bool = False
    fmt: str = "text"
    jobs: int | None = None
    scheduler: str | None = None
    progress: bool | None = None
    each: bool = False  # a row per recorded name; else numbers are folded into {n}
    width: int | None = None  # the terminal's width, which names are cut to fit; None: never cut


def produce_across(request: AcrossRequest) -> str:
    jobs = [
        Job(path, "rank", request.strip_ids, overlap=True, each=request.each, timeline=True) for path in request.files
    ]
    progress = Progress(len(jobs), "reading", show_progress(request.progress))
    summaries = gather(jobs, workers=request.jobs, scheduler=request.scheduler, progress=progress)
    view = spread(summaries, request.pattern)
    rows = arrange(view.rows, View(sort=request.sort, top=request.top), spread_order(request.sort))
    return render("across", request.fmt, AcrossDocument(view, rows), Rendering(width=request.width))


def report_across(
    files: tuple[str, ...],
    across: str | None,
    view: dict[str, Any],
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
        ("--tree", view.get("tree")),
        ("--by", view.get("by")),
        ("--html", html),
        ("--group", view.get("group_by", "name") != "name"),
        ("--skip-first", view.get("skip_first")),
    )
    for option, value in unsupported:
        if value:
            raise UsageError(f"report: {option} does not go with --across ranks; expected one of them")
    check_output_paths("report", [("-o", output)], fmt=fmt)
    if view.get("sort") is not None:
        check_sort(view["sort"], SPREAD_SORTS, "the ranks side by side (--across ranks)")
    chosen = fmt or (format_of("-o", output) if output else "text")
    text = produce_across(
        AcrossRequest(
            files,
            view.get("sort"),
            view.get("top"),
            view.get("name_filter"),
            strip_ids,
            chosen,
            *scale,
            each=bool(view.get("each")),
            width=terminal_width(sys.stdout) if output is None else None,
        )
    )
    if output is None:
        sys.stdout.write(text)
    else:
        write_text_file(output, text)
