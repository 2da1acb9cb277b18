"""Large packages instrumented wholesale, measured as whole processes (issue 11, 13): the program
``run.py`` runs under ``autonvtx run`` (a no-op NVTX tool attached, as under a profiler) once
with every module of the packages targeted and once with a rule that selects nothing.

    autonvtx run --config RULES benchmarks/wholesale.py --packages numpy,pandas   # one JSON line

It imports the packages, then runs a small workload through them (timed on its own, in the
thread's CPU time), and prints what it computed (both runs must agree), the workload's time,
the resident memory at the end, and the packages' versions.

    python benchmarks/wholesale.py --walk-alone [--engine code] [--packages ...]

measures the walk alone instead, in this process: the packages imported first, then
`autonvtx.install(targets=...)` walking every module of them (GC off, a no-op NVTX tool), its
CPU time and what it allocated (tracemalloc, with --memory) per function, the modules' walks
alone (install()'s once-only work apart) per function, the native walk's share of them (either
engine) and the Python around it per module; one JSON line.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

WORKLOADS: dict[str, Callable[[], float]] = {}


def workload(name: str) -> Callable[[Callable[[], float]], Callable[[], float]]:
    def register(function: Callable[[], float]) -> Callable[[], float]:
        WORKLOADS[name] = function
        return function

    return register


@workload("numpy,pandas")
def frames() -> float:
    """Build frames, group, aggregate, join and sort: a data workflow's calls."""
    import numpy
    import pandas

    total = 0.0
    for seed in range(20):
        rng = numpy.random.default_rng(seed)
        frame = pandas.DataFrame({"k": rng.integers(0, 50, 2000), "v": rng.random(2000)})
        grouped = frame.groupby("k")["v"].agg(["sum", "mean", "max"])
        joined = frame.merge(grouped, left_on="k", right_index=True).sort_values("v")
        total += float(joined["sum"].iloc[:10].sum()) + float(numpy.dot(frame["v"], frame["v"]))
    return round(total, 6)


@workload("networkx")
def graphs() -> float:
    """Graph algorithms written in Python: paths, components, centrality, a spanning tree."""
    import networkx

    total = 0.0
    for seed in range(5):
        graph = networkx.gnm_random_graph(300, 1200, seed=seed)
        total += sum(networkx.single_source_shortest_path_length(graph, 0).values())
        total += len(list(networkx.connected_components(graph)))
        total += sum(networkx.betweenness_centrality(graph, k=20, seed=seed).values())
        total += networkx.minimum_spanning_tree(graph).number_of_edges()
        total += networkx.average_clustering(graph)
    return round(total, 6)


@workload("torch")
def training() -> float:
    """A few forward and backward passes of a small model, and an optimizer step."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(20):
        optimizer.zero_grad()
        model(torch.ones(16, 32)).square().mean().backward()
        optimizer.step()
    return round(float(sum(p.sum() for p in model.parameters())), 4)


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def walk_alone(packages: list[str], engine: str, memory: bool) -> dict[str, Any]:
    """install() over the packages' modules, already imported: time and memory per function,
    the native walk's time apart (the walks the code engine hands out, timed around)."""
    import gc
    import tracemalloc

    from autonvtx.recorder import native

    library = native.library_path()
    if library is None:
        raise SystemExit("wholesale: the native recorder is not built (pip install -e .)")
    os.environ["NVTX_INJECTION64_PATH"], os.environ["AUTONVTX_RECORDER_MODE"] = library, "noop"
    for package in packages:
        importlib.import_module(package)
    import autonvtx
    from autonvtx import ranges

    native_ns = [0]
    walk = ranges.uniform_walk_function()

    def timed(*walk_args: Any) -> None:
        started = time.thread_time_ns()
        try:
            walk(*walk_args)  # type: ignore[misc]
        finally:
            native_ns[0] += time.thread_time_ns() - started

    # Both engines take the native walk from here (the wrap engine directly, the code engine
    # through CodeMonitor.uniform_walker), once per rule and color.
    ranges.uniform_walk_function = lambda: None if walk is None else timed  # type: ignore[assignment]
    # The walks of the modules themselves, without install()'s once-only work (the engine
    # made, the import hook's scan of sys.modules).
    from autonvtx.importer import ImportHook

    walks_ns = [0]
    executed = ImportHook.module_executed

    def timed_executed(self: Any, module: Any) -> None:
        started = time.thread_time_ns()
        try:
            executed(self, module)
        finally:
            walks_ns[0] += time.thread_time_ns() - started

    ImportHook.module_executed = timed_executed  # type: ignore[method-assign]
    targets = [m for p in packages for m in (p, f"{p}.*")]
    gc.disable()
    if memory:  # tracemalloc slows every allocation: time and memory come from separate runs
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.thread_time_ns()
    installation = autonvtx.install(targets=targets, engine=engine)
    elapsed = time.thread_time_ns() - started
    allocated = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    reports = installation._instrumentation.walker.reports  # a benchmark reads the private handle
    functions = sum(len(r.wrapped) for r in reports.values())
    modules = len(reports)  # walked, whether or not they define a function
    return {
        "engine": engine,
        "functions": functions,
        "modules": modules,
        "us_per_function": elapsed / 1e3 / max(1, functions),
        "bytes_per_function": allocated / max(1, functions) if memory else None,
        "walks_us_per_function": walks_ns[0] / 1e3 / max(1, functions),
        "native_us_per_function": native_ns[0] / 1e3 / max(1, functions),
        "python_us_per_module": (walks_ns[0] - native_ns[0]) / 1e3 / max(1, modules),
        "once_ms": (elapsed - walks_ns[0]) / 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", default="numpy,pandas", choices=sorted(WORKLOADS))
    parser.add_argument("--walk-alone", action="store_true", help="the walk alone, in this process")
    parser.add_argument("--engine", default="code", choices=("code", "wrap"), help="with --walk-alone")
    parser.add_argument("--memory", action="store_true", help="with --walk-alone: trace allocations (slower)")
    args = parser.parse_args()
    packages = args.packages.split(",")
    if args.walk_alone:
        print(json.dumps(walk_alone(packages, args.engine, args.memory)))
        return 0
    import colorsys  # noqa: F401  (the one tiny target of run.py's "first" variant)

    started = time.thread_time()
    # The collector held off while importing, then one full collection, in every variant: the
    # few hundred objects instrumenting keeps would otherwise bring the process's first full
    # collection forward from the workload (which the time per function leaves out) into the
    # import (which it counts): 21M instructions, a quantum each variant pays once.
    gc.disable()
    for package in packages:
        importlib.import_module(package)
    gc.enable()
    gc.collect()
    import_seconds = time.thread_time() - started
    started = time.thread_time()
    checksum = WORKLOADS[args.packages]()
    workload_seconds = time.thread_time() - started
    print(
        json.dumps(
            {
                "packages": packages,
                "import_seconds": import_seconds,
                "workload_seconds": workload_seconds,
                "checksum": checksum,
                "rss_bytes": resident_bytes(),
                "versions": {p: getattr(sys.modules[p], "__version__", "?") for p in packages},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
