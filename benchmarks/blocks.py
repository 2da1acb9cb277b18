"""Arms that take turns in one process: a program's timed section run again and again, with no
ranges or under an `autonvtx.install(...)` per arm. benchmarks/suggest.py and budget.py run it
under the recorder (`autonvtx run --summary=...` attaches it, as a profiler attaches itself):

    autonvtx run --summary=s.json benchmarks/blocks.py ROUNDS REPEATS ARMS.json PROGRAM [ARGS...]

ARMS.json maps each arm's name to install()'s keyword arguments, or null for no ranges:
`{"plain": null, "rules": {"config": "suggested.toml"}}`. PROGRAM is one of
suggest_programs/*.py: run with `runpy.run_path`, it leaves its section's CPU time in its
global `cpu` (the imports and data it makes before its section are outside it). Each block
installs its arm (the walk is outside the timing), runs PROGRAM once untimed (a budget measures
each function's first calls there; the first block of all also imports everything), then
REPEATS times timed, and ends the installation. The arms' order rotates every round, so that a
shared host's slow minutes fall on every arm alike, which runs in separate processes cannot
promise. One JSON line per block: {"round", "arm", "cpu_s": [...]}.

Under Valgrind's callgrind (turns.count_instructions sets AUTONVTX_BENCH_CALLGRIND), the
program's `section_edge()` (given in its globals; the programs call it where their section
starts and ends) has callgrind dump its counters (`callgrind_control -d`, which zeroes them):
the dump at a section's end holds that section's instructions alone, and the block's line lists
those dumps' numbers ("dumps").
"""

import json
import os
import runpy
import subprocess
import sys

import autonvtx

ROUNDS, REPEATS = int(sys.argv[1]), int(sys.argv[2])
with open(sys.argv[3], encoding="utf-8") as f:
    ARMS = json.load(f)
PROGRAM, ARGS = sys.argv[4], sys.argv[5:]


CALLGRIND = bool(os.environ.get("AUTONVTX_BENCH_CALLGRIND"))
dumps = 0
ends: list[int] = []  # the dumps at the ends of the timed sections


def section_edge() -> None:
    """Where the program's section starts or ends: under callgrind, a dump there."""
    global dumps
    if CALLGRIND:
        subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True, check=True)
        dumps += 1
        ends.append(dumps)


def section() -> float:
    sys.argv = [PROGRAM, *ARGS]
    return float(runpy.run_path(PROGRAM, {"section_edge": section_edge}, run_name="__main__")["cpu"])


names = list(ARMS)
for round_ in range(ROUNDS):
    for arm in names[round_ % len(names) :] + names[: round_ % len(names)]:
        installation = autonvtx.install(**ARMS[arm]) if ARMS[arm] is not None else None
        section()
        ends.clear()
        times = [section() for _ in range(REPEATS)]
        block = {"round": round_, "arm": arm, "cpu_s": times, "dumps": ends[1::2]}
        if installation is not None:
            installation.uninstall()
        print(json.dumps(block), flush=True)
