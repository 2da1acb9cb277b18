"""`autonvtx profile --flight RANGE` and its settings: what they mean under Nsight Systems (a slow
instance opens a capture window over the next instances) and their check before nsys starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from autonvtx.errors import UsageError
from autonvtx.recorder.flight import DEFAULTS, Flight, from_options

# What each command's --flight does, and its settings' words where they differ: `run` (and the
# kernel) write windows from the recorder's ring; `profile` has nsys capture the steps after.
RECORDER = (
    "Flight recorder: keep a ring of recent events, and when an instance of RANGE (a function's"
    " range, or a region such as 'step {i}') lasts more than --flight-factor times the median, write it"
    " and the --flight-keep instances before it to TRACE.flight-N (needs --trace; the whole trace is not written).",
    "instances written before the slow one.",
    "at most N windows written in a run.",
)
NSYS = (
    "When an instance of RANGE (a function's range, or a region such as 'step {i}') lasts more than"
    " --flight-factor times the median of those before it, nsys captures the next --flight-keep"
    " instances (capture ranges, --capture-range-end=repeat); nothing else is captured.",
    "instances captured after the slow one.",
    "at most N capture windows per process.",
)


def flight_options(meaning: tuple[str, str, str]) -> Callable[[Any], Any]:
    """`--flight RANGE` and its settings, with `meaning` (RECORDER or NSYS): the help of
    --flight, --flight-keep and --flight-max; the defaults are Flight's."""
    flight_help, keep_help, max_help = meaning

    def decorate(command: Any) -> Any:
        options = [
            click.option("--flight", metavar="RANGE", help=flight_help),
            click.option(
                "--flight-factor",
                type=float,
                default=DEFAULTS.factor,
                show_default=True,
                metavar="X",
                help="--flight: how many times the median an instance must last to be slow.",
            ),
            click.option(
                "--flight-keep",
                type=int,
                default=DEFAULTS.keep,
                show_default=True,
                metavar="N",
                help=f"--flight: {keep_help}",
            ),
            click.option(
                "--flight-max",
                type=int,
                default=DEFAULTS.max_files,
                show_default=True,
                metavar="N",
                help=f"--flight: {max_help}",
            ),
            click.option(
                "--flight-warmup",
                type=int,
                default=DEFAULTS.warmup,
                show_default=True,
                metavar="N",
                help="--flight: the first N instances are neither compared nor counted (compilation, caches).",
            ),
        ]
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def flight_setting(
    flight: str | None = None,
    flight_factor: float = DEFAULTS.factor,
    flight_keep: int = DEFAULTS.keep,
    flight_max: int = DEFAULTS.max_files,
    flight_warmup: int = DEFAULTS.warmup,
    where: str = "profile",
) -> Flight | None:
    """--flight and its settings as a Flight, checked before anything starts; a setting without
    --flight is refused (it would do nothing). `where`: the command, first in each message."""
    watch = from_options(flight, flight_factor, flight_keep, flight_max, flight_warmup, where)
    if watch is None:
        return None
    try:
        watch.check()
    except UsageError as error:
        raise UsageError(f"{where}: {error}") from None
    return watch
