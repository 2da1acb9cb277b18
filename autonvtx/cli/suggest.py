"""`autonvtx suggest`: run the program once, measured, and write the rules worth keeping."""

from __future__ import annotations

import shlex
import sys
from typing import IO

import click

from autonvtx.cli.group import cli
from autonvtx.cli.launch import check_script
from autonvtx.cli.options import RuleArgs, rule_options
from autonvtx.cli.run import TARGET_KEY, RunCommand
from autonvtx.errors import UsageError
from autonvtx.report.render.render import check_writable


@cli.command(
    "suggest",
    cls=RunCommand,
    context_settings={"help_option_names": ["-h", "--help"]},
    short_help="Run a program once, measured, and write rules for the functions that hold its time.",
)
@click.option("-o", "--output", metavar="FILE", help="Write the suggested config to FILE (default: standard output).")
@click.option(
    "--nsys",
    is_flag=True,
    help="Measure under Nsight Systems (as `autonvtx profile` runs) and rank functions by the GPU time"
    " launched inside them.",
)
@click.option(
    "--max-patterns",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    metavar="N",
    help="At most N include patterns over all rules.",
)
@click.option(
    "--min-share",
    type=click.FloatRange(min=0, max=100),
    default=0.5,
    show_default=True,
    metavar="PCT",
    help="Leave out functions holding less than PCT% of the run's time (or of its GPU time with --nsys).",
)
@click.option(
    "--cost",
    "cost_pct",
    type=click.FloatRange(min=0, max=100, min_open=True),
    default=1.0,
    show_default=True,
    metavar="PCT",
    help="The suggested ranges may cost at most PCT% of the run's time, estimated from the measured"
    " calls and a range's measured cost.",
)
@rule_options
def suggest(
    output: str | None,
    nsys: bool,
    max_patterns: int,
    min_share: float,
    cost_pct: float,
    rules: RuleArgs,
) -> None:
    """Run SCRIPT (or -m MODULE, or -c CODE) once as `autonvtx run` would, with ranges on every
    function of `__main__`, of the program's own packages and of the third-party packages it
    imports (never the standard library); then write a config whose rules range the functions
    that hold the run's time, leaving out calls too short for a range and import-time work.

    \b
      autonvtx suggest [OPTIONS] SCRIPT [ARGS]...
      autonvtx suggest -o autonvtx.toml train.py --epochs 1
      autonvtx suggest -t 'mypkg.*' -m mypkg.train      # measure only these modules

    Rule options (-t, --config, --preset) replace the broad rules of the measured run. Exits
    with the program's status.
    """
    from autonvtx.suggest.calls import Measurement
    from autonvtx.suggest.choice import Limits, choose
    from autonvtx.suggest.measure import MeasureRequest, measure
    from autonvtx.suggest.rulesfile import percent, render

    target = click.get_current_context().meta.get(TARGET_KEY)
    if target is None:
        raise UsageError("suggest: missing SCRIPT, -m MODULE or -c CODE (see 'autonvtx suggest --help')")
    check_writable("suggest", "-o", output)
    check_script(target)
    request = MeasureRequest(target=target, rules=rules, nsys=nsys)
    if nsys:
        from autonvtx import nsight

        nsight.find_nsys()  # none: said before the program runs
    measurement: Measurement = measure(request)
    limits = Limits(min_share=min_share / 100, cost_share=cost_pct / 100, max_patterns=max_patterns)
    suggestion = choose(measurement, limits)
    command = _command_line(target, rules, nsys, max_patterns, min_share, cost_pct)
    text = render(suggestion, measurement, command, _conditions(rules.engine, nsys))
    if output is None:
        sys.stdout.flush()
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        from autonvtx.recorder.trace import write_atomically

        def write(f: IO[str]) -> None:
            f.write(text)

        write_atomically(output, write)
    where = f"; wrote {output}" if output is not None else ""
    print(
        f"autonvtx: suggest: {suggestion.patterns} pattern{'s' if suggestion.patterns != 1 else ''} in"
        f" {len(suggestion.rules)} rule{'s' if len(suggestion.rules) != 1 else ''} range"
        f" {suggestion.coverage:.1%} of the run's time outside imports, at an estimated"
        f" {percent(suggestion.cost_share)}{where}",
        file=sys.stderr,
    )
    if measurement.status:
        print(
            f"autonvtx: suggest: the program exited with status {measurement.status}; the rules are from"
            " the part it ran",
            file=sys.stderr,
        )
    raise SystemExit(measurement.status)


def _command_line(
    target: tuple[str, str, tuple[str, ...]],
    rules: RuleArgs,
    nsys: bool,
    max_patterns: int,
    min_share: float,
    cost_pct: float,
) -> str:
    """The suggest command as it could be typed again (without -o)."""
    words = ["autonvtx", "suggest", *rules.as_args(for_people=True)]
    if nsys:
        words.append("--nsys")
    for flag, given, default in (
        ("--max-patterns", max_patterns, 30),
        ("--min-share", min_share, 0.5),
        ("--cost", cost_pct, 1.0),
    ):
        if given != default:
            words += [flag, f"{given:g}"]
    kind, value, args = target
    words += {"script": [value], "module": ["-m", value], "code": ["-c", value]}[kind]
    return shlex.join([*words, *args])


def _conditions(engine: str | None, nsys: bool) -> str:
    from autonvtx.engines.kinds import choose_engine

    kind, _ = choose_engine(engine or "auto")
    engine_name = kind.name
    tool = "Nsight Systems" if nsys else "the autonvtx recorder"
    version = ".".join(map(str, sys.version_info[:3]))
    return f"Python {version}, the {engine_name} engine, {tool}"
