"""Running blocks.py (arms taking turns in one process, under the recorder) and reading what it
prints: shared by benchmarks/budget.py and benchmarks/suggest.py."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from autonvtx.report.noise import ratio_interval

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
    times: dict[str, list[float]] = {name: [] for name in arms}
    for line in done.stdout.splitlines():
        if line.startswith('{"round"'):
            block = json.loads(line)
            times[block["arm"]] += block["cpu_s"]
    return times, done.stderr


def against_plain(times: dict[str, list[float]], arm: str) -> tuple[float, float, float]:
    """The Hodges-Lehmann ratio of `arm`'s times to the plain arm's, less 1, and its 95% interval."""
    ratio, low, high, _ = ratio_interval(times["plain"], times[arm], 0.95)
    return ratio - 1, low - 1, high - 1


def table(times: dict[str, list[float]]) -> str:
    lines = [f"{'arm':<12} {'runs':>5} {'median':>10} {'vs plain (HL)':>14} {'95% interval':>22}"]
    for arm, values in times.items():
        row = f"{arm:<12} {len(values):>5} {statistics.median(values) * 1e3:>8.1f}ms"
        if arm != "plain":
            change, low, high = against_plain(times, arm)
            row += f" {change:>+13.2%}   [{low:+.2%}, {high:+.2%}]"
        lines.append(row)
    return "\n".join(lines)
