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
"""

import json
import runpy
import sys

import autonvtx

ROUNDS, REPEATS = int(sys.argv[1]), int(sys.argv[2])
with open(sys.argv[3], encoding="utf-8") as f:
    ARMS = json.load(f)
PROGRAM, ARGS = sys.argv[4], sys.argv[5:]


def section() -> float:
    sys.argv = [PROGRAM, *ARGS]
    return float(runpy.run_path(PROGRAM, run_name="__main__")["cpu"])


names = list(ARMS)
for round_ in range(ROUNDS):
    for arm in names[round_ % len(names) :] + names[: round_ % len(names)]:
        installation = autonvtx.install(**ARMS[arm]) if ARMS[arm] is not None else None
        section()
        times = [section() for _ in range(REPEATS)]
        if installation is not None:
            installation.uninstall()
        print(json.dumps({"round": round_, "arm": arm, "cpu_s": times}), flush=True)
