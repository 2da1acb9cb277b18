"""Where `--trace`/`--summary` write, checked before anything runs.

Kept apart from `recorder.session` so that a run that records nothing never imports the
recorder (start-up cost, issue 6): `autonvtx run` parses `--summary` and checks `--buffer-mb`
on every run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autonvtx.errors import UsageError

if TYPE_CHECKING:
    from autonvtx.ranks import RankInfo

SUMMARY_TO_STDERR = "-"
SUMMARY_SUFFIXES = (".txt", ".csv", ".json")
TRACE_SUFFIXES = (".json", ".json.gz", ".pftrace", ".perfetto-trace")
SCRIPT_SUFFIXES = (".py", ".pyw", ".pyz")
KEEP_MODES = ("all", "last")


def is_option_value(word: str) -> bool:
    """Whether the word after `--summary` is its value: a file name with a suffix, not a script.

    The one rule for optional values: `--summary=PATH` always, `--summary PATH` when PATH has
    a suffix other than a Python script's; the suffix must then be one the option writes.
    """
    if not word or word.startswith("-"):
        return False
    suffix = os.path.splitext(word)[1].lower()
    return bool(suffix) and suffix not in SCRIPT_SUFFIXES


@dataclass(frozen=True)
class Outputs:
    """Where the user asked the recording to go."""

    trace: str | None = None
    summary: str | None = None  # SUMMARY_TO_STDERR or a path
    label: str = ""  # how the main process is named in the trace
    buffer_mb: int | None = None
    children: bool = True  # child processes' recordings join the trace
    keep: str = "all"  # "last": a ring per thread, the most recent events (with buffer_mb)
    summary_options: Any = None  # summary.SummaryOptions (not imported here: start-up)
    flight: Any = None  # recorder.flight.Flight: windows around slow instances instead of the whole trace

    @property
    def wanted(self) -> bool:
        return self.trace is not None or self.summary is not None

    def absolute(self) -> Outputs:
        """The same outputs with file names made absolute (the program may change directory)."""
        import dataclasses

        summary = self.summary
        if summary is not None and summary != SUMMARY_TO_STDERR:
            summary = os.path.abspath(summary)
        trace = os.path.abspath(self.trace) if self.trace is not None else None
        return dataclasses.replace(self, trace=trace, summary=summary)

    def for_rank(self, info: RankInfo) -> Outputs:
        """`{rank}` (and `{local_rank}`, `{world_size}`, `{pid}`) filled in the output names."""
        from autonvtx.ranks import expand_output_name

        summary = self.summary
        if summary is not None and summary != SUMMARY_TO_STDERR:
            summary = expand_output_name(summary, info)
        trace = expand_output_name(self.trace, info) if self.trace is not None else None
        import dataclasses

        return dataclasses.replace(self, trace=trace, summary=summary)


def check_outputs(outputs: Outputs) -> None:
    """Refuse before anything runs when an output could not be written at the end."""
    if outputs.trace is not None:
        check_trace_path("--trace", outputs.trace)
    if outputs.summary not in (None, SUMMARY_TO_STDERR):
        check_summary_path("--summary", outputs.summary)
    if outputs.buffer_mb is not None and outputs.buffer_mb <= 0:
        raise UsageError(f"--buffer-mb: expected a positive number of MiB, got {outputs.buffer_mb}")
    if outputs.keep not in KEEP_MODES:
        raise UsageError(f"--keep: {outputs.keep!r} is not a mode; expected 'all' or 'last'")
    if outputs.keep == "last" and outputs.buffer_mb is None:
        raise UsageError("--keep last: needs --buffer-mb N, the memory the most recent events may take")
    if outputs.flight is not None:
        outputs.flight.check()
        if outputs.trace is None:
            raise UsageError("--flight: needs --trace PATH: the windows are written beside it, as PATH.flight-N")
        if outputs.keep == "last":
            raise UsageError("--flight: keeps its own ring of recent events; leave out --keep last")


def check_summary_path(option: str, path: str) -> None:
    """Refuse a summary file whose suffix promises a form the table is not written in."""
    _check_writable(option, path)
    if not path.lower().endswith(SUMMARY_SUFFIXES):
        raise UsageError(f"{option}: {path!r} must end in .txt, .csv or .json (the forms a summary is written in)")


def check_trace_path(option: str, path: str) -> None:
    """Refuse a trace file name that could not be written, or would not be a Chrome trace."""
    _check_writable(option, path)
    if not path.endswith(TRACE_SUFFIXES):
        raise UsageError(
            f"{option}: {path!r} must end in .json or .json.gz (Chrome trace-event JSON), "
            ".pftrace or .perfetto-trace (Perfetto's protobuf format)"
        )


def _check_writable(option: str, path: str) -> None:
    # Imported here: only a named output needs it, and a plain run would pay ~5 ms (issue 6).
    from pathlib import Path

    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        raise UsageError(f"{option}: directory '{parent}' does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{option}: directory '{parent}' is not writable")
    if Path(path).is_dir():
        raise UsageError(f"{option}: '{path}' is a directory; expected a file name")
    # os.access says yes to root in /proc and on a read-only mount: make a file there, as the
    # writer will at the end.
    from autonvtx.probe import cannot_create_in

    why = cannot_create_in(str(parent), Path(path).name)
    if why is not None:
        raise UsageError(
            f"{option}: '{path}' cannot be written: creating a file in '{parent}' fails ({why}); "
            "expected a path in a writable directory"
        )
