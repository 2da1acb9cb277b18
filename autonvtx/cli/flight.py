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


def flight_setting(flight: str | None, factor: float, keep: int, most: int, warmup: int) -> Flight | None:
    """--flight and its settings as a Flight, checked before nsys starts; a setting without
    --flight is refused (it would do nothing)."""
    if flight is None:
        given = {"--flight-factor": factor != 3.0, "--flight-keep": keep != 10, "--flight-max": most != 20}
        given["--flight-warmup"] = warmup != 5
        for name, changed in given.items():
            if changed:
                raise UsageError(f"profile: {name} sets how --flight watches; add --flight RANGE")
        return None
    watch = Flight(range=flight, factor=factor, keep=keep, max_files=most, warmup=warmup)
    watch.check()
    return watch
