"""A recording run never fails silently: an output that cannot be written sets the run's status,
and a program that ends without running its exit (os._exit, SIGKILL, a crash) still gets its
outputs, written by the watcher (`recorder.watch`, `recorder.watcher`).

Every case runs `autonvtx run` in a subprocess as a user would. `capture_output` reads stderr to
its end, and the watcher holds stderr until it is done: when the run returns, whatever the
watcher writes is written.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx

from autonvtx.recorder import native
from autonvtx.recorder.session import FAILED_STATUS

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

# Ranges, then time for the recorder's thread to spill them (it writes every ~100 ms; the
# program waits until its file holds them rather than for a time).
RECORDED = """
    import os, signal, sys, time

    def work():
        return 1

    for _ in range(3):
        work()
    own = os.path.join(os.environ["AUTONVTX_RECORD_DIR"], f"{os.getpid()}.anr")
    while not os.path.exists(own) or os.path.getsize(own) < 200:
        time.sleep(0.01)
    time.sleep(0.3)  # a second spill: the last one holds every range
    print("ran", flush=True)
"""


def watchers_of(pid: int) -> list[int]:
    """The watcher processes watching `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"watcher.py") for a in argv) and str(pid).encode() in argv:
            found.append(int(entry))
    return found


@pytest.mark.parametrize(
    "ending, status",
    [("os._exit(7)", 7), ("os.kill(os.getpid(), signal.SIGKILL)", -9), ("os.kill(os.getpid(), signal.SIGSEGV)", -11)],
)
def test_a_program_that_ends_without_its_exit_still_gets_its_trace(workdir: Path, ending: str, status: int) -> None:
    make_file(workdir / "program.py", RECORDED + "    " + ending + "\n")
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == status, done.stderr  # the program's own, as the shell sees it
    assert done.stdout == "ran\n"
    assert "ended without running its exit (os._exit, a signal or a crash)" in done.stderr
    assert "trace written to" in done.stderr
    assert done.range_names().count("work") == 3
    assert not (workdir / "trace.json.recording").exists()  # written, so removed


def test_a_program_that_ends_without_its_exit_gets_its_summary(workdir: Path) -> None:
    make_file(workdir / "program.py", RECORDED + "    os._exit(0)\n")
    done = run_autonvtx("--summary", "-t", "__main__", "program.py", cwd=workdir, trace=False)
    assert done.returncode == 0
    assert "ended without running its exit" in done.stderr
    assert re.search(r"  3  .*:work$", done.stderr, re.MULTILINE), done.stderr  # the table's row: 3 instances


def test_a_normal_end_leaves_no_watcher_and_no_message(workdir: Path) -> None:
    make_file(
        workdir / "program.py",
        """
        import os, sys
        def work():
            return 1
        work()
        print(os.getpid())
        sys.exit(5)
    """,
    )
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == 5
    assert "ended without running its exit" not in done.stderr
    assert done.range_names() == ["work"]
    assert watchers_of(int(done.stdout)) == []


def test_the_watcher_is_not_the_programs_child_and_holds_only_stderr(workdir: Path) -> None:
    make_file(
        workdir / "program.py",
        """
        import os, sys
        try:
            os.waitpid(-1, os.WNOHANG)  # a program reaping every child of its own
            print("a child", flush=True)
        except ChildProcessError:
            print("no child", flush=True)
        print(os.getpid(), flush=True)
        sys.stdin.readline()  # until the test has looked
        os._exit(0)
    """,
    )
    program = subprocess.Popen(
        [sys.executable, "-m", "autonvtx", "run", "--trace", "t.json", "program.py"],
        cwd=workdir,
        env=autonvtx_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert program.stdout is not None and program.stdin is not None
    assert program.stdout.readline() == "no child\n"
    pid = int(program.stdout.readline())
    (watcher,) = watchers_of(pid)

    def parent_and_session(process: int) -> tuple[int, int]:
        stat = Path(f"/proc/{process}/stat").read_text().rpartition(")")[2].split()
        return int(stat[1]), int(stat[3])

    parent, session = parent_and_session(watcher)
    assert parent != pid and session != parent_and_session(pid)[1]  # not the program's child; a session of its own

    def open_files() -> dict[int, str]:
        found = {}
        for fd in os.listdir(f"/proc/{watcher}/fd"):
            try:
                found[int(fd)] = os.readlink(f"/proc/{watcher}/fd/{fd}")
            except FileNotFoundError:  # closed between the listing and the reading
                continue
        return found

    # The watcher is found as soon as it exists; it may still be closing what it was started with.
    deadline = time.monotonic() + 30
    fds = open_files()
    while len(fds) != 5 and time.monotonic() < deadline:
        time.sleep(0.05)
        fds = open_files()
    assert fds[0] == fds[1] == os.devnull  # the program's stdin and stdout are not held
    assert fds[2] == os.readlink(f"/proc/{pid}/fd/2")
    assert len(fds) == 5  # stdio, the pidfd and the pipe of the program's "done"
    program.stdin.write("go\n")
    program.stdin.close()
    program.stdout.read()
    program.stderr.read()  # the watcher wrote the trace, then closed it
    assert program.wait(timeout=60) == 0
    assert (workdir / "t.json").exists()


def test_a_pipe_from_a_program_that_ended_without_its_exit_ends(workdir: Path) -> None:
    make_file(workdir / "program.py", RECORDED + "    os._exit(0)\n")
    shell = f"'{sys.executable}' -m autonvtx run --trace t.json -t __main__ program.py | cat"
    done = subprocess.run(
        ["sh", "-c", shell],
        cwd=workdir,
        env=autonvtx_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        timeout=120,
    )
    assert done.stdout == "ran\n"


def test_children_are_recorded_and_watch_nothing(workdir: Path) -> None:
    make_file(
        workdir / "program.py",
        """
        import multiprocessing, os, subprocess, sys

        def work():
            return os.getpid()

        if __name__ == "__main__":
            with multiprocessing.get_context("fork").Pool(1) as pool:
                fork_child = pool.apply(work)
            spawned = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                                     capture_output=True, text=True, check=True)
            work()
            print(os.getpid(), fork_child, spawned.stdout.strip())
    """,
    )
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert "ended without running its exit" not in done.stderr
    assert "missing" not in done.stderr
    pid, fork_child, spawned = map(int, done.stdout.split())
    pids = {e["pid"] for e in done.ranges()}
    assert {pid, fork_child} <= pids


def test_under_another_nvtx_tool_no_watcher_is_started(workdir: Path) -> None:
    make_file(workdir / "program.py", "import os\nprint(os.getpid(), flush=True)\nos._exit(0)\n")
    done = run_autonvtx(
        "-t", "__main__", "program.py", cwd=workdir, env=autonvtx_env(NVTX_INJECTION64_PATH="/nonexistent/libtool.so")
    )
    assert done.returncode == 0
    assert "another NVTX tool is attached" in done.stderr
    assert "ended without running its exit" not in done.stderr
    assert not (workdir / "trace.json").exists()


# Outputs that cannot be written


@pytest.mark.parametrize("trace", ["/proc/t.json", "missing/t.json"])
def test_an_unwritable_trace_is_refused_before_the_program_runs(workdir: Path, trace: str) -> None:
    make_file(workdir / "program.py", "print('ran')\n")
    done = run_autonvtx("--trace", trace, "program.py", cwd=workdir, trace=False)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("autonvtx: --trace: ") and "directory" in line
    assert "Traceback" not in done.stderr


VANISHING = """
    import os, shutil, sys
    def work():
        return 1
    work()
    {what}
    sys.exit({status})
"""


@pytest.mark.parametrize("status, expected", [(0, FAILED_STATUS), (4, 4)])
def test_a_trace_that_cannot_be_written_at_exit_sets_the_status(workdir: Path, status: int, expected: int) -> None:
    make_file(workdir / "program.py", VANISHING.format(what="os.mkdir('t.json')", status=status))
    done = run_autonvtx("--trace", "t.json", "-t", "__main__", "program.py", cwd=workdir, trace=False)
    assert done.returncode == expected, done.stderr
    recording = workdir / "t.json.recording"
    line = next(line for line in done.stderr.splitlines() if "could not write" in line)
    assert line.startswith("autonvtx: --trace: could not write 't.json'")
    assert f"'autonvtx recover {recording} -o t.json'" in line
    assert recording.is_dir()


def test_an_uncaught_exception_keeps_its_status_when_the_trace_fails(workdir: Path) -> None:
    make_file(workdir / "program.py", "import os\nos.mkdir('t.json')\nraise ValueError('boom')\n")
    done = run_autonvtx("--trace", "t.json", "program.py", cwd=workdir, trace=False)
    assert done.returncode == 1
    assert "ValueError: boom" in done.stderr and "could not write 't.json'" in done.stderr


def test_a_vanished_directory_sets_the_status(workdir: Path) -> None:
    make_file(workdir / "program.py", VANISHING.format(what="shutil.rmtree('out')", status=0))
    (workdir / "out").mkdir()
    done = run_autonvtx("--trace", "out/t.json", "-t", "__main__", "program.py", cwd=workdir, trace=False)
    assert done.returncode == FAILED_STATUS
    assert "was removed while the program ran" in done.stderr


def test_a_summary_file_that_cannot_be_written_sets_the_status(workdir: Path) -> None:
    make_file(workdir / "program.py", VANISHING.format(what="shutil.rmtree('out')", status=0))
    (workdir / "out").mkdir()
    done = run_autonvtx("--summary", "out/s.txt", "-t", "__main__", "program.py", cwd=workdir, trace=False)
    assert done.returncode == FAILED_STATUS, done.stderr
    assert "autonvtx: --summary: could not write 'out/s.txt'" in done.stderr
    assert "autonvtx recover" in done.stderr


def test_a_sigterm_keeps_its_status(workdir: Path) -> None:
    make_file(workdir / "program.py", "import os, signal\nos.mkdir('t.json')\nos.kill(os.getpid(), signal.SIGTERM)\n")
    done = run_autonvtx("--trace", "t.json", "program.py", cwd=workdir, trace=False)
    assert done.returncode == -signal.SIGTERM
    assert "could not write 't.json'" in done.stderr


def test_a_program_killed_while_writing_its_outputs_still_gets_them(workdir: Path) -> None:
    # A thread of the program kills it as soon as the trace's temporary file appears, in the
    # middle of the exit-time write: the watcher writes the trace, and removes the partial one.
    make_file(
        workdir / "program.py",
        """
        import glob, os, signal, threading, time

        def tick():
            return 1

        def kill_when_writing():
            while not glob.glob(".trace.json.*.tmp"):
                time.sleep(0.0005)
            os.kill(os.getpid(), signal.SIGKILL)

        for _ in range(300_000):
            tick()
        threading.Thread(target=kill_when_writing, daemon=True).start()
    """,
    )
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "ended without running its exit" in done.stderr
    assert done.range_names().count("tick") == 300_000
    assert not list(workdir.glob(".trace.json*"))


def test_ctrl_c_keeps_its_status_and_the_watcher_is_silent(workdir: Path) -> None:
    make_file(workdir / "program.py", "def work():\n    return 1\nwork()\nraise KeyboardInterrupt\n")
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == -2  # killed by SIGINT once it finalized, as under Python
    assert "ended without running its exit" not in done.stderr
    assert done.range_names() == ["work"]


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polling"])
@pytest.mark.parametrize("says_done", [True, False], ids=["done", "died"])
def test_the_watcher_runs_its_command_only_for_a_death_without_done(pidfd: bool, says_done: bool) -> None:
    # The watcher script alone, on a process of the test's (a zombie once killed: dead for it).
    from autonvtx.recorder import watcher

    program = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    read_fd, write_fd = os.pipe()
    fd = os.pidfd_open(program.pid) if pidfd else -1
    passed = [read_fd] + ([fd] if pidfd else [])
    command = [sys.executable, "-c", "print('written after death')"]
    watching = subprocess.Popen(
        [sys.executable, "-I", "-S", watcher.__file__, str(program.pid), str(fd), str(read_fd), *command],
        pass_fds=passed,
        stdout=subprocess.PIPE,
        text=True,
    )
    os.close(read_fd)
    if fd >= 0:
        os.close(fd)
    if says_done:
        os.write(write_fd, b"\1")
    program.kill()
    out, _ = watching.communicate(timeout=60)
    program.wait()
    os.close(write_fd)
    assert watching.returncode == 0
    assert out == ("" if says_done else "written after death\n")


def test_the_watchers_own_names_are_the_environments() -> None:
    # The watcher runs as a script that imports nothing of autonvtx: its copies of the two
    # variables' names must be environment.py's, which the program side sets.
    from autonvtx import environment
    from autonvtx.recorder import watcher

    assert watcher.FLIGHT_DIR == environment.WATCH_FLIGHT_DIR
    assert watcher.FLIGHT_COMMAND == environment.WATCH_FLIGHT_COMMAND
