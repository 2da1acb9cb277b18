"""What the watcher (`autonvtx.recorder.watch`) costs a recording run at start-up.

    python benchmarks/watcher.py [--rounds N]

Three figures, each the fastest of N interleaved rounds (a shared machine disturbs some), in
CPU time (user + system) and in wall time, which on a loaded machine mostly measures waiting for
a core:
- `start_watcher()` itself, in a process shaped like `autonvtx run`'s (autonvtx's recorder
  loaded): the program's CPU plus the intermediate process's, which it waits for;
- a whole `autonvtx run --trace t.json empty.py` with the watcher and with `start_watcher`
  replaced by one that starts nothing (same rounds, interleaved), and their difference;
- the watcher's own CPU time, off the program's path (a bare `python -I -S` that imports what
  it imports).
Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

IN_PROCESS = """
import sys, time
sys.path.insert(0, {repo!r})
from autonvtx.recorder import session  # what a recording run has loaded when it starts the watcher
from autonvtx.recorder.watch import start_watcher
import resource

def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

best_cpu = best_wall = 1e9
for _ in range({rounds}):
    began, began_cpu = time.perf_counter(), cpu()
    watch = start_watcher([], {{}})
    best_cpu, best_wall = min(best_cpu, cpu() - began_cpu), min(best_wall, time.perf_counter() - began)
    assert watch is not None
    watch.say_done()
    time.sleep(0.05)  # the watcher's own start-up is over before the next round
print(best_cpu, best_wall)
"""

# `autonvtx run`, with or without the watcher: the patch is the only difference.
RUN = """
import sys
sys.path.insert(0, {repo!r})
if {off}:
    from autonvtx.recorder import session
    session.start_watcher = lambda command, env: None
from autonvtx.cli import main
sys.argv = ["autonvtx", "run", "--trace", "t.json", "empty.py"]
sys.exit(main())
"""


def run_once(off: bool, cwd: str) -> tuple[float, float]:
    """(CPU, wall) of one run; the CPU of the run's process and what it waited for (not the
    watcher, which is init's child)."""
    code = RUN.format(repo=REPO, off=off)
    before, began = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=cwd, check=True, capture_output=True)
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - began
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def watcher_cpu(rounds: int) -> float:
    best = 1e9
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-I", "-S", "-c", "import os, select"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    in_cpu, in_wall = map(
        float,
        subprocess.run(
            [sys.executable, "-c", IN_PROCESS.format(repo=REPO, rounds=args.rounds)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split(),
    )
    with tempfile.TemporaryDirectory() as cwd:
        with open(os.path.join(cwd, "empty.py"), "w", encoding="utf-8"):
            pass
        on, off = [], []
        for _ in range(args.rounds):
            on.append(run_once(False, cwd))
            off.append(run_once(True, cwd))
    print(f"Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}, best of {args.rounds} rounds")
    print(f"start_watcher() in the program's process: {in_cpu * 1e3:.2f} ms CPU, {in_wall * 1e3:.2f} ms wall")
    for what, pick in (("CPU", 0), ("wall", 1)):
        with_, without = min(r[pick] for r in on), min(r[pick] for r in off)
        print(
            f"autonvtx run --trace t.json empty.py, {what}: {with_ * 1e3:.1f} ms with the watcher, "
            f"{without * 1e3:.1f} ms without: {(with_ - without) * 1e3:+.1f} ms ({with_ / without:.3f}x)"
        )
    print(f"the watcher's own CPU (python -I -S, off the program's path): {watcher_cpu(args.rounds) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
