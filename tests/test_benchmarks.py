"""The benchmarks run (issue 6): `benchmarks/run.py --quick` prints a row for every goal.
Correctness of the benchmark code only: no figure is asserted, timings mean nothing here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autonvtx.recorder import native

REPO = Path(__file__).resolve().parents[1]


def test_quick_benchmark_run_prints_every_goal(tmp_path: Path) -> None:
    if native.library_path() is None:
        pytest.skip("the native recorder is not built in this checkout")
    pytest.importorskip("pandas")
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    header, *table = proc.stdout.splitlines()[1:-1]
    assert header.split(" | ")[0].strip() == "goal"
    rows = json.loads(out.read_text())["rows"]
    assert len(table) == len(rows) + 1  # and the rule under the header
    # 11: generators and coroutines on the native path; 13: the code engine (skipped rows
    # before 3.12 say why); 24: start-up, wholesale, coroutines awaited once, exceptions.
    assert {row["goal"] for row in rows} == {"1", "2", "3", "4", "5", "11", "13", "24"}
    assert all(row["figure"] and row["target"] for row in rows)
    # What holds at any size: nothing traces unselected functions, and `autonvtx run` without
    # a tool leaves selected functions unwrapped and says once how to attach one.
    by_what = {row["what"]: row for row in rows}
    assert by_what["unselected function in an instrumented module / plain"]["met"] is True
    assert "said 1x" in by_what["no tool: `autonvtx run`, selected function / plain twin"]["figure"]
    # Start-up is measured with a config and a no-op tool too, and with a target already
    # imported; wholesale as whole processes, with a workload, per engine (issues 11-13, 24).
    assert any("--config rules.toml empty.py`, no-op tool" in what for what in by_what)
    assert any("already imported" in what and row["goal"] == "24" for what, row in by_what.items())
    assert by_what["start-up: `autonvtx run empty.py` (no rules, no tool) - `python empty.py`"]["target"] == "<= 15 ms"
    engines = ["wrap", "code"] if sys.version_info >= (3, 12) else ["wrap"]
    for engine in engines:
        [wholesale] = [
            row for what, row in by_what.items() if what.startswith("wholesale numpy") and f", {engine} engine" in what
        ]
        assert wholesale["goal"] == "24" and wholesale["target"].startswith("<= ")
        assert "whole process" in wholesale["figure"] and "workload x" in wholesale["figure"]
    # Issue 24's per-resumption and exception figures stand beside their targets.
    awaited = [row for what, row in by_what.items() if what.startswith("coroutine, awaited: wrapper engine")]
    assert [row["target"] for row in awaited] == ["<= 60 ns"]


def test_recorder_benchmark_runs() -> None:
    if native.library_path() is None:
        pytest.skip("the native recorder is not built in this checkout")
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_recorder.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "events recorded" in proc.stdout


def test_output_benchmark_runs() -> None:
    # Issue 15's figures (writing traces and summaries at scale): the code runs, at a tiny size.
    if native.library_path() is None:
        pytest.skip("the native recorder is not built in this checkout")
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_outputs.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for output in ("json", "pftrace", "summary"):
        assert proc.stdout.count(f"  {output} ") == 2, proc.stdout  # one thread, then four
