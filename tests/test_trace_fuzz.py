"""The commands that read traces (summary, diff, report --across ranks, merge) on hostile Chrome
traces: a seeded fuzz of events with lone surrogates in their text, negative, huge and
non-numeric times and durations, wrong types, unmatched begins and ends, and odd pids. Every
case ends with status 0 or a one-line `autonvtx: ...` message, never a traceback (a fault
battery once found 83 of them, 63 from a lone surrogate in a name)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_cli

CASES = 24  # per command; each case is one process (a second or so)
NAMES = ["step", "load\ud800batch", "\udfff", "fwd \u2028 pass", "<!--<script>", "", "x" * 300]
TIMES: list[Any] = [0, 1, 17.5, -5, 1e18, 2.0**70, -(2.0**70), "12", None, True, [1], 1e-9]


def hostile_event(rng: random.Random) -> dict[str, Any]:
    phase = rng.choice(["X", "X", "X", "B", "E", "b", "e", "i", "M", "C"])
    event: dict[str, Any] = {
        "ph": phase,
        "name": rng.choice(NAMES + [7, None]),
        "pid": rng.choice([1, 2, 1, -1, "rank 1", 2**40]),
        "tid": rng.choice([1, 2, 1, "main", 0]),
        "ts": rng.choice(TIMES) if rng.random() < 0.3 else rng.uniform(0, 1000),
    }
    if phase == "X":
        event["dur"] = rng.choice(TIMES) if rng.random() < 0.3 else rng.uniform(0, 100)
    if phase in "be":
        event["id"] = rng.choice([1, 2, "a"])
        event["cat"] = rng.choice(["c", "\ud800"])
    if rng.random() < 0.2:
        event["args"] = rng.choice([{"domain": "\udc00"}, {"payload": "inf"}, [], {"open": True}])
    return event


def hostile_trace(path: Path, seed: int) -> Path:
    rng = random.Random(seed)
    events = [hostile_event(rng) for _ in range(rng.randint(1, 40))]
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    return path


def assert_no_traceback(done: subprocess.CompletedProcess[str], case: str) -> None:
    assert "Traceback" not in done.stderr, f"{case}:\n{done.stderr}"
    assert done.returncode in (0, 2), f"{case}: status {done.returncode}\n{done.stderr}"
    if done.returncode == 2:
        errors = [line for line in done.stderr.splitlines() if not line.startswith("autonvtx: warning")]
        assert errors and all(line.startswith("autonvtx: ") for line in errors), f"{case}:\n{done.stderr}"


@pytest.mark.parametrize("command", ["summary", "diff", "across", "merge"])
def test_hostile_traces_never_raise_a_traceback(tmp_path: Path, command: str) -> None:
    for seed in range(CASES):
        a = hostile_trace(tmp_path / f"a{seed}.json", seed)
        b = hostile_trace(tmp_path / f"b{seed}.json", seed + 10_000)
        if command == "summary":
            done = autonvtx_cli("summary", str(a), "-o", str(tmp_path / f"s{seed}.json"), cwd=tmp_path)
        elif command == "diff":
            done = autonvtx_cli("diff", str(a), "--against", str(b), cwd=tmp_path)
        elif command == "across":
            done = autonvtx_cli("report", str(a), str(b), "--across", "ranks", cwd=tmp_path)
        else:
            done = autonvtx_cli("merge", str(a), str(b), "-o", str(tmp_path / f"m{seed}.json"), cwd=tmp_path)
        assert_no_traceback(done, f"{command} seed {seed}")
