"""`run --flight RANGE`: the window around a slow instance, written as TRACE.flight-N, through the
real native recorder. The machine these run on is shared, so a 1 ms sleep sometimes lasts far
longer: every window the recorder writes is checked against the program's own clock (the step it
fired on must have been slow there too), and the slow step planted by the test must be caught."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import autonvtx_env, make_file, run_autonvtx

needs_312 = pytest.mark.skipif(sys.version_info < (3, 12), reason="the code engine and regions need 3.12+")
ENGINES = ["wrap", pytest.param("code", marks=needs_312)]

TRAINING = """
    import json, sys, time

    def work(i, slow):
        time.sleep(0.03 if i == slow else 0.001)

    def step(i, slow):
        work(i, slow)

    def train(n, slow):
        times = []
        for i in range(n):
            t = time.perf_counter()
            step(i, slow)
            times.append(time.perf_counter() - t)
        return times

    if __name__ == "__main__":
        n, slow = int(sys.argv[1]), int(sys.argv[2])
        with open("times.json", "w") as f:
            json.dump(train(n, slow), f)
"""


def windows(directory: Path, stem: str = "trace", suffix: str = ".json") -> dict[int, dict[str, Any]]:
    """flight number -> the trace written for it."""
    found = {}
    for path in directory.glob(f"{stem}.flight-*{suffix}"):
        number = path.name[len(stem) + len(".flight-") : -len(suffix)]
        found[int(number)] = json.loads(path.read_text())
    return found


def really_slow(directory: Path, instance: int, factor: float) -> bool:
    """Whether the program's own clock saw that step (1-based) last well over the usual."""
    times = json.loads((directory / "times.json").read_text())
    return times[instance - 1] > factor * statistics.median(times) / 2


def ranges(trace: dict[str, Any], name: str | None = None) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and (name is None or e["name"] == name)]


def check_only_slow_steps_fired(workdir: Path, found: dict[int, dict[str, Any]], factor: float, planted: int) -> None:
    for trace in found.values():
        flight = trace["otherData"]["flight"]
        if flight["instance"] != planted:
            assert really_slow(workdir, flight["instance"], factor), flight


@pytest.mark.parametrize("engine", ENGINES)
def test_a_slow_step_gives_one_window_with_it_and_the_ten_before(workdir: Path, engine: str) -> None:
    make_file(workdir / "prog.py", TRAINING)
    done = run_autonvtx(
        "--engine",
        engine,
        "-t",
        "__main__",
        "--flight",
        "step",
        "--flight-factor",
        "10",  # 30x: caught; a shared host's stalls of a few ms are not (each would be a window)
        "--flight-max",
        "1000",
        "--summary",
        "prog.py",
        "3000",
        "1999",
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    assert not (workdir / "trace.json").exists()  # no whole trace under --flight
    found = windows(workdir)
    slow = [t for t in found.values() if t["otherData"]["flight"]["instance"] == 2000]
    assert len(slow) == 1, done.stderr
    trace = slow[0]
    flight = trace["otherData"]["flight"]
    assert flight["name"] == "step" and flight["range"] == "step"
    assert flight["instances_in_window"] == 11 and not flight["ring_cut"]
    assert flight["duration_ns"] > 3 * flight["median_ns"]
    steps = ranges(trace, "step")
    works = ranges(trace, "work")
    assert len(steps) == 11 and len(works) == 11
    assert max(steps, key=lambda e: e["dur"])["ts"] == max(e["ts"] for e in steps)  # the slow one ends it
    assert not ranges(trace, "train")  # began before the window: left out whole, and named
    assert [e["name"] for e in flight["enclosing"]] == ["train"]
    assert "instance 2000 of 'step'" in done.stderr and "the median" in done.stderr
    assert "the whole run's trace is not written under --flight" in done.stderr
    assert "3,000" in done.stderr  # --summary still counts every step
    check_only_slow_steps_fired(workdir, found, 10.0, 2000)


def test_a_steady_run_writes_no_window(workdir: Path) -> None:
    make_file(workdir / "prog.py", TRAINING)
    done = run_autonvtx(
        "-t",
        "__main__",
        "--flight",
        "step",
        "--flight-factor",
        "10",
        "--flight-max",
        "1000",
        "prog.py",
        "1500",
        "-1",
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    found = windows(workdir)
    check_only_slow_steps_fired(workdir, found, 10.0, planted=0)
    if not found:
        assert "no instance of 'step' lasted more than 10x the median" in done.stderr


def test_a_slow_warm_up_step_does_not_fire(workdir: Path) -> None:
    make_file(workdir / "prog.py", TRAINING)
    done = run_autonvtx(
        "-t", "__main__", "--flight", "step", "--flight-max", "1000", "prog.py", "300", "0", cwd=workdir
    )
    assert done.returncode == 0, done.stderr
    found = windows(workdir)
    assert all(t["otherData"]["flight"]["instance"] > 5 for t in found.values())
    check_only_slow_steps_fired(workdir, found, 3.0, planted=0)


def test_without_warm_up_an_early_slow_step_fires_with_what_came_before(workdir: Path) -> None:
    make_file(workdir / "prog.py", TRAINING)
    done = run_autonvtx(
        "-t",
        "__main__",
        "--flight",
        "step",
        "--flight-warmup",
        "0",
        "--flight-keep",
        "5",
        "--flight-max",
        "1000",
        "prog.py",
        "40",
        "3",
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    fired = {t["otherData"]["flight"]["instance"]: t for t in windows(workdir).values()}
    assert 4 in fired, done.stderr
    assert fired[4]["otherData"]["flight"]["instances_in_window"] == 4  # only three came before it
    assert len(ranges(fired[4], "step")) == 4


THREADED = """
    import json, sys, threading, time
    import nvtx

    def recurse(depth):
        with nvtx.annotate(f"level {depth}", domain="app"):
            if depth:
                recurse(depth - 1)

    def background(stop):
        with nvtx.annotate("background", domain="app"):  # open across every window
            while not stop.is_set():
                with nvtx.annotate("tick", domain="app"):
                    time.sleep(0.0015)

    stop = threading.Event()
    worker = threading.Thread(target=background, args=(stop,))
    worker.start()
    times = []
    with nvtx.annotate("train", domain="app"):
        for i in range(400):
            t = time.perf_counter()
            with nvtx.annotate(f"step {i}", domain="app"):
                recurse(4)
                time.sleep(0.03 if i == 300 else 0.001)
            times.append(time.perf_counter() - t)
    stop.set()
    worker.join()
    with open("times.json", "w") as f:
        json.dump(times, f)
"""


def nested_or_apart(events: list[dict[str, Any]]) -> bool:
    """Whether the ranges of one thread nest: each pair is disjoint or one holds the other."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events)
    open_ends: list[float] = []
    for start, end in spans:
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        if open_ends and end > open_ends[-1] + 1e-3:  # crosses the end of the range around it
            return False
        open_ends.append(end)
    return True


def test_threads_and_recursion_keep_nesting_true_in_the_window(workdir: Path) -> None:
    make_file(workdir / "prog.py", THREADED)
    done = run_autonvtx("--flight", "step {i}", "--flight-max", "1000", "prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    found = windows(workdir)
    slow = [t for t in found.values() if t["otherData"]["flight"]["name"] == "step 300"]
    assert len(slow) == 1, done.stderr
    trace = slow[0]
    flight = trace["otherData"]["flight"]
    start_us = flight["window_start_ns"] / 1000
    events = ranges(trace)
    assert {e["name"] for e in events} >= {"step 290", "step 300", "level 0", "level 4", "tick"}
    assert not any(e["name"] in ("train", "background") for e in events)
    # Open when the window began, so left out whole and named: the loop, the background range, and
    # the tick under way then, if one was.
    enclosing = {e["name"]: e["tid"] for e in flight["enclosing"]}
    assert {"train", "background"} <= set(enclosing) <= {"train", "background", "tick"}
    assert enclosing["train"] != enclosing["background"]
    for tid in {e["tid"] for e in events}:
        mine = [e for e in events if e["tid"] == tid]
        assert nested_or_apart(mine), tid
        assert min(e["ts"] for e in mine) >= start_us - 1e-3  # nothing begun before the window
    for i in range(290, 301):  # every step whole, with its whole recursion
        assert len([e for e in events if e["name"] == f"step {i}"]) == 1
    assert len([e for e in events if e["name"].startswith("level ")]) == 11 * 5


@needs_312
def test_a_region_template_names_the_range(workdir: Path) -> None:
    make_file(workdir / "prog.py", TRAINING)
    make_file(
        workdir / "autonvtx.toml",
        """
        [[regions]]
        function = "__main__:train"
        loop = "first"
        name = "step {i}"
        """,
    )
    done = run_autonvtx(
        "--flight", "step {i}", "--flight-keep", "4", "--flight-max", "1000", "prog.py", "300", "250", cwd=workdir
    )
    assert done.returncode == 0, done.stderr
    found = windows(workdir)
    slow = [t for t in found.values() if t["otherData"]["flight"]["name"] == "step 250"]
    assert len(slow) == 1, done.stderr
    names = sorted(e["name"] for e in ranges(slow[0]) if e["name"].startswith("step "))
    assert names == [f"step {i}" for i in range(246, 251)]


MANY_SLOW = """
    import time
    import nvtx
    for i in range(200):
        with nvtx.annotate(f"step {i}", domain="app"):
            time.sleep(0.04 if i % 20 == 19 else 0.001)
"""


def test_at_most_flight_max_windows_and_the_suffix_kept(workdir: Path) -> None:
    make_file(workdir / "prog.py", MANY_SLOW)
    done = run_autonvtx(
        "--trace", "fr.pftrace", "--flight", "step {i}", "--flight-max", "2", "prog.py", cwd=workdir, trace=False
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in workdir.glob("fr*")) == ["fr.flight-1.pftrace", "fr.flight-2.pftrace"]
    assert "2 files written (--flight-max): later slow instances of 'step {i}' are not written" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--flight", "step"], "--flight: needs --trace PATH"),
        (
            ["--trace", "t.json", "--flight", "step", "--flight-factor", "1"],
            "--flight-factor: expected a number above 1",
        ),
        (["--trace", "t.json", "--flight", "step", "--flight-keep", "0"], "--flight-keep: expected 1 to 1000"),
        (["--trace", "t.json", "--flight", "step", "--flight-max", "0"], "--flight-max: expected at least 1"),
        (["--trace", "t.json", "--flight", "step", "--flight-warmup", "-1"], "--flight-warmup: expected 0 or more"),
        (["--trace", "t.json", "--flight-keep", "3"], "--flight-keep sets how --flight watches; add --flight RANGE"),
        (
            ["--trace", "t.json", "--flight", "step", "--keep", "last", "--buffer-mb", "8"],
            "--flight: keeps its own ring",
        ),
        (["--trace", "t.json", "--flight", " "], "--flight: expected the name of a range"),
    ],
)
def test_bad_flight_options_are_one_line_and_status_2(workdir: Path, args: list[str], message: str) -> None:
    make_file(workdir / "prog.py", "print('ran')\n")
    done = run_autonvtx(*args, "prog.py", cwd=workdir, trace=False)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr and "ran" not in done.stdout
    assert len(done.stderr.strip().splitlines()) == 1


LISTS_ITS_RECORDING = """
    import os, time
    import nvtx
    for i in range(300):
        with nvtx.annotate(f"step {i}", domain="app"):
            time.sleep(0.03 if i == 200 else 0.001)
    time.sleep(0.3)  # the recorder's thread has written what came before
    directory = os.environ["AUTONVTX_RECORD_DIR"]
    print(sorted(name for name in os.listdir(directory) if name.endswith(".anr")))
"""


@pytest.mark.parametrize("summary", [False, True])
def test_without_summary_the_recording_directory_keeps_no_events(workdir: Path, summary: bool) -> None:
    make_file(workdir / "prog.py", LISTS_ITS_RECORDING)
    extra = ["--summary"] if summary else []
    done = run_autonvtx("--flight", "step {i}", "--flight-max", "1000", *extra, "prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert (done.stdout.strip() != "[]") == summary  # <pid>.anr only when --summary needs the events
    assert any(t["otherData"]["flight"]["name"] == "step 200" for t in windows(workdir).values()), done.stderr
    assert ("step {n}" in done.stderr) == summary


THREE_MILLION = """
    import time
    import nvtx

    domain = nvtx.get_domain("app")
    names = [domain.get_event_attributes(message=f"step {i}") for i in range(1000)]
    inner = domain.get_event_attributes(message="inner")
    push, pop = domain.push_range, domain.pop_range
    for i in range(3_000_000):
        push(names[i % 1000])
        push(inner)
        if i == 2_000_000:
            time.sleep(1.0)  # some million times a step of ~0.5 us, ten times the factor below
        pop()
        pop()
        if i % 100_000 == 0:
            # Room for the recorder's thread: on CI's two loaded cores it was starved for seconds
            # and dropped a million events at the bound, the planted step among them (said on
            # stderr). Real steps leave such gaps (data loading, I/O); these add 0.6 s in all.
            time.sleep(0.02)
    with open("/proc/self/status") as status:
        print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) // 1024)
"""


def test_three_million_steps_stay_within_150_mib(workdir: Path) -> None:
    make_file(workdir / "prog.py", THREE_MILLION)
    # A shared host's stalls of 50 ms and more would pass the factor too: each is a window.
    done = run_autonvtx(
        "--flight", "step {i}", "--flight-factor", "100000", "--flight-max", "1000", "prog.py", cwd=workdir
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 150, done.stdout  # peak RSS of the whole process, in MiB
    fired = [t["otherData"]["flight"] for t in windows(workdir).values()]
    # The planted second (a step of ~0.5 us otherwise). Found by its length, not its number: on a
    # loaded host the recorder thread can fall behind and drop events at the memory bound (said
    # on stderr), which shifts the instance count.
    slow = [f for f in fired if f["duration_ns"] >= 900_000_000]
    assert slow, done.stderr
    assert slow[0]["instances_in_window"] == 11 and not slow[0]["ring_cut"]
    if "dropped" not in done.stderr:
        assert slow[0]["instance"] == 2_000_001


WAITS_FOR_ITS_WINDOW = """
    import os, sys, time
    import nvtx
    for i in range(300):
        with nvtx.annotate(f"step {i}", domain="app"):
            time.sleep(0.03 if i == 200 else 0.001)
    start = time.monotonic()
    while not os.path.exists(sys.argv[1]) and time.monotonic() - start < 60:
        time.sleep(0.05)
    print("written while running" if os.path.exists(sys.argv[1]) else "not written")
"""


def test_windows_are_written_while_the_program_runs(workdir: Path) -> None:
    make_file(workdir / "prog.py", WAITS_FOR_ITS_WINDOW)
    done = run_autonvtx(
        "--flight",
        "step {i}",
        "--flight-max",
        "1",
        "--flight-factor",
        "10",
        "prog.py",
        str(workdir / "trace.flight-1.json"),
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "written while running", done.stderr
    assert done.stderr.count("flight window written to") == 1  # the exit did not write it again
    assert "--flight: 1 window(s) written" in done.stderr


def test_a_rank_s_windows_carry_its_rank_and_it_in_their_metadata(workdir: Path) -> None:
    make_file(workdir / "prog.py", MANY_SLOW)
    env = autonvtx_env(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    done = run_autonvtx(
        "--trace",
        "run.{rank}.json",
        "--flight",
        "step {i}",
        "--flight-max",
        "1",
        "prog.py",
        cwd=workdir,
        trace=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert [p.name for p in workdir.glob("run*")] == ["run.1.flight-1.json"]
    trace = json.loads((workdir / "run.1.flight-1.json").read_text())
    assert trace["otherData"]["rank"] == 1 and trace["otherData"]["flight"]["range"] == "step {i}"
    assert "run.1.flight-1.json" in done.stderr


def test_an_earlier_run_s_windows_are_replaced_not_left_beside(workdir: Path) -> None:
    make_file(workdir / "prog.py", MANY_SLOW)
    for stale in (workdir / "trace.flight-7.json", workdir / "trace.flight-12.json"):
        stale.write_text("{}")
    (workdir / "trace.flight-notes.json").write_text("{}")  # not a window: left alone
    done = run_autonvtx("--flight", "step {i}", "--flight-max", "1", "prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in workdir.glob("trace.flight-*")) == ["trace.flight-1.json", "trace.flight-notes.json"]
    assert "2 window(s) of an earlier run removed" in done.stderr
    assert not list(workdir.glob("*.recording*"))  # the record directory is gone, whatever the watcher did


def test_the_flight_benchmark_runs() -> None:
    """benchmarks/flight.py at a tiny size: its code works (no figure is asserted here)."""
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "flight.py"), "--steps", "20000", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()[2:]
    assert [row.split("  ")[0] for row in rows] == ["spill only", "--flight", "--flight alone"]
    assert all("MiB" in row for row in rows)


PARENT_AND_CHILD = """
    import subprocess, sys, time
    import nvtx
    child = subprocess.Popen([sys.executable, "child.py"])
    for i in range(200):
        with nvtx.annotate(f"step {i}", domain="app"):
            time.sleep(0.06 if i == 100 else 0.002)
    child.wait()
"""

CHILD = """
    import time
    import nvtx
    for i in range(200):
        with nvtx.annotate(f"step {i}", domain="app"):
            time.sleep(0.06 if i == 150 else 0.002)
"""


def test_each_process_watches_its_own_steps(workdir: Path) -> None:
    make_file(workdir / "prog.py", PARENT_AND_CHILD)
    make_file(workdir / "child.py", CHILD)
    done = run_autonvtx("--flight", "step {i}", "--flight-factor", "10", "--flight-max", "1000", "prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    fired = {(t["otherData"]["flight"]["name"], t["otherData"]["flight"]["pid"]) for t in windows(workdir).values()}
    pids = {pid for name, pid in fired if name in ("step 100", "step 150")}
    assert {name for name, _ in fired} >= {"step 100", "step 150"}, done.stderr
    assert len(pids) == 2  # the parent's slow step and the child's, each in its own process's window
