"""Python thread names become OS thread names (/proc/<pid>/task/<tid>/comm) and NVTX thread
names (seen by the recorder), when threads start and when they are renamed."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx

from autonvtx.propagate import threads
from autonvtx.recorder import native
from autonvtx.recorder.trace import read_chrome_trace

PYTHON_NAMES_OS_THREADS = sys.version_info >= (3, 14)


def comm(tid: int) -> str:
    with open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as f:
        return f.read().rstrip("\n")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("loader", b"loader"),
        ("exactly-15-char", b"exactly-15-char"),
        ("ThreadPoolExecutor-0_0", b"ThreadPoolExecu"),
        ("données-chargées", "données-charg".encode()),  # 15 bytes would split the "é"
        ("", b""),
    ],
)
def test_os_thread_name_fits_the_kernels_15_bytes(name: str, expected: bytes) -> None:
    assert threads.os_thread_name(name) == expected
    assert len(expected) <= threads.OS_NAME_BYTES


@pytest.fixture
def thread_naming():
    """threads.install() for one test; Thread's attributes exactly as found afterwards."""
    bootstrap_inner = threading.Thread.__dict__["_bootstrap_inner"]
    name = threading.Thread.__dict__["name"]
    threads.install()
    yield
    threads.uninstall()
    assert threading.Thread.__dict__["_bootstrap_inner"] is bootstrap_inner
    assert threading.Thread.__dict__["name"] is name
    assert not threads.is_installed()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="OS thread names are read from /proc")
def test_threads_get_their_python_names_as_os_names(thread_naming: None) -> None:
    seen: dict[str, str] = {}
    renamed = threading.Event()

    def read(key: str) -> None:
        seen[key] = comm(threading.get_native_id())

    def read_after_rename() -> None:
        renamed.wait()
        read("renamed")

    first = threading.Thread(target=read, args=("started",), name="loader-thread-with-long-name")
    first.start()
    first.join()
    second = threading.Thread(target=read_after_rename, name="before")
    second.start()
    second.name = "after"
    renamed.set()
    second.join()
    assert seen == {"started": "loader-thread-w", "renamed": "after"}


def test_main_thread_keeps_the_process_name(thread_naming: None) -> None:
    # The main thread's OS name is the process's own (ps, top, pkill see it).
    assert comm(threading.get_native_id()) == comm(os.getpid())
    assert comm(os.getpid()) != "MainThread"


def test_uninstalled_naming_leaves_new_threads_alone(thread_naming: None) -> None:
    threads.uninstall()
    seen = []
    thread = threading.Thread(target=lambda: seen.append(comm(threading.get_native_id())), name="not-named")
    thread.start()
    thread.join()
    assert seen != ["not-named"] or PYTHON_NAMES_OS_THREADS


@pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")
def test_thread_names_reach_os_and_recorder_in_parent_and_children(workdir: Path) -> None:
    make_file(
        workdir / "program.py",
        """
        import json, multiprocessing, threading
        from concurrent.futures import ThreadPoolExecutor

        def comm():
            with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
                return f.read().strip()

        def work():
            return comm()

        def in_child(queue):
            thread = threading.Thread(target=lambda: queue.put(work()), name="child-worker")
            thread.start()
            thread.join()

        if __name__ == "__main__":
            seen = {}
            thread = threading.Thread(target=lambda: seen.setdefault("named", work()), name="data-loader")
            thread.start()
            thread.join()
            with ThreadPoolExecutor(1, thread_name_prefix="pool") as executor:
                seen["pool"] = executor.submit(work).result()
            queue = multiprocessing.get_context("spawn").Queue()
            process = multiprocessing.get_context("spawn").Process(target=in_child, args=(queue,), name="child")
            process.start()
            seen["child"] = queue.get()
            process.join()
            print(json.dumps(seen))
    """,
    )
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    if not PYTHON_NAMES_OS_THREADS:  # 3.14 names them itself; the NVTX names below still count
        assert json.loads(done.stdout) == {"named": "data-loader", "pool": "pool_0", "child": "child-worker"}
    recordings = {r.label: r for r in read_chrome_trace(done.trace_path)}
    parent = next(r for label, r in recordings.items() if label.endswith("program.py"))
    child = recordings["child"]
    assert {"MainThread", "data-loader", "pool_0"} <= set(parent.thread_names.values())
    # In the child nobody but the NVTX name calls could have named them (its recording is
    # written by the child itself).
    assert child.thread_names[child.pid] == "MainThread"
    assert "child-worker" in child.thread_names.values()
    named = {r.tid for r in parent.ranges if r.name == "work"}
    assert {parent.thread_names[tid] for tid in named} == {"data-loader", "pool_0"}


def test_threads_started_after_the_program_drops_the_tool_variable_are_still_named(
    workdir: Path,
) -> None:
    """Whether names go to NVTX is decided when naming is installed: a program that removes
    NVTX_INJECTION64_PATH (to leave its own children unprofiled) is still recorded whole."""
    make_file(
        workdir / "program.py",
        """
        import os, threading
        os.environ.pop("NVTX_INJECTION64_PATH")
        thread = threading.Thread(target=lambda: None, name="loader-worker")
        thread.start()
        thread.join()
    """,
    )
    done = run_autonvtx("program.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    (recording,) = read_chrome_trace(done.trace_path)
    assert set(recording.thread_names.values()) == {"MainThread", "loader-worker"}


@pytest.mark.parametrize("rules", [[], ["-t", "threading"]], ids=["no rules", "rules select threading"])
def test_a_program_that_imports_threading_late_still_gets_thread_naming(workdir: Path, rules: list[str]) -> None:
    """autonvtx itself does not import threading (start-up, issue 24): naming is installed
    right after the program imports it, through a finder that then leaves sys.meta_path, and
    threading keeps its real loader (also when the rules' own hook chains it too)."""
    make_file(
        workdir / "program.py",
        """
        import json, sys
        finders = lambda: [type(f).__name__ for f in sys.meta_path]
        before = "threading" in sys.modules, finders()
        import threading
        seen = {}

        def work():
            with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
                seen["comm"] = f.read().strip()

        thread = threading.Thread(target=work, name="late-loader")
        thread.start()
        thread.join()
        print(json.dumps({"before": before, "after": finders(), "comm": seen["comm"],
                          "loaders": [type(threading.__loader__).__name__, type(threading.__spec__.loader).__name__],
                          "patched": threading.Thread._bootstrap_inner.__qualname__}))
    """,
    )
    env = None
    if rules:  # rules act only with a tool attached
        if native.library_path() is None:
            pytest.skip("the native recorder is not built")
        env = autonvtx_env(NVTX_INJECTION64_PATH=str(native.library_path()), AUTONVTX_RECORDER_MODE="noop")
    done = run_autonvtx(*rules, "program.py", cwd=workdir, trace=False, env=env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["before"][0] is False and seen["before"][1][0] == "ThreadingFinder"
    assert "ThreadingFinder" not in seen["after"]
    assert seen["before"][1][1:] == seen["after"]
    assert seen["loaders"] == ["SourceFileLoader", "SourceFileLoader"]
    assert seen["patched"] == "_bootstrap_inner"
    if not PYTHON_NAMES_OS_THREADS:
        assert seen["comm"] == "late-loader"
