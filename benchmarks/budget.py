"""What `--budget PCT` costs a real program's step, with the recorder attached (issue 35's bar:
`-t 'transformers.*' --budget 2` on a BERT training step costs at most 2% and keeps every
`*.forward`).

    python benchmarks/budget.py [--rounds N] [--steps N] [--budget PCT] [--engine wrap|code]
    python benchmarks/budget.py --in-process [--rounds N] [--steps N] [--budget PCT]

The program is `suggest_programs/bert_step.py` (transformers BERT on the CPU, random weights, one
torch thread), which prints each step's CPU time. Three commands run alternated, N rounds, the
order rotated every round so that a slow phase of a shared host falls on each alike:

- plain `python bert_step.py STEPS`;
- `autonvtx run -t 'transformers.*' --budget PCT --summary=JSON` (the recorder attached, as a
  profiler attaches itself: without a tool `autonvtx run` wraps nothing);
- the same without `--budget`, for scale.

A run's figure is the median of its steps' CPU times (robust to a step stalled by another
process). The ratio against plain is the Hodges-Lehmann estimate over the runs with its 95%
interval (`autonvtx.report.noise`, what `autonvtx diff` uses); the bar is met when the interval's
upper end is within it. Every `*.forward` row of the budgeted run must keep the count of the run
without a budget.

`--in-process` runs `budget_blocks.py` instead: the three arms take turns in blocks of STEPS
steps inside one process under the recorder (install() and uninstall() between blocks), each
step timed on the main thread's CPU clock. A shared host's slow minutes then fall on every arm
alike; the figure is the Hodges-Lehmann ratio of the arms' step times with its 95% interval.
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

from autonvtx.report.noise import ratio_interval

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
    scratch = tempfile.mkdtemp(prefix="autonvtx-budget-bench-")
    command = [sys.executable, "-m", "autonvtx", "run", f"--summary={os.path.join(scratch, 's.json')}"]
    command += [os.path.join(HERE, "budget_blocks.py"), str(options.rounds), str(options.steps), options.budget]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=7200)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    steps: dict[str, list[float]] = {"plain": [], "budget": [], "unbudgeted": []}
    for line in done.stdout.splitlines():
        block = json.loads(line)
        steps[block["arm"]] += block["steps_s"]
    python = ".".join(map(str, sys.version_info[:3]))
    print(
        f"Python {python}, in one process under the recorder: {options.rounds} rounds of blocks of"
        f" {options.steps} steps per arm; each step's CPU time on the main thread"
    )
    print(f"{'arm':<12} {'median step':>12} {'vs plain (HL)':>14} {'95% interval':>22}")
    print(f"{'plain':<12} {statistics.median(steps['plain']) * 1e3:>10.2f}ms")
    for name in ("budget", "unbudgeted"):
        ratio, low, high, _ = ratio_interval(steps["plain"], steps[name], 0.95)
        print(
            f"{name:<12} {statistics.median(steps[name]) * 1e3:>10.2f}ms {ratio - 1:>+13.2%}"
            f"   [{low - 1:+.2%}, {high - 1:+.2%}]"
        )
    _, _, high, _ = ratio_interval(steps["plain"], steps["budget"], 0.95)
    met = high - 1 <= float(options.budget) / 100
    print(f"bar (--budget {options.budget} costs at most {options.budget}%): {'met' if met else 'NOT met'}")
    print("budget's exit line:", next((x for x in done.stderr.splitlines() if "--budget" in x), "none"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--budget", default="2")
    parser.add_argument("--engine", choices=["wrap", "code"], default="wrap")
    parser.add_argument("--in-process", action="store_true", help="Blocks taking turns in one process.")
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
