"""Many rank files at once: `report --across ranks` and `diff` over copies of the real 2-GPU export,
and the false-positive rate and power of diff's test on generated runs.

    python benchmarks/bench_scale.py               # 64 rank files, then 500 generated comparisons
    python benchmarks/bench_scale.py --files 8 --comparisons 50   # quicker

Each rank file is a copy of tests/fixtures/nsys/torch-2gpu-nsys2026.2.sqlite (2.7 MB, 19,118 NVTX
events, 4,010 kernels): the size of the shared fixtures. The commands run as a user runs them
(`python -m autonvtx ...`), workers one per CPU; the seconds printed are wall-clock.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from autonvtx.report.compare.diff import compare  # noqa: E402
from autonvtx.report.compare.gather import Job, available_cpus, gather  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "nsys" / "torch-2gpu-nsys2026.2.sqlite"


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"bench_scale: {' '.join(command[:4])} failed: {done.stderr.strip()}")
    return took


def rank_files(directory: Path, count: int) -> list[str]:
    files = []
    for rank in range(count):
        target = directory / f"rep_{rank:02d}.sqlite"
        shutil.copyfile(FIXTURE, target)
        files.append(str(target))
    return files


def scale(count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="autonvtx-scale-") as where:
        files = rank_files(Path(where), count)
        python = [sys.executable, "-m", "autonvtx"]
        one = timed(python + ["report", files[0], "--across", "ranks", "--strip-ids", "--no-progress"])
        across = timed(python + ["report", *files, "--across", "ranks", "--strip-ids", "--no-progress"])
        half = count // 2
        diff = timed(python + ["diff", *files[:half], "--against", *files[half:], "--strip-ids", "--no-progress"])
        print(f"{count} rank files of {FIXTURE.stat().st_size / 1e6:.1f} MB, {available_cpus()} CPUs")
        print(f"  report --across ranks, 1 file:   {one:6.2f} s")
        print(
            f"  report --across ranks, {count} files: {across:6.2f} s  ({across / one:.1f}x one file; goal: under 60 s)"
        )
        print(f"  diff {half} files --against {half}:  {diff:6.2f} s")
        # ru_maxrss of children: the largest resident set any one process reached (KiB on Linux).
        largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"  largest process (a command or one of its workers): {largest:.0f} MB resident at most")


def false_positives(comparisons: int, runs: int) -> None:
    """How often diff calls an unchanged function changed (or same, or unclear), and how often it catches a 20% slowdown."""
    from synthetic_runs import FUNCTIONS, Program, write_runs

    rng = random.Random(20261125)
    unchanged = [name for name in FUNCTIONS if name != "forward"]
    flagged = caught = same = 0
    with tempfile.TemporaryDirectory(prefix="autonvtx-noise-") as where:
        for index in range(comparisons):
            directory = Path(where) / str(index)
            base = write_runs(directory, "b", runs, Program(), rng)
            new = write_runs(directory, "n", runs, Program(slower={"forward": 1.2}), rng)
            summaries = gather([Job(path) for path in base + new], workers=1)
            verdicts = {row.name: row.verdict for row in compare(summaries[:runs], summaries[runs:]).rows}
            flagged += sum(verdicts[name] in ("slower", "faster") for name in unchanged)
            same += sum(verdicts[name] == "same" for name in unchanged)
            caught += verdicts["forward"] == "slower"
            shutil.rmtree(directory)
    tests = comparisons * len(unchanged)
    print(f"generated runs, {runs} per side, {comparisons} comparisons (exact rank test, alpha 0.01, same within 5%):")
    print(f"  unchanged functions flagged slower or faster: {flagged} of {tests} ({100 * flagged / tests:.2f}%)")
    print(f"  unchanged functions shown same: {same} of {tests} ({100 * same / tests:.1f}%; the rest unclear)")
    print(f"  20% slower function flagged slower: {caught} of {comparisons} ({100 * caught / comparisons:.1f}%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--comparisons", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.files:
        scale(args.files)
    if args.comparisons:
        false_positives(args.comparisons, args.runs)


if __name__ == "__main__":
    main()
