"""What the watcher (`autonvtx.recorder.watch`) costs a recording run at start-up.

    python benchmarks/watcher.py [--rounds N]

Three figures, each the fastest of N interleaved rounds (a shared machine disturbs some):
- `start_watcher()` itself, in a process shaped like `autonvtx run`'s (autonvtx's recorder loaded);
- a whole `autonvtx run --trace t.json empty.py`, wall time to the end of its output, with the
  watcher and with `start_watcher` replaced by one that starts nothing (same process, same
  rounds), and their difference;
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
best = 1e9
for _ in range({rounds}):
    began = time.perf_counter()
    watch = start_watcher([], {{}})
    best = min(best, time.perf_counter() - began)
    assert watch is not None
    watch.say_done()
print(best)
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


def run_once(off: bool, cwd: str) -> float:
    code = RUN.format(repo=REPO, off=off)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - began


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
    in_process = float(subprocess.run([sys.executable, "-c", IN_PROCESS.format(repo=REPO, rounds=args.rounds)],
                                      check=True, capture_output=True, text=True).stdout)
    with tempfile.TemporaryDirectory() as cwd:
        with open(os.path.join(cwd, "empty.py"), "w", encoding="utf-8"):
            pass
        on, off = [], []
        for _ in range(args.rounds):
            on.append(run_once(False, cwd))
            off.append(run_once(True, cwd))
    print(f"Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}, best of {args.rounds} rounds")
    print(f"start_watcher() in the program's process: {in_process * 1e3:.2f} ms")
    print(f"autonvtx run --trace t.json empty.py: {min(on) * 1e3:.1f} ms with the watcher, "
          f"{min(off) * 1e3:.1f} ms without: +{(min(on) - min(off)) * 1e3:.1f} ms ({min(on) / min(off):.3f}x)")
    print(f"the watcher's own CPU (python -I -S, off the program's path): {watcher_cpu(args.rounds) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
