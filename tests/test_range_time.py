"""One definition of a range's time: a recursive function has one Total in `run --summary`, in
`report` on the recording, in `report` on the real Nsight Systems export of the same program, and
`diff` between the two says nothing changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx
from nsys_support import nsys_or_skip, run_profile

from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.stats.python_twin import summarize

# f(3) sleeps four times 10 ms, each call inside the one before: 40 ms of f, whatever the nesting.
RECURSION = """
import time


def f(n):
    time.sleep(0.01)
    if n:
        f(n - 1)


f(3)
"""


def push(name: str, start: int, end: int, tid: int = 1, kind: str = "push") -> Range:
    return Range(1, tid, "", name, start, end, kind=kind)  # type: ignore[arg-type]


def rows(*ranges: Range, **view: Any) -> dict[str, Any]:
    from autonvtx.stats.model import ViewOptions

    return {s.name: s for s in summarize([ProcessRecording(pid=1, ranges=list(ranges))], ViewOptions(**view))}


def test_nested_instances_of_a_range_count_once_in_its_total() -> None:
    f = rows(push("f", 0, 100), push("f", 10, 90), push("f", 20, 30), push("g", 40, 50), push("f", 41, 49))["f"]
    assert f.count == 4  # every instance
    assert f.total_ns == 100  # the time inside the outermost one
    assert f.mean_ns == (100 + 80 + 10 + 8) / 4  # each instance's own duration
    assert f.max_ns == 100 and f.min_ns == 8
    assert f.wall_percent == 100.0


def test_instances_on_other_threads_and_start_end_ranges_each_count() -> None:
    f = rows(push("f", 0, 100), push("f", 10, 90, tid=2))["f"]
    assert f.total_ns == 180  # two threads at once: 180 ms of f in 100 ms of wall time
    s = rows(push("s", 0, 100, kind="startend"), push("s", 10, 90, kind="startend"))["s"]
    assert s.total_ns == 180  # overlapping on purpose (concurrent work): each counts


def test_warm_up_left_out_by_skip_first_does_not_hide_the_instances_inside_it() -> None:
    f = rows(push("f", 0, 100), push("f", 10, 90), push("f", 20, 30), skip_first=1)["f"]
    assert (f.count, f.total_ns) == (2, 80)  # the outermost call was the warm-up


def test_group_class_folds_nested_instances_of_a_class_once() -> None:
    seq = rows(push("model (Sequential)", 0, 100), push("model.0 (Sequential)", 10, 60), group="class")["Sequential"]
    assert (seq.count, seq.total_ns) == (2, 100)


def summary_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    return {row["name"]: row for row in data["ranges"]}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args], cwd=cwd, capture_output=True, text=True, env=autonvtx_env()
    )


def report_rows(path: Path, cwd: Path) -> dict[str, Any]:
    done = cli("report", str(path), "--format", "json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return {row["name"]: row for row in json.loads(done.stdout)["ranges"]}


def recorded_total(tmp_path: Path) -> int:
    """f's Total as `run --summary` gives it, checked equal in `report` on the same recording."""
    make_file(tmp_path / "prog.py", RECURSION)
    ran = run_autonvtx("--summary", "summary.json", "-t", "__main__", "prog.py", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    summary = summary_json(tmp_path / "summary.json")["f"]
    assert summary["count"] == 4
    total = int(summary["total_ns"])
    assert 40e6 <= total < 80e6  # the outermost call; summed over instances it would be ~100 ms
    assert summary["wall_percent"] <= 100.0
    recorded = report_rows(tmp_path / "trace.json", tmp_path)["f"]
    assert (recorded["instances"], recorded["cpu_ns"], recorded["total_ns"]) == (4, total, total)
    return total


def test_a_recursive_function_has_one_total_in_run_summary_and_report(tmp_path: Path) -> None:
    recorded_total(tmp_path)


def test_a_recursive_function_has_the_same_total_in_the_nsys_export_and_diff_sees_no_change(tmp_path: Path) -> None:
    nsys_or_skip()
    total = recorded_total(tmp_path)
    profiled = run_profile("-o", "cap", "-t", "__main__", "prog.py", cwd=tmp_path)
    assert profiled.returncode == 0, profiled.stderr
    captured = report_rows(tmp_path / "cap.sqlite", tmp_path)["f"]
    assert captured["instances"] == 4
    assert captured["cpu_ns"] == pytest.approx(total, rel=0.25)  # two runs of one program, each ~40 ms of f

    # The same program seen by the recorder and by Nsight Systems: no change to report.
    # One run a side: --noise absorbs the two runs' jitter (sleeps on a loaded machine), not a 0.4x.
    diff = cli("diff", "trace.json", "--against", "cap.sqlite", "--noise", "30", "--format", "json", cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr
    (row,) = [row for row in json.loads(diff.stdout)["ranges"] if row["name"].endswith("f")]
    assert row["verdict"] not in ("faster", "slower"), row
    assert row["ratio"] == pytest.approx(1.0, abs=0.25), row


def test_each_by_group_table_has_its_own_shares() -> None:
    from autonvtx.stats.model import ViewOptions

    rec = ProcessRecording(pid=1, ranges=[push("a", 0, 100), push("b", 0, 50, tid=2), push("c", 50, 100, tid=2)])
    stats = summarize([rec], ViewOptions(by="thread"))
    for group in {s.group for s in stats}:
        members = [s for s in stats if s.group == group]
        assert sum(s.percent for s in members) == pytest.approx(100.0)  # Time %, as % Wall, within the group
        assert all(s.wall_percent <= 100.0 for s in members)
