"""A multiprocessing child ended by SIGTERM ends promptly, whichever of its threads the kernel hands
the signal to, with its events kept; and a program's own SIGTERM handler stays the one that runs.

Python runs a signal handler in the main thread only, between bytecodes. A child with threads of
no Python's (an NVTX tool's, CUDA's, OpenBLAS's) may take SIGTERM on one of them: CPython's
C-level handler runs there, and the main thread, waiting in C for a task its terminating pool
will never send, never runs the Python one (as when the main thread took it just before it
entered the wait). Under nsys a fork pool worker hung so now and then, in `with Pool()`. Here
the case is made certain without nsys: the child starts a native thread (pthread_create through
ctypes, SIGTERM unblocked) and then blocks SIGTERM in its main thread, which waits in C; only the
native thread (or autonvtx's own watcher) can take the signal.

"Another NVTX tool" is the native recorder loaded from a copy: a real injection library that is
not autonvtx's, so autonvtx ends the process through C exit(143), as under nsys (termination.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, another_nvtx_tool, make_file, run_autonvtx

from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.trace import read_chrome_trace

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

METHODS = ["fork", "spawn"]
WAITS = ["lock", "read"]

# Every wait is bounded: a child that lives on fails the test (its status reads "alive"), it
# does not hang it.
NATIVE_THREAD = """
    import ctypes, multiprocessing, signal, sys, threading, time

    def start_native_thread():
        # A thread of no Python's that does not block SIGTERM (a library's or a tool's may not):
        # it idles in pause(), which returns once a signal's C-level handler ran there.
        libc = ctypes.CDLL(None)
        libc.pthread_create.argtypes = [ctypes.c_void_p] * 4
        thread = ctypes.c_ulong()
        assert libc.pthread_create(ctypes.byref(thread), None, ctypes.cast(libc.pause, ctypes.c_void_p), None) == 0

    def only_other_threads_take_sigterm():
        start_native_thread()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def work():
        return 1
"""

# The child waits in C for what never comes, as a pool worker idle in its task loop waits for
# the next task: on the task queue's lock (sem_wait), or reading the queue's pipe.
STUCK = (
    NATIVE_THREAD
    + """
    def stuck(lock, reader, ready):
        work()
        only_other_threads_take_sigterm()
        ready.set()
        if sys.argv[2] == "lock":
            lock.acquire()
        else:
            reader.recv()

    if __name__ == "__main__":
        context = multiprocessing.get_context(sys.argv[1])
        lock, ready = context.Lock(), context.Event()
        reader, writer = context.Pipe(duplex=False)
        lock.acquire()
        process = context.Process(target=stuck, args=(lock, reader, ready), name="stuck")
        process.start()
        ready.wait()
        process.terminate()
        process.join(60)
        if process.exitcode is None:
            process.kill()
            process.join()
            print("alive")
        print(process.exitcode)
"""
)

# A program's own handler, set in the child, is the one that runs: autonvtx's watcher sees the
# same SIGTERM (through the wakeup fd) and must leave it to the program. The main thread wakes
# often, so that the handler runs whichever thread took the signal; the handler takes its time,
# as real clean-up does, long enough for a watcher that acted to end the process first.
OWN_HANDLER = """
    import multiprocessing, signal, sys, time

    def work():
        return 1

    def clean_up(signum, frame):
        time.sleep(0.3)
        print("own handler", flush=True)
        sys.exit(7)

    def waiting(ready):
        signal.signal(signal.SIGTERM, clean_up)
        work()
        ready.set()
        while True:
            time.sleep(0.01)

    if __name__ == "__main__":
        context = multiprocessing.get_context(sys.argv[1])
        ready = context.Event()
        process = context.Process(target=waiting, args=(ready,), name="own")
        process.start()
        ready.wait()
        process.terminate()
        process.join(60)
        print(process.exitcode)
"""


def counts(recording: ProcessRecording) -> Counter[str]:
    return Counter(r.name for r in recording.ranges)


def only(recordings: list[ProcessRecording], label: str) -> ProcessRecording:
    [recording] = [r for r in recordings if r.label == label]
    return recording


@pytest.mark.parametrize("wait", WAITS)
@pytest.mark.parametrize("method", METHODS)
def test_a_recorded_child_ends_on_a_sigterm_only_a_native_thread_can_take(
    workdir: Path,
    method: str,
    wait: str,
) -> None:
    make_file(workdir / "program.py", STUCK)
    done = run_autonvtx("-t", "__main__", "program.py", method, wait, cwd=workdir, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["-15"]  # died of SIGTERM, as it would have without autonvtx
    stuck = only(read_chrome_trace(done.trace_path), "stuck")
    assert counts(stuck) == Counter(
        {"stuck": 1, "work": 1, "start_native_thread": 1, "only_other_threads_take_sigterm": 1}
    )
    assert [r.name for r in stuck.ranges if r.is_open] == ["stuck"]  # written while it waited


@pytest.mark.parametrize("wait", WAITS)
@pytest.mark.parametrize("method", METHODS)
def test_a_child_under_another_nvtx_tool_ends_on_a_sigterm_only_a_native_thread_can_take(
    workdir: Path,
    method: str,
    wait: str,
) -> None:
    make_file(workdir / "program.py", STUCK)
    done = run_autonvtx(
        "-t",
        "__main__",
        "program.py",
        method,
        wait,
        cwd=workdir,
        trace=False,
        env=another_nvtx_tool(workdir),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["143"]  # through C exit(), where the tool writes what it holds


@pytest.mark.parametrize("method", METHODS)
def test_a_childs_own_sigterm_handler_is_the_one_that_runs(workdir: Path, method: str) -> None:
    make_file(workdir / "program.py", OWN_HANDLER)
    done = run_autonvtx("-t", "__main__", "program.py", method, cwd=workdir, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["own handler", "7"]  # as under Python
    own = only(read_chrome_trace(done.trace_path), "own")
    assert counts(own) == Counter({"waiting": 1, "work": 1, "clean_up": 1})  # written at its exit


@pytest.mark.parametrize("method", METHODS)
def test_a_childs_own_sigterm_handler_runs_under_another_nvtx_tool(workdir: Path, method: str) -> None:
    make_file(workdir / "program.py", OWN_HANDLER)
    done = run_autonvtx(
        "-t", "__main__", "program.py", method, cwd=workdir, trace=False, env=another_nvtx_tool(workdir), timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["own handler", "7"]


def test_a_spawn_child_of_a_plain_python_under_another_nvtx_tool_ends_on_sigterm(workdir: Path) -> None:
    # AUTONVTX_RULES, no `autonvtx run`: the spawn child sets itself up at start-up (autostart)
    # and is watched there too; a fork child inherits its parent's set-up (the tests above).
    if not list((Path(sys.prefix) / "lib").glob("python*/site-packages/autonvtx-autostart.pth")):
        pytest.skip("autonvtx is not installed in this Python (the .pth comes with the install)")
    make_file(workdir / "program.py", STUCK)
    make_file(workdir / "rules.toml", '[[rules]]\nmodules = ["__main__"]\n')
    env = another_nvtx_tool(workdir)
    env.update(AUTONVTX_RULES="rules.toml", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "program.py", "spawn", "lock"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["143"]
