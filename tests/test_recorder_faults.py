"""The recorder under faults: memory running out, a program that closes every descriptor, the
recording directory removed, the disk full, and the user interrupting the exit-time write.

Every case runs a real program in a subprocess, under the real recorder, and reads back what it
left: what is kept must be exactly true (never half a range), and what is lost must be said.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import make_file, run_autonvtx

import autonvtx
from autonvtx import environment
from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.recorder.recording import read_directory
from autonvtx.recorder.session import FAILED_STATUS

LIBRARY = native.library_path()
pytestmark = pytest.mark.skipif(LIBRARY is None, reason="the native recorder is not built")


def recorder_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in (environment.RECORD_LIMIT_MB, environment.RECORDER_MODE, environment.RECORD_KEEP):
        env.pop(name, None)
    env[environment.NVTX_INJECTION64_PATH] = str(LIBRARY)
    package_root = str(Path(autonvtx.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def parents(recording: ProcessRecording) -> dict[Range, Range | None]:
    """Each push range's enclosing push range on its thread and domain, from the times alone."""
    result: dict[Range, Range | None] = {}
    pushes = sorted(
        (r for r in recording.ranges if r.kind == "push"), key=lambda r: (r.tid, r.domain, r.start_ns, -r.end_ns)
    )
    stack: list[Range] = []
    for r in pushes:
        while stack and (stack[-1].tid, stack[-1].domain) != (r.tid, r.domain):
            stack.clear()
        while stack and stack[-1].end_ns <= r.start_ns:
            stack.pop()
        if stack:
            assert r.end_ns <= stack[-1].end_ns, f"{r} overlaps {stack[-1]} without nesting in it"
        result[r] = stack[-1] if stack else None
        stack.append(r)
    return result


# A hot program: 10 outer ranges, each of 3,000 middle ranges of 20 leaves, and a start/end
# range per middle one. 1,290,020 events; a 1 MiB budget holds a few per cent at a time.
HOT_PROGRAM = """
    import os, sys, nvtx
    from autonvtx.recorder import native
    domain = nvtx.get_domain("hot")
    outer, middle, leaf, span = (domain.get_event_attributes(message=m) for m in ("outer", "middle", "leaf", "span"))
    emitted = 0
    for i in range(10):
        domain.push_range(outer)
        for j in range(3000):
            domain.push_range(middle)
            started = domain.start_range(span)
            for k in range(20):
                domain.push_range(leaf)
                domain.pop_range()
            domain.end_range(started)
            domain.pop_range()
        domain.pop_range()
    emitted = 10 * (2 + 3000 * (4 + 40))
    if not os.environ.get("AUTONVTX_RECORD_DIR"):  # in memory only: written here, at the end
        native.control().flush(os.path.join(sys.argv[1], f"{os.getpid()}.anr"))
    print(emitted)
"""


@pytest.mark.parametrize("mode", ["spilled", "in-memory"])
def test_a_full_buffer_drops_whole_ranges_only(tmp_path: Path, mode: str) -> None:
    script = make_file(tmp_path / "hot.py", HOT_PROGRAM)
    record_dir = tmp_path / "recording"
    record_dir.mkdir()
    env = recorder_env(AUTONVTX_RECORD_LIMIT_MB="1", AUTONVTX_RECORD_DIR=str(record_dir) if mode == "spilled" else "")
    proc = subprocess.run(
        [sys.executable, str(script), str(record_dir)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    emitted = int(proc.stdout.split()[-1])
    (recording,) = read_directory(record_dir)
    assert recording.dropped_events > 0, "the budget should have been too small"
    # Nothing half kept: every range closed by its own pop or end, no pop without its push.
    assert recording.unmatched_pops == 0
    assert not [r for r in recording.ranges if r.is_open]
    assert 2 * len(recording.ranges) + recording.dropped_events == emitted
    names = Counter(r.name for r in recording.ranges)
    assert names["outer"] <= 10 and names["middle"] <= 30_000 and names["leaf"] <= 600_000
    assert names["span"] <= names["middle"] + 30_000
    # Nothing re-nested: a leaf is always in a middle range, a middle one in an outer one.
    expected_parent = {"outer": None, "middle": "outer", "leaf": "middle"}
    wrong = Counter(
        (r.name, p.name if p else None)
        for r, p in parents(recording).items()
        if (p.name if p else None) != expected_parent[r.name]
    )
    assert not wrong, wrong
    leaves = [r for r in recording.ranges if r.name == "leaf"]
    assert max(r.duration_ns for r in leaves) < max(r.duration_ns for r in recording.ranges if r.name == "middle")


def test_a_program_that_closes_every_descriptor_keeps_its_own_files(workdir: Path) -> None:
    # A daemon closes every descriptor it did not open, then opens its own files: they get the
    # lowest free numbers, which the recorder's file may have had. Nothing of ours may land there.
    make_file(
        workdir / "daemon.py",
        """
        import os, time

        def tick():
            return 1

        def ticking(seconds, each=lambda: None):
            calls, deadline = 0, time.monotonic() + seconds
            while time.monotonic() < deadline:
                tick()
                each()
                calls += 1
                time.sleep(0.001)
            return calls

        calls = ticking(0.3)  # the recorder has written its file: it has had a descriptor
        os.closerange(3, 1024)
        with open("mine.txt", "w") as mine:  # the lowest free number: perhaps the recorder's
            lines = ticking(0.5, lambda: (mine.write("line\\n"), mine.flush()))  # several writes of ours
        print(calls + lines, lines)
    """,
    )
    done = run_autonvtx("-t", "__main__", "daemon.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    calls, lines = map(int, done.stdout.split())
    assert (workdir / "mine.txt").read_bytes() == b"line\n" * lines
    assert [r["name"] for r in done.ranges()].count("tick") == calls


# Many ranges, so that writing the trace at exit takes a while; a thread of the program sends
# the signal as soon as the trace's temporary file appears, in the middle of that write.
SIGNALLED_AT_EXIT = """
    import glob, os, signal, sys, threading, time

    def tick():
        return 1

    def signal_when_writing(signum):
        while not glob.glob(".trace.json.*.tmp"):
            time.sleep(0.0005)
        os.kill(os.getpid(), signum)

    # Ctrl-C on, as in a terminal: a run started with SIGINT ignored (a background job of a
    # script) keeps it ignored, rightly, and would end with status 0.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for _ in range(300_000):
        tick()
    threading.Thread(target=signal_when_writing, args=(int(sys.argv[1]),), daemon=True).start()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_exit_time_write_keeps_the_recording(workdir: Path, signum: int) -> None:
    make_file(workdir / "program.py", SIGNALLED_AT_EXIT)
    done = run_autonvtx("-t", "__main__", "program.py", str(int(signum)), cwd=workdir)
    assert done.returncode == -signum, done.stderr  # a shell shows 130 or 143
    assert "Traceback" not in done.stderr
    recording = workdir / "trace.json.recording"
    assert f"{signal.Signals(signum).name} while writing the outputs" in done.stderr
    assert f"autonvtx recover {recording}" in done.stderr
    assert not (workdir / "trace.json").exists()
    assert not list(workdir.glob(".trace.json*"))  # no partial output left
    (process,) = read_directory(recording)
    assert [r.name for r in process.ranges].count("tick") == 300_000 and process.ended_normally


# A spawn child as multiprocessing starts one under autonvtx (SIGTERM held back by its parent,
# prepare() called with its name), with a SIGTERM that lands while the recorder's control
# module is being imported: the moment that made pool workers ended by their pool read as
# missing or "ended abnormally" in a few runs out of ten.
SIGTERM_MID_IMPORT = """
    import importlib.abc, importlib.machinery, multiprocessing.spawn, os, signal, sys

    class SignalMidImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "autonvtx.recorder.native":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            execute = spec.loader.exec_module
            def exec_module(module):
                os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode, if at all
                execute(module)
            spec.loader.exec_module = exec_module
            return spec

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    from autonvtx.propagate import workers
    assert "autonvtx.recorder.native" not in sys.modules
    sys.meta_path.insert(0, SignalMidImport())
    workers.install(None, record=True, role="spawn")
    print(os.getpid(), flush=True)
    # What the parent sends (workers._UNBLOCK_KEY): it held SIGTERM back for this child.
    multiprocessing.spawn.prepare({"name": "early", "autonvtx_unblock_sigterm": True})
    print("not ended by SIGTERM")
"""


def test_a_sigterm_while_a_spawn_child_starts_still_writes_its_recording(tmp_path: Path) -> None:
    script = make_file(tmp_path / "child.py", SIGTERM_MID_IMPORT)
    record_dir = tmp_path / "recording"
    record_dir.mkdir()
    env = recorder_env(AUTONVTX_RECORD_DIR=str(record_dir))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGTERM, (proc.stdout, proc.stderr)
    pid = int(proc.stdout.split()[0])
    assert (record_dir / f"{pid}.json").exists()  # named itself
    assert (record_dir / f"{pid}.anr").exists(), proc.stderr  # and wrote its recording
    (recording,) = read_directory(record_dir)
    assert recording.pid == pid and recording.ended_normally


def test_a_recording_directory_removed_mid_run_is_said(workdir: Path) -> None:
    make_file(
        workdir / "program.py",
        """
        import os, shutil, time

        def tick():
            return 1

        tick()
        time.sleep(0.25)  # written once
        shutil.rmtree(os.environ["AUTONVTX_RECORD_DIR"])
        tick()
    """,
    )
    done = run_autonvtx("--summary", "-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == FAILED_STATUS, done.stderr  # the program's 0, but an output is missing
    assert "trace.json.recording was removed while the program ran" in done.stderr
    assert "no NVTX ranges were recorded" not in done.stderr
    assert not (workdir / "trace.json").exists()


def test_a_full_disk_is_said_and_leaves_a_readable_recording(workdir: Path) -> None:
    # A file size limit fails the recorder's writes as a full disk does (EFBIG for ENOSPC).
    make_file(
        workdir / "program.py",
        """
        import os, resource, signal, time

        def tick():
            return 1

        tick()
        time.sleep(0.25)  # written once
        own = os.path.join(os.environ["AUTONVTX_RECORD_DIR"], f"{os.getpid()}.anr")
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(own) + 100, resource.RLIM_INFINITY))
        for _ in range(20_000):
            tick()
        time.sleep(0.25)  # a write that fails half way
    """,
    )
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == FAILED_STATUS, done.stderr  # the program's 0, but an output is missing
    recording = workdir / "trace.json.recording"
    assert "could not write this process's events" in done.stderr
    assert os.strerror(27) in done.stderr  # EFBIG: what happened, not an I/O error
    assert f"autonvtx recover {recording}" in done.stderr
    (process,) = read_directory(recording)  # what was written before is intact
    assert [r.name for r in process.ranges] == ["tick"]


def test_a_full_disk_while_the_trace_is_written_names_the_trace(workdir: Path) -> None:
    # The recording fits under the limit, the trace (text, several times larger) does not.
    make_file(
        workdir / "program.py",
        """
        import resource, signal

        def tick():
            return 1

        for _ in range(20_000):
            tick()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        # 40 bytes a range in the recording, over 100 in the trace.
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000 * 80, resource.RLIM_INFINITY))
    """,
    )
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == FAILED_STATUS, done.stderr  # the program's 0, but an output is missing
    recording = workdir / "trace.json.recording"
    assert f"cannot write the trace: {os.strerror(27)}" in done.stderr  # not an I/O error on the input
    assert f"autonvtx recover {recording}" in done.stderr
    assert not list(workdir.glob(".trace.json*"))
    (process,) = read_directory(recording)
    assert len(process.ranges) == 20_000


def test_a_programs_own_sigterm_handler_during_the_exit_time_write_keeps_the_recording(workdir: Path) -> None:
    # The program handles SIGTERM itself (sys.exit): autonvtx leaves its handler in charge, and
    # the SystemExit it raises in the middle of the write must not cost the recording.
    make_file(
        workdir / "program.py",
        SIGNALLED_AT_EXIT
        + """
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(3))
""",
    )
    done = run_autonvtx("-t", "__main__", "program.py", str(int(signal.SIGTERM)), cwd=workdir)
    recording = workdir / "trace.json.recording"
    assert "stopped by the program's exit while writing the outputs" in done.stderr, done.stderr
    assert f"autonvtx recover {recording}" in done.stderr
    assert not list(workdir.glob(".trace.json*"))
    (process,) = read_directory(recording)
    assert [r.name for r in process.ranges].count("tick") == 300_000


# Registering a domain scanned a list of every domain, and strings sat in a fixed table of 4096
# chains: 100k domains took 23 s inside the program and 1M strings 32 s (issue 21, item 5).
# With indexes that grow, 200k domains and 1.2M strings take about 5 s here (under a loaded
# machine 10-15 s); the quadratic recorder took about 90 s, past the timeout.
MANY_NAMES = """
    import sys, nvtx
    domains, strings = int(sys.argv[1]), int(sys.argv[2])
    for i in range(domains):
        d = nvtx.get_domain(f"d{i}")
        d.get_registered_string(f"r{i}")
        d.push_range(d.get_event_attributes(message=f"s{i}"))
        d.pop_range()
    s = nvtx.get_domain("strings")
    for i in range(strings):
        s.get_registered_string(f"t{i}")
    print("done")
"""


def test_many_domains_and_registered_strings_register_in_linear_time(workdir: Path) -> None:
    # Four times the names must cost about four times the CPU (quadratic registration: sixteen).
    # CPU time of the finished children, not wall time: the machine may be busy with other tests.
    make_file(workdir / "prog.py", MANY_NAMES)

    def cpu_seconds(domains: int, strings: int) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = run_autonvtx("--summary", "prog.py", str(domains), str(strings), cwd=workdir, trace=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "done\n"
        last = domains - 1
        assert f"d{last}:s{last}" in done.stderr and "d0:s0" in done.stderr  # every domain's range, named
        return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)

    small = cpu_seconds(50_000, 250_000)
    large = cpu_seconds(200_000, 1_000_000)
    assert large < 8 * small, f"200k domains and 1.2M strings took {large:.1f} s of CPU, 4x fewer {small:.1f} s"
