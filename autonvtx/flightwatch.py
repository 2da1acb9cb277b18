"""`--flight RANGE` where autonvtx's recorder is not the NVTX tool (under Nsight Systems:
`autonvtx profile --flight`, `install(flight=...)`, `%autonvtx --flight`): the watched range is
timed in the process where it begins and ends, and each slow instance opens the capture range
(`capture@autonvtx`, the one capture windows open) over the next `keep` instances, with a mark
saying what fired (`_native/flightwatch.c`).

The setting travels to child processes in AUTONVTX_FLIGHT_WATCH; each process watches its own
instances."""

from __future__ import annotations

import atexit
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from autonvtx import environment
from autonvtx.errors import UsageError
from autonvtx.recorder.flight import Flight

# The text that begins each trigger's NVTX mark (flightwatch.c writes it; report reads it back).
MARK_PREFIX = "autonvtx --flight: window "

_armed: list[Flight] = []  # the watch armed in this process (one at most)
# Armed from a parent's setting: a child that never runs the range (a data loader's worker)
# says nothing at exit; the parent says it for the run.
_from_parent: list[bool] = [False]
_said: set[str] = set()  # why a watch could not be armed, said once each


def _client() -> Any:
    from autonvtx import ranges

    client = ranges.native_client() if ranges.is_native() else None
    return client if hasattr(client, "watch_flight") else None


def arm(flight: Flight) -> Callable[[], None] | None:
    """Watch `flight.range` in this process from now on (ranges made before are looked at too),
    and in its children; says what it saw at exit. Returns what ends the watch again
    (install()'s uninstall calls it); None, said once, where no NVTX tool is attached (no range
    is made then) or the native client is missing."""
    flight.check()
    if not environment.is_tool_configured():
        if "tool" not in _said:
            _said.add("tool")
            print(
                f"autonvtx: --flight: no NVTX tool is attached to process {os.getpid()} (run it under `nsys"
                " profile`, `autonvtx profile` or `autonvtx run --trace`): its ranges are not made, nothing is watched",
                file=sys.stderr,
            )
        return None
    client = _client()
    if client is None:
        if "client" not in _said:
            _said.add("client")
            print("autonvtx: --flight needs autonvtx's native client; no range is watched", file=sys.stderr)
        return None
    client.watch_flight(flight.range, flight.factor, flight.keep, flight.max_files, flight.warmup)
    if not _armed:
        atexit.register(_at_exit)
    _armed[:] = [flight]
    inherited = os.environ.get(environment.FLIGHT_WATCH)
    os.environ[environment.FLIGHT_WATCH] = to_text(flight, parent=os.getpid())  # children watch too

    def disarm() -> None:
        """No instance is watched from now on (a window still open ends now), and children get
        the environment's setting as it was; what was seen is still said at exit."""
        client.close_flight()
        if inherited is None:
            os.environ.pop(environment.FLIGHT_WATCH, None)
        else:
            os.environ[environment.FLIGHT_WATCH] = inherited

    return disarm


def to_text(flight: Flight, parent: int | None = None) -> str:
    """AUTONVTX_FLIGHT_WATCH's value; `parent`: the watching process whose children read it."""
    values: dict[str, Any] = {
        "range": flight.range,
        "factor": flight.factor,
        "keep": flight.keep,
        "max": flight.max_files,
        "warmup": flight.warmup,
    }
    if parent is not None:
        values["parent"] = parent
    return json.dumps(values)


def from_text(text: str) -> tuple[Flight, int | None]:
    """The Flight AUTONVTX_FLIGHT_WATCH holds, and the watching parent that set it (None: set by
    `autonvtx profile`); UsageError naming the variable otherwise."""
    try:
        values = json.loads(text)
        parent = values.get("parent")
        flight = Flight(
            range=str(values["range"]),
            factor=float(values["factor"]),
            keep=int(values["keep"]),
            max_files=int(values["max"]),
            warmup=int(values["warmup"]),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        raise UsageError(
            f"{environment.FLIGHT_WATCH}: expected the JSON autonvtx profile sets"
            ' ({"range": ..., "factor": ..., "keep": ..., "max": ..., "warmup": ...})'
        ) from None
    flight.check()
    return flight, parent if isinstance(parent, int) else None


def arm_from_environment() -> None:
    """arm() with what AUTONVTX_FLIGHT_WATCH says, when a parent set it."""
    text = os.environ.get(environment.FLIGHT_WATCH)
    if text and not _armed:
        try:
            flight, parent = from_text(text)
            _from_parent[0] = parent is not None
            arm(flight)
        except UsageError as bad:
            print(f"autonvtx: {bad}; nothing watched", file=sys.stderr)


def watched() -> dict[str, int]:
    """What the watch saw in this process: instances, slow, windows, open, uncaptured."""
    client = _client()
    return dict(client.flight_watched()) if client is not None else {}


def exit_lines(flight: Flight, seen: dict[str, int], pid: int) -> list[str]:
    """What a process says of its watch at exit (each line names the process: several may watch)."""
    where = f"process {pid}"
    if not seen.get("instances"):
        return [
            f"--flight: no instance of '{flight.range}' ran in {where} (it must be a function's range or a"
            " region autonvtx makes: the program's own NVTX ranges cannot be timed under Nsight Systems);"
            " no window captured"
        ]
    if not seen.get("slow"):
        return [
            f"--flight: none of the {seen['instances']} instances of '{flight.range}' in {where} lasted more than"
            f" {flight.factor:g}x the median of those before it: no window captured"
        ]
    lines = [
        f"--flight: {seen['slow']} slow instance(s) of '{flight.range}' of {seen['instances']} in {where};"
        f" {seen['windows']} capture window(s) of up to {flight.keep} instances after them"
    ]
    if seen.get("uncaptured"):
        lines.append(
            f"--flight: {seen['uncaptured']} slow instance(s) in {where} came after --flight-max"
            f" {flight.max_files} windows and were not captured"
        )
    return lines


def _at_exit() -> None:
    client = _client()
    if not _armed or client is None:
        return
    client.close_flight()  # a window open when the program ends ends with it
    seen = watched()
    if _from_parent[0] and not seen.get("instances"):
        return  # a child that never ran the range: its parent speaks for the run
    for line in exit_lines(_armed[0], seen, os.getpid()):
        print(f"autonvtx: {line}", file=sys.stderr)
