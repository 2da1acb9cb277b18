"""Large packages instrumented wholesale, measured as whole processes (issue 11, 13): the program
``run.py`` runs under ``autonvtx run`` (a no-op NVTX tool attached, as under a profiler) once
with every module of the packages targeted and once with a rule that selects nothing.

    autonvtx run --config RULES benchmarks/wholesale.py --packages numpy,pandas   # one JSON line

It imports the packages, then runs a small workload through them (timed on its own, in the
thread's CPU time), and prints what it computed (both runs must agree), the workload's time,
the resident memory at the end, and the packages' versions.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from typing import Any, Callable

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", default="numpy,pandas", choices=sorted(WORKLOADS))
    args = parser.parse_args()
    packages = args.packages.split(",")
    import colorsys  # noqa: F401  (the one tiny target of run.py's "first" variant)

    started = time.thread_time()
    for package in packages:
        importlib.import_module(package)
    import_seconds = time.thread_time() - started
    started = time.thread_time()
    checksum = WORKLOADS[args.packages]()
    workload_seconds = time.thread_time() - started
    print(json.dumps({
        "packages": packages,
        "import_seconds": import_seconds,
        "workload_seconds": workload_seconds,
        "checksum": checksum,
        "rss_bytes": resident_bytes(),
        "versions": {p: getattr(sys.modules[p], "__version__", "?") for p in packages},
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
