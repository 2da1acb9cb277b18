"""`--flight RANGE` where the recorder is not the NVTX tool (`autonvtx profile --flight`,
`install(flight=...)`, `%autonvtx --flight`): the watched range timed in the process, a capture
range over the instances after each slow one, and its mark. Checked through the native recorder
(which keeps only what falls in capture ranges, as nsys does) and on the real Nsight Systems.

The machine these run on is shared: a 2 ms sleep sometimes lasts far longer, so a window other
than the planted one is accepted only when the program's own clock saw its step slow too."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, autonvtx_env, make_file, run_autonvtx

needs_312 = pytest.mark.skipif(sys.version_info < (3, 12), reason="the code engine and regions need 3.12+")
ENGINES = ["wrap", pytest.param("code", marks=needs_312)]
WATCH = "AUTONVTX_FLIGHT_WATCH"
MARK = re.compile(
    r"autonvtx --flight: window (\d+): '([^']*)' \(instance (\d+) of '([^']*)'\) took .*, ([\d.]+)x the median"
)

TRAINING = """
    import json, sys, time

    def step(i, slow):
        time.sleep(0.06 if i == slow else 0.002)

    def helper(i):
        return i

    def train(n, slow):
        times = []
        for i in range(n):
            t = time.perf_counter()
            step(i, slow)
            times.append(time.perf_counter() - t)
            helper(i)
        return times

    if __name__ == "__main__":
        n, slow = int(sys.argv[1]), int(sys.argv[2])
        with open("times.json", "w") as f:
            json.dump(train(n, slow), f)
        sys.exit(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
"""


def watch(range_: str, factor: float = 10.0, keep: int = 3, most: int = 20, warmup: int = 5) -> str:
    return json.dumps({"range": range_, "factor": factor, "keep": keep, "max": most, "warmup": warmup})


def really_slow(workdir: Path, instance: int) -> bool:
    """Whether the program's own clock saw that step (1-based) last well over the usual."""
    times = json.loads((workdir / "times.json").read_text())
    return times[instance - 1] > 4 * statistics.median(times)


def marks(events: list[dict[str, Any]]) -> list[re.Match[str]]:
    return [m for e in events if e.get("ph") == "i" and (m := MARK.match(e["name"]))]


def check_windows(workdir: Path, events: list[dict[str, Any]], watched: str, planted: int, keep: int) -> None:
    """The planted slow instance opened a window holding the `keep` instances after it (and not
    itself); any other window followed a step the program's clock saw slow too."""
    found = marks(events)
    instances = {int(m[3]): m for m in found}
    assert planted in instances, [e["name"] for e in events if e.get("ph") == "i"]
    for number, match in instances.items():
        assert match[4] == watched and float(match[5]) > 10.0
        if number != planted:
            assert really_slow(workdir, number), match[0]
    opened = [e for e in events if e.get("ph") == "b" and e["name"] == "capture"]
    closed = [e for e in events if e.get("ph") == "e" and e["name"] == "capture"]
    assert len(opened) == len(closed) == len(found)
    mark = next(e for e in events if e.get("ph") == "i" and MARK.match(e["name"])[3] == str(planted))  # type: ignore[index]
    start = max(e["ts"] for e in opened if e["ts"] <= mark["ts"])
    end = min(e["ts"] for e in closed if e["ts"] >= mark["ts"])
    inside = [e for e in events if e.get("ph") == "X" and start <= e["ts"] <= end]
    assert len([e for e in inside if e["name"].startswith("step")]) == keep
    assert all(e["dur"] < 50_000 for e in inside if e["name"].startswith("step"))  # the slow one is before it


@pytest.mark.parametrize("engine", ENGINES)
def test_a_slow_step_opens_a_capture_window_over_the_next_instances(workdir: Path, engine: str) -> None:
    make_file(workdir / "prog.py", TRAINING)
    done = run_autonvtx(
        "--engine",
        engine,
        "-t",
        "__main__",
        "prog.py",
        "120",
        "59",
        cwd=workdir,
        env=autonvtx_env(**{WATCH: watch("step")}),
    )
    assert done.returncode == 0, done.stderr
    events = json.loads((workdir / "trace.json").read_text())["traceEvents"]
    check_windows(workdir, events, "step", planted=60, keep=3)
    assert "(instance 60 of 'step') took" in done.stderr and "capture window" in done.stderr
    assert "slow instance(s) of 'step' of 120 in process" in done.stderr
    # Only the captured windows are kept, as nsys would keep them: train and helper are outside.
    assert not [e for e in events if e.get("ph") == "X" and e["name"] == "train"]


@needs_312
def test_a_region_template_is_watched(workdir: Path) -> None:
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
    done = run_autonvtx("prog.py", "120", "59", cwd=workdir, env=autonvtx_env(**{WATCH: watch("step {i}")}))
    assert done.returncode == 0, done.stderr
    events = json.loads((workdir / "trace.json").read_text())["traceEvents"]
    check_windows(workdir, events, "step {i}", planted=60, keep=3)
    assert "'step 59' (instance 60 of 'step {i}')" in done.stderr


def test_a_steady_run_opens_no_window_and_says_so(workdir: Path) -> None:
    make_file(workdir / "prog.py", TRAINING)
    env = autonvtx_env(**{WATCH: watch("step", factor=50.0)})
    done = run_autonvtx("-t", "__main__", "prog.py", "100", "-1", "3", cwd=workdir, env=env)
    assert done.returncode == 3, done.stderr  # the program's status passes through
    if "capture window 1 opened" not in done.stderr:  # a 100 ms stall of the host would open one
        assert "none of the 100 instances of 'step' in process" in done.stderr
        assert "lasted more than 50x the median of those before it: no window captured" in done.stderr


def test_a_range_that_never_runs_is_said(workdir: Path) -> None:
    make_file(workdir / "prog.py", TRAINING)
    done = run_autonvtx(
        "-t", "__main__", "prog.py", "10", "-1", cwd=workdir, env=autonvtx_env(**{WATCH: watch("stpe")})
    )
    assert done.returncode == 0, done.stderr
    assert "--flight: no instance of 'stpe' ran in process" in done.stderr


PARENT = """
    import subprocess, sys, time

    def step(i):
        time.sleep(0.15 if i == 40 else 0.002)  # far past 10x, even of a median the child's start slowed

    child = subprocess.Popen([sys.executable, "child.py"])
    for i in range(80):
        step(i)
    child.wait()
"""

CHILD_STEPS = """
    import time

    def step(i):
        time.sleep(0.15 if i == 60 else 0.002)

    for i in range(80):
        step(i)
"""


def test_each_process_watches_its_own_instances(workdir: Path) -> None:
    make_file(workdir / "prog.py", PARENT)
    make_file(workdir / "child.py", CHILD_STEPS)
    env = autonvtx_env(**{WATCH: watch("step", keep=1)})
    done = run_autonvtx("-t", "__main__", "prog.py", cwd=workdir, env=env)
    assert done.returncode == 0, done.stderr
    events = json.loads((workdir / "trace.json").read_text())["traceEvents"]
    fired = {(e["pid"], int(m[3])) for e in events if e.get("ph") == "i" and (m := MARK.match(e["name"]))}
    parent = {pid for pid, instance in fired if instance == 41}
    child = {pid for pid, instance in fired if instance == 61}
    assert len(parent) == 1 and len(child) == 1 and parent != child, fired
    assert done.stderr.count("slow instance(s) of 'step' of 80 in process") == 2


def test_a_child_that_never_runs_the_range_stays_quiet(workdir: Path) -> None:
    make_file(workdir / "prog.py", PARENT)
    make_file(workdir / "child.py", "def other():\n    pass\n\nother()\n")
    done = run_autonvtx("-t", "__main__", "prog.py", cwd=workdir, env=autonvtx_env(**{WATCH: watch("step")}))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("in process") == 1, done.stderr  # the parent's line; the child has no step


@pytest.mark.parametrize("text", ["[1]", '{"range": "step"}', "not json"])
def test_a_damaged_setting_is_said_and_nothing_watched(workdir: Path, text: str) -> None:
    make_file(workdir / "prog.py", TRAINING)
    done = run_autonvtx("-t", "__main__", "prog.py", "10", "-1", cwd=workdir, env=autonvtx_env(**{WATCH: text}))
    assert done.returncode == 0, done.stderr
    assert "autonvtx: AUTONVTX_FLIGHT_WATCH: expected the JSON autonvtx profile sets" in done.stderr
    assert "nothing watched" in done.stderr and "Traceback" not in done.stderr


FORKING = """
    import os, sys, time

    def step(i):
        time.sleep(0.002)

    for i in range(50):
        step(i)
    pid = os.fork()
    for i in range(30 if pid == 0 else 20):
        step(i)
    if pid:
        os.waitpid(pid, 0)
"""


def test_a_fork_child_counts_its_own_instances(workdir: Path) -> None:
    make_file(workdir / "prog.py", FORKING)
    done = run_autonvtx("-t", "__main__", "prog.py", cwd=workdir, env=autonvtx_env(**{WATCH: watch("step", 50.0)}))
    assert done.returncode == 0, done.stderr
    # "none of the N instances of 'step' in process P", or "... of 'step' of N in process P" after a stall
    said = re.findall(r"none of the (\d+) instances of 'step' in process|of 'step' of (\d+) in process", done.stderr)
    assert sorted(int(a or b) for a, b in said) == [30, 70], done.stderr  # the child's 30 are its own, not 80


@pytest.mark.parametrize(
    ("watched", "domain", "message", "expected"),
    [
        ("step", "autonvtx", "step", True),
        ("autonvtx:step", "autonvtx", "step", True),
        ("autonvtx:step", "other", "step", False),
        ("step", "autonvtx", "Trainer.step", False),
        ("Trainer.step", "autonvtx", "Trainer.step", True),
        ("step {i}", "autonvtx", "step {i}", True),  # a region's template
        ("step {n}", "autonvtx", "step {i}", True),
        ("step 3", "autonvtx", "step {i}", True),  # numbers fold as the summary's rows do
        ("step", "autonvtx", "step {i}", False),
        ("step2", "autonvtx", "step3", False),  # a number touching a word is part of the name
    ],
)
def test_which_ranges_are_watched(watched: str, domain: str, message: str, expected: bool) -> None:
    """Only the watched range is timed: every other Range keeps the path it has without --flight."""
    code = (
        "import sys; from autonvtx import _nvtxclient as c; before = c.Range(sys.argv[2], sys.argv[3], 0, 0);"
        " c.watch_flight(sys.argv[1], 3.0, 10, 20, 5); after = c.Range(sys.argv[2], sys.argv[3], 0, 0);"
        " print(before.watched, after.watched)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, watched, domain, message], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.split() == [str(expected)] * 2  # made before arming: looked at when armed


PROGRAM_INSTALLING = """
    import json, sys, time
    import autonvtx

    def step(i, slow):
        time.sleep(0.06 if i == slow else 0.002)

    def train(n, slow):
        times = []
        for i in range(n):
            t = time.perf_counter()
            step(i, slow)
            times.append(time.perf_counter() - t)
        return times

    with autonvtx.install(targets=["__main__"], flight="step", flight_factor=10, flight_keep=4):
        times = train(120, 59)
    with open("times.json", "w") as f:
        json.dump(times, f)
    train(40, 20)  # uninstalled: no range, nothing watched
"""


def test_install_takes_flight(workdir: Path) -> None:
    make_file(workdir / "prog.py", PROGRAM_INSTALLING)
    done = run_autonvtx("prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    events = json.loads((workdir / "trace.json").read_text())["traceEvents"]
    check_windows(workdir, events, "step", planted=60, keep=4)
    assert "of 120 in process" in done.stderr  # the uninstalled calls are not counted


def test_install_without_a_tool_says_nothing_is_watched(workdir: Path) -> None:
    code = "import autonvtx; autonvtx.install(targets=['json'], flight='step'); print('ran')"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(PYTHONPATH=str(REPO)),
    )
    assert done.returncode == 0 and done.stdout == "ran\n", done.stderr
    assert "autonvtx: --flight: no NVTX tool is attached to process" in done.stderr
    assert "nothing is watched" in done.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"flight": "step", "flight_keep": 0}, "install: flight_keep: expected 1 to 1000"),
        ({"flight": "step", "flight_factor": 1}, "install: flight_factor: expected a number above 1"),
        ({"flight": "step", "flight_factor": "fast"}, "install: flight_factor, .*expected numbers"),
        ({"flight": 3}, "install: flight: expected the name of a range"),
    ],
)
def test_install_refuses_bad_flight_settings(arguments: dict[str, Any], message: str) -> None:
    import autonvtx
    from autonvtx.errors import UsageError

    with pytest.raises(UsageError, match=message):
        autonvtx.install(targets=["nothing_here_at_all"], **arguments)


def test_the_magic_takes_flight() -> None:
    from autonvtx.api import parse_magic_options
    from autonvtx.cli.flight import flight_setting
    from autonvtx.errors import UsageError
    from autonvtx.recorder.flight import Flight

    parsed = parse_magic_options(["-t", "__main__", "--flight", "step", "--flight-keep", "4"])
    assert parsed is not None
    assert flight_setting(**parsed[3], where="%autonvtx") == Flight(range="step", keep=4)
    parsed = parse_magic_options(["-t", "__main__", "--flight-max", "4"])
    assert parsed is not None
    with pytest.raises(UsageError, match=r"%autonvtx: --flight-max sets how --flight watches; add --flight RANGE"):
        flight_setting(**parsed[3], where="%autonvtx")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--flight", "step", "--flight-factor", "1"], "profile: --flight-factor: expected a number above 1"),
        (["--flight-keep", "3"], "profile: --flight-keep sets how --flight watches; add --flight RANGE"),
        (["--flight", " "], "profile: --flight: expected the name of a range"),
    ],
)
def test_profile_refuses_bad_flight_settings_before_nsys(workdir: Path, args: list[str], message: str) -> None:
    make_file(workdir / "prog.py", "print('ran')")
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "profile", "-t", "__main__", *args, "prog.py"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(NSYS="/nonexistent/nsys"),  # refused before nsys is looked for
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"autonvtx: {message}"), done.stderr
    assert "ran" not in done.stdout


# ---- the real Nsight Systems ----


def nsys_marks(export: Path) -> list[str]:
    with sqlite3.connect(export) as db:
        return [row[0] for row in db.execute("SELECT text FROM NVTX_EVENTS WHERE eventType = 34 AND text IS NOT NULL")]


def nsys_ranges(export: Path, name: str) -> int:
    with sqlite3.connect(export) as db:
        rows = db.execute(
            "SELECT COUNT(*) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId"
            " WHERE n.eventType IN (59, 60) AND COALESCE(n.text, s.value) = ?",
            (name,),
        ).fetchone()
    return int(rows[0])


@pytest.mark.parametrize("engine", ENGINES)
def test_profile_flight_captures_the_steps_after_a_slow_one_on_nsys(workdir: Path, engine: str) -> None:
    from tests.nsys_support import nsys_or_skip, run_profile

    nsys_or_skip()
    make_file(workdir / "prog.py", TRAINING)
    done = run_profile(
        "-o", "fr", "--engine", engine, "-t", "__main__", "--flight", "step", "--flight-factor", "10",
        "--flight-keep", "3", "prog.py", "120", "59", "4", cwd=workdir,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr  # the program's own status
    exports = sorted(workdir.glob("fr*.sqlite"))
    assert exports, done.stderr
    planted = [e for e in exports if any("(instance 60 of 'step')" in m for m in nsys_marks(e))]
    assert len(planted) == 1, (done.stderr, [nsys_marks(e) for e in exports])
    export = planted[0]
    assert nsys_ranges(export, "capture") == 1  # the capture range nsys started the collection on
    assert nsys_ranges(export, "step") == 3  # the 3 instances after the slow one, nothing before
    assert nsys_ranges(export, "train") == 0
    for other in exports:
        for mark in nsys_marks(other):
            match = MARK.match(mark)
            assert match is not None and (match[3] == "60" or really_slow(workdir, int(match[3]))), mark
    # The report of each window says which trigger it followed.
    assert re.search(r"--flight window \d+ of process \d+: opened after 'step' \(instance 60 of 'step'\)", done.stdout)
    if len(exports) > 1:
        assert f"--flight: capture 1 of {len(exports)}" in done.stderr
    # `autonvtx report` on the window's export alone says it too.
    report = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", str(export)], capture_output=True, text=True, cwd=workdir
    )
    assert report.returncode == 0, report.stderr
    assert "opened after 'step' (instance 60 of 'step') took" in " ".join(report.stdout.split())


def test_profile_flight_on_a_steady_run_captures_nothing_and_says_so(workdir: Path) -> None:
    from tests.nsys_support import nsys_or_skip, run_profile

    nsys_or_skip()
    make_file(workdir / "prog.py", TRAINING)
    done = run_profile(
        "-o", "fr", "-t", "__main__", "--flight", "step", "--flight-factor", "50", "prog.py", "60", "-1", "5",
        cwd=workdir,
    )  # fmt: skip
    assert done.returncode == 5, done.stderr
    if "capture window 1 opened" in done.stderr:
        pytest.skip("the shared host stalled a step 50x: a window was rightly opened")
    assert not list(workdir.glob("fr*.nsys-rep"))
    assert "none of the 60 instances of 'step' in process" in done.stderr
    assert "--flight: no capture window opened, so nsys recorded nothing and wrote no" in done.stderr


def test_the_flight_watch_benchmark_runs() -> None:
    """benchmarks/flight_watch.py in its quick form: its code works (no figure is asserted here)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "flight_watch.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[2:-1]]
    engines = ["wrap"] + (["code"] if sys.version_info >= (3, 12) else [])
    assert [row[:2] for row in rows] == [[engine, name] for engine in engines for name in ("other", "other=", "step*")]
    assert all(row[-1].endswith("x") for row in rows)


def test_windows_left_as_qdstrm_without_an_importer_are_said(workdir: Path) -> None:
    import time

    from autonvtx.cli.profile import imported_windows, window_reports
    from autonvtx.nsight import Nsys, NsysError, report_paths

    outputs = report_paths(str(workdir / "fr"))
    started = time.time()
    (workdir / "fr.1.qdstrm").write_bytes(b"")
    (workdir / "fr.2.nsys-rep").write_bytes(b"")
    (workdir / "fr.x.nsys-rep").write_bytes(b"")  # not a window's name
    assert window_reports(outputs, started) == [str(workdir / "fr.2.nsys-rep")]
    with pytest.raises(
        NsysError, match=r"nsys left only .*fr\.1\.qdstrm: its importer \(QdstrmImporter\) was not found"
    ):
        imported_windows(Nsys(path="/usr/bin/nsys", version="2022.4.2", importer=None), outputs, started)


def test_an_earlier_run_s_window_reports_need_force_and_go_with_it(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from autonvtx.cli.profile import check_outputs
    from autonvtx.errors import UsageError
    from autonvtx.nsight import report_paths

    output = str(workdir / "fr")
    outputs = report_paths(output)
    for name in ("fr.7.nsys-rep", "fr.7.sqlite", "fr.notes.txt"):
        (workdir / name).write_text("earlier")
    with pytest.raises(UsageError, match=r"fr\.7\.nsys-rep exists; expected --force to overwrite it"):
        check_outputs(output, outputs, force=False, windows=True)
    check_outputs(output, outputs, force=True, windows=True)
    assert sorted(p.name for p in workdir.iterdir()) == ["fr.notes.txt"]
    assert "--force: 1 report(s) of an earlier run's windows removed" in capsys.readouterr().err
