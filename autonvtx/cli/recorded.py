"""The commands on what the recorder wrote: `summary`, `recover`, `merge`."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from autonvtx.cli.group import cli
from autonvtx.cli.views import make_view_options, side_table_options, view_options
from autonvtx.errors import UsageError


@cli.command("summary")
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    metavar="PATH",
    help="Write the table to PATH (.txt, .csv, .json) instead of standard output.",
)
@view_options
@side_table_options
def summary_command(trace: str, output: str | None, **view: Any) -> None:
    """Print the range statistics table of a saved TRACE (.json, .json.gz, .pftrace)."""
    from autonvtx.recorder.outputs import check_summary_path
    from autonvtx.recorder.perfetto import read_trace
    from autonvtx.report.profile import recording_stats
    from autonvtx.report.render.render import format_of, write_summary, write_text_file
    from autonvtx.report.render.renderers import Rendering, SummaryDocument, render
    from autonvtx.report.render.table import terminal_width
    from autonvtx.report.render.text import use_color
    from autonvtx.report.sidechecks import asked
    from autonvtx.report.sideviews import pairs_table, recording_memory, unarranged
    from autonvtx.stats.model import filtered_out, row_order, summary_notes, unshaped
    from autonvtx.stats.view import arrange

    if not os.path.exists(trace):
        raise UsageError(f"summary: no such file '{trace}'")
    if output is not None:
        check_summary_path("summary: -o", output)
    options = make_view_options(view)
    recordings = read_trace(trace)
    side = asked(options)
    if side is not None:
        form = format_of("summary: -o", output) if output is not None else "text"
        if side == "pairs":
            rows = recording_stats(recordings, unshaped(unarranged(options)))
            table = pairs_table(rows, options, form, summary_notes(recordings))
        else:
            table = recording_memory(recordings, options, form, summary_notes(recordings))
        if output is None:
            click.echo(table, nl=False)
        else:
            write_text_file(output, table)
        return
    # The same function `report` reads a recording's figures with: one table, one set of numbers.
    every = recording_stats(recordings, unshaped(options))
    stats = arrange(every, options.view, row_order(options.sort))
    empty = filtered_out(every, stats, options)
    notes = summary_notes(recordings) + ([empty] if empty else [])
    if output is None:
        rendering = Rendering(width=terminal_width(sys.stdout), color=use_color(sys.stdout))
        click.echo(render("summary", "text", SummaryDocument(stats, notes, empty), rendering), nl=False)
    else:
        write_summary(stats, output, notes=notes, empty=empty)
        if empty:
            print(f"autonvtx: {empty}", file=sys.stderr)


@cli.command("recover")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("-o", "--output", required=True, metavar="PATH", help="The trace (.json, .json.gz, .pftrace).")
def recover_command(directory: str, output: str) -> None:
    """Write the trace of a run whose events were spilled to DIRECTORY but never written out
    (the directory `autonvtx run` named on stderr, or one left by a killed run)."""
    from autonvtx.recorder.outputs import check_trace_path
    from autonvtx.recorder.results import recover

    check_trace_path("recover: -o", output)
    recover(directory, output)
    print(f"autonvtx: trace written to {output} (open it in https://ui.perfetto.dev)", file=sys.stderr)


@cli.command("merge")
@click.argument("traces", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="PATH",
    help="The merged trace (.json, .json.gz, .pftrace); inputs may be any of these.",
)
def merge_command(traces: tuple[str, ...], output: str) -> None:
    """Merge per-rank (or per-run) TRACES into one timeline, aligned on one clock."""
    from autonvtx.recorder.merge import check_inputs, merge_traces
    from autonvtx.recorder.outputs import check_trace_path

    check_inputs(traces, output)
    check_distinct_files("merge", traces)
    check_trace_path("merge: -o", output)
    for note in merge_traces(traces, output):
        print(f"autonvtx: {note}", file=sys.stderr)
    noun = "trace" if len(traces) == 1 else "traces"
    print(f"autonvtx: merged {len(traces)} {noun} into {output}", file=sys.stderr)


def check_distinct_files(where: str, paths: Sequence[str]) -> None:
    """A file named twice (by any path) is a mistake: merged twice, its events would show
    twice on the timeline."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        status = os.stat(path)
        key = (status.st_dev, status.st_ino)
        first = seen.get(key)
        seen[key] = path
        if first is not None:
            raise UsageError(f"{where}: '{path}': the same file as '{first}'; expected each trace once")
