"""report --across ranks names the rank the others wait for, and its function: on two real processes
that synchronise through a pipe (tests/straggler_job.py), recorded by the recorder, and on timelines
made to order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import autonvtx_env

from autonvtx.report.compare.straggler import find_straggler
from autonvtx.report.compare.timelines import build_timeline

JOB = Path(__file__).parent / "straggler_job.py"
MS = 1_000_000


def record_job(where: Path, case: str) -> list[str]:
    """Both ranks of the job, run at once under `autonvtx run --trace` as a launcher runs them."""
    where.mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        os.mkfifo(where / f"to{rank}")
    trace = str(where / "t.{rank}.json")
    ranks = [
        subprocess.Popen(
            [sys.executable, "-m", "autonvtx", "run", "--trace", trace, "-t", "__main__", str(JOB), str(where), case],
            env=autonvtx_env(RANK=str(rank), WORLD_SIZE="2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    for process in ranks:
        try:
            _out, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for other in ranks:
                other.kill()
            raise
        assert process.returncode == 0, err
    return [str(where / "t.0.json"), str(where / "t.1.json")]


def across_json(*files: str) -> dict:  # type: ignore[type-arg]
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", *files, "--across", "ranks", "--format", "json"],
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_slow_data_loader_is_named_not_the_rank_that_waits_in_backward(tmp_path: Path) -> None:
    """Rank 1's load_batch takes 20 ms longer a step; rank 0 waits those 20 ms inside backward.
    Per range, both ranks lose 20 ms a step: only when each reaches backward tells them apart."""
    named = []
    for run in range(10):
        document = across_json(*record_job(tmp_path / str(run), "data"))
        straggler = document["straggler"]
        named.append((straggler["rank"], straggler["function"]))
        assert straggler["method"] == "arrival", straggler
        assert straggler["sync_range"] == "autonvtx:backward", straggler
    assert named == [("rank 1", "autonvtx:load_batch")] * 10


def test_slow_compute_inside_backward_is_named(tmp_path: Path) -> None:
    """Rank 1's backward computes 20 ms longer before all_reduce, where rank 0 waits."""
    for run in range(3):
        document = across_json(*record_job(tmp_path / str(run), "compute"))
        straggler = document["straggler"]
        assert (straggler["rank"], straggler["function"]) == ("rank 1", "autonvtx:backward"), straggler
        assert straggler["sync_range"] == "autonvtx:all_reduce"
        assert straggler["late_in"] >= 5 and straggler["waited_ns"] > 5 * 15 * MS


def test_the_text_headline_says_rank_function_and_why(tmp_path: Path) -> None:
    files = record_job(tmp_path, "data")
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", *files, "--across", "ranks"],
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    headline = next(line for line in done.stdout.splitlines() if line.startswith("straggler:"))
    assert headline.startswith("straggler: rank 1, `autonvtx:load_batch` (reached the ranges that end together")
    assert "`autonvtx:backward`" in headline and "longer than the other ranks' median" in headline


# Timelines made to order: (thread, start, end, name), in milliseconds


def _timeline(ranges: list[tuple[int, float, float, str]]):  # type: ignore[no-untyped-def]
    return build_timeline((tid, int(start * MS), int(end * MS), name) for tid, start, end, name in ranges)


def _steps(load: float, compute: float, steps: int = 4) -> list[tuple[int, float, float, str]]:
    """load, then backward (compute, then a wait until the step's common end at 100 ms a step)."""
    found = []
    for step in range(steps):
        at = 100.0 * step
        found += [
            (1, at, at + load, "load"),
            (1, at + load, at + 90, "backward"),
            (1, at + load, at + load + compute, "grad"),
        ]
    return found


def test_reached_is_the_end_of_the_last_child_and_self_time_excludes_children() -> None:
    timeline = _timeline([(1, 0, 10, "outer"), (1, 1, 3, "a"), (1, 4, 6, "b"), (2, 0, 5, "other")])
    assert timeline.instances["outer"] == [(0, 6 * MS, 10 * MS)]
    assert timeline.instances["a"] == [(1 * MS, 1 * MS, 3 * MS)]
    assert timeline.self_ns["outer"] == 6 * MS and timeline.self_ns["other"] == 5 * MS


def test_the_late_rank_at_an_aligned_end_is_the_straggler_and_its_busy_child_the_function() -> None:
    timelines = {
        "rank 0": _timeline(_steps(load=10, compute=20)),
        "rank 1": _timeline(_steps(load=10, compute=50)),  # its grad ends 30 ms later; backward ends together
        "rank 2": _timeline(_steps(load=12, compute=20)),
    }
    found = find_straggler(timelines)
    assert found is not None
    assert (found.rank, found.function, found.sync_range) == ("rank 1", "grad", "backward")
    assert found.late_in == 4 and found.synchronising == 4
    assert found.function_excess_ns == 4 * 30 * MS


def test_ranges_that_never_end_together_fall_back_to_busy_time() -> None:
    timelines = {
        "rank 0": _timeline([(1, 0, 10, "load"), (1, 10, 20, "step")]),
        "rank 1": _timeline([(1, 0, 40, "load"), (1, 40, 50, "step")]),
    }
    found = find_straggler(timelines)
    assert found is not None and found.method == "self time"
    assert (found.rank, found.function) == ("rank 1", "load")
    assert "no range ends together" in found.why
    assert find_straggler({"rank 0": timelines["rank 0"]}) is None


@pytest.mark.parametrize("skip", [True, False])
def test_skipped_ranges_are_never_the_function(skip: bool) -> None:
    timelines = {
        "rank 0": _timeline([(1, 0, 10, "nccl:all_reduce"), (1, 10, 20, "step")]),
        "rank 1": _timeline([(1, 0, 40, "nccl:all_reduce"), (1, 40, 45, "step")]),
    }
    found = find_straggler(timelines, (lambda name: name.startswith("nccl:")) if skip else (lambda _n: False))
    assert found is not None
    assert found.function == ("step" if skip else "nccl:all_reduce")


# One Nsight Systems capture of the whole job: the launcher and both ranks


def test_one_capture_of_a_job_labels_ranks_by_rank_and_leaves_the_launcher_out(tmp_path: Path) -> None:
    from nsys_support import nsys_or_skip, run_profile

    nsys_or_skip()
    (tmp_path / "pipes").mkdir()
    launcher = Path(__file__).parent / "straggler_launch.py"
    profiled = run_profile("-o", "job", "-t", "__main__", str(launcher), str(tmp_path / "pipes"), "data", cwd=tmp_path)
    assert profiled.returncode == 0, profiled.stdout + profiled.stderr
    document = across_json(str(tmp_path / "job.sqlite"))
    assert document["ranks"] == ["rank 0", "rank 1"]  # by rank, not pid; the launcher is no rank
    assert any(note.startswith("left out, holding no rank: pid ") for note in document["notes"])
    straggler = document["straggler"]
    assert (straggler["rank"], straggler["function"], straggler["sync_range"]) == (
        "rank 1",
        "autonvtx:load_batch",
        "autonvtx:backward",
    )
    # The launcher's own range (it waits for the ranks the whole run) is in no rank's row.
    assert "autonvtx:launch" not in {row["name"] for row in document["ranges"]}


def test_one_recording_of_a_job_leaves_the_launcher_out(tmp_path: Path) -> None:
    (tmp_path / "pipes").mkdir()
    launcher = Path(__file__).parent / "straggler_launch.py"
    trace = tmp_path / "job.json"
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "--trace", str(trace), "-t", "__main__", str(launcher)]
        + [str(tmp_path / "pipes"), "data"],
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    document = across_json(str(trace))
    assert document["ranks"] == ["rank 0", "rank 1"]
    assert any(note.startswith("left out, holding no rank: process ") for note in document["notes"])
    assert (document["straggler"]["rank"], document["straggler"]["function"]) == ("rank 1", "autonvtx:load_batch")


# A real DistributedDataParallel job (gloo, CPU) under torchrun


def test_a_ddp_job_names_the_rank_with_the_slow_data_loader(tmp_path: Path) -> None:
    """tests/straggler_ddp.py: rank 1 loads its batches 50 ms slower; rank 0 waits in backward's all-reduce."""
    pytest.importorskip("torch")
    pytest.importorskip("torch.distributed.run")
    env = autonvtx_env(OMP_NUM_THREADS="1")
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])  # torchrun finds autonvtx
    job = Path(__file__).parent / "straggler_ddp.py"
    launch = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "--no-python"]
        + ["autonvtx", "run", "--trace", "t.{rank}.json", "-t", "__main__", str(job)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert launch.returncode == 0, launch.stderr
    straggler = across_json(str(tmp_path / "t.0.json"), str(tmp_path / "t.1.json"))["straggler"]
    assert (straggler["rank"], straggler["function"], straggler["sync_range"]) == (
        "rank 1",
        "autonvtx:load_batch",
        "autonvtx:backward",
    ), straggler


def test_a_range_met_once_is_not_the_function_when_steps_wait_step_after_step() -> None:
    """`main` holds a one-off wait of its own (a rendezvous at start-up, no range around it): rank 1's
    main has 200 ms more self time, but its steps are late because of `grad`."""
    timelines = {
        "rank 0": _timeline([(1, 0, 400, "main"), *_steps(load=10, compute=20)]),
        "rank 1": _timeline([(1, -200, 400, "main"), *_steps(load=10, compute=50)]),
    }
    found = find_straggler(timelines)
    assert found is not None
    assert (found.rank, found.function) == ("rank 1", "grad")


def test_filter_shapes_the_table_not_the_straggler(tmp_path: Path) -> None:
    """--filter decides the rows shown; the straggler is found from every range of the job (a
    filter hiding the communication ranges once switched the method)."""
    files = record_job(tmp_path, "compute")
    whole = across_json(*files)["straggler"]
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", *files, "--across", "ranks", "--format", "json"]
        + ["--filter", "*backward*"],
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert {row["name"] for row in document["ranges"]} == {"autonvtx:backward"}
    assert document["straggler"] == whole


def test_filter_hiding_the_communication_ranges_keeps_the_straggler() -> None:
    """The two-GPU torch export: its straggler comes from the c10d ranges' NCCL waits; a filter
    that shows only forward rows hid them and switched the method."""
    export = str(Path(__file__).parent / "fixtures" / "nsys" / "torch-2gpu-nsys2026.2.sqlite")
    whole = across_json(export)["straggler"]
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", export, "--across", "ranks", "--format", "json"]
        + ["--filter", "*forward*"],
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert whole["method"] == "communication"
    assert json.loads(done.stdout)["straggler"] == whole


@pytest.mark.parametrize("export", ["torch-2gpu-nsys2026.2.sqlite", "saxpy-mpi-cuda-nsys2022.2.sqlite"])
@pytest.mark.parametrize("each", [False, True])
def test_timelines_kept_from_the_sweeps_read_are_those_read_again(export: str, each: bool) -> None:
    # --across ranks read each export's ranges twice (the sweep, then the timelines): the sweep
    # now keeps them, and the straggler must see exactly what a second read gave.
    from autonvtx.report.compare.timelines import read_timelines
    from autonvtx.report.profile import ReportOptions, read_profile
    from autonvtx.stats.model import ViewOptions

    path = str(Path(__file__).parent / "fixtures" / "nsys" / export)
    kept = read_profile(path, ReportOptions(ViewOptions(by="rank", each=each), with_tree=False, flat_ranges=True))
    again = read_profile(path, ReportOptions(ViewOptions(by="rank", each=each), with_tree=False))
    assert kept.flat_ranges and again.flat_ranges is None
    from_sweep = read_timelines(kept, path, each=each)
    from_second_read = read_timelines(again, path, each=each)
    assert from_sweep.keys() == from_second_read.keys() and len(from_sweep) >= 1
    for rank, timeline in from_sweep.items():
        assert timeline.instances == from_second_read[rank].instances
        assert timeline.self_ns == from_second_read[rank].self_ns
