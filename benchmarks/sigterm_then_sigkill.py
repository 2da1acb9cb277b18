"""What a recorded child loses when SIGKILL follows SIGTERM 20 ms later (`timeout -k`, Slurm,
torchrun), as docs/processes.md states it (issue 37, item 14):

    python benchmarks/sigterm_then_sigkill.py [--runs N] [--rate busy|600k] [--grace MS]

A parent under `autonvtx run --trace` starts a child that calls a ranged function as fast as it
can (`busy`, about 2.5 million calls a second here) or 600,000 times a second, lets it run
0.4 s, sends SIGTERM, then SIGKILL after the grace period. Per run: how the child ended, and how
long before the SIGTERM and before the SIGKILL its last kept range ended (CLOCK_MONOTONIC, the
trace's clock); then the worst of all runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

RULES = '[[rules]]\nmodules = ["__main__"]\n'

CHILD = textwrap.dedent("""
    import sys, time

    def step(i):
        return i + 1

    def main(limited):
        n = 0
        print("ready", flush=True)
        while True:
            tick = time.monotonic() + 0.001
            for _ in range(600):
                n = step(n)
            while limited and time.monotonic() < tick:
                pass

    main(sys.argv[1] == "600k")
""")

PARENT = textwrap.dedent("""
    import signal, subprocess, sys, time

    rate, grace = sys.argv[1], float(sys.argv[2]) / 1000
    child = subprocess.Popen([sys.executable, "child.py", rate], stdout=subprocess.PIPE, text=True)
    child.stdout.readline()
    time.sleep(0.4)
    term = time.monotonic_ns()
    child.send_signal(signal.SIGTERM)
    time.sleep(grace)
    kill = time.monotonic_ns()
    child.kill()
    print(child.pid, child.wait(), term, kill, flush=True)
""")


def one_run(cwd: Path, rate: str, grace: int) -> tuple[int, float, float, bool]:
    """(the child's status, ms from its last kept range's end to the SIGTERM, to the SIGKILL,
    whether a write was cut)."""
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "--trace", "t.json", "parent.py", rate, str(grace)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    pid, status, term, kill = map(int, done.stdout.split())
    last = 0.0
    marker = f'"pid":{pid},'
    with open(cwd / "t.json") as trace:  # one event a line: read the child's closed ranges only
        for line in trace:
            if marker in line and '"ph":"X"' in line and '"open":true' not in line:
                event = json.loads(line.rstrip().rstrip(","))
                last = max(last, event["ts"] + event["dur"])
    return status, (term - last * 1000) / 1e6, (kill - last * 1000) / 1e6, "was cut short" in done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--rate", choices=("busy", "600k"), default="busy")
    parser.add_argument("--grace", type=int, default=20, help="ms between SIGTERM and SIGKILL")
    args = parser.parse_args()
    repo = Path(__file__).resolve().parent.parent
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))
    worst_term = worst_kill = 0.0
    with tempfile.TemporaryDirectory() as directory:
        cwd = Path(directory)
        (cwd / "autonvtx.toml").write_text(RULES)
        (cwd / "child.py").write_text(CHILD)
        (cwd / "parent.py").write_text(PARENT)
        print(f"Python {sys.version.split()[0]}, rate {args.rate}, SIGKILL {args.grace} ms after SIGTERM")
        for run in range(args.runs):
            status, before_term, before_kill, cut = one_run(cwd, args.rate, args.grace)
            ended = "SIGTERM (events written)" if status == -15 else "SIGKILL" + (" (a write cut)" if cut else "")
            print(
                f"run {run + 1}: ended by {ended}; last range kept {before_term:.1f} ms before the SIGTERM, {before_kill:.1f} ms before the SIGKILL"
            )
            worst_term, worst_kill = max(worst_term, before_term), max(worst_kill, before_kill)
    print(f"worst: {worst_term:.1f} ms before the SIGTERM, {worst_kill:.1f} ms before the SIGKILL")


if __name__ == "__main__":
    main()
