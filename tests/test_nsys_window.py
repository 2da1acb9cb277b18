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
        name: n for name, n in theirs.items() if name != "capture"
    }


FORKED = """
import multiprocessing as mp


def work(i):
    return i


def train(n):
    for i in range(n):
        work(i)


if __name__ == "__main__":
    train(2)
    process = mp.get_context("fork").Process(target=train, args=(3,))
    process.start()
    process.join()
"""


def test_a_fork_childs_region_ranges_reach_nsys(tmp_path: Path) -> None:
    # nsys starts afresh in a fork child and drops events made with the parent's NVTX handles:
    # regions ask for theirs again there, as function ranges do.
    nsys_or_skip()
    (tmp_path / "forked.py").write_text(FORKED)
    (tmp_path / "autonvtx.toml").write_text(
        '[[rules]]\nmodules = ["__main__"]\ninclude = ["train"]\n'
        '[[regions]]\nfunction = "__main__:train"\nloop = "first"\nname = "step"\n'
    )
    profiled = run_profile("-o", "forked", "forked.py", cwd=tmp_path)
    assert profiled.returncode == 0, profiled.stderr
    ranges = Export(tmp_path / "forked.sqlite").ranges()
    by_process = Counter((r.pid, r.name) for r in ranges if r.domain == "autonvtx")
    pids = sorted({pid for pid, _ in by_process})
    assert len(pids) == 2, by_process
    counts = sorted(tuple(sorted((name, n) for (pid, name), n in by_process.items() if pid == p)) for p in pids)
    # A fixed name is a registered string: the handle the child must ask for again.
    assert counts == [(("step", 2), ("train", 1)), (("step", 3), ("train", 1))]
