"""What `--budget` costs a BERT step in instructions, which a busy host does not move (issue 35's
bar: `-t 'transformers.*' --budget 2` costs at most 2% of the step).

    python benchmarks/budget_instructions.py [--rounds N] [--steps N] [--budget PCT] [--full]

Timings on this project's shared 2-core machines move by 3-6% from run to run whatever the
design (benchmarks/budget.py gives their intervals); instruction counts do not. One process runs
under Valgrind's callgrind and under autonvtx's recorder (`autonvtx run --summary`, which attaches
it, as a profiler attaches itself). Inside it a BERT (a small one by default, whose step makes
as many calls in a tenth of the time, so the ranges weigh ten times more; `--full` for
suggest_programs/bert_step.py's) runs blocks of STEPS steps, the arms taking turns: no ranges,
`install(targets=["transformers.*"], budget=PCT)`, and the same without a budget. Each block
installs its arm, runs one step untimed (the budget measures each function's first calls), has
callgrind dump its counters (`callgrind_control -d`, which zeroes them), runs STEPS steps and
dumps again: that second dump holds the block's steps alone. The figure is each arm's
instructions per step, against the plain arm's: the ratio of the arms' medians over the rounds,
with each arm's spread over the rounds beside it.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def child(rounds: int, steps: int, budget: float, full: bool) -> None:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    import autonvtx

    torch.manual_seed(0)
    torch.set_num_threads(1)
    if full:
        config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
        batch, length = 8, 128
    else:
        config = BertConfig(
            vocab_size=1000, hidden_size=64, num_hidden_layers=4, num_attention_heads=2, intermediate_size=128
        )
        batch, length = 2, 16
    model = BertForSequenceClassification(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids, labels = torch.randint(0, config.vocab_size, (batch, length)), torch.randint(0, 2, (batch,))

    def step() -> None:
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    dumps = 0

    def dump() -> int:
        nonlocal dumps
        subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True, check=True)
        dumps += 1
        return dumps

    step()  # everything the step imports is imported before the first walk
    arms = {"plain": None, "budget": budget, "unbudgeted": 0.0}
    names = list(arms)
    for round_ in range(rounds):
        for arm in names[round_ % 3 :] + names[: round_ % 3]:
            installation = None
            if arms[arm] is not None:
                installation = autonvtx.install(targets=["transformers.*"], budget=arms[arm] or None)
            step()
            dump()
            for _ in range(steps):
                step()
            print(json.dumps({"arm": arm, "dump": dump()}), flush=True)
            if installation is not None:
                installation.uninstall()


def instructions(path: str) -> int:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            found = re.match(r"(?:summary|totals): (\d+)", line)
            if found:
                return int(found.group(1))
    raise SystemExit(f"no totals in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--full", action="store_true", help="suggest_programs/bert_step.py's BERT, not the small one.")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.rounds, options.steps, options.budget, options.full)
        return
    scratch = tempfile.mkdtemp(prefix="autonvtx-budget-instructions-")
    out = os.path.join(scratch, "cg.out")
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%p", "--dump-line=no"]
    command += [sys.executable, "-m", "autonvtx", "run", f"--summary={os.path.join(scratch, 's.json')}"]
    command += [os.path.abspath(__file__), "--child", "--rounds", str(options.rounds), "--steps", str(options.steps)]
    command += ["--budget", str(options.budget)] + (["--full"] if options.full else [])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    env["PYTHONHASHSEED"] = "0"
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=7200)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    per_step: dict[str, list[float]] = {"plain": [], "budget": [], "unbudgeted": []}
    for line in done.stdout.splitlines():
        if line.startswith('{"arm"'):
            block = json.loads(line)
            [path] = glob.glob(f"{out}.*.{block['dump']}")
            per_step[block["arm"]].append(instructions(path) / options.steps)
    python = ".".join(map(str, sys.version_info[:3]))
    size = "suggest_programs/bert_step.py's BERT" if options.full else "a small BERT"
    print(
        f"Python {python}, {size}, under callgrind and the recorder: {options.rounds} rounds of"
        f" {options.steps} steps per arm; instructions per step"
    )
    base = statistics.median(per_step["plain"])
    print(f"{'arm':<12} {'median':>14} {'spread over rounds':>22} {'vs plain':>9}")
    for arm, values in per_step.items():
        spread = (max(values) - min(values)) / statistics.median(values)
        change = statistics.median(values) / base - 1
        print(f"{arm:<12} {statistics.median(values):>14,.0f} {spread:>21.2%} {change:>+9.2%}")
    budget_change = statistics.median(per_step["budget"]) / base - 1
    met = budget_change <= options.budget / 100
    print(f"bar (--budget {options.budget:g} costs at most {options.budget:g}%): {'met' if met else 'NOT met'}")
    print("the budget's exit line:", next((x for x in done.stderr.splitlines() if "autonvtx: --budget" in x), "none"))


if __name__ == "__main__":
    main()
