"""`autonvtx profile --flight RANGE` and its settings: what they mean under Nsight Systems (a slow
instance opens a capture window over the next instances) and their check before nsys starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from autonvtx.errors import UsageError
from autonvtx.recorder.flight import Flight

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
_DEFAULT = Flight(range="-")


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
                default=_DEFAULT.factor,
                show_default=True,
                metavar="X",
                help="--flight: how many times the median an instance must last to be slow.",
            ),
            click.option(
                "--flight-keep",
                type=int,
                default=_DEFAULT.keep,
                show_default=True,
                metavar="N",
                help=f"--flight: {keep_help}",
            ),
            click.option(
                "--flight-max",
                type=int,
                default=_DEFAULT.max_files,
                show_default=True,
                metavar="N",
                help=f"--flight: {max_help}",
            ),
            click.option(
                "--flight-warmup",
                type=int,
                default=_DEFAULT.warmup,
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
    flight_factor: float = _DEFAULT.factor,
    flight_keep: int = _DEFAULT.keep,
    flight_max: int = _DEFAULT.max_files,
    flight_warmup: int = _DEFAULT.warmup,
    where: str = "profile",
) -> Flight | None:
    """--flight and its settings as a Flight, checked before anything starts; a setting without
    --flight is refused (it would do nothing). `where`: the command, first in each message."""
    if flight is None:
        given = {
            "--flight-factor": flight_factor != _DEFAULT.factor,
            "--flight-keep": flight_keep != _DEFAULT.keep,
            "--flight-max": flight_max != _DEFAULT.max_files,
            "--flight-warmup": flight_warmup != _DEFAULT.warmup,
        }
        for name, changed in given.items():
            if changed:
                raise UsageError(f"{where}: {name} sets how --flight watches; add --flight RANGE")
        return None
    watch = Flight(range=flight, factor=flight_factor, keep=flight_keep, max_files=flight_max, warmup=flight_warmup)
    try:
        watch.check()
    except UsageError as error:
        raise UsageError(f"{where}: {error}") from None
    return watch
