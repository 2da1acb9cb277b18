"""The per-module cost of instrumenting a package wholesale (issue 24), in instructions.

    python benchmarks/bench_modules.py [--modules 400] [--functions 1] [--engine code]
    python benchmarks/bench_modules.py --annotate 40   # + the native functions' share
    python benchmarks/bench_modules.py --lines         # where the Python per module goes

Generates a package of N small modules (K plain functions each) in a temporary directory and
counts, under callgrind (which the host's load does not move), the instructions of `autonvtx
run` importing all of them twice: with a rule that targets the package wholesale, and with one
that targets only `colorsys`, which the program imports first (so both runs load the engine and
the native client). The difference over N is the cost of a targeted module, over N*K that of a
function; one JSON line. With --annotate, callgrind_annotate's inclusive counts per module of
the costliest native functions (autonvtx's C, importlib's C) in the targeted run.

Callgrind sees the interpreter, not Python functions: --lines says where the Python goes
instead, as the lines each Python function runs per module (sys.settrace's line events),
targeted over untargeted, in this process's interpreter (no callgrind; a line is some 100
instructions on 3.12).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import autonvtx_command, user_env  # noqa: E402  (this directory's shared helpers)

PACKAGE = "autonvtx_bench_modules"


def write_package(root: str, modules: int, functions: int) -> str:
    """The package, and a program importing each module by an import statement; its path."""
    package = os.path.join(root, PACKAGE)
    os.makedirs(package)
    with open(os.path.join(package, "__init__.py"), "w") as f:
        f.write("")
    for m in range(modules):
        with open(os.path.join(package, f"m{m:04d}.py"), "w") as f:
            f.write("VALUE = 1\n\n")
            for k in range(functions):
                f.write(f"def f{k}(x):\n    return x + {k}\n\n")
    program = os.path.join(root, "program.py")
    with open(program, "w") as f:
        # The collector held off while importing, as in wholesale.py: a few kept objects would
        # otherwise move a full collection from one variant into the other.
        f.write("import gc\ngc.disable()\nimport colorsys\n")
        f.writelines(f"import {PACKAGE}.m{m:04d}\n" for m in range(modules))
        f.write("gc.enable()\ngc.collect()\n")
    # Compiled once, before counting: neither variant pays for writing bytecode caches.
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)
    return program


def rules(variant: str, engine: str) -> str:
    modules = [PACKAGE, f"{PACKAGE}.*"] if variant == "targeted" else ["colorsys"]
    return f'[autonvtx]\nengine = "{engine}"\n\n[[rules]]\nmodules = [' + ", ".join(f'"{m}"' for m in modules) + "]\n"


def count(root: str, program: str, variant: str, engine: str, out: str) -> int:
    from autonvtx.recorder import native

    library = native.library_path()
    if library is None:
        raise SystemExit("bench_modules: the native recorder is not built (pip install -e .)")
    config = os.path.join(root, f"{variant}.toml")
    with open(config, "w") as f:
        f.write(rules(variant, engine))
    # One hash seed: string hashes order sets and dicts, which moved the count by 2,000
    # instructions a module from one run to the next.
    env = user_env(
        NVTX_INJECTION64_PATH=library,
        AUTONVTX_RECORDER_MODE="noop",
        PYTHONHASHSEED="0",
        PYTHONPATH=os.pathsep.join((root, user_env()["PYTHONPATH"])),
    )
    command = [*autonvtx_command(), "run", "--config", config, program]
    # Once outside callgrind first: whatever has no bytecode cache yet (autonvtx's own
    # modules in a fresh checkout) is compiled then, not in the run counted.
    subprocess.run(command, cwd=root, env=env, capture_output=True, timeout=600, check=True)
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command]
    proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=1200)
    collected = [line.split()[-1] for line in proc.stderr.splitlines() if "Collected :" in line]
    if proc.returncode != 0 or not collected:
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return int(collected[-1])


def annotate(out: str, modules: int, top: int) -> list[tuple[int, str]]:
    """(inclusive instructions per module, function) of the costliest functions of autonvtx,
    importlib and the native client in the targeted run."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", out], capture_output=True, text=True, check=True
    ).stdout
    rows = []
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) != 2 or not parts[0].replace(",", "").isdigit():
            continue
        name = parts[1]
        if any(k in name for k in ("autonvtx", "importlib", "uniform.c", "monitoring.c", "_bootstrap")):
            rows.append((int(parts[0].replace(",", "")) // modules, name[:150]))
    return sorted(rows, reverse=True)[:top]


_LINES_PROGRAM = f"""
import collections, os, sys
import autonvtx
root, n, engine, targeted = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
sys.path.insert(0, root)
import colorsys
package = "{PACKAGE}"
autonvtx.install(targets=["colorsys", package, package + ".*"] if targeted else ["colorsys"], engine=engine)
__import__(package + ".m0000")  # the engine made, the package imported: not counted
lines = collections.Counter()

def tracer(frame, event, arg):
    code = frame.f_code
    key = os.path.basename(code.co_filename).split(" ")[0] + ":" + code.co_qualname
    def local(frame, event, arg):
        if event == "line":
            lines[key] += 1
        return local
    return local

sys.settrace(tracer)
for m in range(1, n):
    __import__(f"{{package}}.m{{m:04d}}")
sys.settrace(None)
for key, count in lines.items():
    print(count / (n - 1), key)
"""


def python_lines(root: str, modules: int, engine: str) -> list[tuple[float, str]]:
    """(line events per module, function) of a targeted module's import over an untargeted one."""
    from autonvtx.recorder import native

    counts: list[dict[str, float]] = []
    for targeted in ("0", "1"):
        env = user_env(
            NVTX_INJECTION64_PATH=native.library_path() or "", AUTONVTX_RECORDER_MODE="noop", PYTHONHASHSEED="0"
        )
        out = subprocess.run(
            [sys.executable, "-c", _LINES_PROGRAM, root, str(modules), engine, targeted],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        counts.append({k: float(v) for v, k in (line.split(" ", 1) for line in out.splitlines())})
    untargeted, targeted_ = counts
    rows = [(targeted_.get(k, 0.0) - untargeted.get(k, 0.0), k) for k in {*untargeted, *targeted_}]
    return sorted((row for row in rows if abs(row[0]) >= 0.5), reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=400)
    parser.add_argument("--functions", type=int, default=1, help="plain functions per module")
    parser.add_argument("--engine", default="code", choices=("code", "wrap"))
    parser.add_argument(
        "--annotate",
        type=int,
        default=0,
        metavar="ROWS",
        help="print this many rows of the targeted run's inclusive counts",
    )
    parser.add_argument(
        "--lines", action="store_true", help="Python lines per targeted module, by function (no callgrind)"
    )
    args = parser.parse_args()
    if args.lines:
        root = tempfile.mkdtemp(prefix="autonvtx-bench-modules-")
        try:
            write_package(root, args.modules, args.functions)
            rows = python_lines(root, args.modules, args.engine)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        for per_module, name in rows:
            print(f"{per_module:8.1f}  {name}")
        print(f"{sum(r[0] for r in rows):8.1f}  in all (line events per targeted module)")
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_modules: valgrind is not installed")
    root = tempfile.mkdtemp(prefix="autonvtx-bench-modules-")
    try:
        program = write_package(root, args.modules, args.functions)
        counts: dict[str, int] = {}
        for variant in ("untargeted", "targeted"):
            out = os.path.join(root, f"{variant}.callgrind")
            counts[variant] = count(root, program, variant, args.engine, out)
        extra = counts["targeted"] - counts["untargeted"]
        result: dict[str, Any] = {
            "python": sys.version.split()[0],
            "engine": args.engine,
            "modules": args.modules,
            "functions_per_module": args.functions,
            "per_module": round(extra / args.modules),
            "per_function": round(extra / (args.modules * args.functions)),
            **counts,
        }
        print(json.dumps(result))
        if args.annotate:
            for per_module, name in annotate(os.path.join(root, "targeted.callgrind"), args.modules, args.annotate):
                print(f"{per_module:>10,}  {name}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
