"""`autonvtx profile --flight RANGE` and its settings: what they mean under Nsight Systems (a slow
instance opens a capture window over the next instances) and their check before nsys starts."""

from __future__ import annotations

from typing import Any

import click

from autonvtx.errors import UsageError
from autonvtx.recorder.flight import Flight


def flight_options(command: Any) -> Any:
    """`--flight RANGE` and its settings, meaning what they mean for `run --flight`; under nsys
    a slow instance opens a capture window over the next --flight-keep instances."""
    options = [
        click.option(
            "--flight",
            metavar="RANGE",
            help="When an instance of RANGE (a function's range, or a region such as 'step {i}') lasts more than"
            " --flight-factor times the median of those before it, nsys captures the next --flight-keep"
            " instances (capture ranges, --capture-range-end=repeat); nothing else is captured.",
        ),
        click.option(
            "--flight-factor",
            type=float,
            default=3.0,
            show_default=True,
            metavar="X",
            help="--flight: how many times the median an instance must last to be slow.",
        ),
        click.option(
            "--flight-keep",
            type=int,
            default=10,
            show_default=True,
            metavar="N",
            help="--flight: instances captured after the slow one.",
        ),
        click.option(
            "--flight-max",
            type=int,
            default=20,
            show_default=True,
            metavar="N",
            help="--flight: at most N capture windows per process.",
        ),
        click.option(
            "--flight-warmup",
            type=int,
            default=5,
            show_default=True,
            metavar="N",
            help="--flight: the first N instances are neither compared nor counted (compilation, caches).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def flight_setting(
    flight: str | None = None,
    flight_factor: float = 3.0,
    flight_keep: int = 10,
    flight_max: int = 20,
    flight_warmup: int = 5,
    where: str = "profile",
) -> Flight | None:
    """--flight and its settings as a Flight, checked before anything starts; a setting without
    --flight is refused (it would do nothing). `where`: the command, first in each message."""
    if flight is None:
        given = {
            "--flight-factor": flight_factor != 3.0,
            "--flight-keep": flight_keep != 10,
            "--flight-max": flight_max != 20,
            "--flight-warmup": flight_warmup != 5,
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
