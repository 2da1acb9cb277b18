"""Running blocks.py (arms taking turns in one process, under the recorder) and reading what it
prints: shared by benchmarks/budget.py and benchmarks/suggest.py. Timed (take_turns), or
counted in instructions under Valgrind's callgrind (count_instructions), which a busy host does
not move: this project's shared machines move CPU times by 3-6% from run to run."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from autonvtx.report.compare.noise import ratio_interval

HERE = os.path.dirname(os.path.abspath(__file__))


def take_turns(
    rounds: int, repeats: int, arms: dict[str, Any], program: str, *args: str
) -> tuple[dict[str, list[float]], str]:
    """Each arm's section CPU times (seconds), and blocks.py's stderr (autonvtx's lines)."""
    scratch = tempfile.mkdtemp(prefix="autonvtx-turns-")
    arms_file = os.path.join(scratch, "arms.json")
    with open(arms_file, "w", encoding="utf-8") as f:
        json.dump(arms, f)
    command = [sys.executable, "-m", "autonvtx", "run", f"--summary={os.path.join(scratch, 's.json')}"]
    command += [os.path.join(HERE, "blocks.py"), str(rounds), str(repeats), arms_file, program, *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=7200, cwd=os.path.dirname(program))
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    times: dict[str, list[list[float]]] = {name: [] for name in arms}
    for line in done.stdout.splitlines():
        if line.startswith('{"round"'):
            block = json.loads(line)
            times[block["arm"]].append(block["cpu_s"])
    return times, done.stderr


def count_instructions(
    rounds: int, repeats: int, arms: dict[str, Any], program: str, *args: str
) -> tuple[dict[str, list[float]], str]:
    """Each arm's instructions per section (every section of a round's block, in order), counted
    by callgrind around the section alone, and the run's stderr."""
    import glob
    import re

    scratch = tempfile.mkdtemp(prefix="autonvtx-instructions-")
    arms_file = os.path.join(scratch, "arms.json")
    with open(arms_file, "w", encoding="utf-8") as f:
        json.dump(arms, f)
    out = os.path.join(scratch, "cg.out")
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%p", "--dump-line=no"]
    command += [sys.executable, "-m", "autonvtx", "run", f"--summary={os.path.join(scratch, 's.json')}"]
    command += [os.path.join(HERE, "blocks.py"), str(rounds), str(repeats), arms_file, program, *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    env.update(AUTONVTX_BENCH_CALLGRIND="1", PYTHONHASHSEED="0")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=7200, cwd=os.path.dirname(program))
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    counts: dict[str, list[float]] = {name: [] for name in arms}
    for line in done.stdout.splitlines():
        if line.startswith('{"round"'):
            block = json.loads(line)
            for number in block["dumps"]:
                [path] = glob.glob(f"{out}.*.{number}")
                with open(path, encoding="utf-8", errors="replace") as f:
                    total = next(int(m.group(1)) for m in map(re.compile(r"(?:summary|totals): (\d+)").match, f) if m)
                counts[block["arm"]].append(total)
    return counts, done.stderr


def against_plain(times: dict[str, list[list[float]]], arm: str) -> tuple[float, float, float]:
    """The Hodges-Lehmann ratio of `arm`'s times to the plain arm's, less 1, and its 95% interval
    (every run of each arm pooled)."""
    pooled = {name: [value for block in blocks for value in block] for name, blocks in times.items()}
    ratio, low, high, _ = ratio_interval(pooled["plain"], pooled[arm], 0.95)
    return ratio - 1, low - 1, high - 1


def paired(times: dict[str, list[list[float]]], arm: str) -> tuple[float, float, float]:
    """The same from the rounds paired: each round's log ratio of medians (its blocks ran side by
    side), their Hodges-Lehmann estimate (the median of the Walsh averages) less 1, and its
    95% interval from the exact distribution of the signed-rank statistic."""
    logs = [math.log(statistics.median(new) / statistics.median(base)) for base, new in zip(times["plain"], times[arm])]
    n = len(logs)
    walsh = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    most = n * (n + 1) // 2
    counts = [1] + [0] * most  # ways each signed-rank sum T+ arises, over the 2^n sign choices
    for rank in range(1, n + 1):
        for total in range(most, rank - 1, -1):
            counts[total] += counts[total - rank]
    k, below = 0, 0
    while below + counts[k] <= 0.025 * 2**n:  # P(T+ <= k) within the lower tail
        below += counts[k]
        k += 1
    middle = statistics.median(walsh)
    if k == 0:
        return math.exp(middle) - 1, -1.0, math.inf
    return math.exp(middle) - 1, math.exp(walsh[k - 1]) - 1, math.exp(walsh[len(walsh) - k]) - 1


def table(times: dict[str, list[list[float]]]) -> str:
    head = f"{'arm':<12} {'runs':>5} {'median':>10} {'vs plain, pooled (HL)':>22} {'95% interval':>20}"
    lines = [head + f" {'rounds paired':>14} {'95% interval':>20}"]
    for arm, blocks in times.items():
        values = [value for block in blocks for value in block]
        row = f"{arm:<12} {len(values):>5} {statistics.median(values) * 1e3:>8.1f}ms"
        if arm != "plain":
            change, low, high = against_plain(times, arm)
            row += f" {change:>+21.2%}   [{low:+.2%}, {high:+.2%}]"
            change, low, high = paired(times, arm)
            row += f" {change:>+13.2%}   [{low:+.2%}, {high:+.2%}]"
        lines.append(row)
    return "\n".join(lines)
