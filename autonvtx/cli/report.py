"""`autonvtx report`: GPU time per NVTX range from what Nsight Systems recorded (or autonvtx's traces)."""

from __future__ import annotations

import sys
from typing import Any

import click

from autonvtx.cli.group import cli
from autonvtx.cli.views import (
    REPORT_SORT_HELP,
    REPORT_SORTS,
    scale_options,
    side_table_options,
    view_from,
    view_options_for,
)


@cli.command("report")
@click.argument("profile", nargs=-1, required=True)
@view_options_for(REPORT_SORTS, REPORT_SORT_HELP)
@side_table_options
@click.option("--strip-ids", is_flag=True, help="Fold per-call suffixes such as ', op_id = 990760' into one name.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "csv", "json"]),
    help="Output form (default: text, or from -o's extension).",
)
@click.option("-o", "--output", metavar="PATH", help="Write to PATH (.txt, .csv, .json) instead of standard output.")
@click.option(
    "--html", metavar="PATH", help="Also write a self-contained page: a flame chart of the tree beside the table."
)
@click.option(
    "--html-by",
    type=click.Choice(["gpu", "cpu"]),
    default="gpu",
    show_default=True,
    help="What sizes the boxes of --html.",
)
@click.option(
    "--across",
    type=click.Choice(["ranks"]),
    help="Ranks side by side: spread per range, stragglers, NCCL overlap (several files allowed).",
)
@scale_options
def report_command(
    profile: tuple[str, ...],
    strip_ids: bool,
    fmt: str | None,
    output: str | None,
    html: str | None,
    html_by: str,
    across: str | None,
    jobs: int | None,
    scheduler: str | None,
    progress: bool | None,
    **view: Any,
) -> None:
    """GPU time per NVTX range from PROFILE: an `nsys export --type sqlite` file, a .nsys-rep, or an
    autonvtx trace (.json, .json.gz, .pftrace: CPU time, the figures `autonvtx summary` prints)."""
    from autonvtx.report.output import ReportRequest, produce
    from autonvtx.report.render.table import terminal_width

    options = view_from(view)
    if (across is not None or len(profile) > 1) and (options.pair or options.memory):
        from autonvtx.errors import UsageError

        option = "--pair" if options.pair else "--memory"
        raise UsageError(f"report: {option}: one profile at a time; expected one PROFILE without --across")
    if across is not None or len(profile) > 1:
        from autonvtx.report.compare.acrossrun import report_across

        report_across(profile, across, options, strip_ids, fmt, output, html, (jobs, scheduler, progress))
        return
    request = ReportRequest(
        profile[0],
        options,
        strip_ids,
        fmt,
        output,
        html,
        html_by,
        terminal=output is None and fmt in (None, "text") and sys.stdout.isatty(),
        width=terminal_width(sys.stdout) if output is None else None,
    )
    text = produce(request)
    if text is not None:
        click.echo(text, nl=False)
    if html is not None:
        print(f"autonvtx: report: wrote {html}", file=sys.stderr)
