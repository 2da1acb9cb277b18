"""`autonvtx suggest` on real programs (issue 35): how much of each program's measured section the
suggested rules put inside a range, what they cost, and how many patterns they hold.

    python benchmarks/suggest.py [--repeat N] [PROGRAM.py ...]   # default: benchmarks/suggest_programs/*

Each program marks its timed section with an NVTX range `section` (domain `bench`) and prints
`section_s=SECONDS section_cpu_s=SECONDS`. For each program:

1. `autonvtx suggest -o RULES PROGRAM` writes the rules (its own estimate is printed too);
2. `autonvtx run --config RULES --trace T PROGRAM`: coverage is the union of the suggested ranges
   on the section's thread inside the section, over the section's duration;
3. cost: the section's CPU time with no ranges and under `install(config=RULES)`, the two
   taking turns in one process under the recorder (`turns.py`, `blocks.py`: --repeat rounds of
   two runs each), as the pooled runs' and the paired rounds' Hodges-Lehmann ratio with 95%
   intervals; with --instructions, also each section's instructions counted under Valgrind's
   callgrind (two rounds), which a busy host does not move. Without an NVTX tool attached
   `autonvtx run` wraps nothing (docs/costs.md), so that case costs nothing.

One JSON line per program, then a table.
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
from typing import Any

from turns import against_plain, count_instructions, paired, take_turns

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable
AUTONVTX = [PYTHON, "-m", "autonvtx"]


CLOCK = "section_cpu_s"  # the section's CPU time, as the programs print it (a busy host moves wall time by tens of %)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}


def coverage(trace_path: str) -> tuple[float, int]:
    """(share of the section inside an autonvtx range on its thread, ranges in the section)."""
    with open(trace_path, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    ends = {(e["pid"], e["tid"], e.get("id")): e["ts"] for e in events if e.get("ph") == "e" and e["name"] == "section"}
    begin = next(e for e in events if e.get("ph") == "b" and e["name"] == "section" and e.get("cat") == "bench")
    start, end = begin["ts"], ends[(begin["pid"], begin["tid"], begin.get("id"))]
    spans = sorted(
        (max(e["ts"], start), min(e["ts"] + e["dur"], end))
        for e in events
        if e.get("ph") == "X" and e.get("cat") != "bench" and (e["pid"], e["tid"]) == (begin["pid"], begin["tid"])
        if e["ts"] < end and e["ts"] + e["dur"] > start
    )
    covered, reach = 0.0, start
    for first, last in spans:
        if last > reach:
            covered += last - max(first, reach)
            reach = last
    return covered / (end - start), len(spans)


def measure(program: str, repeat: int, scratch: str, instructions: bool) -> dict[str, Any]:
    cwd = os.path.dirname(program)
    rules = os.path.join(scratch, os.path.basename(program) + ".toml")
    suggested = subprocess.run(
        [*AUTONVTX, "suggest", "-o", rules, program], cwd=cwd, capture_output=True, text=True, env=_clean_env()
    )
    if suggested.returncode != 0:
        raise SystemExit(f"suggest failed on {program}:\n{suggested.stderr[-3000:]}")
    with open(rules, encoding="utf-8") as f:
        text = f.read()
    patterns = sum(1 for line in text.splitlines() if re.match(r'\s+".*",\s+#', line))
    trace = os.path.join(scratch, "check.json")
    subprocess.run(
        [*AUTONVTX, "run", "--config", rules, "--trace", trace, program],
        cwd=cwd,
        capture_output=True,
        env=_clean_env(),
        check=True,
    )
    covered, ranges = coverage(trace)
    cost = re.search(r"one range cost ([0-9.]+) (ns|us)", text)
    range_ns = float(cost.group(1)) * (1000 if cost.group(2) == "us" else 1) if cost else 0.0
    # The cost: the program's section with no ranges and under the suggested rules, taking turns
    # in one process under the recorder (turns.py), so a busy host's slow minutes fall on both.
    arms = {"plain": None, "rules": {"config": rules}}
    times, _ = take_turns(repeat, 2, arms, program)
    pooled, paired_change = against_plain(times, "rules"), paired(times, "rules")
    counted = None
    if instructions:  # the same sections counted in instructions, which the host's load does not move
        counts, _ = count_instructions(2, 1, arms, program)
        counted = statistics.median(counts["rules"]) / statistics.median(counts["plain"]) - 1
    base = statistics.median(value for block in times["plain"] for value in block)
    measured = re.search(rf"\b{CLOCK}=([0-9.]+)", suggested.stdout)
    return {
        "program": os.path.basename(program),
        "python": ".".join(map(str, sys.version_info[:3])),
        "patterns": patterns,
        "coverage": round(covered, 4),
        "ranges_in_section": ranges,
        "section_s": round(base, 4),
        "cost_pooled": [round(x, 4) for x in pooled],  # HL estimate, 95% interval
        "cost_paired": [round(x, 4) for x in paired_change],
        "cost_instructions": round(counted, 5) if counted is not None else None,
        # The ranges in the section times what one cost at the measured run's start-up: the cost
        # that timing noise on a busy host hides.
        "cost_estimated": round(ranges * range_ns / 1e9 / base, 5),
        # The measured run itself (every function of every imported package ranged), one run.
        "measured_run_slowdown": round(float(measured.group(1)) / base, 2) if measured else None,
        "suggest_says": suggested.stderr.strip().splitlines()[-1],
        "rules": rules,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--instructions", action="store_true", help="Also count the cost in instructions under callgrind (slow)."
    )
    parser.add_argument("--keep", metavar="DIR", help="Keep the suggested rules in DIR.")
    options = parser.parse_args()
    programs = options.programs or sorted(glob.glob(os.path.join(HERE, "suggest_programs", "*.py")))
    scratch = options.keep or tempfile.mkdtemp(prefix="autonvtx-suggest-bench-")
    os.makedirs(scratch, exist_ok=True)
    rows = []
    for program in programs:
        row = measure(os.path.abspath(program), options.repeat, scratch, options.instructions)
        print(json.dumps(row), flush=True)
        rows.append(row)
    head = f"{'program':<20} {'patterns':>8} {'coverage':>9} {'estimated':>10} {'instructions':>13}"
    print(head + f" {'timed (paired rounds, 95%)':>32}")
    for row in rows:
        change, low, high = row["cost_paired"]
        timed = f"{change:+.2%} [{low:+.2%}, {high:+.2%}]"
        counted = f"{row['cost_instructions']:+.2%}" if row["cost_instructions"] is not None else "-"
        print(
            f"{row['program']:<20} {row['patterns']:>8} {row['coverage']:>9.1%} {row['cost_estimated']:>10.2%}"
            f" {counted:>13} {timed:>32}"
        )


if __name__ == "__main__":
    main()
