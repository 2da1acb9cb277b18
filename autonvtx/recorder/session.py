"""One recording from `autonvtx run`: attach the recorder, then write the trace and summary at exit."""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from autonvtx import environment
from autonvtx.errors import UsageError
from autonvtx.recorder.model import ProcessRecording

SUMMARY_TO_STDERR = "-"
SUMMARY_SUFFIXES = (".txt", ".csv", ".json")
TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass(frozen=True)
class Outputs:
    """Where the user asked the recording to go."""

    trace: str | None = None
    summary: str | None = None  # SUMMARY_TO_STDERR or a path
    label: str = ""  # how the main process is named in the trace
    buffer_mb: int | None = None

    @property
    def wanted(self) -> bool:
        return self.trace is not None or self.summary is not None


def check_outputs(outputs: Outputs) -> None:
    """Refuse before anything runs when an output could not be written at the end."""
    if outputs.trace is not None:
        _check_writable("--trace", outputs.trace)
        if not outputs.trace.endswith(TRACE_SUFFIXES):
            raise UsageError(
                f"--trace: {outputs.trace!r} must end in .json or .json.gz (Chrome trace-event JSON)"
            )
    if outputs.summary not in (None, SUMMARY_TO_STDERR):
        _check_writable("--summary", outputs.summary)
    if outputs.buffer_mb is not None and outputs.buffer_mb <= 0:
        raise UsageError(f"--buffer-mb: expected a positive number of MiB, got {outputs.buffer_mb}")


def _check_writable(option: str, path: str) -> None:
    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        raise UsageError(f"{option}: directory '{parent}' does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{option}: directory '{parent}' is not writable")
    if Path(path).is_dir():
        raise UsageError(f"{option}: '{path}' is a directory; expected a file name")


def other_tool_attached() -> str | None:
    """The injection library another NVTX tool (nsys, ...) already set, if any."""
    from autonvtx.recorder import native

    current = os.environ.get(environment.NVTX_INJECTION64_PATH)
    if not current:
        return None
    ours = native.library_path()
    if ours is not None and os.path.realpath(current) == os.path.realpath(ours):
        return None
    return current


class RecordingSession:
    """Attaches the native recorder to this process (and, through the environment, its children).

    The trace is written from an `atexit` handler registered before the target runs, so it runs
    after the target's own handlers; SIGTERM is turned into the same write followed by the
    default SIGTERM death, so the exit status stays what it would have been.
    """

    def __init__(self, outputs: Outputs) -> None:
        self.outputs = outputs
        self._directory: str | None = None
        self._saved_env: dict[str, str | None] = {}
        self._finished = False

    def start(self) -> None:
        # Everything finish() needs is imported now: at exit the program may have changed
        # sys.path (the runner replaces sys.path[0]) or the working directory.
        from autonvtx.recorder import native, recording, summary, trace  # noqa: F401

        library = native.library_path()
        if library is None:
            raise UsageError(
                "--trace/--summary: the native recorder is not built in this installation; "
                "reinstall autonvtx with 'pip install --force-reinstall autonvtx' and a C compiler"
            )
        self._directory = tempfile.mkdtemp(prefix="autonvtx-")
        settings = {
            environment.NVTX_INJECTION64_PATH: library,
            environment.RECORD_DIR: self._directory,
        }
        if self.outputs.buffer_mb is not None:
            settings[environment.RECORD_LIMIT_MB] = str(self.outputs.buffer_mb)
        for key, value in settings.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        atexit.register(self.finish)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, self._on_sigterm)

    def cancel(self) -> None:
        """Undo start() when the target never ran (it was not found)."""
        atexit.unregister(self.finish)
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
        self._finished = True

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.finish()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def finish(self) -> None:
        """Flush this process's events, read every process's recording, write the outputs."""
        if self._finished or self._directory is None:
            return
        self._finished = True
        try:
            self._write_outputs(self._directory)
        except Exception as error:  # never turn the user's exit into our traceback
            print(f"autonvtx: could not write the recording: {error}", file=sys.stderr)
        finally:
            shutil.rmtree(self._directory, ignore_errors=True)

    def _write_outputs(self, directory: str) -> None:
        from autonvtx.recorder import native
        from autonvtx.recorder.recording import read_directory
        from autonvtx.recorder.summary import summarize, summary_notes, write_summary
        from autonvtx.recorder.trace import write_chrome_trace

        native.control().flush(os.path.join(directory, f"{os.getpid()}.anr"))
        recordings = read_directory(directory)
        for recording in recordings:
            if recording.pid == os.getpid():
                recording.label = self.outputs.label or recording.label
                _name_live_threads(recording)
        notes = summary_notes(recordings)
        if not any(r.ranges or r.marks for r in recordings):
            notes.append("no NVTX ranges or marks were recorded")
        if self.outputs.summary != SUMMARY_TO_STDERR:  # else the table already ends with them
            for note in notes:
                print(f"autonvtx: {note}", file=sys.stderr)
        if self.outputs.trace is not None:
            write_chrome_trace(recordings, self.outputs.trace)
            print(f"autonvtx: trace written to {self.outputs.trace}", file=sys.stderr)
        if self.outputs.summary is not None:
            write_summary(summarize(recordings), self.outputs.summary, notes=notes)
            if self.outputs.summary != SUMMARY_TO_STDERR:
                print(f"autonvtx: summary written to {self.outputs.summary}", file=sys.stderr)


def _name_live_threads(recording: ProcessRecording) -> None:
    """Give this process's threads their Python names where NVTX named none.

    The OS name of a thread Python started is the process's own (Python before 3.14 does not
    set it), which says nothing; the Python name of every thread still alive is better.
    """
    for thread in threading.enumerate():
        tid = thread.native_id
        if tid is not None and (tid not in recording.thread_names or tid == recording.pid or
                                recording.thread_names[tid] == _process_comm()):
            recording.thread_names[tid] = thread.name


def _process_comm() -> str:
    try:
        with open("/proc/self/comm", encoding="utf-8") as comm:
            return comm.read().strip()
    except OSError:
        return ""
