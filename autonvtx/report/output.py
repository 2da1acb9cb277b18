"""`autonvtx report` and `autonvtx summary`: read the profile, shape it with the view options, write it."""

from __future__ import annotations

import dataclasses
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from autonvtx.errors import UsageError
from autonvtx.report.figures import Report, Row, TreeNode
from autonvtx.report.profile import ReportOptions, read_profile, recording_stats, row_of, tree_of
from autonvtx.report.render.render import check_output_paths, format_of, write_text_file
from autonvtx.report.render.renderers import Rendering, ReportDocument, render
from autonvtx.report.sidechecks import asked
from autonvtx.report.sideviews import export_memory, pairs_table, recording_memory
from autonvtx.report.viewchecks import check_view_applies
from autonvtx.report.views import export_order, nested, placed, placed_order
from autonvtx.stats.model import (
    GPU_SORTS,
    STATS_SORTS,
    ViewOptions,
    check_sort,
    filtered_out,
    no_match_message,
    row_order,
)
from autonvtx.stats.view import View, arrange


@dataclass(frozen=True)
class ReportRequest:
    """Everything `autonvtx report` was asked, as the command line gave it."""

    profile: str
    view: ViewOptions = ViewOptions()  # --tree, --by, --sort, --top, --filter, --group, --each, ...
    strip_ids: bool = False
    fmt: str | None = None
    output: str | None = None
    html: str | None = None
    html_by: str = "gpu"
    terminal: bool = False  # the table goes to a terminal: without --top, the first TERMINAL_TOP rows
    width: int | None = None  # the terminal's width, which names are cut to fit; None: never cut


# A profile can hold tens of thousands of range names (torch's per-call op ids): a terminal
# gets the first rows and, first, a line saying how to see more; a file or a pipe gets all.
TERMINAL_TOP = 30


def produce(request: ReportRequest) -> str | None:
    """Write the outputs asked for; return the text for standard output (None when -o took it)."""
    _check_output_paths(request)
    with without_cycle_collection():
        return _produce(request)


@contextmanager
def without_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while a report is built: a per-name report allocates
    tens of thousands of rows, cells and strings that form no cycles, and each allocation burst
    made the collector walk every object again (a third of `report --each`'s CPU time on the
    two-GPU export). Reference counting still frees everything; the collector resumes after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _produce(request: ReportRequest) -> str | None:
    fmt = request.fmt or (format_of("report: -o", request.output) if request.output else "text")
    asked_view = request.view
    report = read_profile(
        request.profile,
        ReportOptions(asked_view, strip_ids=request.strip_ids, with_tree=asked_view.tree or request.html is not None),
    )
    check_view_applies(report.kind, request.profile, asked_view)
    if asked(asked_view) is not None:
        return _side_table(report, request, fmt)
    sort = asked_view.sort or ("gpu" if report.has_gpu else "cpu")
    head = ""
    # The terminal's cut is the table's only: --html keeps every row (`asked_view`).
    view = asked_view
    if request.terminal and view.top is None and not view.tree and len(report.rows) > TERMINAL_TOP:
        head = (
            f"showing the first {TERMINAL_TOP} of {len(report.rows):,} ranges by {sort}: --top N for more,"
            " or write them all with -o FILE or through a pipe\n\n"
        )
        view = dataclasses.replace(view, top=TERMINAL_TOP)
    check_sort(
        sort,
        GPU_SORTS if report.has_gpu else STATS_SORTS,
        "this export" if report.kind == "nsys" else "an autonvtx recording (no GPU data)",
    )
    if report.kind == "autonvtx":
        content, rows, page_tree = _recording_outputs(report, view, sort, fmt, request.width, request.html is not None)
    else:
        rows = arrange(report.rows, View(sort=sort, top=view.top, filter=view.filter), export_order(sort))
        if report.rows and not rows and view.filter is not None:
            _say_empty(report, no_match_message(view.filter, view.each))
        tree = _export_tree(report, sort, view.top, view.filter) if view.tree else None
        content = render("report", fmt, ReportDocument(report, rows, tree), Rendering(width=request.width))
        page_tree = None
    if report.empty is not None and (request.output is not None or fmt != "text"):
        print(f"autonvtx: {report.empty}", file=sys.stderr)  # the table's own line says it only in text
    if request.html is not None:
        size_by = request.html_by if report.has_gpu else "cpu"
        if view is not asked_view:
            rows, page_tree = _page_rows(report, asked_view, sort, fmt)
        if page_tree is None:
            page_tree = _export_tree(report, size_by, None, asked_view.filter)
        page = render("report", "html", ReportDocument(report, rows, page_tree), Rendering(size_by=size_by))
        write_text_file(request.html, page)
    if request.output is None:
        return head + content
    write_text_file(request.output, content)
    return None


def _page_rows(report: Report, view: ViewOptions, sort: str, fmt: str) -> tuple[list[Row], list[TreeNode] | None]:
    """The rows (and, for a recording, the tree) the page draws, as `view` asks for them."""
    if report.kind == "autonvtx":
        _, rows, tree = _recording_outputs(report, view, sort, fmt, None, True)
        return rows, tree
    return arrange(report.rows, View(sort=sort, top=view.top, filter=view.filter), export_order(sort)), None


def _side_table(report: Report, request: ReportRequest, fmt: str) -> str | None:
    """--pair or --memory: that table instead of the report's (`report.sideviews`)."""
    if request.html is not None:
        raise UsageError("report: --html: the page draws the report's tree; --pair and --memory are tables")
    view = request.view
    if asked(view) == "pairs":
        if report.kind == "autonvtx":
            rows: list[Any] = [row.stats for row in report.rows if row.stats is not None]
        else:
            rows = list(report.rows)
        content = pairs_table(rows, view, fmt, report.notes, report.has_gpu)
    elif report.kind == "autonvtx":
        content = recording_memory(report.recordings, view, fmt)
    else:
        content = export_memory(_export_path(request.profile), view, fmt, strip_ids=request.strip_ids)
    if request.output is None:
        return content
    write_text_file(request.output, content)
    return None


def _export_path(profile: str) -> str:
    from autonvtx.report.nsys.nsysrep import ensure_export, is_report

    return ensure_export(profile) if is_report(profile) else profile


def _recording_outputs(
    report: Report, asked_view: ViewOptions, sort: str, fmt: str, width: int | None, page: bool
) -> tuple[str, list[Row], list[TreeNode]]:
    """An autonvtx recording's table and tree, from the statistics model with the view options
    (`page`: the HTML page draws the tree too)."""
    view = dataclasses.replace(asked_view, tree=False, by=report.by, sort=sort, pair=None, memory=False)
    # read_profile computed the flat rows with these groups already: only their arrangement is new.
    every = [row.stats for row in report.rows if row.stats is not None]
    flat = arrange(every, view.view, row_order(sort))
    empty = filtered_out(every, flat, view)
    if empty is not None:
        _say_empty(report, empty)
    tree_stats = (
        recording_stats(report.recordings, dataclasses.replace(view, tree=True)) if asked_view.tree or page else []
    )
    rows = [row_of(s) for s in flat]
    tree = tree_of(tree_stats) if tree_stats or asked_view.tree else []
    document = ReportDocument(report, rows, tree if asked_view.tree else None, tree_stats if asked_view.tree else flat)
    content = render("report", fmt, document, Rendering(width=width))
    return content, rows, tree


def _export_tree(report: Report, sort: str, top: int | None, pattern: str | None) -> list[TreeNode]:
    """An export's tree as the view options show it: its nodes arranged by the one view, nested again."""
    view = View(tree=True, sort=sort, top=top, filter=pattern)
    return nested(report.tree, arrange(placed(report.tree), view, placed_order(sort)))


def _say_empty(report: Report, why: str) -> None:
    report.empty = why
    report.notes.append(why)


def _check_output_paths(request: ReportRequest) -> None:
    """Fail before the (possibly long) read when an output cannot be written."""
    check_output_paths("report", [("-o", request.output), ("--html", request.html)], fmt=request.fmt)
