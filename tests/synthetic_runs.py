"""Runs made to order: autonvtx traces with known range durations and known noise, for diff and the rank view.

Each run is the trace the recorder would write for a program whose functions take known times:
`train` encloses, per step, `load_batch`, `forward`, `backward` and `optimizer_step`. Noise is
multiplicative and log-normal at three levels: the whole run (a busy machine), each function in
each run (caches, clocks), and each call.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.recorder.trace import write_chrome_trace

FUNCTIONS = {"load_batch": 400_000, "forward": 1_000_000, "backward": 1_800_000, "optimizer_step": 300_000}


@dataclass(frozen=True)
class Noise:
    run: float = 0.02  # sigma of the log of a run's common factor
    function: float = 0.01  # sigma of the log of each function's factor in a run
    call: float = 0.05  # sigma of the log of each call's factor


@dataclass(frozen=True)
class Program:
    steps: int = 20
    slower: dict[str, float] = field(default_factory=dict)  # function -> factor (1.2: 20% slower)
    noise: Noise = Noise()


def recording(program: Program, rng: random.Random, pid: int = 4242, label: str = "") -> ProcessRecording:
    """One process's ranges: `train` around the steps, each function once per step."""
    run_factor = rng.lognormvariate(0.0, program.noise.run)
    factors = {
        name: run_factor * rng.lognormvariate(0.0, program.noise.function) * program.slower.get(name, 1.0)
        for name in FUNCTIONS
    }
    tid = pid
    now = 1_000_000_000
    start = now
    ranges = []
    for _ in range(program.steps):
        for name, mean in FUNCTIONS.items():
            took = int(mean * factors[name] * rng.lognormvariate(0.0, program.noise.call))
            ranges.append(Range(pid, tid, "", name, now, now + took))
            now += took + 1_000
    ranges.insert(0, Range(pid, tid, "", "train", start, now))
    return ProcessRecording(
        pid,
        cmdline=["python", "train.py"],
        thread_names={tid: "MainThread"},
        ranges=ranges,
        flush_ns=now + 1_000,
        label=label,
    )


def write_run(path: Path, program: Program, rng: random.Random) -> Path:
    write_chrome_trace([recording(program, rng)], path)
    return path


def write_runs(directory: Path, stem: str, count: int, program: Program, rng: random.Random) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    return [str(write_run(directory / f"{stem}{i}.json", program, rng)) for i in range(count)]


def write_ranks(path: Path, ranks: int, slow_rank: int, factor: float, rng: random.Random) -> Path:
    """A merged trace of a `ranks`-process job in which one rank's `forward` is `factor` times slower."""
    recordings = []
    for rank in range(ranks):
        slower = {"forward": factor} if rank == slow_rank else {}
        recordings.append(recording(Program(slower=slower), rng, pid=5000 + rank, label=f"rank {rank}"))
    write_chrome_trace(recordings, path)
    return path
