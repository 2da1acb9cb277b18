"""SIGTERM ends an instrumented process within a bounded time, as it ends plain Python at once.

autonvtx answers SIGTERM with a Python-level handler, which runs only when the main thread next
runs bytecode. A main thread blocked in C (here: a mutex locked twice through ctypes; in the
field, torch's gloo shutdown deadlock) never runs it: before the SIGTERM deadline
(`_native/deadline.c`) such a process was still alive 15-20 s later, and `timeout`, Slurm and
torchrun's escalation waited on it. And where another NVTX tool is attached, SIGTERM ends the
process through C exit(143), whose library destructors can hang (OpenBLAS joining a thread that
waits for a lock): the same deadline ends that exit with _exit(143).

"Another NVTX tool" is the native recorder loaded from a copy, as in test_child_sigterm.py: a real
injection library that is not autonvtx's own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import another_nvtx_tool, autonvtx_env, make_file

from autonvtx.recorder import native
from autonvtx.recorder.trace import read_chrome_trace

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

# Long enough for the deadline (1 s) and a loaded CI machine; a process still alive past it
# fails the test instead of hanging it.
BOUND_S = 20

STUCK_IN_C = """
    import ctypes

    def set_up():
        return 1

    def stuck():
        libc = ctypes.CDLL(None)
        mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER (glibc)
        libc.pthread_mutex_lock(mutex)
        print("ready", flush=True)
        libc.pthread_mutex_lock(mutex)  # a second time: the main thread waits in C forever

    set_up()
    stuck()
"""

# A library whose destructor waits for a lock that is never released, as OpenBLAS's
# blas_thread_shutdown waited for a BLAS thread stuck on a lock another thread held: C exit()
# runs it and never returns.
HANGING_DESTRUCTOR = r"""
#include <pthread.h>
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
void hold(void) { pthread_mutex_lock(&held); }
__attribute__((destructor)) static void wait_for_it(void) { pthread_mutex_lock(&held); }
"""

EXIT_HANGS = """
    import ctypes, sys, time

    library = ctypes.CDLL(sys.argv[1])
    library.hold()
    print("ready", flush=True)
    while True:  # bytecode: the Python handler runs at once and ends through C exit()
        time.sleep(0.01)
"""


def terminate_when_ready(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, float, str]:
    """Start `command`, SIGTERM it once it printed "ready"; (status, seconds to end, stderr)."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line == "ready\n", (line, process.stderr.read() if process.stderr else "")
        time.sleep(0.2)  # into the blocking call
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            status = process.wait(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still alive {BOUND_S} s after SIGTERM")
        took = time.monotonic() - sent
        assert process.stderr is not None
        return status, took, process.stderr.read()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_for(path: Path) -> None:
    """The watcher writes the trace once the program is gone: give it its time."""
    deadline = time.monotonic() + BOUND_S
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_plain_python_dies_at_once_the_baseline(tmp_path: Path) -> None:
    make_file(tmp_path / "program.py", STUCK_IN_C)
    status, _, _ = terminate_when_ready([sys.executable, "program.py"], tmp_path, autonvtx_env())
    assert status == -signal.SIGTERM


def test_a_recorded_program_blocked_in_c_dies_by_sigterm_and_its_trace_is_written(tmp_path: Path) -> None:
    make_file(tmp_path / "program.py", STUCK_IN_C)
    trace = tmp_path / "trace.json"
    command = [sys.executable, "-m", "autonvtx", "run", "--trace", str(trace), "-t", "__main__", "program.py"]
    status, _, stderr = terminate_when_ready(command, tmp_path, autonvtx_env())
    assert status == -signal.SIGTERM, stderr  # as plain Python: killed by the signal
    wait_for(trace)
    [recording] = read_chrome_trace(trace)
    names = sorted(r.name for r in recording.ranges)
    assert names == ["set_up", "stuck"], stderr
    assert [r.name for r in recording.ranges if r.is_open] == ["stuck"]


def test_under_another_nvtx_tool_a_program_blocked_in_c_ends_through_exit(tmp_path: Path) -> None:
    make_file(tmp_path / "program.py", STUCK_IN_C)
    command = [sys.executable, "-m", "autonvtx", "run", "-t", "__main__", "program.py"]
    status, _, stderr = terminate_when_ready(command, tmp_path, another_nvtx_tool(tmp_path))
    assert status == 128 + signal.SIGTERM, stderr  # C exit(143): the tool's exit hooks ran


def test_under_another_nvtx_tool_an_exit_that_hangs_in_a_destructor_still_ends(tmp_path: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the hanging library")
    source = make_file(tmp_path / "hang.c", HANGING_DESTRUCTOR)
    library = tmp_path / "libhang.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source), "-lpthread"], check=True)
    make_file(tmp_path / "program.py", EXIT_HANGS)
    command = [sys.executable, "-m", "autonvtx", "run", "-t", "__main__", "program.py", str(library)]
    status, _, stderr = terminate_when_ready(command, tmp_path, another_nvtx_tool(tmp_path))
    assert status == 128 + signal.SIGTERM, stderr
