"""A capture window under the real Nsight Systems: `autonvtx profile` turns it into nsys's capture
range, so the export holds the window's iterations only (Python 3.12+, as regions are)."""
from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, run_autonvtx
from nsys_support import Export, nsys_or_skip, report_counts, run_profile

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12), reason="regions and capture windows need Python 3.12+")

EXAMPLE = REPO / "examples" / "training_loop"


def test_only_the_windows_iterations_reach_the_capture_with_their_index_as_payload(tmp_path: Path) -> None:
    nsys_or_skip()
    shutil.copytree(EXAMPLE, tmp_path / "example")
    directory = tmp_path / "example"
    profiled = run_profile("-o", "window", "train.py", cwd=directory)
    assert profiled.returncode == 0, profiled.stderr
    assert "epoch 2: loss" in profiled.stdout  # the program ran to its end

    export = Export(directory / "window.sqlite")
    ranges = export.ranges()
    steps = {r.name: r.payload for r in ranges if r.name.startswith("step ")}
    assert steps == {f"step {i}": i for i in range(20, 30)}  # iterations [20, 30): the config's window
    named = Counter(r.name for r in ranges if r.domain == "autonvtx")
    assert named["forward"] == named["backward"] == 10
    assert named["evaluate"] == 0  # at the end of each epoch of 40 steps: outside the window

    recorded = run_autonvtx("train.py", cwd=directory)  # autonvtx's recorder keeps the same window
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.trace_path is not None
    ours = report_counts(directory / "window.sqlite", directory)
    theirs = report_counts(recorded.trace_path, directory)
    assert {name: n for name, n in ours.items() if name != "capture"} == {
        name: n for name, n in theirs.items() if name != "capture"}
