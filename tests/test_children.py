"""Child processes run the parent's rules and join its recording: multiprocessing (spawn,
forkserver, fork), ProcessPoolExecutor, subprocess; crashed children, --no-children, and the
bootstrap itself (chaining, idempotence, never raising)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, default_verb, make_file, run_autonvtx

from autonvtx import environment
from autonvtx.config import Config, Rule
from autonvtx.propagate import children
from autonvtx.propagate.workers import multiprocessing_role
from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.trace import read_chrome_trace

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

PYTHON = os.path.basename(sys.executable)


def counts(recording: ProcessRecording) -> Counter[str]:
    return Counter(r.name for r in recording.ranges)


def nested(inner: str, outer: str, recording: ProcessRecording) -> bool:
    """Every `inner` range lies inside an `outer` range of the same thread."""
    outers = [r for r in recording.ranges if r.name == outer]
    return all(
        any(o.tid == i.tid and o.start_ns <= i.start_ns <= i.end_ns <= o.end_ns for o in outers)
        for i in recording.ranges
        if i.name == inner
    )


def only(recordings: list[ProcessRecording], label: str) -> ProcessRecording:
    [recording] = [r for r in recordings if r.label == label]
    return recording


POOL_PROGRAM = """
    import multiprocessing, sys

    def leaf(x):
        return x * 2

    def work(x):
        return leaf(x) + 1

    if __name__ == "__main__":
        context = multiprocessing.get_context(sys.argv[1])
        with context.Pool(2) as pool:
            print(pool.map(work, range(4)))
        process = context.Process(target=work, args=(3,), name="solo")
        process.start()
        process.join()
        print(process.exitcode)
"""

POOL_WORKER = {"spawn": "SpawnPoolWorker-", "forkserver": "ForkServerPoolWorker-", "fork": "ForkPoolWorker-"}


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_multiprocessing_children_run_the_rules_and_join_the_trace(workdir: Path, method: str) -> None:
    make_file(workdir / "program.py", POOL_PROGRAM)
    done = run_autonvtx("-t", "__main__", "program.py", method, cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[1, 3, 5, 7]", "0"]
    recordings = read_chrome_trace(done.trace_path)
    parent = only(recordings, f"{PYTHON} program.py {method}")
    assert counts(parent) == Counter()  # the work happens in the children
    workers = [r for r in recordings if r.label.startswith(POOL_WORKER[method])]
    assert workers
    pooled = sum((counts(r) for r in workers), Counter())
    # leaf is called by work through the script's globals: in spawn and forkserver children
    # those are runpy's copy of __mp_main__, which must see the wrapper too.
    assert pooled == Counter({"work": 4, "leaf": 4})
    solo = only(recordings, "solo")
    assert counts(solo) == Counter({"work": 1, "leaf": 1})
    assert all(nested("leaf", "work", r) for r in [*workers, solo])
    assert "missing_processes" not in done.trace["otherData"]


IDLE_POOL_PROGRAM = """
    import multiprocessing, sys

    def work(x):
        return x * 2

    if __name__ == "__main__":
        with multiprocessing.get_context(sys.argv[1]).Pool(4) as pool:
            print(pool.map(work, [1], chunksize=1))
"""


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_idle_pool_workers_are_named_as_their_siblings(workdir: Path, method: str) -> None:
    # Issue 11, 4: the pool ends its workers (SIGTERM) as soon as the one task is done; those
    # still starting up were named by their command line, or missing, varying run to run.
    make_file(workdir / "program.py", IDLE_POOL_PROGRAM)
    expected = sorted([f"{PYTHON} program.py {method}", *(f"{POOL_WORKER[method]}{i}" for i in range(1, 5))])
    # A worker ended while it started (its SIGTERM handled in the middle of an import the
    # flush needed) was named missing or "ended abnormally" in a few runs out of ten; the
    # deterministic case is tests/test_recorder_faults.py's spawn-child test.
    for _ in range(3):
        done = run_autonvtx("-t", "__main__", "program.py", method, cwd=workdir)
        assert (done.returncode, done.stdout) == (0, "[2]\n"), done.stderr
        labels = sorted(r.label for r in read_chrome_trace(done.trace_path))
        assert labels == expected, done.stderr
        assert "missing" not in done.stderr and "missing_processes" not in done.trace["otherData"]
        assert "abnormally" not in done.stderr


def test_process_pool_executor_subprocess_and_non_python_children(workdir: Path) -> None:
    make_file(
        workdir / "tasks.py",
        """
        def square(x):
            return x * x
    """,
    )
    make_file(
        workdir / "child.py",
        """
        import sys, tasks
        print(tasks.square(int(sys.argv[1])))
    """,
    )
    make_file(
        workdir / "program.py",
        """
        import subprocess, sys
        from concurrent.futures import ProcessPoolExecutor
        import tasks

        if __name__ == "__main__":
            with ProcessPoolExecutor(2) as executor:
                print(sum(executor.map(tasks.square, range(5))))
            subprocess.run([sys.executable, "child.py", "7"], check=True)
            print(subprocess.run(["/bin/sh", "-c", "echo from sh; exit 3"]).returncode)
    """,
    )
    done = run_autonvtx("-v", "-t", "tasks", "program.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["30", "49", "from sh", "3"]
    recordings = read_chrome_trace(done.trace_path)
    child = only(recordings, f"{PYTHON} child.py 7")
    assert counts(child) == Counter({"square": 1})
    executor_workers = [
        r for r in recordings if r.label.startswith(("ForkProcess-", "ForkServerProcess-", "SpawnProcess-"))
    ]
    assert sum((counts(r) for r in executor_workers), Counter()) == Counter({"square": 5})
    # The shell is left alone: it ran as it would have, and nobody waits for its recording.
    assert "missing_processes" not in done.trace["otherData"]
    assert f"({PYTHON} child.py 7): {default_verb()} 1 function in 1 module" in done.stderr


def test_crashed_children_lose_only_their_own_events(workdir: Path) -> None:
    # The crasher dies before it records anything: a child that recorded events before a hard
    # death keeps those its spiller wrote (every 100 ms), and whether that happened before
    # os._exit() depends on the scheduler (a crasher that called work() was named "ended
    # abnormally", its work kept, under load). That case is test_export.py's SIGKILL test,
    # which waits for the spill.
    make_file(
        workdir / "program.py",
        """
        import multiprocessing, os, subprocess, sys

        def work():
            return 1

        if __name__ == "__main__":
            work()
            process = multiprocessing.get_context("fork").Process(target=os._exit, args=(3,), name="crasher")
            process.start()
            process.join()
            killed = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
            killed.wait()
            work()
            print(process.pid, process.exitcode, killed.pid, killed.returncode)
    """,
    )
    done = run_autonvtx("--summary", "-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    crasher, crasher_status, killed, killed_status = map(int, done.stdout.split())
    assert (crasher_status, killed_status) == (3, -9)
    recordings = read_chrome_trace(done.trace_path)
    parent = only(recordings, f"{PYTHON} program.py")
    assert counts(parent) == Counter({"work": 2})
    missing = done.trace["otherData"]["missing_processes"]
    assert {(m["pid"], m["reason"]) for m in missing} == {
        (crasher, "ended without writing"),
        (killed, "ended without writing"),
    }
    assert f"process {crasher} (crasher) ended without writing its recording" in done.stderr
    assert f"process {killed} ({PYTHON} -c import os" in done.stderr
    crashed = only(recordings, "crasher")  # its name; the status is a field of its own
    assert crashed.ranges == [] and crashed.status == "recording missing"
    assert crashed.track_name == "crasher (recording missing)"


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_sigterm_is_handled_even_where_the_main_thread_cannot(workdir: Path, method: str) -> None:
    # Python runs signal handlers in the main thread only, between bytecodes: a main thread
    # that entered a blocking C call just after SIGTERM arrived (a pool worker taking the
    # queue lock its terminating parent holds) never runs one. SIGTERM blocked in the main
    # thread makes that case certain: only autonvtx's watcher thread can see the signal.
    make_file(
        workdir / "program.py",
        """
        import multiprocessing, signal, sys, threading

        def work():
            return 1

        def stuck(lock, ready):
            work()
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            ready.set()
            lock.acquire()

        if __name__ == "__main__":
            context = multiprocessing.get_context(sys.argv[1])
            lock, ready = context.Lock(), context.Event()
            lock.acquire()
            process = context.Process(target=stuck, args=(lock, ready), name="stuck")
            process.start()
            ready.wait()
            process.terminate()
            process.join()
            print(process.exitcode, threading.active_count())
    """,
    )
    done = run_autonvtx("-t", "__main__", "program.py", method, cwd=workdir, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["-15", "1"]  # died of SIGTERM; no thread of ours in sight
    stuck = only(read_chrome_trace(done.trace_path), "stuck")
    assert counts(stuck) == Counter({"stuck": 1, "work": 1})
    assert [r.name for r in stuck.ranges if r.is_open] == ["stuck"]  # written while it waited


def test_no_children_leaves_children_uninstrumented_and_unrecorded(workdir: Path) -> None:
    make_file(
        workdir / "program.py",
        """
        import multiprocessing, os

        def work():
            return 1

        def report():
            work()
            print(os.environ.get("NVTX_INJECTION64_PATH"), "AUTONVTX_RECORD_DIR" in os.environ,
                  __import__("autonvtx").is_instrumented(work), flush=True)

        if __name__ == "__main__":
            work()
            for method in ("spawn", "fork"):
                process = multiprocessing.get_context(method).Process(target=report)
                process.start()
                process.join()
    """,
    )
    done = run_autonvtx("--no-children", "-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    spawned, forked = done.stdout.splitlines()
    assert spawned == "None False False"  # a fresh interpreter: nothing of autonvtx
    assert forked.endswith("True")  # a fork child is a copy: it keeps the wrappers, records nothing
    recordings = read_chrome_trace(done.trace_path)
    assert [r.label for r in recordings] == [f"{PYTHON} program.py"]
    assert counts(recordings[0]) == Counter({"work": 1})


def test_seed_multiprocess_example_shows_both_spawned_processes(workdir: Path) -> None:
    pytest.importorskip("numpy")
    example = workdir / "multiprocess"
    shutil.copytree(REPO / "examples" / "multiprocess", example)
    done = run_autonvtx("--summary", "multiprocess.py", cwd=example)
    assert done.returncode == 0, done.stderr
    recordings = read_chrome_trace(done.trace_path)
    assert counts(only(recordings, f"{PYTHON} multiprocess.py")) == Counter({"main": 1})
    calculate = [r for r in recordings if r.label == "calculate"]
    assert len(calculate) == 2
    for process in calculate:
        assert counts(process) == Counter({"big_computation": 1, "mock generate data": 1, "mean": 1})
        assert nested("mock generate data", "big_computation", process)
        assert nested("mean", "big_computation", process)
    assert {r.color for p in calculate for r in p.ranges if r.name == "mean"} == {0xFF0000FF}


# The bootstrap on its own: a Python started with it on PYTHONPATH


def run_child(code: str, cwd: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    """`python -c CODE` with the bootstrap on its path and the recorder as its NVTX tool (not
    recording: no AUTONVTX_RECORD_DIR)."""
    env = autonvtx_env(**env_extra)
    env.setdefault(environment.PYTHONPATH, children.BOOTSTRAP_DIR)
    env.setdefault(environment.NVTX_INJECTION64_PATH, str(native.library_path()))
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


CONFIG_JSON = Config(rules=(Rule(modules=("tasks",), origin="test"),)).to_json()


def test_bootstrap_chains_the_hidden_sitecustomize_once(workdir: Path) -> None:
    user = make_file(
        workdir / "user" / "sitecustomize.py",
        """
        import os
        os.environ["USER_SITECUSTOMIZE_RUNS"] = str(int(os.environ.get("USER_SITECUSTOMIZE_RUNS", "0")) + 1)
    """,
    ).parent
    # Seen twice on the path (as nested runs would put it): it still runs once.
    path = os.pathsep.join([children.BOOTSTRAP_DIR, children.BOOTSTRAP_DIR, str(user)])
    done = run_child(
        "import os, sys, sitecustomize; from autonvtx import autostart\n"
        "print(os.environ['USER_SITECUSTOMIZE_RUNS'], sitecustomize.__file__, autostart._started)",
        workdir,
        PYTHONPATH=path,
        AUTONVTX_CONFIG=CONFIG_JSON,
    )
    assert done.returncode == 0, done.stderr
    runs, module_file, bootstrapped = done.stdout.split()
    assert (runs, module_file, bootstrapped) == ("1", str(user / "sitecustomize.py"), "True")


def test_a_failing_hidden_sitecustomize_is_reported_as_python_would(workdir: Path) -> None:
    user = make_file(workdir / "user" / "sitecustomize.py", "raise RuntimeError('broken site')\n").parent
    path = os.pathsep.join([children.BOOTSTRAP_DIR, str(user)])
    done = run_child("print('ran')", workdir, PYTHONPATH=path)
    plain = run_child("print('ran')", workdir, PYTHONPATH=str(user))
    assert (done.returncode, done.stdout, done.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert "Error in sitecustomize" in done.stderr


def test_bootstrap_never_breaks_the_child(workdir: Path) -> None:
    done = run_child("print('ran')", workdir, AUTONVTX_CONFIG="{not json")
    assert done.returncode == 0
    assert done.stdout == "ran\n"
    assert done.stderr.startswith("autonvtx: warning: process ")
    assert "not instrumented" in done.stderr


def test_bootstrap_instruments_the_child_with_the_parents_rules(workdir: Path) -> None:
    make_file(workdir / "tasks.py", "def square(x):\n    return x * x\n")
    done = run_child(
        "import autonvtx, tasks; print(autonvtx.is_instrumented(tasks.square))", workdir, AUTONVTX_CONFIG=CONFIG_JSON
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"


def test_a_child_left_alone_drops_autonvtx_from_its_environment(workdir: Path) -> None:
    library = native.library_path()
    assert library is not None
    env = {
        environment.CHILDREN: "off",
        environment.NVTX_INJECTION64_PATH: library,
        environment.RECORD_DIR: str(workdir),
        environment.PYTHONPATH: os.pathsep.join([children.BOOTSTRAP_DIR, "/elsewhere"]),
    }
    done = run_child("import json, os; print(json.dumps(dict(os.environ)))", workdir, **env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen[environment.PYTHONPATH] == "/elsewhere"
    assert not any(name.startswith(("AUTONVTX_", "NVTX_")) for name in seen)


@pytest.mark.parametrize(
    ("argv", "role"),
    [
        (
            [
                sys.executable,
                "-c",
                "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
                "--multiprocessing-fork",
            ],
            "spawn",
        ),
        (
            [sys.executable, "-B", "-c", "from multiprocessing.forkserver import main; main(3, 5, ['__main__'])"],
            "forkserver",
        ),
        ([sys.executable, "-c", "from multiprocessing.resource_tracker import main;main(3)"], "helper"),
        ([sys.executable, "-c", "print('from multiprocessing.spawn import')"], None),
        ([sys.executable, "train.py", "-c", "from multiprocessing.spawn import x"], None),
        ([sys.executable, "train.py"], None),
    ],
)
def test_multiprocessing_role(argv: list[str], role: str | None) -> None:
    assert multiprocessing_role(argv) == role
