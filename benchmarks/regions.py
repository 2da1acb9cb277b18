"""Per-iteration cost of a loop region (issue 14) beside an empty loop body and a hand-written
``with nvtx.annotate(...)`` in the loop, and a function outside every region (1.00x):

    python benchmarks/regions.py [--quick]     # prints a table; Python 3.12+

The native recorder is attached as NVTX's tool in its no-op mode before anything calls NVTX
(what a profiler that ignores the events costs). Every variant runs the same loop, round by
round, interleaved, keeping the fastest round of each in the thread's CPU time (a busy machine
preempts; the minimum is the least disturbed round). Per-iteration figures are differences
from the empty loop.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
import types
from collections.abc import Callable
from typing import Any

SOURCE = textwrap.dedent("""
    import nvtx

    def empty(n):
        for i in range(n):
            pass

    def region(n):
        for i in range(n):
            pass

    def region_named(n):
        for i in range(n):
            pass

    def annotated(n):
        for i in range(n):
            with nvtx.annotate("step", domain="autonvtx"):
                pass

    def outside(n):
        for i in range(n):
            pass
""")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny N, two rounds (CI)")
    args = parser.parse_args()
    if sys.version_info < (3, 12):
        print("regions: Python 3.12+ (sys.monitoring) only", file=sys.stderr)
        return 2
    n, rounds = (2_000, 2) if args.quick else (100_000, 31)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from autonvtx import environment
    from autonvtx.recorder import native

    library = native.library_path()
    if library is None:
        print("regions: the native recorder is not built (pip install -e .)", file=sys.stderr)
        return 2
    # The tool must be named before the first NVTX call of any client in this process.
    os.environ[environment.NVTX_INJECTION64_PATH] = library
    os.environ[environment.RECORDER_MODE] = "noop"
    os.environ.pop(environment.RECORD_DIR, None)

    from autonvtx.config import Config, Region
    from autonvtx.regions import RegionInstaller, regions_available

    why_not = regions_available()
    if why_not is not None:
        print(f"regions: {why_not}", file=sys.stderr)
        return 2
    module = types.ModuleType("bench_regions")
    sys.modules[module.__name__] = module
    exec(compile(SOURCE, "<bench_regions>", "exec"), vars(module))
    # linecache: the regions are placed from the source, as from a file.
    import linecache

    linecache.cache["<bench_regions>"] = (len(SOURCE), None, SOURCE.splitlines(True), "<bench_regions>")
    config = Config(
        regions=(
            Region("bench_regions:region", loop="first", name="step", origin="bench"),
            Region("bench_regions:region_named", loop="first", name="step {i}", origin="bench"),
        )
    )
    installer = RegionInstaller(config)
    installer.module_executed(module)
    assert len(installer.resolved) == 2, installer.problems or installer.note
    variants: dict[str, Callable[[int], Any]] = {
        "empty loop body": module.empty,
        "loop region, fixed name": module.region,
        "loop region, name 'step {i}'": module.region_named,
        "with nvtx.annotate(...)": module.annotated,
        "function outside regions": module.outside,
    }
    best = {name: float("inf") for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            start = time.thread_time_ns()
            run(n)
            best[name] = min(best[name], (time.thread_time_ns() - start) / n)
    counts = installer.iteration_counts()
    installer.uninstall()
    # Every iteration of every round began a range: the region did its work.
    assert counts == [n * rounds, n * rounds], counts
    base = best["empty loop body"]
    print(f"per iteration, n={n}, fastest of {rounds} rounds (thread CPU time), no-op NVTX tool:")
    for name, ns in best.items():
        extra = "" if name == "empty loop body" else f"  (+{ns - base:6.1f} ns over the empty body)"
        print(f"  {name:32s} {ns:8.1f} ns{extra}")
    print(f"  function outside regions / empty loop: {best['function outside regions'] / base:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
