"""One recording from `autonvtx run`: attach the recorder, then write the trace and summary at exit.

Every process of a run writes its events into one directory, as `<pid>.anr`: the process
`autonvtx run` started, and each child that follows it. A Python child also leaves `<pid>.json`
there when it starts (its pid, parent and label). At exit the first process reads them all; a
note without its recording is a child that died before writing it (a crash, `os._exit`,
SIGKILL) or that still runs, and the trace and summary say so.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

from autonvtx import environment
from autonvtx.errors import TraceFormatError, UsageError
from autonvtx.ranks import RankInfo, detect_rank
from autonvtx.recorder import shutdown
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.outputs import SUMMARY_TO_STDERR, Outputs


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
    default SIGTERM death (`shutdown.on_sigterm`), so the exit status stays what it would have been.
    """

    def __init__(self, outputs: Outputs) -> None:
        self.outputs = outputs
        self._directory: str | None = None
        self._saved_env: dict[str, str | None] = {}
        self._finished = False
        self._pid = os.getpid()

    def start(self) -> None:
        # Everything finish() needs is imported now: at exit the program may have changed
        # sys.path (the runner replaces sys.path[0]) or the working directory.
        import socket  # noqa: F401  (clock_identity() needs it at exit)
        import tempfile

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
        shutdown.on_sigterm(self.finish)

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

    def finish(self) -> None:
        """Flush this process's events, read every process's recording, write the outputs.

        In a child forked without exec (it inherits this object, its atexit entry and its
        SIGTERM handler) it only flushes the child's own events: the parent writes the outputs.
        """
        if os.getpid() != self._pid:
            if self.outputs.children:
                shutdown.flush_process()
            return
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
        from autonvtx.recorder.summary import summarize, summary_notes, write_summary
        from autonvtx.recorder.trace import write_chrome_trace

        native.control().flush(os.path.join(directory, f"{self._pid}.anr"))
        recordings, unreadable = _read_recordings(directory, None if self.outputs.children else self._pid)
        process_notes = read_process_notes(directory) if self.outputs.children else {}
        for recording in recordings:
            if recording.pid == self._pid:
                recording.label = self.outputs.label or recording.label
                _name_live_threads(recording)
            elif recording.pid in process_notes:
                recording.label = str(process_notes[recording.pid].get("label") or "")
        missing = _missing_processes(process_notes, {r.pid for r in recordings})
        for process in missing:
            recordings.append(ProcessRecording(
                pid=process["pid"], ppid=process["ppid"], label=f"{process['label']} (recording missing)"))
        # Capture windows (regions' `capture`): only the events inside them are exported.
        from autonvtx.recorder.window import keep_capture_windows

        windowed = keep_capture_windows(recordings)
        notes = summary_notes(recordings) + unreadable + [_missing_note(p) for p in missing] + windowed
        if not any(r.ranges or r.marks for r in recordings):
            notes.append("no NVTX ranges or marks were recorded")
        if self.outputs.summary != SUMMARY_TO_STDERR:  # else the table already ends with them
            for note in notes:
                print(f"autonvtx: {note}", file=sys.stderr)
        if self.outputs.trace is not None:
            metadata = {**clock_identity(), **_rank_metadata(detect_rank())}
            if missing:
                metadata["missing_processes"] = missing
            write_chrome_trace(recordings, self.outputs.trace, metadata=metadata)
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


# Every recording child


NOTE_SUFFIX = ".json"


def note_process(label: str) -> None:
    """Leave `<pid>.json` in the record directory: this process runs, and how to name it.

    The first process compares these notes with the recordings present to name the children
    whose recording is missing. Written atomically; never raises.
    """
    directory = os.environ.get(environment.RECORD_DIR)
    if not directory:
        return
    pid = os.getpid()
    note = {"pid": pid, "ppid": os.getppid(), "label": label}
    temp = os.path.join(directory, f".{pid}{NOTE_SUFFIX}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as stream:
            json.dump(note, stream)
        os.replace(temp, os.path.join(directory, f"{pid}{NOTE_SUFFIX}"))
    except OSError:
        pass


def read_process_notes(directory: str) -> dict[int, dict[str, Any]]:
    """pid -> note, for every readable note in `directory`."""
    notes: dict[int, dict[str, Any]] = {}
    for path in Path(directory).glob("*" + NOTE_SUFFIX):
        try:
            note = json.loads(path.read_text(encoding="utf-8"))
            notes[int(note["pid"])] = {
                "pid": int(note["pid"]), "ppid": int(note.get("ppid", 0)), "label": str(note.get("label", ""))}
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return notes


def _read_recordings(directory: str, only_pid: int | None) -> tuple[list[ProcessRecording], list[str]]:
    """The recordings in `directory` (only `only_pid`'s when given), sorted by pid, and a note
    per file that could not be read: one bad file costs only its own process's events."""
    from autonvtx.recorder.recording import SUFFIX, read_recording

    recordings: list[ProcessRecording] = []
    unreadable: list[str] = []
    for path in sorted(Path(directory).glob("*" + SUFFIX)):
        if only_pid is not None and path.stem != str(only_pid):
            continue
        try:
            recordings.append(read_recording(path))
        except TraceFormatError as error:
            unreadable.append(f"{error}: the events of process {path.stem} are missing")
    recordings.sort(key=lambda r: r.pid)
    return recordings, unreadable


def _missing_processes(notes: dict[int, dict[str, Any]], recorded: set[int]) -> list[dict[str, Any]]:
    missing = []
    for pid, note in sorted(notes.items()):
        if pid not in recorded:
            missing.append({**note, "reason": "still running" if _is_running(pid) else "ended without writing"})
    return missing


def _missing_note(process: dict[str, Any]) -> str:
    who = f"process {process['pid']} ({process['label']})"
    if process["reason"] == "still running":
        return f"{who} was still running when the recording was written: its events are missing"
    return f"{who} ended without writing its recording (a crash, os._exit or a kill): its events are missing"


def _is_running(pid: int) -> bool:
    """Whether `pid` is alive and not a zombie (a dead child its parent has not waited for)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X", "x")


def clock_identity() -> dict[str, str]:
    """Which CLOCK_MONOTONIC the timestamps are on: the host, and its boot (the clock restarts
    at each boot). Traces with the same `boot_id` line up exactly; `autonvtx merge` aligns
    others through each process's `realtime_offset_ns`."""
    import socket

    identity = {"host": socket.gethostname()}
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            identity["boot_id"] = boot.read().strip()
    except OSError:
        pass
    return identity


def _rank_metadata(info: RankInfo) -> dict[str, object]:
    if not info.is_distributed:
        return {}
    return {"rank": info.rank, "world_size": info.world_size, "local_rank": info.local_rank,
            "launcher": info.launcher}
