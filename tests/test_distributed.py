"""Ranks: output names and labels carry them, --ranks leaves the other ranks untouched, and a
real two-rank torchrun (gloo on CPU, DataLoader workers) merges into one trace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, make_file

from autonvtx.recorder import native
from autonvtx.recorder.trace import read_chrome_trace

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

PYTHON = os.path.basename(sys.executable)

PROGRAM = """
    import json, os

    def work():
        return 1

    work()
    print(json.dumps({"wrapped": __import__("autonvtx").is_instrumented(work),
                      "autonvtx": sorted(k for k in os.environ if k.startswith(("AUTONVTX_", "NVTX_")))}))
"""


def run_rank(workdir: Path, rank: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`autonvtx run ARGS` as rank `rank` of 4 would run under torchrun."""
    env = autonvtx_env(RANK=str(rank), WORLD_SIZE="4", LOCAL_RANK=str(rank))
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_output_names_and_labels_carry_the_rank(workdir: Path) -> None:
    make_file(workdir / "program.py", PROGRAM)
    done = run_rank(
        workdir,
        2,
        "--trace",
        "t.{rank}.json",
        "--summary",
        "s.{rank}-of-{world_size}.json",
        "-t",
        "__main__",
        "program.py",
    )
    assert done.returncode == 0, done.stderr
    [recording] = read_chrome_trace(workdir / "t.2.json")
    assert recording.label == f"rank 2: {PYTHON} program.py"
    assert [r.name for r in recording.ranges] == ["work"]
    other = json.loads((workdir / "t.2.json").read_text())["otherData"]
    assert (other["rank"], other["world_size"], other["launcher"]) == (2, 4, "torchrun")
    assert (workdir / "s.2-of-4.json").exists()


@pytest.mark.parametrize(("rank", "selected"), [(0, True), (1, False), (3, True)])
def test_ranks_outside_the_list_run_untouched(workdir: Path, rank: int, selected: bool) -> None:
    make_file(workdir / "program.py", PROGRAM)
    done = run_rank(workdir, rank, "--ranks", "0,3", "--trace", "t.{rank}.json", "-t", "__main__", "program.py")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (workdir / f"t.{rank}.json").exists() == selected
    assert seen["wrapped"] == selected
    if not selected:  # nothing of autonvtx reaches the program, nor its children
        assert seen["autonvtx"] == []
        assert done.stderr == ""


def test_bad_rank_list_refuses_to_start(workdir: Path) -> None:
    make_file(workdir / "program.py", "print('ran')\n")
    done = run_rank(workdir, 0, "--ranks", "0,x", "program.py")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("autonvtx: --ranks: bad rank list '0,x'")


def test_torchrun_two_ranks_on_cpu_merge_into_one_trace(workdir: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.run")
    example = workdir / "distributed"
    shutil.copytree(REPO / "examples" / "distributed", example)
    env = autonvtx_env(OMP_NUM_THREADS="1")
    # torchrun --no-python runs `autonvtx` from PATH: this interpreter's.
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    launch = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "--no-python",
            "autonvtx",
            "run",
            "--trace",
            "t.{rank}.json",
            "train.py",
            "--epochs",
            "1",
        ],
        cwd=example,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert launch.returncode == 0, launch.stderr
    assert launch.stdout.startswith("epoch 0: mean loss")
    merge = subprocess.run(
        [sys.executable, "-m", "autonvtx", "merge", "t.0.json", "t.1.json", "-o", "all.json"],
        cwd=example,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert merge.returncode == 0, merge.stderr
    recordings = read_chrome_trace(example / "all.json")
    for rank in (0, 1):
        # (named after the interpreter of the `autonvtx` script torchrun found on PATH)
        [main] = [
            r
            for r in recordings
            if r.label.startswith(f"rank {rank}: python") and r.label.endswith(" train.py --epochs 1")
        ]
        names = Counter(r.name for r in main.ranges)
        # 64 samples, 2 ranks, batches of 8: 4 steps per rank, one forward each.
        assert (names["train"], names["train_step"], names["Net.forward"]) == (1, 4, 4)
        assert main.thread_names[main.pid] == f"rank {rank}: MainThread"  # a rank says which it is
        workers = [r for r in recordings if r.label.startswith(f"rank {rank}: Process-")]
        assert len(workers) == 2  # num_workers=2
        made = sum((Counter(r.name for r in w.ranges) for w in workers), Counter())
        assert made == Counter({"make_sample": 32, "RandomRegression.__getitem__": 32})
    assert "missing_processes" not in json.loads((example / "all.json").read_text())["otherData"]
