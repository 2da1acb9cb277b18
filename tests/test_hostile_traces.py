"""Traces with what no recorder writes (a lone surrogate in a name, a negative duration, a time
before 0 or past 2**63 ns) are read with what is wrong dropped or repaired and said in one line:
summary, diff, report --across ranks and merge end normally, with no traceback and no figure
made of an impossible event (a negative duration once gave -105.9% and a "faster" verdict)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_cli


def event(name: str, ts: float, dur: float, pid: int = 1, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def write_trace(path: Path, events: list[dict[str, Any]]) -> Path:
    # json.dumps writes a lone surrogate as the escape \ud800, as a foreign tool's trace holds it.
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    return path


HOSTILE = [
    event("step", 10, 100),
    event("bad\ud800name", 200, 50),
    event("negative", 300, -40),
    event("before zero", -5, 1),
    event("far future", 1e18, 1),
    event("huge duration", 400, 2.0**70),
    event("step", 500, 100),
]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "hostile.json", HOSTILE)


def assert_clean(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_summary_drops_impossible_events_and_says_so(hostile: Path) -> None:
    table = hostile.parent / "table.json"
    done = autonvtx_cli("summary", str(hostile), "-o", str(table), cwd=hostile.parent)
    assert_clean(done)
    assert "4 event(s) dropped" in done.stderr
    assert "lone surrogate" in done.stderr and "U+FFFD" in done.stderr
    names = table.read_text(encoding="utf-8")
    for gone in ("negative", "before zero", "far future", "huge duration"):
        assert gone not in names
    assert "bad\\ufffdname" in names and "step" in names


def test_diff_of_hostile_traces_gives_no_impossible_change(hostile: Path, tmp_path: Path) -> None:
    other = write_trace(tmp_path / "other.json", HOSTILE)
    done = autonvtx_cli("diff", str(hostile), "--against", str(other), cwd=tmp_path)
    assert_clean(done)
    assert "negative" not in done.stdout and "huge duration" not in done.stdout


def test_across_ranks_and_merge_read_hostile_traces(hostile: Path, tmp_path: Path) -> None:
    other = write_trace(tmp_path / "rank1.json", [{**e, "pid": 2} for e in HOSTILE])
    assert_clean(autonvtx_cli("report", str(hostile), str(other), "--across", "ranks", cwd=tmp_path))
    merged = tmp_path / "merged.json"
    done = autonvtx_cli("merge", str(hostile), str(other), "-o", str(merged), cwd=tmp_path)
    assert_clean(done)
    document = json.loads(merged.read_text(encoding="utf-8"))
    names = {e.get("name") for e in document["traceEvents"] if e.get("ph") == "X"}
    assert {"step", "bad\ufffdname"} <= names
    assert not names & {"negative", "before zero", "far future", "huge duration"}


def test_an_end_before_its_begin_is_dropped(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path / "be.json",
        [
            {"ph": "B", "name": "backwards", "pid": 1, "tid": 1, "ts": 100},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 50},
            event("fine", 200, 10),
        ],
    )
    table = tmp_path / "table.json"
    done = autonvtx_cli("summary", str(trace), "-o", str(table), cwd=tmp_path)
    assert_clean(done)
    assert "1 event(s) dropped" in done.stderr
    text = table.read_text(encoding="utf-8")
    assert "backwards" not in text and "fine" in text
