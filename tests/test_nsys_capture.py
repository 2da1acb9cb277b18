"""`autonvtx profile` under the real Nsight Systems: one capture of a program that uses every kind
of child and ending, checked in its SQLite export and against autonvtx's own recorder."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Completed, autonvtx_env, make_file, run_autonvtx
from nsys_support import Export, NvtxRange, Profiled, counts, nsys_or_skip, report_counts, run_profile

PROGRAM = """
    import multiprocessing as mp
    import subprocess
    import sys
    import threading


    class Model:
        def forward(self, x):
            return x + 1


    def step(model, i):
        return model.forward(i)


    def load_batch(i):
        return i


    def loader():
        for i in range(3):
            load_batch(i)


    def spawn_task(x):
        return x * 2


    def fork_task(x):
        return x * 3


    def sigterm_task():
        return 4


    def wait_for_sigterm(ready):
        sigterm_task()
        sigterm_task()
        ready.set()
        threading.Event().wait()  # until terminate()


    def thread_exit():
        sys.exit(0)  # ends this thread only


    def main():
        model = Model()
        for i in range(5):
            step(model, i)
        thread = threading.Thread(target=loader, name="loader")
        thread.start()
        thread.join()
        subprocess.run([sys.executable, "-c", "import worker; worker.child_work(); worker.child_work()"], check=True)
        with mp.get_context("spawn").Pool(2) as pool:  # ends its workers with SIGTERM
            pool.map(spawn_task, range(4))
        with mp.get_context("fork").Pool(2) as pool:
            pool.map(fork_task, range(4))
        for method in ("spawn", "fork"):
            context = mp.get_context(method)
            ready = context.Event()
            process = context.Process(target=wait_for_sigterm, args=(ready,))
            process.start()
            ready.wait()
            process.terminate()
            process.join()
            print(method, "terminated, exitcode", process.exitcode)
        thread = threading.Thread(target=thread_exit)
        thread.start()
        thread.join()
        return 3


    if __name__ == "__main__":
        sys.exit(main())
"""

CONFIG = """
    [autonvtx]
    domain = "app"
    color = "#3366cc"

    [[rules]]
    modules = ["__main__"]
    include = ["main", "step", "loader", "load_batch", "spawn_task", "fork_task",
               "sigterm_task", "thread_exit"]

    [[rules]]
    modules = ["worker"]

    [[rules]]
    modules = ["__main__"]
    include = ["Model.*"]
    color = "#22aa44"
    category = "model"
"""

# A subprocess's own script is not instrumented by the child bootstrap (it passes through no
# import hook): its work lives in a module.
WORKER = """
    def child_work():
        return 2
"""

EXPECTED = {
    "main": 1,
    "step": 5,
    "Model.forward": 5,
    "loader": 1,
    "load_batch": 3,
    "child_work": 2,
    "spawn_task": 4,
    "fork_task": 4,
    "sigterm_task": 4,
    "thread_exit": 1,
}


@dataclass
class Capture:
    directory: Path
    profiled: Profiled
    ranges: list[NvtxRange]
    export: Export


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    nsys_or_skip()
    directory = tmp_path_factory.mktemp("nsys-capture")
    for name, text in (("app.py", PROGRAM), ("worker.py", WORKER), ("autonvtx.toml", CONFIG)):
        make_file(directory / name, text)
    env = autonvtx_env(RANK="0")
    profiled = run_profile("-o", "rep_%q{RANK}", "--html", "page.html", "app.py", cwd=directory, env=env)
    assert (directory / "rep_0.sqlite").exists(), profiled.stdout + profiled.stderr
    export = Export(directory / "rep_0.sqlite")
    return Capture(directory, profiled, export.ranges(), export)


def test_profile_leaves_the_report_and_its_export_named_by_rank_and_exits_with_the_programs_status(
    capture: Capture,
) -> None:
    assert capture.profiled.returncode == 3, capture.profiled.stderr
    assert (capture.directory / "rep_0.nsys-rep").exists()
    assert "CPU time per NVTX range: rep_0.sqlite" in capture.profiled.stdout
    assert "spawn terminated, exitcode" in capture.profiled.stdout  # the program's own output
    assert (capture.directory / "page.html").read_text().startswith("<!DOCTYPE html>")
    assert "Traceback" not in capture.profiled.stderr


def test_nsys_progress_bars_reach_a_log_as_their_final_state_only(capture: Capture) -> None:
    # stdout is a pipe here, as in a CI log: nsys redraws each bar with carriage returns, which
    # text mode turns into one line per redrawn step unless autonvtx keeps only the last.
    bars = [line for line in capture.profiled.stdout.splitlines() if re.match(r"\[\d+/\d+\] \[", line)]
    assert bars, capture.profiled.stdout
    assert all("100%" in bar for bar in bars), bars
    assert len(bars) == len({bar.split("]")[0] for bar in bars}), bars


def test_every_range_reaches_nsys_from_threads_subprocesses_pools_forks_and_terminated_processes(
    capture: Capture,
) -> None:
    assert counts(capture.ranges, "app") == Counter(EXPECTED)


def test_each_kind_of_child_records_in_its_own_process(capture: Capture) -> None:
    pids: dict[str, set[int]] = {}
    for r in capture.ranges:
        pids.setdefault(r.name, set()).add(r.pid)
    (main,) = pids["main"]
    assert pids["step"] == pids["loader"] == pids["thread_exit"] == {main}
    for name in ("child_work", "spawn_task", "fork_task"):
        assert main not in pids[name], name
    assert len(pids["sigterm_task"]) == 2 and main not in pids["sigterm_task"]  # a spawn and a fork process


def test_ranges_carry_their_domain_color_and_registered_message(capture: Capture) -> None:
    ours = [r for r in capture.ranges if r.domain == "app"]
    assert ours and all(r.registered for r in ours)
    colors = {r.name: r.color for r in ours}
    assert colors["step"] == colors["spawn_task"] == colors["fork_task"] == 0xFF3366CC
    assert colors["Model.forward"] == 0xFF22AA44


def test_a_threads_python_name_is_its_nvtx_name(capture: Capture) -> None:
    names = capture.export.thread_names()
    (loader,) = {(r.pid, r.tid) for r in capture.ranges if r.name == "load_batch"}
    assert names[loader] == "loader"
    (main,) = {(r.pid, r.tid) for r in capture.ranges if r.name == "main"}
    assert names[main] == "rank 0: MainThread"  # RANK=0: the main thread says its rank


def test_categories_are_named_in_the_export(capture: Capture) -> None:
    names = capture.export.categories()
    domains = capture.export.domains()
    forwards = [r for r in capture.ranges if r.name == "Model.forward"]
    assert forwards and all(r.category for r in forwards)
    for r in forwards:
        (domain,) = {d for (pid, d), name in domains.items() if pid == r.pid and name == "app"}
        assert names[(r.pid, domain, r.category)] == "model"
    assert {r.category for r in capture.ranges if r.name == "step"} == {None}  # none given: nsys stores none


@pytest.fixture(scope="module")
def recorded(capture: Capture, tmp_path_factory: pytest.TempPathFactory) -> Completed:
    """The same program under `autonvtx run --trace` (autonvtx's own recorder)."""
    directory = tmp_path_factory.mktemp("recorded")
    for name, text in (("app.py", PROGRAM), ("worker.py", WORKER), ("autonvtx.toml", CONFIG)):
        make_file(directory / name, text)
    done = run_autonvtx("app.py", cwd=directory)
    assert done.returncode == 3, done.stderr
    return done


def test_report_counts_equal_what_autonvtx_recorder_records_for_the_same_program(
    capture: Capture,
    recorded: Completed,
) -> None:
    assert recorded.trace_path is not None
    assert (
        report_counts(capture.directory / "rep_0.sqlite", capture.directory)
        == report_counts(recorded.trace_path, recorded.trace_path.parent)
        == EXPECTED
    )


def test_a_terminated_child_exits_143_under_nsys_and_dies_of_sigterm_under_the_recorder(
    capture: Capture,
    recorded: Completed,
) -> None:
    # Under nsys the child ends through exit(143) so that nsys's exit hooks run (termination.py):
    # a shell reads 143 either way; a Python parent sees 143 there, -15 for a death by the signal.
    assert "spawn terminated, exitcode 143" in capture.profiled.stdout
    assert "fork terminated, exitcode 143" in capture.profiled.stdout
    assert "spawn terminated, exitcode -15" in recorded.stdout
    assert "fork terminated, exitcode -15" in recorded.stdout


def test_each_process_s_domains_keep_their_own_names(tmp_path: Path) -> None:
    # nsys numbers NVTX domains per process: the parent's "trainer" and the child's "data" are
    # both domain 1 in the export, and the report named every range after one of them.
    nsys_or_skip()
    make_file(
        tmp_path / "app.py",
        """
        import subprocess, sys

        def main():
            subprocess.run([sys.executable, "-c", "import worker; worker.load(); worker.load()"], check=True)
            step()

        def step():
            return 1

        main()
    """,
    )
    make_file(tmp_path / "worker.py", "def load():\n    return 2\n")
    make_file(
        tmp_path / "autonvtx.toml",
        """
        [[rules]]
        modules = ["__main__"]
        domain = "trainer"

        [[rules]]
        modules = ["worker"]
        domain = "data"
    """,
    )
    profiled = run_profile("-o", "domains", "app.py", cwd=tmp_path)
    assert profiled.returncode == 0, profiled.stderr
    export = Export(tmp_path / "domains.sqlite")
    # The export itself holds the collision this test is about.
    assert {(r.domain, r.name) for r in export.ranges()} == {("trainer", "main"), ("trainer", "step"), ("data", "load")}
    reported = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", "domains.sqlite", "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert reported.returncode == 0, reported.stderr
    rows = json.loads(reported.stdout)["ranges"]
    assert {(row["domain"], row["name"], row["instances"]) for row in rows} == {
        ("trainer", "main", 1),
        ("trainer", "step", 1),
        ("data", "load", 2),
    }
