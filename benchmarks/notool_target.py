"""Run by run.py as ``autonvtx run -t __main__ --include work notool_target.py N ROUNDS`` with
no NVTX tool attached (issue 6, goal 3): times the selected ``work`` against ``twin``, the same
function that no rule selects, and prints one JSON object."""

import json
import sys
import time


def work(x):
    return x


def twin(x):
    return x


def loop(n, f):
    for _ in range(n):
        f(1)


def main() -> None:
    n, rounds = int(sys.argv[1]), int(sys.argv[2])
    best = {"work": float("inf"), "twin": float("inf")}
    for _ in range(rounds):
        for name, f in (("work", work), ("twin", twin)):
            start = time.thread_time_ns()
            loop(n, f)
            best[name] = min(best[name], (time.thread_time_ns() - start) / n)
    print(json.dumps({"ns": best, "work_type": type(work).__name__}))


main()
