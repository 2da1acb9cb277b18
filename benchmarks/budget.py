"""What `--budget PCT` costs a real program's step, with the recorder attached (issue 35's bar:
`-t 'transformers.*' --budget 2` on a BERT training step costs at most 2% and keeps every
`*.forward`).

    python benchmarks/budget.py [--rounds N] [--steps N] [--budget PCT] [--engine wrap|code]
    python benchmarks/budget.py --in-process [--small] [--rounds N] [--repeats N] [--steps N] [--budget PCT]

The program is `suggest_programs/bert_step.py` (transformers BERT on the CPU, random weights, one
torch thread), which prints each step's CPU time. Three commands run alternated, N rounds, the
order rotated every round so that a slow phase of a shared host falls on each alike:

- plain `python bert_step.py STEPS`;
- `autonvtx run -t 'transformers.*' --budget PCT --summary=JSON` (the recorder attached, as a
  profiler attaches itself: without a tool `autonvtx run` wraps nothing);
- the same without `--budget`, for scale.

A run's figure is the median of its steps' CPU times (robust to a step stalled by another
process). The ratio against plain is the Hodges-Lehmann estimate over the runs with its 95%
interval (`autonvtx.report.compare.noise`, what `autonvtx diff` uses); the bar is met when the interval's
upper end is within it. Every `*.forward` row of the budgeted run must keep the count of the run
without a budget.

`--in-process` has the three arms take turns inside one process under the recorder
(`blocks.py`: install() and uninstall() between blocks, the program's section run REPEATS times
a block), so that a shared host's slow minutes fall on every arm alike; the figure is the
Hodges-Lehmann ratio of the arms' section CPU times with its 95% interval. `--small` uses a
BERT a tenth of the size whose steps make as many calls: the ranges weigh ten times more.
The same counted in instructions, which a busy host does not move (CPU times move by 3-6% here):
benchmarks/budget_instructions.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from turns import against_plain, paired, table, take_turns

from autonvtx.report.compare.noise import ratio_interval

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "suggest_programs", "bert_step.py")


def step_median(command: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    match = re.search(r"^steps_cpu_s=(.*)$", done.stdout, re.M)
    if match is None:
        raise SystemExit(f"{' '.join(command)} printed no steps_cpu_s:\n{done.stdout[-2000:]}")
    return statistics.median(float(value) for value in match.group(1).split(","))


def forward_counts(summary: str) -> dict[str, int]:
    with open(summary, encoding="utf-8") as f:
        rows = json.load(f)["ranges"]
    return {row["name"]: row["count"] for row in rows if row["name"].endswith(".forward")}


def in_process(options: argparse.Namespace) -> None:
    rules: dict[str, Any] = {"targets": ["transformers.*"], "engine": options.engine}
    arms = {"plain": None, "budget": {**rules, "budget": float(options.budget)}, "unbudgeted": rules}
    args = [str(options.steps), *(["small"] if options.small else [])]
    times, stderr = take_turns(options.rounds, options.repeats, arms, PROGRAM, *args)
    python = ".".join(map(str, sys.version_info[:3]))
    print(
        f"Python {python}, engine {options.engine}, {'a small BERT' if options.small else 'BERT'}: arms taking"
        f" turns in one process under the recorder, {options.rounds} rounds of {options.repeats} timed runs of"
        f" {options.steps} steps each; a run's figure is its section's CPU time"
    )
    print(table(times))
    # Met when both intervals' upper ends are within the budget: the pooled runs and the rounds paired.
    met = max(against_plain(times, "budget")[2], paired(times, "budget")[2]) <= float(options.budget) / 100
    print(f"bar (--budget {options.budget} costs at most {options.budget}%): {'met' if met else 'NOT met'}")
    print("the budget's exit line:", next((x for x in stderr.splitlines() if "autonvtx: --budget" in x), "none"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--budget", default="2")
    parser.add_argument("--engine", choices=["wrap", "code"], default="wrap")
    parser.add_argument("--in-process", action="store_true", help="Blocks taking turns in one process.")
    parser.add_argument("--small", action="store_true", help="--in-process: a BERT a tenth of the size.")
    parser.add_argument("--repeats", type=int, default=3, help="--in-process: timed runs per block.")
    options = parser.parse_args()
    if options.in_process:
        in_process(options)
        return
    scratch = tempfile.mkdtemp(prefix="autonvtx-budget-bench-")
    summaries = {name: os.path.join(scratch, f"{name}.json") for name in ("budget", "unbudgeted")}
    rules = ["-t", "transformers.*", "--engine", options.engine]
    commands = {
        "plain": [sys.executable, PROGRAM, str(options.steps)],
        "budget": [
            *(sys.executable, "-m", "autonvtx", "run", *rules, "--budget", options.budget),
            f"--summary={summaries['budget']}",
            *(PROGRAM, str(options.steps)),
        ],
        "unbudgeted": [
            *(sys.executable, "-m", "autonvtx", "run", *rules, f"--summary={summaries['unbudgeted']}"),
            *(PROGRAM, str(options.steps)),
        ],
    }
    figures: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for round_ in range(options.rounds):
        for name in names[round_ % 3 :] + names[: round_ % 3]:
            figures[name].append(step_median(commands[name]))
        print(json.dumps({"round": round_, **{k: v[-1] for k, v in figures.items()}}), flush=True)

    python = ".".join(map(str, sys.version_info[:3]))
    print(
        f"\nPython {python}, engine {options.engine}, {options.rounds} rounds of {options.steps} steps;"
        f" a run's figure is its median step CPU time"
    )
    print(f"{'command':<12} {'median step':>12} {'vs plain (HL)':>14} {'95% interval':>22}")
    print(f"{'plain':<12} {statistics.median(figures['plain']) * 1e3:>10.2f}ms")
    for name in ("budget", "unbudgeted"):
        ratio, low, high, _ = ratio_interval(figures["plain"], figures[name], 0.95)
        print(
            f"{name:<12} {statistics.median(figures[name]) * 1e3:>10.2f}ms {ratio - 1:>+13.2%}"
            f"   [{low - 1:+.2%}, {high - 1:+.2%}]"
        )
    kept, every = forward_counts(summaries["budget"]), forward_counts(summaries["unbudgeted"])
    lost = {name: (kept.get(name), count) for name, count in every.items() if kept.get(name) != count}
    print(
        f"*.forward rows: {len(every)} without a budget, {len(every) - len(lost)} kept with their exact counts"
        + (f"; differ: {lost}" if lost else "")
    )
    _, _, high, _ = ratio_interval(figures["plain"], figures["budget"], 0.95)
    print(
        f"bar (--budget {options.budget} costs at most {options.budget}%, every *.forward kept):"
        f" {'met' if high - 1 <= float(options.budget) / 100 and not lost else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
