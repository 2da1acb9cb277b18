"""The flight recorder (`--flight RANGE`): which settings it takes, what the native recorder is told,
and the windows it wrote turned into traces beside `--trace`.

The watching itself is native (`_native/flight.c`, run by the recorder's own thread): each
process compares every instance of the range with the median of those before it and, for a slow
one, writes the window (the instance and the `keep` before it, every thread) as a recording of
its own, `flight-N/<pid>.anr` in the record directory, with `flight-N/flight.json` saying what
fired. This module names the trace each becomes (`run.json` -> `run.flight-N.json`) and writes it.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autonvtx import environment
from autonvtx.errors import UsageError

# The trace suffixes, longest first: `.flight-N` goes before the whole suffix (`run.json.gz` ->
# `run.flight-1.json.gz`).
_SUFFIXES = (".perfetto-trace", ".json.gz", ".pftrace", ".json")
FLIGHT_INFO = "flight.json"
FLIGHT_SCHEMA = "autonvtx-flight/1"
# The recorder's memory bound under --flight by default: a run of hours stays within it. A
# recorder thread starved of CPU lets the threads' buffers fill to it, so the whole process
# peaks near the interpreter's own memory plus this (3M steps: under 150 MiB on a loaded host).
DEFAULT_BUFFER_MB = 96
MAX_KEEP = 1000  # the native scanner keeps at most this many instances before the slow one


@dataclass(frozen=True)
class Flight:
    """`--flight RANGE` and its settings."""

    range: str
    factor: float = 3.0
    keep: int = 10
    max_files: int = 20
    warmup: int = 5

    def check(self) -> None:
        """Refuse settings that could never do what they say, naming the option."""
        if not self.range.strip():
            raise UsageError(
                "--flight: expected the name of a range (a function's range, or a region such as 'step {i}')"
            )
        if not self.factor > 1.0:
            raise UsageError(
                f"--flight-factor: expected a number above 1 (how many times the median), got {self.factor}"
            )
        if not 1 <= self.keep <= MAX_KEEP:
            raise UsageError(f"--flight-keep: expected 1 to {MAX_KEEP} instances before the slow one, got {self.keep}")
        if self.max_files < 1:
            raise UsageError(f"--flight-max: expected at least 1 file, got {self.max_files}")
        if self.warmup < 0:
            raise UsageError(f"--flight-warmup: expected 0 or more instances, got {self.warmup}")


DEFAULTS = Flight(range="-")  # the settings a command gives when not told: Flight's own


def from_options(
    flight: str | None = None,
    flight_factor: float = DEFAULTS.factor,
    flight_keep: int = DEFAULTS.keep,
    flight_max: int = DEFAULTS.max_files,
    flight_warmup: int = DEFAULTS.warmup,
    where: str = "run",
) -> Flight | None:
    """--flight and its settings (as the commands' options give them) as a Flight, not checked
    yet, or None; a setting without --flight is refused, after `where` (the command): it would
    do nothing."""
    if flight is None:
        given = {
            "--flight-factor": flight_factor != DEFAULTS.factor,
            "--flight-keep": flight_keep != DEFAULTS.keep,
            "--flight-max": flight_max != DEFAULTS.max_files,
            "--flight-warmup": flight_warmup != DEFAULTS.warmup,
        }
        for name, changed in given.items():
            if changed:
                raise UsageError(f"{where}: {name} sets how --flight watches; add --flight RANGE")
        return None
    return Flight(range=flight, factor=flight_factor, keep=flight_keep, max_files=flight_max, warmup=flight_warmup)


def flight_path(trace: str, number: int) -> str:
    """`trace` with `.flight-N` before its suffix: `fr.json` -> `fr.flight-1.json`."""
    head, tail = split_suffix(trace)
    return f"{head}.flight-{number}{tail}"


def split_suffix(trace: str) -> tuple[str, str]:
    for suffix in _SUFFIXES:
        if trace.endswith(suffix):
            return trace[: -len(suffix)], suffix
    head, tail = os.path.splitext(trace)
    return head, tail


def recorder_settings(outputs: Any, shown_trace: str | None) -> dict[str, str]:
    """What the native recorder of a `--flight` run reads at load (every process of the run
    inherits it). Without --summary, no event goes to the record directory: the ring alone (disk
    stays bounded too)."""
    assert outputs.flight is not None and shown_trace is not None  # check_outputs: --flight needs --trace
    settings = flight_settings(outputs.flight, shown_trace, keep_events=outputs.summary is not None)
    if outputs.buffer_mb is None:
        settings[environment.RECORD_LIMIT_MB] = str(DEFAULT_BUFFER_MB)
    return settings


def remove_earlier_windows(trace: str, shown: str, above: int | None) -> list[str]:
    """An earlier run's windows beside the trace (`TRACE.flight-N.EXT`) numbered above `above`,
    the last this run wrote (those up to it it replaced), removed at this run's exit: a stale
    one with a higher number would pass for this run's. None: this run wrote no window, and
    they are left as they were (said), as they are by a run that crashes before its exit. The
    note saying what was done, if anything."""
    head, tail = split_suffix(trace)
    directory, name = os.path.split(head)
    stale = []
    for path in Path(directory or ".").glob(f"{glob.escape(name)}.flight-*{glob.escape(tail)}"):
        number = path.name[len(name) + len(".flight-") : len(path.name) - len(tail)]
        if number.isdigit() and int(number) > (above or 0) and path.is_file():
            stale.append(path)
    if not stale:
        return []
    if above is None:
        return [f"--flight: {len(stale)} window(s) of an earlier run left as they were ({flight_path(shown, 1)}, ...)"]
    for path in stale:
        with contextlib.suppress(OSError):
            path.unlink()
    return [f"--flight: {len(stale)} window(s) of an earlier run removed ({flight_path(shown, above + 1)}, ...)"]


def watcher_settings(directory: str, command: list[str]) -> dict[str, str]:
    """What makes the watcher write each window's trace as it comes (`recorder.watcher`)."""
    return {environment.WATCH_FLIGHT_DIR: directory, environment.WATCH_FLIGHT_COMMAND: json.dumps(command)}


def flight_settings(flight: Flight, shown_trace: str, *, keep_events: bool = True) -> dict[str, str]:
    """The recorder's settings for `flight`; `keep_events`: every event also goes to the
    recording directory (for --summary)."""
    head, tail = split_suffix(shown_trace)
    return {
        environment.FLIGHT_SPILL: "1" if keep_events else "0",
        environment.FLIGHT_RANGE: flight.range,
        environment.FLIGHT_FACTOR: repr(flight.factor),
        environment.FLIGHT_KEEP: str(flight.keep),
        environment.FLIGHT_MAX: str(flight.max_files),
        environment.FLIGHT_WARMUP: str(flight.warmup),
        environment.FLIGHT_HEAD: head,
        environment.FLIGHT_TAIL: tail,
    }


@dataclass
class Window:
    """One window the recorder wrote: its directory and what fired it."""

    number: int
    directory: Path
    info: dict[str, Any]


def windows(directory: str) -> list[Window]:
    """The complete windows in a record directory (flight.json is written last), by number."""
    found = []
    for path in Path(directory).glob("flight-*"):
        number = path.name.partition("-")[2]
        info_path = path / FLIGHT_INFO
        if not (number.isdigit() and path.is_dir() and info_path.is_file()):
            continue
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and info.get("schema") == FLIGHT_SCHEMA:
            found.append(Window(int(number), path, info))
    return sorted(found, key=lambda w: w.number)


def is_window(path: Path) -> bool:
    """Whether `path` in a record directory is a window the recorder made (`flight-N`)."""
    return path.name.startswith("flight-") and path.name[len("flight-") :].isdigit()


def window_metadata(info: dict[str, Any]) -> dict[str, Any]:
    """What a flight trace says of itself (its `otherData.flight`): the trigger, the window, and
    the ranges left out whole because they began before it."""
    keys = (
        "range",
        "name",
        "instance",
        "duration_ns",
        "median_ns",
        "median_of",
        "factor",
        "keep",
        "instances_in_window",
        "window_start_ns",
        "window_end_ns",
        "slow_start_ns",
        "ring_cut",
        "still_open",
        "enclosing_left_out",
        "enclosing_unnamed",
        "enclosing",
        "pid",
        "tid",
        "write_ns",
        "write_cpu_ns",
    )
    return {key: info[key] for key in keys if key in info}


def window_notes(written: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What the windows (shown name, flight.json) leave out or show open, said once for them all
    (each file's `otherData.flight` has its own figures)."""
    notes = []
    names = sorted({str(e.get("name", "")) for _, info in written for e in info.get("enclosing", [])})
    left_out = [shown for shown, info in written if info.get("enclosing_left_out") or info.get("enclosing_unnamed")]
    if left_out:
        named = f" ({', '.join(repr(n) for n in names[:5])}{', ...' if len(names) > 5 else ''})" if names else ""
        where = left_out[0] if len(left_out) == 1 else f"{len(left_out)} windows"
        notes.append(
            f"{where}: the ranges that began before the window{named} are left out whole"
            " (named in otherData.flight.enclosing)"
        )
    for shown, info in written:
        if info.get("still_open"):
            notes.append(
                f"{shown}: {info['still_open']} range(s) begun in the window had not ended when it was written"
            )
        if info.get("ring_cut"):
            notes.append(
                f"{shown}: the recorder's ring held only {info.get('instances_in_window')} of the"
                f" {int(info.get('keep', 0)) + 1} instances: raise --buffer-mb for a longer window"
            )
    return notes


CLAIMED = "claimed"  # made (mkdir) by whoever writes a window's trace: the watcher's writer, or the exit
DONE = "done"  # made once the window's trace is written


def write_window(window: Window, trace: str, shown: str, labels: dict[int, str], metadata: dict[str, Any]) -> None:
    """The window's trace at `trace` (named `shown` to the user), then its DONE mark; OSError if
    it cannot be written."""
    from autonvtx.recorder.results import Request, write_results

    write_results(
        str(window.directory),
        Request(trace=trace, labels=labels, metadata={**metadata, "flight": window_metadata(window.info)}),
    )
    try:
        os.mkdir(window.directory / DONE)
    except FileExistsError:
        pass
    info = window.info
    print(
        f"autonvtx: flight window written to {shown} ({info.get('name')!s}, instance {info.get('instance')} of "
        f"'{info.get('range')}', and the {int(info.get('instances_in_window', 1)) - 1} before it)",
        file=sys.stderr,
        flush=True,
    )


def claim(window: Window) -> bool:
    """Whether this process is the one to write the window (the first to claim it)."""
    try:
        os.mkdir(window.directory / CLAIMED)
    except FileExistsError:
        return False
    return True


def wait_until_written(window: Window, seconds: float) -> bool:
    """Whether the writer that claimed the window wrote it within `seconds`."""
    import time

    deadline = time.monotonic() + seconds
    while not (window.directory / DONE).is_dir():
        if time.monotonic() > deadline or not (window.directory / CLAIMED).is_dir():
            return (window.directory / DONE).is_dir()  # unclaimed: the writer gave it back
        time.sleep(0.05)
    return True


# How long the exit waits for a window the watcher's writer claimed before writing it itself.
WATCHER_WRITE_SECONDS = 15.0


def write_windows(
    directory: str, outputs: Any, given: str | None, labels: dict[int, str], metadata: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """At the run's exit: each window in the record directory not written yet, as the trace
    `TRACE.flight-N.EXT` (`given`: the trace's name as the user gave it). Returns (notes about
    them, what could not be written)."""
    flight, trace = outputs.flight, outputs.trace
    assert flight is not None and trace is not None and given is not None
    written: list[tuple[str, dict[str, Any]]] = []
    failures = []
    for window in windows(directory):
        shown = flight_path(given, window.number)
        if not window.info.get("written", True):
            continue  # the recorder said why on stderr when it fired
        if not claim(window) and wait_until_written(window, WATCHER_WRITE_SECONDS):
            written.append((shown, window.info))  # the watcher wrote it while the program ran
            continue
        try:
            write_window(window, flight_path(trace, window.number), shown, labels, metadata)
        except OSError as error:
            failures.append(f"--flight: could not write '{shown}': {error.strerror or error}")
            continue
        written.append((shown, window.info))
    notes = window_notes(written)
    last = max((window.number for window in windows(directory)), default=None) if written else None
    notes += remove_earlier_windows(trace, given, last)
    if not written:
        notes.append(
            f"--flight: no instance of '{flight.range}' lasted more than {flight.factor:g}x the median of those "
            f"before it: no window written, and no trace of the whole run (--flight writes only windows)"
        )
    else:
        notes.append(f"--flight: {len(written)} window(s) written; the whole run's trace is not written under --flight")
    return notes, failures


def write_from_state(state: str, window_directory: str) -> None:
    """The watcher's writer (it claimed the window): the window's trace while the program runs;
    `state`: the session's (`RecordingSession._state_command`)."""
    from autonvtx.recorder.results import read_process_notes

    values = json.loads(state)
    trace, given, metadata = values["outputs"]["trace"], values["given"]["trace"], values["metadata"]
    directory = str(Path(window_directory).parent)
    labels = {pid: str(note.get("label") or "") for pid, note in read_process_notes(directory).items()}
    labels[values["pid"]] = values["outputs"]["label"]  # as the exit names the processes
    for window in windows(directory):
        if window.directory == Path(window_directory):
            try:
                write_window(
                    window, flight_path(trace, window.number), flight_path(given, window.number), labels, metadata
                )
            except OSError:  # unclaimed again: the exit writes it, and says why if it cannot either
                with contextlib.suppress(OSError):  # the exit may have removed the directory already
                    os.rmdir(window.directory / CLAIMED)


def remove_record_directory(directory: str) -> None:
    """Renamed first, so that the watcher's flight writer, which may be looking, makes nothing in
    it while it is removed (a claim made there would keep it from going)."""
    import shutil

    gone = f"{directory}.{os.getpid()}.removed"
    try:
        os.rename(directory, gone)
    except OSError:
        gone = directory
    shutil.rmtree(gone, ignore_errors=True)
