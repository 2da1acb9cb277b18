"""Instrumenting large packages wholesale (issue 6, goal 4): numpy and pandas imported with
every module of theirs targeted, against the same imports with nothing targeted. A worker of
``run.py``:

    python benchmarks/wholesale.py [--plain] [--packages numpy,pandas]   # prints one JSON object

The native recorder is attached in its no-op mode, as under a profiler, so that selected
functions are really wrapped. Time is the importing thread's CPU time (a busy machine's
preemption left out), and separately the part spent walking modules and wrapping, and how many
full passes the garbage collector made; memory is the growth of the resident set over the
imports.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from autonvtx import environment  # noqa: E402
from autonvtx.recorder import native  # noqa: E402


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plain", action="store_true", help="import without instrumenting")
    parser.add_argument("--packages", default="numpy,pandas")
    args = parser.parse_args()
    packages = args.packages.split(",")

    library = native.library_path()
    if library is None:
        print("wholesale: the native recorder is not built (pip install -e .)", file=sys.stderr)
        return 2
    os.environ[environment.NVTX_INJECTION64_PATH] = library
    os.environ[environment.RECORDER_MODE] = "noop"
    os.environ.pop(environment.RECORD_DIR, None)

    import importlib

    hook = instrumenter = None
    walked = [0.0]
    if not args.plain:
        # autonvtx's own modules are imported first (as `autonvtx run` does before the target),
        # so both runs time only the packages' imports and what instrumenting them costs.
        from autonvtx import ranges, walk  # noqa: F401
        from autonvtx.engines import wrap  # noqa: F401
        from autonvtx.config import Config, Rule
        from autonvtx.importer import ImportHook
        from autonvtx.walk import Walker
        from autonvtx.matching import Matcher

        modules = tuple(m for p in packages for m in (p, f"{p}.*"))
        matcher = Matcher(Config(rules=(Rule(modules=modules, origin="benchmark"),)))
        instrumenter = Walker(matcher)
        hook = ImportHook(matcher, instrumenter)
        walk = instrumenter.instrument

        def timed_walk(module: Any) -> Any:  # the part of the cost autonvtx's own code spends
            started = time.thread_time()
            try:
                return walk(module)
            finally:
                walked[0] += time.thread_time() - started

        instrumenter.instrument = timed_walk  # type: ignore[method-assign]
    else:
        from autonvtx import ranges, walk  # noqa: F401,F811
        from autonvtx.engines import wrap  # noqa: F401,F811

    full_collections = [0]  # the collector's full passes during the imports

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] == 2 and phase == "stop":
            full_collections[0] += 1

    gc.callbacks.append(on_collection)
    rss_before = resident_bytes()
    start = time.thread_time()
    if hook is not None:
        hook.install()
    for package in packages:
        importlib.import_module(package)
    seconds = time.thread_time() - start
    rss_after = resident_bytes()
    gc.callbacks.remove(on_collection)
    # What the timed imports did (the workflow below may import more, lazily).
    walked_seconds = walked[0]
    wrapped = instrumenter.engine.wrapped_count() if instrumenter is not None else 0
    modules = len(instrumenter.reports) if instrumenter is not None else 0
    skipped = 0
    if instrumenter is not None:
        skipped = sum(len(r.skipped) for r in instrumenter.reports.values())

    # The instrumented packages still work: a small workflow through both.
    import numpy
    import pandas

    frame = pandas.DataFrame({"k": numpy.arange(100) % 7, "v": numpy.linspace(0.0, 1.0, 100)})
    checksum = float(frame.groupby("k")["v"].sum().round(6).sum())
    if "torch" in packages:  # and a forward and backward pass through torch
        import torch

        torch.manual_seed(0)
        layer = torch.nn.Linear(8, 2)
        layer(torch.ones(3, 8)).square().mean().backward()
        checksum += round(float(layer.weight.grad.sum()), 5)
    if hook is not None:
        hook.uninstall()
    print(json.dumps({
        "packages": packages,
        "instrumented": hook is not None,
        "seconds": seconds,
        "hook_seconds": walked_seconds,
        "full_collections": full_collections[0],
        "rss_bytes": rss_after - rss_before,
        "wrapped": wrapped,
        "skipped": skipped,
        "modules": modules,
        "checksum": checksum,
        "versions": {p: getattr(sys.modules[p], "__version__", "?") for p in packages},
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
