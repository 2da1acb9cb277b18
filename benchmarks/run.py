"""autonvtx's performance goals (issues 6, 11, 13 and 24), each measured and printed against
its target.

    python benchmarks/run.py            # the table (about a minute on 2 cores)
    python benchmarks/run.py --quick    # tiny sizes: checks the benchmark code runs (CI)
    python benchmarks/run.py --json out.json   # also write every figure measured
    python benchmarks/run.py --only percall,wholesale --engine code   # some sections, one engine
    python benchmarks/run.py --only start-up   # the start-up rows alone (about 10 s)
    python benchmarks/run.py --only wholesale --instructions   # + callgrind's count per function (minutes)

Each measurement runs in its own process (whether a tool is attached, and which per-call
path serves the ranges, are fixed at a process's start):

    percall.py         goals 1, 2, 5   per-call cost with a no-op tool and with the recorder;
                       11, 13, 24      unselected functions; the recorder's rate in C;
                                       generators and coroutines per resumption; the code
                                       engine's calls, resumptions and untargeted exceptions
    percall.py (pure)  goal 1, info    the same through the pure-Python fallback
    notool_target.py   goal 3          `autonvtx run` with no tool attached
    start-up           goals 4, 24     `autonvtx run empty.py` against `python empty.py`: with
                                       no rules, with a config and a no-op tool attached, and
                                       with a config whose target is already imported
    wholesale.py       goal 24         numpy and pandas, networkx (torch, for information)
                                       instrumented wholesale by each engine: whole `autonvtx
                                       run` processes, importing and running a small workload,
                                       every module targeted against a rule that selects nothing

Every figure is the fastest of several interleaved measurements in CPU time (the thread's for
per-call loops, user + system of the child for whole processes; process-level medians are
printed next to it): on a machine shared with other work that is the run least disturbed, and
the two sides of each comparison see the same conditions. The wholesale rows' time per
function is the median of the rounds' ratios (everything over one tiny target) at the fastest
run of the tiny target, their workload ratio the median of the rounds' ratios: the host's
speed moves by up to 2x over minutes, and a ratio of two runs a second apart holds where
differences do not. With --instructions they also count instructions (callgrind), which the
load does not move at all. Nothing here asserts a timing;
"met?" compares the figure printed with its target.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHAPES = ("function", "method", "*args/**kwargs")


@dataclass
class Row:
    goal: str
    what: str
    figure: str
    target: str
    met: bool | None  # None: printed for information, no target

    def cells(self) -> list[str]:
        met = "-" if self.met is None else ("yes" if self.met else "NO")
        return [self.goal, self.what, self.figure, self.target, met]


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no NVTX tool, no autonvtx settings, and bytecode
    caches written as by default (with PYTHONDONTWRITEBYTECODE every start-up would compile
    whatever has no cache yet)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def worker(script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Any:
    """Run benchmarks/`script` and return the JSON object it prints last."""
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, script), *args],
        env=env if env is not None else user_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{script} {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def autonvtx_command() -> list[str]:
    """The console script next to this interpreter (what users run), else `python -m autonvtx`."""
    script = os.path.join(os.path.dirname(sys.executable), "autonvtx")
    return [script] if os.path.isfile(script) else [sys.executable, "-m", "autonvtx"]


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(command: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `command`, which must succeed."""
    cpu, wall = child_cpu_seconds(), time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    wall, cpu = time.perf_counter() - wall, child_cpu_seconds() - cpu
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr}")
    return cpu, wall


def ns(value: float) -> str:
    return f"{value:.0f} ns"


def goal1_rows(per: dict[str, Any], label: str, target: bool) -> list[Row]:
    rows = []
    for shape in SHAPES:
        t = per["shapes"][shape]
        ours, hand = t["autonvtx"] - t["plain"], t["nvtx.annotate"] - t["plain"]
        ratio = ours / hand
        rows.append(
            Row(
                "1",
                f"{shape}: autonvtx / @nvtx.annotate overhead, no-op tool{label}",
                f"{ratio:.2f}x ({ns(ours)} vs {ns(hand)}; plain call {ns(t['plain'])})",
                "<= 0.5x" if target else "-",
                ratio <= 0.5 if target else None,
            )
        )
    return rows


def recorder_rows(per: dict[str, Any]) -> list[Row]:
    rows = []
    for shape in SHAPES:
        t = per["shapes"][shape]
        ratio = t["autonvtx [record]"] / t["autonvtx"]
        added = t["autonvtx [record]"] - t["autonvtx"]
        over = (t["autonvtx [record]"] - t["plain"]) / max(1e-9, t["autonvtx"] - t["plain"])
        rows.append(
            Row(
                "1",
                f"{shape}: annotated call, recorder / no-op tool",
                f"{ratio:.2f}x ({ns(t['autonvtx [record]'])} vs {ns(t['autonvtx'])}: +{ns(added)}; "
                f"overhead {over:.1f}x)",
                "<= 1.5x",
                ratio <= 1.5,
            )
        )
    return rows


def goal2_row(per: dict[str, Any]) -> Row:
    t = per["unselected_ns"]
    ratio = t["instrumented module"] / t["plain"]
    same, hooks = per["unselected_same_object"], per["global_hooks"]
    return Row(
        "2",
        "unselected function in an instrumented module / plain",
        f"{ratio:.2f}x ({'the same function object' if same else 'REPLACED'}, "
        f"{'a trace/profile hook is set' if hooks else 'no trace/profile hook'})",
        "1.00x",
        same and not hooks,
    )


def goal3_rows(quick: bool, library: dict[str, Any]) -> list[Row]:
    n, rounds = ("2000", "2") if quick else ("20000", "41")
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run(
            [
                *autonvtx_command(),
                "run",
                "-t",
                "__main__",
                "--include",
                "work",
                os.path.join(HERE, "notool_target.py"),
                n,
                rounds,
            ],
            cwd=cwd,
            env=user_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"autonvtx run notool_target.py failed:\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    hints = [line for line in proc.stderr.splitlines() if "no NVTX tool is attached" in line]
    ratio = result["ns"]["work"] / result["ns"]["twin"]
    rows = [
        Row(
            "3",
            "no tool: `autonvtx run`, selected function / plain twin",
            f"{ratio:.2f}x ({result['work_type']}, left unwrapped; how to attach a tool said {len(hints)}x)",
            "<= 1.1x",
            ratio <= 1.1 and len(hints) == 1,
        )
    ]
    for shape in SHAPES:
        t = library["shapes"][shape]
        rows.append(
            Row(
                "3",
                f"{shape}: no tool, wrapped in-process (library use) / plain",
                f"{t['autonvtx'] / t['plain']:.2f}x (+{ns(t['autonvtx'] - t['plain'])})",
                "-",
                None,
            )
        )
    return rows


# The README's example config: rules for a project's package (not imported by empty.py) and
# for the script's own functions.
STARTUP_CONFIG = """
[autonvtx]
domain = "myproject"

[[rules]]
modules = ["myproject", "myproject.*"]
exclude = ["_*", "*._*"]

[[rules]]
modules = ["__main__"]
include = ["main", "train_*"]
"""


# A config whose one target is a module `python` itself has imported before the script runs:
# instrumenting starts at once (issue 24's start-up figure), not on a later import.
IMPORTED_TARGET_CONFIG = """
[[rules]]
modules = ["genericpath"]
"""


def startup_rows(quick: bool) -> list[Row]:
    """Goals 4 and 24, start-up: `autonvtx run empty.py` with no rules and no tool (its best
    case), with a config and a no-op tool attached (as under a profiler), and with a config whose
    target is already imported, against `python empty.py`: CPU time of the whole process
    (user + system), best of 15."""
    runs = 3 if quick else 15
    sys.path.insert(0, REPO)
    from autonvtx.recorder import native

    library = native.library_path()
    env = user_env()
    with tempfile.TemporaryDirectory() as cwd:
        empty = os.path.join(cwd, "empty.py")
        open(empty, "w").close()
        config = os.path.join(cwd, "rules.toml")
        with open(config, "w") as f:
            f.write(STARTUP_CONFIG)
        imported = os.path.join(cwd, "imported.toml")
        with open(imported, "w") as f:
            f.write(IMPORTED_TARGET_CONFIG)
        commands = {
            "python": ([sys.executable, empty], env),
            "no rules": ([*autonvtx_command(), "run", empty], env),
        }
        if library is not None:
            tool = user_env(NVTX_INJECTION64_PATH=library, AUTONVTX_RECORDER_MODE="noop")
            commands["config"] = ([*autonvtx_command(), "run", "--config", config, empty], tool)
            commands["imported"] = ([*autonvtx_command(), "run", "--config", imported, empty], tool)
        for command, command_env in commands.values():
            timed_run(command, cwd, command_env)  # warm the file cache
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
        for _ in range(runs):  # alternating, so that all see the same conditions
            for key, (command, command_env) in commands.items():
                samples[key].append(timed_run(command, cwd, command_env))
    cpu = {k: min(c for c, _ in v) for k, v in samples.items()}
    median = {k: statistics.median(c for c, _ in v) for k, v in samples.items()}
    wall = {k: statistics.median(w for _, w in v) for k, v in samples.items()}

    def figure(key: str) -> tuple[float, str]:
        added = (cpu[key] - cpu["python"]) * 1000
        return added, (
            f"+{added:.0f} ms CPU ({cpu[key] * 1000:.0f} vs {cpu['python'] * 1000:.0f} ms, "
            f"best of {runs}; medians +{(median[key] - median['python']) * 1000:.0f} ms CPU, "
            f"+{(wall[key] - wall['python']) * 1000:.0f} ms wall)"
        )

    added, text = figure("no rules")
    rows = [
        Row(
            "24",
            "start-up: `autonvtx run empty.py` (no rules, no tool) - `python empty.py`",
            text,
            "<= 15 ms",
            added <= 15,
        )
    ]
    if "config" in commands:
        added, text = figure("config")
        rows.append(
            Row(
                "4",
                "start-up: `autonvtx run --config rules.toml empty.py`, no-op tool attached - `python empty.py`",
                text,
                "<= 40 ms",
                added <= 40,
            )
        )
        added, text = figure("imported")
        rows.append(
            Row(
                "24",
                "start-up: `autonvtx run --config imported.toml empty.py` (its target, "
                "genericpath, already imported), no-op tool attached - `python empty.py`",
                text,
                "<= 20 ms",
                added <= 20,
            )
        )
    else:
        rows += [
            Row(
                goal,
                f"start-up with a config ({what}) and a no-op tool",
                "skipped: the native recorder is not built",
                target,
                False,
            )
            for goal, what, target in (("4", "rules.toml", "<= 40 ms"), ("24", "target already imported", "<= 20 ms"))
        ]
    return rows


# The rules of a wholesale run, by variant: every module of the packages; one tiny module the
# program imports first (what starting to wrap costs: wrapt's import); nothing at all.
def wholesale_rules(variant: str, packages: list[str], engine: str = "wrap") -> str:
    modules = {
        "all": [m for p in packages for m in (p, f"{p}.*")],
        "first": ["colorsys"],
        "nothing": ["autonvtx_benchmark_selects_nothing"],
    }[variant]
    return f'[autonvtx]\nengine = "{engine}"\n\n[[rules]]\nmodules = [' + ", ".join(f'"{m}"' for m in modules) + "]\n"


def wholesale(packages: str, runs: int, engine: str = "wrap", instructions: bool = False) -> dict[str, Any] | None:
    """`packages` imported and used by benchmarks/wholesale.py, as whole `autonvtx run`
    processes with a no-op tool attached: every module targeted, against one tiny target and
    against a rule that selects nothing, in `runs` alternating rounds. None when not installed.

    The time per function is the median of the rounds' ratios of process CPU time (user +
    system) outside the workload (the program times it itself), everything over one tiny
    target, at the fastest run of the latter; the other figures are the best run of each
    variant. The workload's cost is the median of the rounds' ratios, printed beside it."""
    names = packages.split(",")
    if any(importlib.util.find_spec(name) is None for name in names):
        return None
    sys.path.insert(0, REPO)
    from autonvtx.recorder import native

    library = native.library_path()
    if library is None:
        raise RuntimeError("the native recorder is not built (pip install -e .)")
    # One BLAS/OpenMP thread: OpenBLAS's idle workers spin after numpy's import, and billed 11%
    # of a run's CPU time (perf), varying with the run's length, not with autonvtx.
    env = user_env(
        NVTX_INJECTION64_PATH=library,
        AUTONVTX_RECORDER_MODE="noop",
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    program = [os.path.join(HERE, "wholesale.py"), "--packages", packages]
    samples: dict[str, list[tuple[float, dict[str, Any]]]] = {"all": [], "first": [], "nothing": []}
    with tempfile.TemporaryDirectory() as cwd:
        for variant in samples:
            with open(os.path.join(cwd, f"{variant}.toml"), "w") as f:
                f.write(wholesale_rules(variant, names, engine))
        # Counted once, untimed: -v's report at exit would be part of only one side's time.
        counted = subprocess.run(
            [*autonvtx_command(), "run", "-v", "--config", "all.toml", *program],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        found = [
            line
            for line in counted.stderr.splitlines()
            if line.startswith(("autonvtx: wrapped ", "autonvtx: monitored "))
        ]
        if counted.returncode != 0 or not found:
            raise RuntimeError(f"wholesale {packages} failed:\n{counted.stderr[-2000:]}")
        wrapped, modules = (int(word) for word in found[-1].split() if word.isdigit())
        for round_ in range(runs):  # alternating, so that every variant sees the same conditions
            order = list(samples.items())
            for variant, runs_of in order if round_ % 2 == 0 else reversed(order):
                command = [*autonvtx_command(), "run", "--config", f"{variant}.toml", *program]
                runs_of.append(timed_json(command, cwd, env))
        counted_instructions = import_instructions(packages, cwd, env) if instructions else None
    checksums = {r["checksum"] for runs_of in samples.values() for _, r in runs_of}
    if len(checksums) != 1:
        raise RuntimeError(f"{packages} compute differently when instrumented: {checksums}")
    rounds = list(zip(samples["all"], samples["first"], samples["nothing"]))

    def outside(run: tuple[float, dict[str, Any]]) -> float:
        # The process's CPU time outside the workload: starting, importing, wrapping, exiting.
        return run[0] - run[1]["workload_seconds"]

    rss = {v: statistics.median(r["rss_bytes"] for _, r in runs_of) for v, runs_of in samples.items()}
    workload = statistics.median(
        a["workload_seconds"] / n["workload_seconds"] for (_, a), (_, n) in zip(samples["all"], samples["nothing"])
    )
    first = samples["all"][0][1]
    best = {v: min(outside(run) for run in runs_of) for v, runs_of in samples.items()}
    best_cpu = {v: min(cpu for cpu, _ in runs_of) for v, runs_of in samples.items()}
    # The time per function: the median of the rounds' ratios (everything / one tiny target,
    # outside the workload; the two runs of a round follow one another) applied to the fastest
    # "one tiny target" run. The host's speed moves by up to 2x over minutes here, which moves
    # differences of bests and of medians alike (the same code read 2.6 and 18.7 us in one
    # quiet session); a round's ratio holds, so the figure is the cost at the host's best speed
    # seen in the run. The plain differences are printed beside it.
    ratios = sorted(outside(a) / outside(f) for a, f, _ in rounds)
    per_round = [(r - 1) * best["first"] / max(1, wrapped) for r in ratios]
    return {
        "count": max(1, wrapped),
        "modules": modules,
        "versions": ", ".join(f"{k} {v}" for k, v in first["versions"].items()),
        "per_function": statistics.median(per_round),
        "per_function_spread": (per_round[len(per_round) // 4], per_round[(3 * len(per_round)) // 4]),
        "per_function_best": (best["all"] - best["first"]) / max(1, wrapped),
        "per_function_median": statistics.median(outside(a) - outside(f) for a, f, _ in rounds) / max(1, wrapped),
        "whole": best_cpu["all"] - best_cpu["nothing"],
        "fixed": best_cpu["first"] - best_cpu["nothing"],
        "nothing": best_cpu["nothing"],
        "workload_ratio": workload,
        "workload_seconds": statistics.median(n["workload_seconds"] for _, n in samples["nothing"]),
        "memory": rss["all"] - rss["first"],
        "instructions": None
        if counted_instructions is None
        else (counted_instructions["all"] - counted_instructions["first"]) / max(1, wrapped),
    }


def import_instructions(packages: str, cwd: str, env: dict[str, str]) -> dict[str, int] | None:
    """Instructions executed by `autonvtx run -c "import colorsys, PACKAGES"` (the collector
    held off, then one full collection, as in wholesale.py: see there) under each of the
    configs "all" and "first" in `cwd` (callgrind, where valgrind is installed): a count the
    host's load does not move, where the CPU times above move by 2x. None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    counts = {}
    for variant in ("all", "first"):
        command = [
            valgrind,
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            *autonvtx_command(),
            "run",
            "--config",
            f"{variant}.toml",
            "-c",
            f"import gc; gc.disable(); import colorsys, {packages}; gc.enable(); gc.collect()",
        ]
        # One hash seed for both variants: string hashes order dictionaries and sets, and
        # unseeded runs of the same code moved by up to 9M instructions (1,500 a function).
        proc = subprocess.run(
            command, cwd=cwd, env={**env, "PYTHONHASHSEED": "0"}, capture_output=True, text=True, timeout=1200
        )
        collected = [line.split()[-1] for line in proc.stderr.splitlines() if "Collected :" in line]
        if proc.returncode != 0 or not collected:
            raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        counts[variant] = int(collected[-1])
    return counts


def timed_json(command: list[str], cwd: str, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """(CPU seconds, the JSON object printed last) of one run of `command`, which must succeed."""
    cpu = child_cpu_seconds()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    cpu = child_cpu_seconds() - cpu
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return cpu, json.loads(proc.stdout.strip().splitlines()[-1])


def time_figure(w: dict[str, Any], runs: int, engine: str = "wrap") -> str:
    count = w["count"]
    verb, start = ("monitored", "monitor") if engine == "code" else ("wrapped", "wrap (wrapt's import)")
    low, high = w["per_function_spread"]
    return (
        f"{w['per_function'] * 1e6:.1f} us ({count} {verb} in {w['modules']} modules, the "
        f"process's CPU time outside the workload: the median of {runs} rounds' ratios to one "
        f"tiny target, at the fastest of its runs; quartiles {low * 1e6:.1f}-{high * 1e6:.1f} us; "
        f"difference of the best runs {w['per_function_best'] * 1e6:.1f} us, median of the "
        f"rounds' differences {w['per_function_median'] * 1e6:.1f} us; "
        + (
            ""
            if w["instructions"] is None
            else f"{w['instructions']:,.0f} instructions per function importing the packages (callgrind); "
        )
        + "whole process "
        f"+{w['whole'] * 1000:.0f} ms CPU over a rule selecting nothing "
        f"({w['nothing'] * 1000:.0f} ms), of which +{w['fixed'] * 1000:.0f} ms is starting to "
        f"{start}) | workload x{w['workload_ratio']:.2f} "
        f"({w['workload_seconds'] * 1000:.0f} ms uninstrumented)"
    )


# Issue 24's targets per selected function, by engine: time (us) and memory (bytes).
WHOLESALE_TARGETS = {"wrap": (8, 400), "code": (3, 200)}


def wholesale_rows(quick: bool, only_engine: str | None = None, instructions: bool = False) -> list[Row]:
    """Goals 4 and 24, wholesale, as whole processes: numpy and pandas, and networkx (many
    small Python functions), with the wrap engine and (3.12+) the code engine, each against
    issue 24's targets; torch for information, where installed. `only_engine`: that one."""
    runs = 1 if quick else 11
    sys.path.insert(0, REPO)
    from autonvtx.engines.kinds import choose_engine

    engines = ["wrap"]
    kind, why_not = choose_engine("code")
    code = kind.name
    if code == "code":
        engines.append("code")
    if only_engine is not None:
        engines = [e for e in engines if e == only_engine]
    rows = []
    for engine in engines:
        for packages in ("numpy,pandas", "networkx", "torch"):
            rows.append(
                wholesale_row(
                    packages,
                    engine,
                    runs if packages != "torch" else max(1, runs // 2),
                    instructions and packages != "torch",
                )
            )
    if code != "code" and only_engine != "wrap":
        rows.append(Row("24", "wholesale, code engine", f"skipped: {why_not}", "<= 3 us, <= 200 B", None))
    return rows


def wholesale_row(packages: str, engine: str, runs: int, instructions: bool = False) -> Row:
    verb = "monitored" if engine == "code" else "wrapped"
    limit_us, limit_b = WHOLESALE_TARGETS[engine]
    goal, target = ("24", f"<= {limit_us} us, <= {limit_b} B") if packages != "torch" else ("24", "-")
    info = wholesale(packages, runs, engine, instructions)
    if info is None:
        return Row(
            goal,
            f"wholesale {packages}, {engine} engine",
            "skipped: not installed here",
            target,
            None if target == "-" else False,
        )
    per_us, per_b = info["per_function"] * 1e6, info["memory"] / info["count"]
    return Row(
        goal,
        f"wholesale {info['versions']}, {engine} engine: CPU time, memory per {verb} "
        "function | workload under the rules / under a rule selecting nothing",
        f"{time_figure(info, runs, engine)}, {per_b:.0f} B (+{info['memory'] / 2**20:.1f} MiB resident)",
        target,
        None if target == "-" else per_us <= limit_us and per_b <= limit_b,
    )


def percall_engine_rows(per: dict[str, Any]) -> list[Row]:
    """Issue 11 (generators and coroutines on the native path) and 13 (the code engine's calls
    and resumptions), from percall.py's own summary of its no-op-tool result."""
    sys.path.insert(0, HERE)
    import percall

    return [
        Row(engine_goal(what), what, figure, target, met) for what, figure, target, met in percall.summary_rows(per)
    ]


def engine_goal(what: str) -> str:
    if what.startswith(("coroutine, awaited: wrapper engine", "code engine: untargeted exceptions propagated")):
        return "24"
    if what.startswith(("code", "function: code", "method: code", "*args")) or "code engine" in what:
        return "13"
    return "11"


def goal5_rows(per: dict[str, Any]) -> list[Row]:
    r = per["recorder"]
    if "skipped" in r:
        return [Row("5", "recorder", r["skipped"], ">= 10 M events/s", False)]
    one, two = r["events_per_s_1_thread"] / 1e6, r["events_per_s_2_threads"] / 1e6
    return [
        Row(
            "5",
            "recorder: events/s per thread into its buffers (push/pop loop in C)",
            f"{one:.1f} M/s (2 threads at once: {two:.1f} M/s each; no-op tool "
            f"{r['noop_events_per_s_1_thread'] / 1e6:.0f} M/s)",
            ">= 10 M/s",
            one >= 10,
        ),
        Row(
            "5",
            "recorder: memory per event",
            f"{r['bytes_per_event']:.1f} B ({r['events']:,} events, {r['dropped']} dropped)",
            "printed",
            None,
        ),
    ]


def format_table(rows: list[Row]) -> str:
    header = ["goal", "what", "figure", "target", "met?"]
    table = [header] + [row.cells() for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


# The sections --only picks: percall.py with a no-op tool (goals 1, 2, 5, 11, 13, 24's
# per-call rows), its pure-Python run, its run without a tool (goal 3), start-up, wholesale.
SECTIONS = ("percall", "pure", "notool", "startup", "wholesale")


def sections(text: str) -> tuple[str, ...]:
    names = tuple(name.strip().replace("start-up", "startup") for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in SECTIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown section {unknown[0]!r}; expected some of {', '.join(SECTIONS)}"
            if unknown
            else f"expected some of {', '.join(SECTIONS)}"
        )
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI: the code runs)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure measured")
    parser.add_argument(
        "--only", metavar="SECTIONS", type=sections, help=f"comma-separated, of: {', '.join(SECTIONS)} (default: all)"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="wholesale rows: also count instructions per function (callgrind; minutes)",
    )
    parser.add_argument("--engine", choices=("wrap", "code"), help="wholesale rows of this engine only (default: both)")
    args = parser.parse_args(argv)
    quick = ["--quick"] if args.quick else []
    only = args.only or SECTIONS
    started = time.perf_counter()
    if args.only == "start-up":
        print(f"autonvtx benchmarks: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, start-up rows only")
        print(format_table(startup_rows(args.quick)))
        print(f"({time.perf_counter() - started:.0f} s)")
        return 0

    rows: list[Row] = []
    native = pure = library = None
    if "percall" in only or "pure" in only:
        native = worker("percall.py", *quick)
    if "pure" in only:
        pure = worker("percall.py", *quick, env=user_env(AUTONVTX_PURE_PYTHON="1"))
    if "notool" in only:
        library = worker("percall.py", *quick, "--tool", "none")
    if "percall" in only:
        rows += goal1_rows(native, "", target=True)
        rows += recorder_rows(native)
    if "pure" in only:
        rows += goal1_rows(pure, " (pure-Python fallback)", target=False)
    if "percall" in only:
        rows.append(goal2_row(native))
    if "notool" in only:
        rows += goal3_rows(args.quick, library)
    if "startup" in only:
        rows += startup_rows(args.quick)
    if "wholesale" in only:
        rows += wholesale_rows(args.quick, args.engine, args.instructions)
    if "percall" in only:
        rows += goal5_rows(native)
        rows += percall_engine_rows(native)

    native_path = "not measured" if native is None else "yes" if native["native"] else "NO (fallback)"
    print(
        f"autonvtx benchmarks: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"native per-call path: {native_path}"
        f"{' (quick: sizes too small for the figures to mean anything)' if args.quick else ''}"
    )
    print(format_table(rows))
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {
                    "python": sys.version,
                    "rows": [vars(r) for r in rows],
                    "percall": native,
                    "percall_pure": pure,
                    "percall_no_tool": library,
                },
                out,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
