"""A process's status (ended abnormally, still running, recording missing) is a field carried from
where it is known to where it is shown, never kept inside its name and read back out of it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_file

from autonvtx.recorder import native
from autonvtx.recorder.trace import read_chrome_trace

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )


def test_a_name_holding_a_status_text_is_only_a_name(tmp_path: Path) -> None:
    """A program whose command line ends with "(still running)" or "(ended abnormally)" ended
    well: no note says otherwise, and its track is named by its command line alone."""
    program = make_file(
        tmp_path / "prog.py",
        """
        import nvtx
        with nvtx.annotate("work"):
            pass
        """,
    )
    for text in ("(still running)", "(ended abnormally)"):
        run = _run(tmp_path, "--trace", "t.json", "--summary", "--by", "process", str(program), text)
        assert run.returncode == 0, run.stderr
        assert "still running when" not in run.stderr and "ended abnormally (a crash" not in run.stderr
        trace = json.loads((tmp_path / "t.json").read_text())
        (process,) = trace["otherData"]["processes"]
        assert process["status"] == "ended" and process["label"].endswith(text)
        (named,) = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"]
        assert named == process["label"]
        (rec,) = read_chrome_trace(tmp_path / "t.json")
        assert rec.status == "ended" and rec.display_name == process["label"] == rec.track_name


def test_a_killed_child_carries_its_status_beside_its_name(tmp_path: Path) -> None:
    child = make_file(
        tmp_path / "child.py",
        """
        import os, signal, nvtx
        with nvtx.annotate("child.step"):
            pass
        path = os.path.join(os.environ["AUTONVTX_RECORD_DIR"], f"{os.getpid()}.anr")
        while not os.path.exists(path) or os.path.getsize(path) < 40:
            os.sched_yield()
        os.kill(os.getpid(), signal.SIGKILL)
        """,
    )
    parent = make_file(
        tmp_path / "parent.py",
        f"""
        import subprocess, sys
        print("child status", subprocess.call([sys.executable, {str(child)!r}]))
        """,
    )
    run = _run(tmp_path, "--trace", "t.json", "--summary", "--by", "process", str(parent))
    assert run.returncode == 0, run.stderr
    assert f"child status {-signal.SIGKILL}" in run.stdout
    trace = json.loads((tmp_path / "t.json").read_text())
    (killed,) = [p for p in trace["otherData"]["processes"] if p["status"] != "ended"]
    assert killed["status"] == "ended abnormally" and not killed["ended_normally"]
    name = f"python {child}"
    assert killed["label"] == name  # the name alone: the status has its own field
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert names[killed["pid"]] == f"{name} (ended abnormally)"  # the track shows it once
    said = " ".join(run.stderr.split())  # notes are wrapped to the terminal's width
    assert said.count(f"process {killed['pid']} ({name}) ended abnormally (a crash") == 1
    # The summary's group heading says it beside the name, from the field.
    assert f"process {killed['pid']} ({name}), ended abnormally" in said
    (rec,) = [r for r in read_chrome_trace(tmp_path / "t.json") if r.pid == killed["pid"]]
    assert rec.status == "ended abnormally" and rec.display_name == name
    assert rec.track_name == f"{name} (ended abnormally)"
