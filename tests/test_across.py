"""autonvtx report --across ranks: spread per range across ranks, the straggler, NCCL overlap."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_env, take_view
from synthetic_runs import Program, recording, write_ranks

from autonvtx.report.compare.acrossrun import AcrossRequest, produce_across
from autonvtx.report.nsys.overlap import intersect, is_communication, length, merge
from autonvtx.stats.model import ViewOptions

FIXTURES = Path(__file__).parent / "fixtures" / "nsys"
TORCH = str(FIXTURES / "torch-2gpu-nsys2026.2.sqlite")
SAXPY = str(FIXTURES / "saxpy-mpi-cuda-nsys2022.2.sqlite")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args], capture_output=True, text=True, env=autonvtx_env(), timeout=300
    )


def across(*files: str, **options: Any) -> dict[str, Any]:
    return json.loads(produce_across(AcrossRequest(tuple(files), take_view(options), fmt="json", **options)))


def test_intervals_merge_and_intersect() -> None:
    assert merge([(5, 8), (0, 3), (2, 4), (8, 9)]) == [(0, 4), (5, 9)]
    assert intersect([(0, 4), (5, 9)], [(3, 6), (8, 20)]) == [(3, 4), (5, 6), (8, 9)]
    assert length([(0, 4), (5, 9)]) == 8
    assert is_communication("ncclDevKernel_SendRecv") and is_communication("ncclKernel_AllReduce_RING_LL_Sum_float")
    assert not is_communication("flash_fwd_kernel")


def test_one_export_with_two_processes() -> None:
    document = across(TORCH, strip_ids=True)
    assert document["schema"] == "autonvtx-across-ranks/2"
    assert document["ranks"] == ["pid 144", "pid 145"]
    rows = {row["name"]: row for row in document["ranges"]}
    for row in document["ranges"]:
        assert {"name", "slowest_rank", "imbalance", "min_ns", "median_ns", "max_ns"} <= set(row)
        assert row["min_ns"] <= row["median_ns"] <= row["max_ns"]
        if row["imbalance"] is not None:
            assert row["imbalance"] >= 1.0
            assert row["imbalance"] == pytest.approx(row["max_ns"] / row["median_ns"], rel=1e-5)
    alltoall = rows["AllToAll4D"]
    assert alltoall["metric"] == "gpu" and alltoall["ranks"] == 2
    slowest = max(alltoall["per_rank"], key=lambda value: value["ns"])
    assert alltoall["slowest_rank"] == slowest["rank"]
    # The range holds NCCL SendRecv kernels and compute kernels; what overlaps is counted once.
    assert alltoall["communication_ns"] > 0 and alltoall["compute_ns"] > 0
    assert alltoall["exposed_ns"] == alltoall["communication_ns"] - alltoall["overlapped_ns"]
    assert 0 <= alltoall["overlapped_ns"] <= min(alltoall["communication_ns"], alltoall["compute_ns"])
    for value in alltoall["per_rank"]:
        assert value["communication_ns"] <= value["ns"]  # NCCL kernel time is part of the range's GPU time
    # With NCCL kernels the ranks wait on the GPU, in the communication ranges: pid 144 spends 17 ms
    # in the all-to-all against pid 145's 8 ms, so it waited there for pid 145.
    straggler = document["straggler"]
    assert (straggler["rank"], straggler["method"]) == ("pid 145", "communication")
    assert straggler["waited_ns"] == rows["nccl:all_to_all"]["max_ns"] - rows["nccl:all_to_all"]["min_ns"]
    assert straggler["function"] == "aten::split"  # the most beyond pid 144's time, outside communication
    assert "communication_ns" not in rows[straggler["function"]]


def test_nccl_overlap_matches_a_direct_query() -> None:
    """The range's NCCL kernels, found by joining kernels to their launching calls in SQL."""
    import sqlite3

    connection = sqlite3.connect(f"file:{TORCH}?mode=ro", uri=True)
    nccl = connection.execute(
        "SELECT SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
        "WHERE s.value LIKE 'nccl%'"
    ).fetchone()[0]
    connection.close()
    document = across(TORCH, strip_ids=True)
    alltoall = next(row for row in document["ranges"] if row["name"] == "AllToAll4D")
    # NCCL kernels of one process do not overlap each other (one communication stream).
    assert alltoall["communication_ns"] <= nccl
    assert alltoall["communication_ns"] > 0.9 * nccl


def test_merged_trace_names_the_slow_rank() -> None:
    rng = random.Random(3)
    for slow_rank in (0, 1):
        path = write_ranks(Path(f"{_tmp()}/merged_{slow_rank}.json"), 2, slow_rank, 1.3, rng)
        document = across(str(path))
        assert document["ranks"] == ["rank 0", "rank 1"]
        forward = next(row for row in document["ranges"] if row["name"] == "forward")
        assert forward["slowest_rank"] == f"rank {slow_rank}"
        assert forward["imbalance"] > 1.1
        assert document["straggler"]["rank"] == f"rank {slow_rank}"
        assert document["has_gpu_data"] is False


def _tmp() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="autonvtx-across-")


def test_rank_files_take_their_rank_from_the_name(tmp_path: Path) -> None:
    from autonvtx.recorder.trace import write_chrome_trace

    rng = random.Random(5)
    files = []
    for rank in range(4):
        program = Program(slower={"forward": 1.4} if rank == 2 else {})
        path = tmp_path / f"rep_{rank}.json"
        write_chrome_trace([recording(program, rng, pid=100 + rank)], path)
        files.append(str(path))
    done = cli("report", *files, "--across", "ranks", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["ranks"] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert document["straggler"]["rank"] == "rank 2"
    text = cli("report", *files, "--across", "ranks")
    assert "straggler: rank 2" in text.stdout
    first = text.stdout.splitlines()[7]
    assert "rank 2" in first and first.endswith(("forward", "train"))


def test_copies_of_one_file_are_told_apart(tmp_path: Path) -> None:
    copies = []
    for index in range(2):
        copy = tmp_path / f"copy{'ab'[index]}.sqlite"
        shutil.copy(SAXPY, copy)
        copies.append(str(copy))
    document = across(*copies)
    assert document["ranks"] == ["rank 0 (copya.sqlite)", "rank 0 (copyb.sqlite)"]
    assert all(row["imbalance"] in (1.0, None) for row in document["ranges"])
    assert document["straggler"] is None


def test_cli_messages() -> None:
    several = cli("report", TORCH, SAXPY)
    assert several.returncode == 2
    assert (
        several.stderr.strip()
        == "autonvtx: report: 2 files given; expected one PROFILE, or several with --across ranks"
    )
    tree = cli("report", TORCH, "--across", "ranks", "--tree")
    assert tree.returncode == 2 and "--tree does not go with --across ranks" in tree.stderr
    csv_out = cli("report", TORCH, "--across", "ranks", "--format", "csv", "--strip-ids", "--top", "3")
    lines = csv_out.stdout.splitlines()
    assert lines[0].startswith("name,metric,ranks,min_ns,median_ns,max_ns,lost_ns,slowest_rank")
    assert len(lines) == 4


def test_one_rank_says_so() -> None:
    document = across(SAXPY)
    assert document["ranks"] == ["rank 0"]
    assert any("only one rank" in note for note in document["notes"])


RANKED = """
    import os, time

    SLOW = 3.0 if os.environ["RANK"] == "1" else 1.0

    # Sleeps long beside a loaded machine's wake-up delays (tens of ms at worst).
    def forward():
        time.sleep(0.1 * SLOW)

    def backward():
        time.sleep(0.05)

    for _ in range(3):
        forward()
        backward()
"""


def test_recorded_two_rank_run_names_the_slow_rank(tmp_path: Path) -> None:
    """Two ranks recorded by `autonvtx run` (rank from RANK, as under torchrun): rank 1's forward is slow."""
    from conftest import make_file

    program = make_file(tmp_path / "ranks.py", RANKED)
    for rank in ("0", "1"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "autonvtx",
                "run",
                "--trace",
                str(tmp_path / "t.{rank}.json"),
                "-t",
                "__main__",
                str(program),
            ],
            capture_output=True,
            text=True,
            env=autonvtx_env(RANK=rank, WORLD_SIZE="2"),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    files = [str(tmp_path / "t.0.json"), str(tmp_path / "t.1.json")]
    for inputs in (files, [_merged(files, tmp_path)]):
        document = across(*inputs)
        assert document["ranks"] == ["rank 0", "rank 1"]
        forward = next(row for row in document["ranges"] if row["name"] == "autonvtx:forward")
        assert forward["slowest_rank"] == "rank 1" and forward["imbalance"] > 1.3  # 1.5 without noise
        assert document["straggler"]["rank"] == "rank 1"


def _merged(files: list[str], tmp_path: Path) -> str:
    merged = tmp_path / "all.json"
    done = cli("merge", *files, "-o", str(merged))
    assert done.returncode == 0, done.stderr
    return str(merged)


def test_no_communication_kernels_no_overlap_figures() -> None:
    from autonvtx.report.nsys.overlap import read_overlap

    assert read_overlap(SAXPY, "rank", False) == {}  # saxpy kernels only
    assert read_overlap(TORCH, "rank", True)[("pid 144", "AllToAll4D")][0] > 0
    document = across(SAXPY)
    assert all("communication_ns" not in row for row in document["ranges"])


def test_an_output_that_cannot_be_written_is_refused_before_any_file_is_read(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    # The inputs do not exist either: the message names -o, so it was checked first.
    done = cli(
        "report", str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite"), "--across", "ranks", "-o", f"{missing}/x.txt"
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "-o" in done.stderr and "no such directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_names_are_whole_in_a_file_and_fit_a_terminal() -> None:
    whole = produce_across(AcrossRequest((TORCH,), view=ViewOptions(top=40, sort="name")))
    assert "FSDP::post_forward (blocks.{n}._checkpoint_wrapped_module), op_id = {n}" in whole
    fitted = produce_across(AcrossRequest((TORCH,), width=140, view=ViewOptions(top=40, sort="name")))
    table = fitted.split("\n\n", 1)[1].splitlines()
    assert all(len(line) <= 140 for line in table), [line for line in table if len(line) > 140]
    assert any(line.endswith("op_id = {n}") and "..." in line for line in table)  # the end kept


def test_every_sort_key_of_the_ranks_view_is_accepted_and_others_refused_in_one_line() -> None:
    for sort in ("imbalance", "lost", "max", "median", "min", "kernels", "count", "name"):
        done = cli("report", TORCH, "--across", "ranks", "--sort", sort, "--top", "3", "--format", "json")
        assert done.returncode == 0, (sort, done.stderr)
    lost = json.loads(cli("report", TORCH, "--across", "ranks", "--sort", "lost", "--format", "json").stdout)
    assert [r["lost_ns"] for r in lost["ranges"]] == sorted((r["lost_ns"] for r in lost["ranges"]), reverse=True)
    for sort in ("self", "mean", "span", "memcpy"):
        done = cli("report", "missing-a.sqlite", "missing-b.sqlite", "--across", "ranks", "--sort", sort)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (sort, done.stderr)
        assert f"--sort: the ranks side by side (--across ranks) has no figures for '{sort}'" in done.stderr
