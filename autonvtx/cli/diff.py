"""`autonvtx diff`: what changed between runs, per range, beyond run-to-run noise."""

from __future__ import annotations

import sys
from typing import Any

import click

from autonvtx.cli.group import cli
from autonvtx.cli.views import DIFF_SORT_HELP, scale_options, view_from, view_options_for
from autonvtx.stats.model import DIFF_SORTS


class AgainstCommand(click.Command):
    """Every file listed after --against belongs to NEW: `diff a b --against c d` compares a, b with c, d."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = any(arg.partition("=")[0] in ("--against", "-h", "--help") for arg in args)
        if not given:
            # click's "Missing option '--against'" alone does not say what the command looks like.
            missing = "--against NEW..." if args else "BASE... --against NEW..."
            raise click.UsageError(
                f"missing {missing}; usage: autonvtx diff BASE... --against NEW... [OPTIONS],"
                " e.g. autonvtx diff base_*.json --against new_*.json (see 'autonvtx diff --help')",
                ctx,
            )
        return super().parse_args(ctx, expand_against(args))


def expand_against(args: list[str]) -> list[str]:
    out: list[str] = []
    taking = False
    for index, arg in enumerate(args):
        if arg == "--":
            out.extend(args[index:])
            break
        if arg == "--against":
            taking = True
            continue
        if arg.startswith("--against="):  # the same, spelled with "=": what follows is NEW too
            out.extend(("--against", arg.partition("=")[2]))
            taking = True
            continue
        if taking and not arg.startswith("-"):
            out.extend(("--against", arg))
            continue
        taking = False
        out.append(arg)
    return out


@cli.command("diff", cls=AgainstCommand)
@click.argument("base", nargs=-1, required=True)
@click.option(
    "--against",
    "new",
    multiple=True,
    required=True,
    metavar="NEW",
    help="The run(s) to compare with BASE (repeat, or list several after one --against).",
)
@view_options_for(DIFF_SORTS, DIFF_SORT_HELP)
@click.option("--strip-ids", is_flag=True, help="Fold per-call suffixes such as ', op_id = 990760' into one name.")
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.01,
    show_default=True,
    help="Level of the test: a change is real when its p-value is below this.",
)
@click.option(
    "--noise",
    "noise_pct",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    metavar="PCT",
    help="With one run on a side (no test possible): changes within PCT percent count as noise.",
)
@click.option(
    "--min-change",
    "min_change_pct",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    metavar="PCT",
    help="The smallest change that matters: `same` when the ratio's interval lies within PCT percent of 1.",
)
@click.option(
    "--fail-over",
    type=click.FloatRange(min=0),
    metavar="PCT",
    help="Exit with status 1 when a range slowed, beyond noise, by more than PCT percent (for CI).",
)
@click.option(
    "--fail-unclear",
    is_flag=True,
    help="With --fail-over: also fail on `unclear` ranges whose interval reaches a slowdown beyond PCT.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "csv", "json"]),
    help="Output form (default: text, or from -o's extension).",
)
@click.option("-o", "--output", metavar="PATH", help="Write to PATH instead of standard output.")
@click.option(
    "--html", metavar="PATH", help="Also write a self-contained page: the tree coloured by change beside the table."
)
@scale_options
def diff_command(
    base: tuple[str, ...],
    new: tuple[str, ...],
    strip_ids: bool,
    alpha: float,
    noise_pct: float,
    min_change_pct: float,
    fail_over: float | None,
    fail_unclear: bool,
    fmt: str | None,
    output: str | None,
    html: str | None,
    jobs: int | None,
    scheduler: str | None,
    progress: bool | None,
    **view: Any,
) -> None:
    """Compare BASE runs against NEW runs: nsys exports (.sqlite, .nsys-rep) or autonvtx traces (.json, .json.gz, .pftrace).

    Rows come with real changes first, largest first; --sort name, or a column (gpu, cpu,
    kernels, instances) to order by the larger side's figure."""
    from autonvtx.report.compare.diff import DiffOptions
    from autonvtx.report.compare.diffrun import DiffRequest, produce_diff
    from autonvtx.report.render.table import terminal_width

    request = DiffRequest(
        base,
        new,
        view_from(view),
        strip_ids,
        fmt,
        output,
        html,
        fail_over,
        DiffOptions(alpha=alpha, noise_pct=noise_pct, min_change_pct=min_change_pct),
        jobs,
        scheduler,
        progress,
        width=terminal_width(sys.stdout) if output is None else None,
        fail_unclear=fail_unclear,
    )
    if fail_unclear and fail_over is None:
        from autonvtx.errors import UsageError

        raise UsageError("diff: --fail-unclear goes with --fail-over PCT; expected both")
    result = produce_diff(request)
    if result.text is not None:
        click.echo(result.text, nl=False)
    if html is not None:
        print(f"autonvtx: diff: wrote {html}", file=sys.stderr)
    if result.unsure:
        shown = "; ".join(result.unsure[:5]) + ("; ..." if len(result.unsure) > 5 else "")
        print(
            f"autonvtx: diff: warning: {len(result.unsure)} range(s) may have slowed by more than {fail_over:g}% "
            f"(too few or too noisy runs to tell; --fail-unclear fails on them): {shown}",
            file=sys.stderr,
        )
    if result.failing:
        shown = "; ".join(result.failing[:5]) + ("; ..." if len(result.failing) > 5 else "")
        print(
            f"autonvtx: diff: {len(result.failing)} range(s) slowed by more than {fail_over:g}%: {shown}",
            file=sys.stderr,
        )
        raise SystemExit(1)
