"""Cost per call of `shapes = true` on a rule (issue 34): the same NumPy function ranged with and
without shapes, and not ranged, in one process, on the engine asked for.

    python benchmarks/shapes.py [--engine wrap|code] [--arrays numpy|torch] [--calls 20000] [--rounds 21]

The function takes two small arrays (NumPy's, whose dims the native wrapper reads from the
array's struct, or torch's CPU tensors, read through `.shape` and `.dtype`) (the call's own work is small, so the overhead shows); each
variant installs autonvtx through the API, runs its loop and uninstalls, round after round,
interleaved, keeping the fastest round of each, timed in the thread's CPU time. The native
recorder is attached in its no-op mode. One JSON object: nanoseconds per call of each variant,
and what shapes add over the same range without them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from autonvtx import environment  # noqa: E402
from autonvtx.recorder import native  # noqa: E402

MODULE = "autonvtx_bench_shapes"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="wrap", choices=("wrap", "code"))
    parser.add_argument("--arrays", default="numpy", choices=("numpy", "torch"))
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    library = native.library_path()
    if library is None:
        print("shapes: the native recorder is not built (pip install -e .)", file=sys.stderr)
        return 2
    os.environ[environment.NVTX_INJECTION64_PATH] = library
    os.environ[environment.RECORDER_MODE] = "noop"
    os.environ.pop(environment.RECORD_DIR, None)

    import numpy as np

    import autonvtx

    folder = tempfile.mkdtemp(prefix="bench_shapes.")
    with open(os.path.join(folder, f"{MODULE}.py"), "w") as f:
        f.write("def add(x, y):\n    return x\n")
    sys.path.insert(0, folder)
    configs = {}
    for name, extra in (("range", ""), ("range+shapes", "shapes = true\n")):
        path = os.path.join(folder, f"{name}.toml")
        with open(path, "w") as f:
            f.write(f'[[rules]]\nmodules = ["{MODULE}"]\n{extra}')
        configs[name] = path
    a, b = np.ones((32, 128)), np.ones((128, 64))
    if args.arrays == "torch":
        import torch

        a, b = torch.ones((32, 128)), torch.ones((128, 64))

    def loop() -> float:
        import autonvtx_bench_shapes as m  # the current binding: wrapped or not

        add = m.add
        start = time.thread_time()
        for _ in range(args.calls):
            add(a, b)
        return (time.thread_time() - start) / args.calls * 1e9

    best: dict[str, float] = {}
    for _ in range(args.rounds):
        best["plain"] = min(best.get("plain", float("inf")), loop())
        for name, path in configs.items():
            installation = autonvtx.install(path, engine=args.engine)
            try:
                loop()  # the first call of a new shape makes its emitter: not timed
                best[name] = min(best.get(name, float("inf")), loop())
            finally:
                installation.uninstall()
    print(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "engine": args.engine,
                "arrays": args.arrays,
                "ns_per_call": {k: round(v) for k, v in best.items()},
                "shapes_extra_ns": round(best["range+shapes"] - best["range"]),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
