"""`autonvtx run` as a click command: its options and help, and the parse of whatever
`cli.runargs` leaves to click (--help, mistakes, --summary and the view options); what the
run does is `cli.launch.start_run`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from autonvtx.cli.flight import RECORDER, flight_options
from autonvtx.cli.group import cli
from autonvtx.cli.launch import TargetRun, describe_target, say_if_no_rules, start_run
from autonvtx.cli.options import RuleArgs, rule_options, summary_options
from autonvtx.errors import UsageError

# Imported from here by others (and before cli.launch existed): the run's pieces.
__all__ = [
    "TARGET_KEY",
    "RunCommand",
    "TargetRun",
    "describe_target",
    "run",
    "say_if_no_rules",
    "split_target_arguments",
]

TARGET_KEY = "autonvtx.target"


class RunCommand(click.Command):
    """`run` stops parsing its own options at the target: everything after belongs to the target.

    click alone would keep parsing options after `-m MODULE` (an option value, not a positional),
    so `autonvtx run -m pkg --help` would show our help; we split the arguments first.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ours, target = split_target_arguments(args, _value_options(self))
        ctx.meta[TARGET_KEY] = target
        return super().parse_args(ctx, ours)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        # The target is split off before click parses, so click does not know to show it.
        return [*super().collect_usage_pieces(ctx), "SCRIPT", "[ARGS]..."]


def _value_options(command: click.Command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def split_target_arguments(
    args: Sequence[str], value_options: set[str]
) -> tuple[list[str], tuple[str, str, tuple[str, ...]] | None]:
    """Split `run`'s arguments into (our options, (kind, value, target args)).

    `--summary` takes a value when written `--summary=PATH`, or when the next argument has a
    file suffix other than a script's (`outputs.is_option_value`), so `autonvtx run --summary
    train.py` runs train.py and `--summary out.html` is refused for its suffix.
    """
    ours: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            if i + 1 >= len(args):
                return ours, None
            return ours, ("script", args[i + 1], tuple(args[i + 2 :]))
        for flag, kind in (("-m", "module"), ("-c", "code")):
            if token == flag:
                if i + 1 >= len(args):
                    raise UsageError(f"run: {flag}: option requires an argument")
                return ours, (kind, args[i + 1], tuple(args[i + 2 :]))
            if token.startswith(flag) and not token.startswith("--"):
                return ours, (kind, token[len(flag) :], tuple(args[i + 1 :]))
        if token == "--summary":
            # Imported here: a run without --summary does not load outputs (start-up, issue 6).
            from autonvtx.recorder.outputs import SUMMARY_TO_STDERR, is_option_value

            following = args[i + 1] if i + 1 < len(args) else ""
            if is_option_value(following):
                ours.append(f"--summary={following}")
                i += 2
            else:
                ours.append(f"--summary={SUMMARY_TO_STDERR}")
                i += 1
            continue
        if token.startswith("-") and token != "-":
            ours.append(token)
            if token in value_options and i + 1 < len(args):
                ours.append(args[i + 1])
                i += 1
            i += 1
            continue
        return ours, ("script", token, tuple(args[i + 1 :]))
    return ours, None


@cli.command(
    cls=RunCommand,
    context_settings={"help_option_names": ["-h", "--help"]},
    short_help="Run a Python program with NVTX ranges on the functions the rules select.",
)
@rule_options
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="At exit, list per module what was wrapped and skipped (-vv: every decision with its reason).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Run nothing: print what 'autonvtx list' would for the modules the target imports "
    "at its top level (and its own functions).",
)
@click.option(
    "--trace",
    metavar="PATH",
    help="Record every NVTX event and write a trace: Chrome JSON (.json, .json.gz) or Perfetto (.pftrace).",
)
@click.option(
    "--summary",
    metavar="[PATH]",
    help="Print a range statistics table to stderr, or write it to PATH (.txt, .csv, .json).",
)
@click.option(
    "--buffer-mb",
    type=int,
    metavar="MB",
    help="Memory bound of the recorder's event buffers per process (default 512).",
)
@click.option(
    "--keep",
    type=click.Choice(["all", "last"]),
    default="all",
    help="last: keep only the most recent events, within --buffer-mb (a ring per thread).",
)
@flight_options(RECORDER)
@summary_options
@click.option(
    "--no-children",
    is_flag=True,
    help="Leave child processes alone: neither instrumented nor recorded.",
)
@click.option(
    "--capture",
    "captures",
    multiple=True,
    metavar="FUNCTION:FROM-TO",
    help="Profile only iterations FROM <= i < TO of FUNCTION's first loop (or its calls when it"
    " has none), e.g. '__main__:train:100-110': cudaProfilerStart/Stop, an NVTX range"
    " 'capture@autonvtx', and --trace/--summary keep only the window. Python 3.12+.",
)
@click.option(
    "--ranks",
    metavar="LIST",
    help="Under torchrun, Slurm or MPI, instrument and record only these ranks ('0,3', '0-3'); "
    "the others run untouched.",
)
@click.option(
    "--budget",
    metavar="PCT",
    help="Turn off the ranges of functions whose range costs more than PCT% of their own time,"
    " measured over their first 100 calls with the attached tool (e.g. 2); named at exit.",
)
def run(
    rules: RuleArgs,
    verbose: int,
    dry_run: bool,
    trace: str | None,
    summary: str | None,
    buffer_mb: int | None,
    keep: str,
    no_children: bool,
    captures: tuple[str, ...],
    ranks: str | None,
    flight: str | None,
    flight_factor: float,
    flight_keep: int,
    flight_max: int,
    flight_warmup: int,
    budget: str | None,
    **table: Any,
) -> TargetRun:
    """Run SCRIPT (or -m MODULE, or -c CODE) as `python` would, with NVTX ranges.

    \b
      autonvtx run [OPTIONS] SCRIPT [ARGS]...
      autonvtx run [OPTIONS] -m MODULE [ARGS]...
      autonvtx run [OPTIONS] -c CODE [ARGS]...

    Everything after the target belongs to it: `autonvtx run s.py --help` passes --help to s.py.
    """
    target = click.get_current_context().meta.get(TARGET_KEY)
    return start_run(
        target,
        rules=rules,
        verbose=verbose,
        dry_run=dry_run,
        trace=trace,
        summary=summary,
        buffer_mb=buffer_mb,
        keep=keep,
        no_children=no_children,
        captures=captures,
        ranks=ranks,
        table=table,
        budget=budget,
        flight=flight,
        flight_factor=flight_factor,
        flight_keep=flight_keep,
        flight_max=flight_max,
        flight_warmup=flight_warmup,
    )
