"""One recording from `autonvtx run`: attach the recorder, then write the trace and summary at exit.

Every process of a run writes its events into one directory, as `<pid>.anr`: the process
`autonvtx run` started, and each child that follows it. A Python child also leaves `<pid>.json`
there when it starts (its pid, parent and label). At exit the first process reads them all; a
note without its recording is a child that died before writing it (a crash, `os._exit`,
SIGKILL) or that still runs, and the trace and summary say so.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autonvtx import environment
from autonvtx.errors import UsageError
from autonvtx.ranks import RankInfo, detect_rank
from autonvtx.recorder import flight, shutdown
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.outputs import SUMMARY_TO_STDERR, Outputs
from autonvtx.recorder.results import NOTE_SUFFIX, read_process_notes
from autonvtx.recorder.watch import Watch, start_watcher


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
        # Named from the directory autonvtx started in, wherever the program goes meanwhile;
        # messages keep the names the user gave.
        self.outputs = outputs.absolute()
        self._given = outputs
        self._directory: str | None = None
        self._saved_env: dict[str, str | None] = {}
        self._finished = False
        self._keep_directory = False
        self._failed = False  # an output could not be written: the run's status says so (FAILED_STATUS)
        self._pid = os.getpid()
        self._watch: Watch | None = None
        self._alive = True  # False when written by the watcher after this process died

    def start(self) -> None:
        # Everything finish() needs is imported now: at exit the program may have changed
        # sys.path (the runner replaces sys.path[0]) or the working directory.
        import socket  # noqa: F401  (clock_identity() needs it at exit)
        import tempfile

        from autonvtx.recorder import native, perfetto, recording, results, trace, writer  # noqa: F401
        from autonvtx.report.render import render  # noqa: F401
        from autonvtx.stats import model, python_twin  # noqa: F401

        library = native.library_path()
        if library is None:
            raise UsageError(f"--trace/--summary: {_unbuilt()}")
        self._directory = _record_directory(self.outputs.trace) or tempfile.mkdtemp(prefix="autonvtx-")
        watcher_env = _clean_environment()
        if self.outputs.flight is not None:  # the watcher writes each window's trace as it comes
            watcher_env.update(flight.watcher_settings(self._directory, self._state_command("flight")))
        # If this process dies without its exit, the watcher runs `write_from_state` below.
        self._watch = start_watcher(self._state_command("session"), watcher_env)
        settings = {
            environment.NVTX_INJECTION64_PATH: library,
            environment.RECORD_DIR: self._directory,
        }
        if self.outputs.buffer_mb is not None:
            settings[environment.RECORD_LIMIT_MB] = str(self.outputs.buffer_mb)
        if self.outputs.keep == "last":
            settings[environment.RECORD_KEEP] = "last"
        if self.outputs.flight is not None:
            settings.update(flight.recorder_settings(self.outputs, self._given.trace))
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
        if self._watch is not None:
            self._watch.say_done()

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
        interrupted = 0
        try:
            with shutdown.interruptible(), _standard_imports():
                self._write_outputs(self._directory)
        except (KeyboardInterrupt, shutdown.Interrupted, SystemExit) as stop:
            # Ctrl-C or SIGTERM while writing (or the program's own handler of a signal, ending
            # it by SystemExit): keep the recording, leave no partial output, and end as that
            # signal would have ended the program.
            interrupted = (
                stop.signum
                if isinstance(stop, shutdown.Interrupted)
                else signal.SIGINT
                if isinstance(stop, KeyboardInterrupt)
                else 0
            )
            self._keep_directory = True
            self._remove_partial_outputs()
            cause = signal.Signals(interrupted).name if interrupted else "the program's exit"
            print(
                f"autonvtx: stopped by {cause} while writing the outputs; "
                f"the events are kept in {self._directory} ({self._recover_command()})",
                file=sys.stderr,
            )
        except Exception as error:  # never turn the user's exit into our traceback
            self._fail(f"could not write the recording: {error}", keep=True)
        finally:
            if not self._keep_directory:
                flight.remove_record_directory(self._directory)
            if self._watch is not None:
                self._watch.say_done()
        if self._failed and not interrupted:
            _fail_exit()
        if interrupted:
            shutdown.die_of(interrupted)

    def _fail(self, what: str, *, keep: bool) -> None:
        """Say what could not be written, and how to get it still; the run's status will say it too."""
        self._failed = True
        if not keep:
            print(f"autonvtx: {what}", file=sys.stderr)
            return
        self._keep_directory = True
        print(
            f"autonvtx: {what}; the events are kept in {self._directory}: "
            f"'{self._recover_command()}' writes the trace once that is fixed",
            file=sys.stderr,
        )

    def _recover_command(self) -> str:
        target = self._given.trace if self._given.trace is not None else "trace.json"
        return f"autonvtx recover {self._directory} -o {target}"

    def finish_after_death(self) -> None:
        """In the writer the watcher starts: the outputs from what the dead program spilled."""
        directory = self._directory
        if directory is None or not os.path.isdir(directory):
            return
        self._finished = True
        lost = (
            " (with --keep last its events stay in memory until the exit: they are lost)"
            if self.outputs.keep == "last"
            else ""
        )
        print(
            f"autonvtx: the program (pid {self._pid}) ended without running its exit (os._exit, a signal or a "
            f"crash){lost}; writing the outputs from its recording in {directory}",
            file=sys.stderr,
        )
        self._remove_partial_outputs()  # the program's, if it died while writing them
        try:
            self._write_outputs(directory)
        except Exception as error:
            self._fail(f"could not write the recording: {error}", keep=True)
        finally:
            if not self._keep_directory:
                shutil.rmtree(directory, ignore_errors=True)

    def _state_command(self, module: str) -> list[str]:
        """`python -I -c` calling `write_from_state` of `autonvtx.recorder.<module>`, in a fresh
        interpreter that imports this same autonvtx, with this session's state (JSON) and the
        command's further arguments."""
        import dataclasses

        given = {"trace": self._given.trace, "summary": self._given.summary}
        state = {
            "outputs": dataclasses.asdict(self.outputs),
            "given": given,
            "directory": self._directory,
            "pid": self._pid,
            "metadata": {**clock_identity(), **_rank_metadata(detect_rank())},
        }
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = (
            f"import sys; sys.path.insert(0, {root!r}); "
            f"from autonvtx.recorder.{module} import write_from_state; write_from_state(*sys.argv[1:])"
        )
        return [sys.executable, "-I", "-c", code, json.dumps(state)]

    def _remove_partial_outputs(self) -> None:
        """The hidden temporary files this process was writing the outputs to (`.<name>.<pid>.*.tmp`
        beside each output), left by a write interrupted at any point."""
        for output in (self.outputs.trace, self.outputs.summary):
            if output is None or output == SUMMARY_TO_STDERR:
                continue
            directory, name = os.path.split(os.path.abspath(output))
            for temp in Path(directory).glob(f".{glob.escape(name)}.{self._pid}.*.tmp"):
                try:
                    temp.unlink()
                except OSError:
                    pass

    def _write_outputs(self, directory: str) -> None:
        from autonvtx.recorder import native
        from autonvtx.recorder.results import Request, print_notes, recording_files, write_results
        from autonvtx.report.render.render import write_summary
        from autonvtx.report.sideviews import statistics_view, write_side_table

        try:
            if self._alive:
                native.control().flush(os.path.join(directory, f"{self._pid}.anr"))
        except OSError as error:
            if not os.path.isdir(directory):
                self._fail(
                    f"the recording directory {directory} was removed while the program ran: "
                    "the events it held are lost, and no trace or summary was written",
                    keep=False,
                )
                return
            self._fail(f"could not write this process's events: {error.strerror or error}", keep=True)
            return
        process_notes = read_process_notes(directory) if self.outputs.children else {}
        labels = {pid: str(note.get("label") or "") for pid, note in process_notes.items()}
        labels[self._pid] = self.outputs.label
        watched = self.outputs.flight is not None
        metadata: dict[str, Any] = {**clock_identity(), **_rank_metadata(detect_rank())}
        if watched and self.outputs.summary is None:  # no events were kept: only windows
            dropped = native.control().stats().dropped if self._alive else 0
            lost = [f"{dropped:,} events were dropped at the memory bound (windows lack them; raise --buffer-mb)"]
            print_notes(self._write_flight_windows(directory, labels, metadata) + (lost if dropped else []))
            return
        recorded = {int(p.stem) for p in recording_files(directory) if p.stem.isdigit()}
        missing = _missing_processes(process_notes, recorded)
        if missing:
            metadata["missing_processes"] = missing
        request = Request(
            trace=None if watched else self.outputs.trace,
            summary=self.outputs.summary,
            labels=labels,
            only_pid=None if self.outputs.children else self._pid,
            missing=missing,
            metadata=metadata,
            adjust=self._adjust,
        )
        if self.outputs.summary_options is not None:
            request.options = statistics_view(self.outputs.summary_options)  # --pair, --memory: every row
        try:
            results = write_results(directory, request)
        except OSError as error:
            which = (
                f"--trace: could not write '{self._given.trace}'"
                if self.outputs.trace is not None
                else "--summary: could not read the recording"
            )
            self._fail(f"{which}: {error.strerror or error}", keep=True)
            return
        notes = results.notes + [_missing_note(p) for p in missing]
        if watched:
            notes += self._write_flight_windows(directory, labels, metadata)
        if self.outputs.summary != SUMMARY_TO_STDERR:  # else the table already ends with them
            print_notes(notes)
        if self.outputs.trace is not None and not watched:
            print(
                f"autonvtx: trace written to {self._given.trace} (open it in https://ui.perfetto.dev)", file=sys.stderr
            )
        if self.outputs.summary is not None:
            try:
                if not write_side_table(results.stats, directory, self.outputs, notes):
                    write_summary(results.stats, self.outputs.summary, notes=notes, empty=results.empty)
            except OSError as error:
                self._fail(f"--summary: could not write '{self._given.summary}': {error.strerror or error}", keep=True)
                return
            if self.outputs.summary != SUMMARY_TO_STDERR:
                print(f"autonvtx: summary written to {self._given.summary}", file=sys.stderr)

    def _write_flight_windows(self, directory: str, labels: dict[int, str], metadata: dict[str, Any]) -> list[str]:
        """Each window the recorder wrote, as `TRACE.flight-N.EXT` (`flight.write_windows`); notes."""
        notes, failures = flight.write_windows(directory, self.outputs, self._given.trace, labels, metadata)
        for failure in failures:
            self._fail(failure, keep=True)
        return notes

    def _adjust(self, recordings: list[ProcessRecording]) -> None:
        for recording in recordings:
            if recording.pid == self._pid:
                if self._alive:
                    _name_live_threads(recording)
            elif recording.status == "ended abnormally" and _is_running(recording.pid):
                recording.status = "still running"  # not dead: its events so far are all there is


RECORD_DIRECTORY_SUFFIX = ".recording"

# The run's status when the program ended well (0) but an output it asked for was not written.
FAILED_STATUS = 3


def _fail_exit() -> None:
    """The run's status becomes FAILED_STATUS if the program's would have been 0."""
    from autonvtx.recorder import native

    try:
        native.control().fail_exit(FAILED_STATUS)
    except OSError:
        pass


def _clean_environment() -> dict[str, str]:
    """This process's environment without what makes a process recorded or instrumented: the
    watcher and the writer it may start are neither."""
    ours = {
        environment.NVTX_INJECTION64_PATH,
        environment.RECORD_DIR,
        environment.RECORD_LIMIT_MB,
        environment.RECORD_KEEP,
        *environment.FLIGHT_VARIABLES,
        environment.RULES,
        environment.CONFIG,
    }
    return {key: value for key, value in os.environ.items() if key not in ours}


def write_from_state(state: str) -> None:
    """The watcher's writer: the outputs of a run whose first process died without its exit
    (`RecordingSession._state_command` says what to write)."""
    from autonvtx.stats.model import ViewOptions

    values = json.loads(state)
    view, watch = values["outputs"].pop("summary_options"), values["outputs"].pop("flight")
    watched = flight.Flight(**watch) if watch is not None else None
    outputs = Outputs(**values["outputs"], summary_options=ViewOptions(**view) if view else None, flight=watched)
    session = RecordingSession(Outputs(**values["given"]))
    session.outputs = outputs
    session._directory, session._pid, session._alive = values["directory"], values["pid"], False
    session.finish_after_death()


def _unbuilt() -> str:
    """Why the recorder library is missing, and what to do: most often a source checkout's
    ./autonvtx, imported from the working directory (`python -m autonvtx` there), shadows the
    installed package (the name autonvtx on PyPI is another project: never advise it)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../autonvtx
    if os.path.dirname(package) == os.getcwd():
        return (
            f"the native recorder is not built in {package}, the source folder imported from the working"
            " directory; run from another directory (the installed autonvtx is then used), or build it"
            " here with 'pip install -e .'"
        )
    return (
        f"the native recorder is not built in this installation ({package}); install autonvtx again"
        " from its source with a C compiler ('pip install .' in a clone of autonvtx)"
    )


def _record_directory(trace: str | None) -> str | None:
    """`<trace>.recording/` beside the trace: where a run killed before writing it (SIGKILL,
    os._exit) leaves its events for `autonvtx recover`. One left by an earlier run that holds
    events nobody recovered is moved aside (`<trace>.recording.N`, and said), never deleted; one
    holding no events is replaced; one a live process still writes to (another rank given the
    same trace name) is left alone, and this run records into a temporary directory instead."""
    if trace is None:
        return None
    directory = Path(trace + RECORD_DIRECTORY_SUFFIX).absolute()  # children may change directory
    if directory.is_dir():
        entries = list(directory.iterdir())
        if any(p.suffix not in (".anr", ".json", ".tmp") and not flight.is_window(p) for p in entries) or any(
            p.stem.isdigit() and _is_running(int(p.stem)) for p in entries
        ):
            return None
        if any(p.suffix == ".anr" for p in entries):
            if not _move_aside(directory, trace):
                return None
        else:
            shutil.rmtree(directory, ignore_errors=True)
    try:
        directory.mkdir()
    except OSError:  # taken meanwhile, or not writable: a temporary directory serves
        return None
    return str(directory)


@contextlib.contextmanager
def _standard_imports() -> Iterator[None]:
    """While the outputs are written: importlib's own finders on sys.meta_path, whatever the
    program left there. Writing imports (a codec, the exporter's modules); a program that emptied
    sys.meta_path ends normally under Python, and its trace must be written all the same. The
    program's list is put back as it was."""
    bootstrap = sys.modules.get("_frozen_importlib")
    external = sys.modules.get("_frozen_importlib_external")
    standard = [
        finder
        for finder in (
            getattr(bootstrap, "BuiltinImporter", None),
            getattr(bootstrap, "FrozenImporter", None),
            getattr(external, "PathFinder", None),
        )
        if finder is not None
    ]
    missing = [finder for finder in standard if finder not in sys.meta_path]
    if not missing:
        yield
        return
    saved = list(sys.meta_path)
    sys.meta_path.extend(missing)
    try:
        yield
    finally:
        sys.meta_path[:] = saved


def _move_aside(directory: Path, trace: str) -> bool:
    """An earlier run's unrecovered events moved to the first free `<directory>.N`, and the move
    said with the command that recovers them; False where it cannot be moved (this run then
    records elsewhere and the events stay where they are)."""
    for number in range(1, 1000):
        aside = directory.with_name(f"{directory.name}.{number}")
        if aside.exists() or aside.is_symlink():
            continue
        try:
            directory.rename(aside)
        except OSError:
            return False
        print(
            f"autonvtx: {directory} held the events of an earlier run that were never recovered; "
            f"moved them to {aside} ('autonvtx recover {aside} -o {trace}' writes their trace)",
            file=sys.stderr,
        )
        return True
    return False


def _name_live_threads(recording: ProcessRecording) -> None:
    """Give this process's threads their Python names where NVTX named none.

    The OS name of a thread Python started is the process's own (Python before 3.14 does not
    set it), which says nothing; the Python name of every thread still alive is better.
    """
    for thread in threading.enumerate():
        tid = thread.native_id
        if tid is not None and (
            tid not in recording.thread_names or tid == recording.pid or recording.thread_names[tid] == _process_comm()
        ):
            recording.thread_names[tid] = thread.name


def _process_comm() -> str:
    try:
        with open("/proc/self/comm", encoding="utf-8") as comm:
            return comm.read().strip()
    except OSError:
        return ""


# Every recording child


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
    return {"rank": info.rank, "world_size": info.world_size, "local_rank": info.local_rank, "launcher": info.launcher}
