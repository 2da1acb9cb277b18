"""What `autonvtx run --trace/--summary` costs after the program ends, and its peak memory.

    python benchmarks/bench_outputs.py              # 1,000,000 ranges, 1 and 4 threads (~1 min)
    python benchmarks/bench_outputs.py --quick      # 20,000 ranges (CI smoke run)
    python benchmarks/bench_outputs.py --keep-last 50000000   # the keep-last bound, long

A script calls one tiny function (selected with `-t __main__ --include tiny`) N times, on one
thread or split over four, and writes the time its last statement ran. Each row is one whole
`autonvtx run`: the seconds from that moment to the process's exit (writing the outputs), the
output's size, and the peak resident memory of the run (`wait4`'s ru_maxrss: the largest
process, the first one). The goals (issue 15): JSON <= 0.6 s, .pftrace <= 0.25 s and <= 40%
of the JSON's size, summary alone <= 0.3 s, peak <= 150 MB; keep-last under 150 MB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

TARGET = """
import sys, threading, time
def tiny():
    pass
def loop(n):
    for _ in range(n):
        tiny()
n, threads = int(sys.argv[1]), int(sys.argv[2])
if threads == 1:
    loop(n)
else:
    workers = [threading.Thread(target=loop, args=(n // threads,)) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
with open(sys.argv[3], "w") as f:
    f.write(repr(time.time()))
"""


def run_once(directory: Path, outputs: list[str], n: int, threads: int) -> tuple[float, int]:
    """(seconds from the program's last statement to the run's exit, peak RSS in bytes)."""
    script = directory / "target.py"
    script.write_text(TARGET)
    stamp = directory / "end.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [
        sys.executable,
        "-m",
        "autonvtx",
        "run",
        "-t",
        "__main__",
        "--include",
        "tiny",
        *outputs,
        str(script),
        str(n),
        str(threads),
        str(stamp),
    ]
    process = subprocess.Popen(command, cwd=directory, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    ended = time.time()
    stderr = process.stderr.read().decode() if process.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_outputs: the run failed:\n{stderr}")
    return ended - float(stamp.read_text()), usage.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 ranges, one repeat")
    parser.add_argument("--ranges", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument(
        "--keep-last",
        type=int,
        default=0,
        metavar="N",
        help="instead: N ranges under --buffer-mb 64 --keep last, peak RSS",
    )
    args = parser.parse_args()
    n = args.ranges or (20_000 if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 3)
    print(f"python {sys.version.split()[0]}, {n:,} ranges of one tiny function; best of {repeats}")
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        if args.keep_last:
            seconds, rss = run_once(
                directory, ["--trace", "t.pftrace", "--buffer-mb", "64", "--keep", "last"], args.keep_last, 1
            )
            size = (directory / "t.pftrace").stat().st_size
            print(
                f"keep-last  {args.keep_last:>12,} ranges  write {seconds:6.3f} s  trace {size / 1e6:7.1f} MB"
                f"  peak RSS {rss / 2**20:6.1f} MiB  (goal < 150)"
            )
            return 0
        baseline = {threads: min(run_once(directory, [], n, threads)[0] for _ in range(repeats)) for threads in (1, 4)}
        rows = [
            ("json", ["--trace", "t.json"], "t.json", 0.6),
            ("pftrace", ["--trace", "t.pftrace"], "t.pftrace", 0.25),
            ("summary", ["--summary", "s.txt"], "s.txt", 0.3),
        ]
        for threads in (1, 4):
            sizes = {}
            print(
                f"{threads} thread(s); a run without outputs exits {baseline[threads]:.3f} s after its last statement"
            )
            for name, outputs, output, goal in rows:
                best = min((run_once(directory, outputs, n, threads) for _ in range(repeats)), key=lambda r: r[0])
                sizes[name] = (directory / output).stat().st_size
                extra = ""
                if name == "pftrace":
                    extra = f"  {100 * sizes['pftrace'] / sizes['json']:.0f}% of the JSON (goal <= 40%)"
                print(
                    f"  {name:8} after end {best[0]:6.3f} s (goal <= {goal} s)  size {sizes[name] / 1e6:7.1f} MB"
                    f"  peak RSS {best[1] / 2**20:6.1f} MiB (goal <= 150){extra}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
