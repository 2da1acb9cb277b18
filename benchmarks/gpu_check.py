"""On a machine with a CUDA GPU: do kernels fall inside the autonvtx ranges that launched them?

    python benchmarks/gpu_check.py [--keep DIR]

For PyTorch (examples/torch_training/train.py with the torch preset), Numba, CuPy (targeted, and
with the cupy preset) and JAX (the jax preset) (small programs written here: the examples have
none for them) it
  1. runs the program under `autonvtx run --trace` and checks ranges were recorded;
  2. where `nsys` is on PATH: profiles the same run with `nsys profile -t cuda,nvtx`, exports it,
     runs `autonvtx report` on the export, and checks that kernels were launched inside ranges
     and that the report's per-range kernel counts equal an independent SQL join;
  3. else, where NVIDIA's cupti-python is installed: records the CUDA API calls and kernels with
     CUPTI inside the run, and checks that the calls launching kernels fall inside ranges the
     recorder wrote on the same thread (CUPTI's clock mapped to CLOCK_MONOTONIC, the
     recorder's, from timestamp pairs taken before and after the run).
  4. for the torch plugin's `memory` option: runs a module that allocates a known scratch
     buffer and keeps a known output, under the recorder (and nsys where it is on PATH), and
     checks `--memory`'s figures (rise at least the scratch buffer, exactly the output kept);
  5. runs a `torch.compile`d model plainly and under each engine (`--engine code` where
     sys.monitoring exists, `--engine wrap`), and checks that the compiled results equal the
     plain run's, that autonvtx adds no graph break and no recompiled graph, and that the
     functions around the compiled model got their ranges.
Prints one line per thing checked. Without a GPU it prints why and exits 0; a failed check exits 1.
`--cpu` runs the checks that need no GPU (1 and 5) on the CPU, to try this script anywhere.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

NUMBA_WORK = """
import numpy as np
from numba import cuda

@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

def step(x, y):
    out = cuda.device_array_like(x)
    saxpy[(x.size + 255) // 256, 256](2.0, x, y, out)
    return out

def run():
    x = cuda.to_device(np.arange(1 << 20, dtype=np.float32))
    y = cuda.to_device(np.ones(1 << 20, dtype=np.float32))
    for _ in range(5):
        out = step(x, y)
    cuda.synchronize()
    return float(out.copy_to_host()[-1])
"""

CUPY_WORK = """
import cupy as cp

def step(x):
    return cp.sqrt(x * 2.0 + 1.0).sum()

def run():
    x = cp.arange(1 << 20, dtype=cp.float32)
    total = 0.0
    for _ in range(5):
        total += float(step(x))
    cp.cuda.Device().synchronize()
    return total
"""

# The cupy preset's vocabulary (module functions, linalg, fft): ufuncs, operators and ndarray
# methods are outside it by design (autonvtx/configs/cupy.toml).
CUPY_PRESET_WORK = """
import cupy as cp

def run():
    x = cp.arange(1 << 20, dtype=cp.float32).reshape(1024, 1024) / (1 << 20)
    total = 0.0
    for _ in range(3):
        total += float(cp.sum(cp.dot(x, x)))
        total += float(cp.abs(cp.fft.fft(x[0])).max())
        total += float(cp.linalg.norm(x))
    cp.cuda.Device().synchronize()
    return total
"""

JAX_WORK = """
import jax
import jax.numpy as jnp

@jax.jit
def step(x):
    return jnp.tanh(x @ x.T).sum()

def run():
    x = jnp.arange(512 * 512, dtype=jnp.float32).reshape(512, 512) / (512 * 512)
    total = 0.0
    for _ in range(5):
        total += float(step(x).block_until_ready())
    return total
"""

# A compiled model inside functions the rules select: the compiled graph must not change
# (no graph break, no extra graph) and its results must equal the plain run's.
COMPILE_WORK = """
import json
import torch
from torch._dynamo.utils import counters


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(256, 256)
        self.second = torch.nn.Linear(256, 256)

    def forward(self, x):
        return self.second(torch.relu(self.first(x)))


def step(model, x):
    return model(x).sum()


def run():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Block().to(device)
    compiled = torch.compile(model)
    x = torch.randn(64, 256, device=device)
    eager = float(step(model, x))
    results = [float(step(compiled, x)) for _ in range(5)]
    print("GPU_CHECK_RESULT " + json.dumps({
        "device": device, "eager": eager, "compiled": results,
        "graph_breaks": sum(counters["graph_break"].values()),
        "unique_graphs": counters["stats"]["unique_graphs"]}), flush=True)
    return sum(results)
"""

# Memory per module call (the torch plugin's `memory` option): a 4 MiB scratch buffer freed
# before the call returns, and a 64 KiB output kept; the CUDA caching allocator rounds to 512
# bytes, which both sizes are multiples of.
MEMORY_WORK = """
import torch
from torch import nn

SCRATCH = 1 << 22
KEPT = (1 << 14) * 4


class Temporary(nn.Module):
    def forward(self, x):
        scratch = torch.empty(SCRATCH, dtype=torch.uint8, device=x.device)
        scratch.fill_(1)
        return x + 1


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.temporary = Temporary()

    def forward(self, x):
        return self.temporary(x)


def run():
    x = torch.zeros(1 << 14, device="cuda")
    model = Model()
    outputs = [model(x) for _ in range(3)]
    torch.cuda.synchronize()
    return float(sum(float(o.sum()) for o in outputs))
"""

# The target autonvtx runs: it starts CUPTI when asked, then runs a script (as __main__) or a
# work module's run(), so that the same command serves the recorder, nsys and CUPTI checks.
LAUNCHER = """
import json, os, runpy, sys, time

out = os.environ.get("GPU_CHECK_CUPTI_OUT")
records = {"api": [], "kernels": [], "clock": []}
if out:
    from cupti import cupti
    api_kinds = {int(cupti.ActivityKind.RUNTIME), int(cupti.ActivityKind.DRIVER)}
    kernel_kind = int(cupti.ActivityKind.CONCURRENT_KERNEL)

    def requested():
        return 8 * 1024 * 1024, 0

    def completed(activities):
        for a in activities:
            kind = int(a.kind)
            if kind in api_kinds:
                records["api"].append([a.start, a.end, a.correlation_id, getattr(a, "thread_id", None)])
            elif kind == kernel_kind:
                records["kernels"].append([a.start, a.end, a.correlation_id, str(a.name)])

    def pair():
        # The tightest of a few (CUPTI, CLOCK_MONOTONIC) readings maps one clock onto the other.
        best = None
        for _ in range(20):
            before = time.monotonic_ns()
            stamp = cupti.get_timestamp()
            after = time.monotonic_ns()
            if best is None or after - before < best[2]:
                best = (stamp, (before + after) // 2, after - before)
        return list(best)

    cupti.activity_register_callbacks(requested, completed)
    kinds = (cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER, cupti.ActivityKind.CONCURRENT_KERNEL)
    for kind in kinds:
        cupti.activity_enable(kind)
    records["clock"].append(pair())
target = sys.argv[1]
sys.argv = sys.argv[1:]
try:
    if target.endswith(".py"):
        runpy.run_path(target, run_name="__main__")
    else:
        __import__(target).run()
finally:
    if out:
        cupti.activity_flush_all(1)
        records["clock"].append(pair())
        for kind in kinds:
            cupti.activity_disable(kind)
        with open(out, "w") as f:
            json.dump(records, f)
"""

# Per-name kernel counts by the definition, in SQL (the same join tests/test_report.py checks
# the report against on the recorded fixtures).
INDEPENDENT = """
WITH rt AS (SELECT globalTid, start, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass NOT IN (67, 68, 69)),
launched AS (SELECT k.rowid AS id, rt.globalTid AS tid, rt.start AS t FROM CUPTI_ACTIVITY_KIND_KERNEL k
             JOIN rt ON rt.correlationId = k.correlationId AND rt.globalTid >> 24 = k.globalPid >> 24),
r AS (SELECT n.globalTid AS tid, n.start, n."end", COALESCE(n.text, s.value) AS name
      FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60))
SELECT name, COUNT(DISTINCT l.id) FROM launched l JOIN r ON r.tid = l.tid AND r.start <= l.t AND l.t <= r."end" GROUP BY name
"""


def say(line: str) -> None:
    print(f"gpu_check: {line}", flush=True)


def gpu_present() -> tuple[bool, str]:
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True)
        gpus = [line for line in done.stdout.splitlines() if line.startswith("GPU ")]
        if done.returncode == 0 and gpus:
            return True, "; ".join(gpus)
        return False, f"nvidia-smi -L lists no GPU ({(done.stderr or done.stdout).strip() or done.returncode})"
    if Path("/proc/driver/nvidia/gpus").is_dir() and any(Path("/proc/driver/nvidia/gpus").iterdir()):
        return True, "an NVIDIA driver with GPUs (no nvidia-smi)"
    return False, "no nvidia-smi on PATH and no NVIDIA driver (/proc/driver/nvidia)"


def workloads(scratch: Path) -> list[dict[str, Any]]:
    (scratch / "gpucheck_work_numba.py").write_text(textwrap.dedent(NUMBA_WORK))
    (scratch / "gpucheck_work_cupy.py").write_text(textwrap.dedent(CUPY_WORK))
    (scratch / "gpucheck_work_jax.py").write_text(textwrap.dedent(JAX_WORK))
    (scratch / "gpucheck_work_cupy_preset.py").write_text(textwrap.dedent(CUPY_PRESET_WORK))
    (scratch / "gpucheck_work_compile.py").write_text(textwrap.dedent(COMPILE_WORK))
    (scratch / "gpucheck_work_memory.py").write_text(textwrap.dedent(MEMORY_WORK))
    (scratch / "gpucheck_launch.py").write_text(textwrap.dedent(LAUNCHER))
    train = REPO / "examples" / "torch_training" / "train.py"
    # Backward ranges per module (issue 34): on CUDA autograd runs them on its device thread, as
    # start/end ranges; the kernels of a layer's backward should fall inside its range.
    backward = scratch / "gpucheck_backward.toml"
    backward.write_text('[autonvtx]\npresets = ["torch"]\n[autonvtx.plugin.torch]\nbackward_modules = true\n')
    return [
        {
            "name": "torch-backward",
            "module": "torch",
            "rules": ["--config", str(backward)],
            "target": [str(train), "--device", "cuda", "--epochs", "1"],
            "expect": "Classifier [backward]",
            "usable": "import torch; assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'",
        },
        {
            "name": "torch",
            "module": "torch",
            "rules": ["--preset", "torch"],
            "target": [str(train), "--device", "cuda", "--epochs", "1"],
            "expect": None,
            "usable": "import torch; assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'",
        },
        {
            "name": "numba",
            "module": "numba",
            "rules": ["-t", "gpucheck_work_numba"],
            "target": ["gpucheck_work_numba"],
            "expect": "step",
            "usable": "from numba import cuda; assert cuda.is_available(), 'numba.cuda.is_available() is False'\n"
            "cuda.jit('void(float32[:])')(lambda a: None)",
        },
        {
            "name": "cupy",
            "module": "cupy",
            "rules": ["-t", "gpucheck_work_cupy"],
            "target": ["gpucheck_work_cupy"],
            "expect": "step",
            "usable": "import cupy; assert cupy.cuda.runtime.getDeviceCount() > 0, 'no device'",
        },
        {
            "name": "cupy-preset",
            "module": "cupy",
            "rules": ["--preset", "cupy"],
            "target": ["gpucheck_work_cupy_preset"],
            "expect": "dot",
            "usable": "import cupy; assert cupy.cuda.runtime.getDeviceCount() > 0, 'no device'",
        },
        {
            "name": "jax",
            "module": "jax",
            "rules": ["--preset", "jax"],
            "target": ["gpucheck_work_jax"],
            "expect": "jit(step)",
            "usable": "import jax; assert jax.devices('gpu'), 'no GPU device'",
        },
    ]


def compile_engines() -> list[str]:
    return (["code"] if sys.version_info >= (3, 12) else []) + ["wrap"]


def compile_result(stdout: str) -> dict[str, Any] | None:
    lines = [line for line in stdout.splitlines() if line.startswith("GPU_CHECK_RESULT ")]
    return json.loads(lines[-1].split(" ", 1)[1]) if lines else None


def check_compile(scratch: Path) -> list[bool]:
    """torch.compile under each engine: the same graphs and results as the plain run."""
    from autonvtx.recorder.trace import read_chrome_trace

    launch = [str(scratch / "gpucheck_launch.py"), "gpucheck_work_compile"]
    plain = subprocess.run(
        [sys.executable, *launch], cwd=scratch, env=environment(scratch), capture_output=True, text=True, timeout=900
    )
    base = compile_result(plain.stdout)
    if plain.returncode != 0 or base is None:
        say(f"FAIL torch.compile: the plain run exited {plain.returncode}: {plain.stderr.strip()[-300:]}")
        return [False]
    say(
        f"torch.compile plain run on {base['device']}: {base['graph_breaks']} graph breaks, "
        f"{base['unique_graphs']} graphs"
    )
    results = []
    for engine in compile_engines():
        trace = scratch / f"compile-{engine}.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "autonvtx",
                "run",
                "--engine",
                engine,
                "-t",
                "gpucheck_work_compile",
                "--trace",
                str(trace),
                *launch,
            ],
            cwd=scratch,
            env=environment(scratch),
            capture_output=True,
            text=True,
            timeout=900,
        )
        got = compile_result(done.stdout)
        if done.returncode != 0 or got is None:
            say(f"FAIL torch.compile, {engine} engine: exited {done.returncode}: {done.stderr.strip()[-400:]}")
            results.append(False)
            continue
        names: dict[str, int] = {}
        for rec in read_chrome_trace(trace):
            for r in rec.ranges:
                names[r.name] = names.get(r.name, 0) + 1
        same = (
            got["graph_breaks"] == base["graph_breaks"]
            and got["unique_graphs"] == base["unique_graphs"]
            and all(abs(a - b) <= 1e-3 * max(1.0, abs(b)) for a, b in zip(got["compiled"], base["compiled"]))
            and abs(got["eager"] - base["eager"]) <= 1e-3 * max(1.0, abs(base["eager"]))
        )
        ranged = names.get("step", 0) == 6 and names.get("run", 0) == 1
        ok = same and ranged
        shown = ", ".join(f"{name} x{count}" for name, count in sorted(names.items()))
        say(
            f"{'ok' if ok else 'FAIL'} torch.compile, {engine} engine: {got['graph_breaks']} graph breaks, "
            f"{got['unique_graphs']} graphs, results {'equal' if same else 'DIFFER'}; ranges: {shown}"
        )
        results.append(ok)
    return results


def check_memory(scratch: Path, nsys: str | None) -> list[bool]:
    """The torch plugin's `memory` option on the real CUDA allocator: `--memory` figures from the
    recorder's trace and, with nsys, from its export."""
    config = scratch / "gpucheck_memory.toml"
    config.write_text('[autonvtx]\npresets = ["torch"]\n[autonvtx.plugin.torch]\nmemory = true\n')
    work = {"name": "torch-memory", "rules": ["--config", str(config)], "target": ["gpucheck_work_memory"]}
    trace = scratch / "torch-memory.json"
    done = subprocess.run(
        autonvtx_command(work, scratch, "--trace", str(trace)),
        cwd=scratch,
        env=environment(scratch),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        say(f"FAIL torch-memory: autonvtx run --trace exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return [False]
    sources = [("recorder", ["report", "--memory", "--each", "--format", "json", str(trace)])]
    if nsys:
        rep = scratch / "torch-memory-nsys"
        profile = [nsys, "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw", "none", "--force-overwrite", "true"]
        captured = subprocess.run(
            [*profile, "-o", str(rep), *autonvtx_command(work, scratch)],
            cwd=scratch,
            env=environment(scratch),
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if captured.returncode != 0:
            say(f"FAIL torch-memory: nsys profile exited {captured.returncode}: {captured.stderr.strip()[-300:]}")
            return [False]
        sources.append(("nsys", ["report", "--memory", "--each", "--format", "json", str(rep) + ".nsys-rep"]))
    results = []
    cost = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "torch_modules.py"), "--device", "cuda", "--rounds", "3"],
        env=environment(scratch),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if cost.returncode == 0:
        figures = json.loads(cost.stdout.splitlines()[-1])
        say(
            f"torch-memory: cost per module call on CUDA (us over module ranges alone): {figures['extra_us_over_ranges']}"
        )
    else:
        say(f"torch-memory: the cost benchmark failed ({cost.stderr.strip()[-300:]})")
    for source, command in sources:
        shown = subprocess.run(
            [sys.executable, "-m", "autonvtx", *command],
            cwd=scratch,
            env=environment(scratch),
            capture_output=True,
            text=True,
            timeout=900,
        )
        rows = (
            {r["name"]: r for r in json.loads(shown.stdout or "{}").get("memory", [])} if shown.returncode == 0 else {}
        )
        row = rows.get("temporary (Temporary)")
        ok = (
            row is not None
            and row["calls"] == 3
            and row["rise_max_bytes"] >= (1 << 22)
            and row["kept_mean_bytes"] == (1 << 14) * 4
        )
        say(
            f"{'ok' if ok else 'FAIL'} torch-memory ({source}): "
            + (
                f"temporary (Temporary) x{row['calls']}: rise {row['rise_max_bytes']:,} B (scratch 4,194,304 B), "
                f"kept {row['kept_mean_bytes']:,.0f} B (output 65,536 B), peak {row['peak_bytes']:,} B"
                if row is not None
                else f"no memory row for the module ({shown.stderr.strip()[-300:] or sorted(rows)})"
            )
        )
        results.append(ok)
    return results


def autonvtx_command(work: dict[str, Any], scratch: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "autonvtx",
        "run",
        *extra,
        *work["rules"],
        str(scratch / "gpucheck_launch.py"),
        *work["target"],
    ]


def environment(scratch: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(scratch), str(REPO), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def check_recorder(work: dict[str, Any], scratch: Path) -> bool:
    from autonvtx.recorder.trace import read_chrome_trace

    trace = scratch / f"{work['name']}.json"
    done = subprocess.run(
        autonvtx_command(work, scratch, "--trace", str(trace)),
        cwd=scratch,
        env=environment(scratch),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        say(f"FAIL {work['name']}: autonvtx run --trace exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return False
    names = {r.name for rec in read_chrome_trace(trace) for r in rec.ranges}
    ok = bool(names) and (work["expect"] is None or work["expect"] in names)
    say(
        f"{'ok' if ok else 'FAIL'} {work['name']}: autonvtx run --trace recorded {len(names)} range names"
        + (f" (expected {work['expect']!r} among them)" if work["expect"] else "")
    )
    if os.environ.get("GPU_CHECK_NAMES"):
        say(f"  names: {', '.join(sorted(names)[:40])}")
    return ok


def check_nsys(work: dict[str, Any], scratch: Path, nsys: str) -> bool:
    from autonvtx.report.output import ReportRequest, produce

    rep = scratch / f"{work['name']}-nsys"
    profile = [
        nsys,
        "profile",
        "-t",
        "cuda,nvtx",
        "--force-overwrite",
        "true",
        "-o",
        str(rep),
        *autonvtx_command(work, scratch),
    ]
    done = subprocess.run(profile, cwd=scratch, env=environment(scratch), capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        say(f"FAIL {work['name']}: nsys profile exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return False
    export = scratch / f"{work['name']}-nsys.sqlite"
    subprocess.run(
        [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(export), str(rep) + ".nsys-rep"],
        check=True,
        capture_output=True,
        timeout=900,
    )
    report = json.loads(produce(ReportRequest(str(export), fmt="json")) or "{}")
    db = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    try:
        expected = dict(db.execute(INDEPENDENT))
    except sqlite3.Error as exc:  # e.g. no kernel table: the capture holds no kernels at all
        say(f"FAIL {work['name']}: the export cannot be joined ({exc})")
        return False
    finally:
        db.close()
    got = {r["name"]: r["kernels"] for r in report["ranges"] if r["kernels"]}
    total = report["totals"]["capture"]["kernels"]
    inside = total - report["totals"]["outside_ranges"]["kernels"] - report["totals"]["launch_not_captured"]["kernels"]
    ok = total > 0 and inside > 0 and got == expected and (work["expect"] is None or got.get(work["expect"], 0) > 0)
    say(
        f"{'ok' if ok else 'FAIL'} {work['name']}: nsys captured {total} kernels, {inside} launched inside ranges; "
        f"report's per-range kernel counts {'equal' if got == expected else 'DIFFER FROM'} the SQL join "
        f"({len(got)} ranges with kernels)"
    )
    return ok


def check_cupti(work: dict[str, Any], scratch: Path) -> bool:
    from autonvtx.recorder.trace import read_chrome_trace

    trace = scratch / f"{work['name']}-cupti.json"
    records_path = scratch / f"{work['name']}-cupti-records.json"
    done = subprocess.run(
        autonvtx_command(work, scratch, "--trace", str(trace)),
        cwd=scratch,
        env=environment(scratch, GPU_CHECK_CUPTI_OUT=str(records_path)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        say(f"FAIL {work['name']}: the CUPTI run exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return False
    records = json.loads(records_path.read_text())
    (cupti_0, mono_0, _), (cupti_1, mono_1, _) = records["clock"]
    offset = mono_0 - cupti_0
    drift = (mono_1 - cupti_1) - offset
    calls = {corr: (start + offset, tid) for start, _end, corr, tid in records["api"]}
    ranges = [r for rec in read_chrome_trace(trace) for r in rec.ranges]
    recorded_tids = {r.tid for r in ranges}
    inside = 0
    named: dict[str, int] = {}
    for _start, _end, corr, _name in records["kernels"]:
        call = calls.get(corr)
        if call is None:
            continue
        at, tid = call
        # CUPTI's threadId is the OS thread id on Linux; where it matches none the recorder saw
        # (another convention), any range of the process is accepted.
        enclosing = [r for r in ranges if r.start_ns <= at <= r.end_ns and (tid not in recorded_tids or r.tid == tid)]
        if enclosing:
            inside += 1
            for r in {r.name for r in enclosing}:
                named[r] = named.get(r, 0) + 1
    kernels = len(records["kernels"])
    ok = kernels > 0 and inside > 0 and (work["expect"] is None or named.get(work["expect"], 0) > 0)
    top = ", ".join(f"{name} {count}" for name, count in sorted(named.items(), key=lambda kv: -kv[1])[:3])
    say(
        f"{'ok' if ok else 'FAIL'} {work['name']}: CUPTI saw {kernels} kernels, {inside} launched inside autonvtx ranges "
        f"(clock drift over the run {drift} ns; most kernels under: {top or 'none'})"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", metavar="DIR", help="keep traces and exports in DIR")
    parser.add_argument(
        "--only",
        metavar="NAMES",
        help="only these workloads (comma-separated: torch, torch-backward, torch-memory, numba, cupy, cupy-preset, jax, "
        "compile)",
    )
    parser.add_argument("--cpu", action="store_true", help="without a GPU: the torch.compile checks on the CPU")
    args = parser.parse_args()
    present, why = gpu_present()
    if not present and not args.cpu:
        say(f"skipped: no CUDA GPU on this machine ({why})")
        return 0
    say(f"GPU: {why}" if present else f"no GPU ({why}): --cpu, the torch.compile checks on the CPU alone")
    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="autonvtx-gpu-check-"))
    scratch.mkdir(parents=True, exist_ok=True)
    nsys = shutil.which("nsys")
    has_cupti = importlib.util.find_spec("cupti") is not None
    say(
        f"kernel-in-range check by: {'nsys (' + nsys + ')' if nsys else 'cupti-python' if has_cupti else 'nothing (no nsys, no cupti-python): only that the programs run and record ranges'}"
    )
    results = []
    try:
        gpu_work = workloads(scratch)  # writes the work modules, the compile check's too
        only = set(args.only.split(",")) if args.only else None
        for work in gpu_work if present else []:
            if only is not None and work["name"] not in only:
                continue
            if importlib.util.find_spec(work["module"]) is None:
                say(f"skipped {work['name']}: {work['module']} is not installed")
                continue
            probe = subprocess.run([sys.executable, "-c", work["usable"]], capture_output=True, text=True, timeout=300)
            if probe.returncode != 0:
                reason = (probe.stderr.strip().splitlines() or ["exit status " + str(probe.returncode)])[-1]
                say(f"skipped {work['name']}: it cannot use the GPU here ({reason})")
                continue
            results.append(check_recorder(work, scratch))
            if nsys:
                results.append(check_nsys(work, scratch, nsys))
            elif has_cupti:
                results.append(check_cupti(work, scratch))
        if present and (only is None or "torch-memory" in only):
            if importlib.util.find_spec("torch") is None:
                say("skipped torch-memory: torch is not installed")
            else:
                results.extend(check_memory(scratch, nsys))
        if only is None or "compile" in only:
            if importlib.util.find_spec("torch") is None:
                say("skipped torch.compile: torch is not installed")
            else:
                results.extend(check_compile(scratch))
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    failed = results.count(False)
    say(
        f"{len(results) - failed} checks passed, {failed} failed"
        if results
        else "nothing to check: no framework installed"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
