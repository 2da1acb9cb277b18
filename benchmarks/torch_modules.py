"""Cost per module call of the torch plugin's options (issue 34): module ranges alone, with
`backward_modules`, with `shapes`, and on CUDA with `memory`, against the same model without
autonvtx, in one process.

    python benchmarks/torch_modules.py [--layers 64] [--steps 30] [--rounds 7] [--device cuda]

A model of N small Linear layers (batch 4, width 8: the layers' own work is small, so the
overhead shows) runs forward and backward steps; each variant installs autonvtx through the API
(preset torch, the plugin's options set), runs its steps, and uninstalls, round after round,
interleaved; the fastest round of each is kept, timed in the thread's CPU time (a busy machine
preempts). The native recorder is attached in its no-op mode (what a profiler that ignores the
events costs). One JSON object: microseconds per module call (forward and backward) for each
variant, and each variant's extra over the plain model.
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

VARIANTS = {
    "ranges": "",
    "backward_modules": "backward_modules = true\n",
    "shapes": "shapes = true\n",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (adds the memory option's variant)")
    args = parser.parse_args()
    library = native.library_path()
    if library is None:
        print("torch_modules: the native recorder is not built (pip install -e .)", file=sys.stderr)
        return 2
    # The tool must be named before the first NVTX call of any client in this process.
    os.environ[environment.NVTX_INJECTION64_PATH] = library
    os.environ[environment.RECORDER_MODE] = "noop"
    os.environ.pop(environment.RECORD_DIR, None)

    import torch
    from torch import nn

    import autonvtx

    torch.manual_seed(0)
    model = nn.Sequential(*(nn.Linear(8, 8) for _ in range(args.layers))).to(args.device)
    x = torch.randn(4, 8, device=args.device)
    # The memory option reads the CUDA allocator's counters: on CPU tensors it does not apply.
    variants = dict(VARIANTS, memory="memory = true\n") if args.device.startswith("cuda") else VARIANTS
    calls = args.layers + 1  # the Sequential's own call too

    def steps() -> float:
        start = time.thread_time()
        for _ in range(args.steps):
            model.zero_grad()
            model(x).sum().backward()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()  # the queued kernels do not spill into the next variant's time
        return (time.thread_time() - start) / (args.steps * calls) * 1e6

    folder = tempfile.mkdtemp(prefix="torch_modules.")
    configs = {}
    for name, options in variants.items():
        path = os.path.join(folder, f"{name}.toml")
        with open(path, "w") as f:
            f.write(f'[autonvtx]\npresets = ["torch"]\n[autonvtx.plugin.torch]\n{options}')
        configs[name] = path

    best: dict[str, float] = {}
    steps()  # warm up: first calls allocate
    for _ in range(args.rounds):
        best["plain"] = min(best.get("plain", float("inf")), steps())
        for name, path in configs.items():
            installation = autonvtx.install(path)
            try:
                steps()  # names made on the first call, not timed
                best[name] = min(best.get(name, float("inf")), steps())
            finally:
                installation.uninstall()
    result = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "layers": args.layers,
        "device": args.device,
        "us_per_module_call": {k: round(v, 3) for k, v in best.items()},
        "extra_us_over_plain": {k: round(v - best["plain"], 3) for k, v in best.items() if k != "plain"},
        "extra_us_over_ranges": {
            k: round(v - best["ranges"], 3) for k, v in best.items() if k not in ("plain", "ranges")
        },
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
