"""autonvtx's performance goals (issue 6), each measured and printed against its target.

    python benchmarks/run.py            # the table (about a minute on 2 cores)
    python benchmarks/run.py --quick    # tiny sizes: checks the benchmark code runs (CI)
    python benchmarks/run.py --json out.json   # also write every figure measured

Each measurement runs in its own process (whether a tool is attached, and which per-call
path serves the ranges, are fixed at a process's start):

    percall.py         goals 1, 2, 5   per-call cost with a no-op tool and with the recorder;
                                       unselected functions; the recorder's rate in C
    percall.py (pure)  goal 1, info    the same through the pure-Python fallback
    notool_target.py   goal 3          `autonvtx run` with no tool attached
    start-up           goal 4          `autonvtx run empty.py` against `python empty.py`: with
                                       no rules, and with a config and a no-op tool attached
    wholesale.py       goal 4          numpy and pandas (and torch, for information)
                                       instrumented wholesale

Every figure is the fastest of several interleaved measurements in CPU time (the thread's for
per-call loops, user + system of the child for whole processes; process-level medians are
printed next to it): on a machine shared with other work that is the run least disturbed, and
the two sides of each comparison see the same conditions. The wholesale figure is the one
exception: the median of paired ratios applied to the fastest plain import, so also a figure
for the least disturbed conditions (wholesale() says why). Nothing here asserts a timing;
"met?" compares the figure printed with its target.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
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
        rows.append(Row(
            "1", f"{shape}: autonvtx / @nvtx.annotate overhead, no-op tool{label}",
            f"{ratio:.2f}x ({ns(ours)} vs {ns(hand)}; plain call {ns(t['plain'])})",
            "<= 0.5x" if target else "-", ratio <= 0.5 if target else None,
        ))
    return rows


def recorder_rows(per: dict[str, Any]) -> list[Row]:
    rows = []
    for shape in SHAPES:
        t = per["shapes"][shape]
        ratio = t["autonvtx [record]"] / t["autonvtx"]
        added = t["autonvtx [record]"] - t["autonvtx"]
        over = (t["autonvtx [record]"] - t["plain"]) / max(1e-9, t["autonvtx"] - t["plain"])
        rows.append(Row(
            "1", f"{shape}: annotated call, recorder / no-op tool",
            f"{ratio:.2f}x ({ns(t['autonvtx [record]'])} vs {ns(t['autonvtx'])}: +{ns(added)}; "
            f"overhead {over:.1f}x)",
            "<= 1.5x", ratio <= 1.5,
        ))
    return rows


def goal2_row(per: dict[str, Any]) -> Row:
    t = per["unselected_ns"]
    ratio = t["instrumented module"] / t["plain"]
    same, hooks = per["unselected_same_object"], per["global_hooks"]
    return Row(
        "2", "unselected function in an instrumented module / plain",
        f"{ratio:.2f}x ({'the same function object' if same else 'REPLACED'}, "
        f"{'a trace/profile hook is set' if hooks else 'no trace/profile hook'})",
        "1.00x", same and not hooks,
    )


def goal3_rows(quick: bool, library: dict[str, Any]) -> list[Row]:
    n, rounds = ("2000", "2") if quick else ("20000", "41")
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run(
            [*autonvtx_command(), "run", "-t", "__main__", "--include", "work",
             os.path.join(HERE, "notool_target.py"), n, rounds],
            cwd=cwd, env=user_env(), capture_output=True, text=True, timeout=120,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"autonvtx run notool_target.py failed:\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    hints = [line for line in proc.stderr.splitlines() if "no NVTX tool is attached" in line]
    ratio = result["ns"]["work"] / result["ns"]["twin"]
    rows = [Row(
        "3", "no tool: `autonvtx run`, selected function / plain twin",
        f"{ratio:.2f}x ({result['work_type']}, left unwrapped; "
        f"how to attach a tool said {len(hints)}x)",
        "<= 1.1x", ratio <= 1.1 and len(hints) == 1,
    )]
    for shape in SHAPES:
        t = library["shapes"][shape]
        rows.append(Row(
            "3", f"{shape}: no tool, wrapped in-process (library use) / plain",
            f"{t['autonvtx'] / t['plain']:.2f}x (+{ns(t['autonvtx'] - t['plain'])})", "-", None,
        ))
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


def startup_rows(quick: bool) -> list[Row]:
    """Goal 4, start-up: `autonvtx run empty.py` with no rules and no tool (its best case), and
    with a config and a no-op tool attached (as under a profiler), against `python empty.py`."""
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
        commands = {
            "python": ([sys.executable, empty], env),
            "no rules": ([*autonvtx_command(), "run", empty], env),
        }
        if library is not None:
            tool = user_env(NVTX_INJECTION64_PATH=library, AUTONVTX_RECORDER_MODE="noop")
            commands["config"] = ([*autonvtx_command(), "run", "--config", config, empty], tool)
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
    rows = [Row("4", "start-up: `autonvtx run empty.py` (no rules, no tool) - `python empty.py`",
                text, "<= 60 ms", added <= 60)]
    if "config" in commands:
        added, text = figure("config")
        rows.append(Row(
            "4", "start-up: `autonvtx run --config rules.toml empty.py`, no-op tool attached"
            " - `python empty.py`", text, "<= 40 ms", added <= 40,
        ))
    else:
        rows.append(Row("4", "start-up with a config and a no-op tool", "skipped: the native "
                        "recorder is not built", "<= 40 ms", False))
    return rows


def wholesale(packages: str, runs: int) -> dict[str, Any]:
    """`packages` imported instrumented wholesale against plain, in `runs` alternating pairs.

    The import's CPU time varies by a quarter from run to run on a shared machine, as much as
    the difference measured; a slow spell stretches both runs of a pair alike, so the time is
    the median of the pairs' ratios applied to the fastest plain import (best-of-each and
    median differences are kept beside it)."""
    plain, instrumented = [], []
    for _ in range(runs):  # alternating, so that both see the same conditions
        plain.append(worker("wholesale.py", "--plain", "--packages", packages))
        instrumented.append(worker("wholesale.py", "--packages", packages))
    if {r["checksum"] for r in plain} != {r["checksum"] for r in instrumented}:
        raise RuntimeError(f"{packages} compute differently when instrumented")
    count = max(1, instrumented[0]["wrapped"])
    plain_s = [r["seconds"] for r in plain]
    instrumented_s = [r["seconds"] for r in instrumented]
    ratio = statistics.median(i / p for i, p in zip(instrumented_s, plain_s))
    memory = statistics.median(r["rss_bytes"] for r in instrumented) - statistics.median(
        r["rss_bytes"] for r in plain
    )
    return {
        "count": count,
        "modules": instrumented[0]["modules"],
        "versions": ", ".join(f"{k} {v}" for k, v in instrumented[0]["versions"].items()),
        "ratio": ratio,
        "seconds": (ratio - 1) * min(plain_s),
        "best": min(instrumented_s) - min(plain_s),
        "median": statistics.median(instrumented_s) - statistics.median(plain_s),
        "walking": min(r["hook_seconds"] for r in instrumented),
        "full_collections": (statistics.median(r["full_collections"] for r in plain),
                             statistics.median(r["full_collections"] for r in instrumented)),
        "memory": memory,
    }


def time_figure(w: dict[str, Any], runs: int) -> str:
    count = w["count"]
    return (
        f"{w['seconds'] * 1e6 / count:.1f} us ({count} wrapped in {w['modules']} modules: import "
        f"x{w['ratio']:.3f}, +{w['seconds'] * 1000:.0f} ms CPU, median of {runs} pairs; "
        f"best-of-each {w['best'] * 1e6 / count:.1f} us, medians {w['median'] * 1e6 / count:.1f} us; "
        f"walking and wrapping {w['walking'] * 1e6 / count:.1f} us at best; full GC passes "
        f"{w['full_collections'][0]:g} plain, {w['full_collections'][1]:g} instrumented)"
    )


def wholesale_rows(quick: bool) -> list[Row]:
    """Goal 4, wholesale: numpy and pandas (the goal's figure), and torch for information when
    it is installed (its import is four times longer: fewer pairs)."""
    runs = 1 if quick else 15
    w = wholesale("numpy,pandas", runs)
    per_us, per_bytes = w["seconds"] * 1e6 / w["count"], w["memory"] / w["count"]
    rows = [
        Row("4", f"wholesale {w['versions']}: time per wrapped function", time_figure(w, runs),
            "<= 10 us", per_us <= 10),
        Row("4", "wholesale: memory per wrapped function",
            f"{per_bytes:.0f} B (+{w['memory'] / 2**20:.1f} MiB resident)", "<= 1 KiB",
            per_bytes <= 1024),
    ]
    if importlib.util.find_spec("torch") is not None:
        runs = 1 if quick else 5
        t = wholesale("torch", runs)
        rows.append(Row("4", f"wholesale {t['versions']}: time, memory per wrapped function",
                        f"{time_figure(t, runs)}, {t['memory'] / t['count']:.0f} B", "-", None))
    return rows


def goal5_rows(per: dict[str, Any]) -> list[Row]:
    r = per["recorder"]
    if "skipped" in r:
        return [Row("5", "recorder", r["skipped"], ">= 10 M events/s", False)]
    one, two = r["events_per_s_1_thread"] / 1e6, r["events_per_s_2_threads"] / 1e6
    return [
        Row("5", "recorder: events/s per thread into its buffers (push/pop loop in C)",
            f"{one:.1f} M/s (2 threads at once: {two:.1f} M/s each; no-op tool "
            f"{r['noop_events_per_s_1_thread'] / 1e6:.0f} M/s)", ">= 10 M/s", one >= 10),
        Row("5", "recorder: memory per event",
            f"{r['bytes_per_event']:.1f} B ({r['events']:,} events, {r['dropped']} dropped)",
            "printed", None),
    ]


def format_table(rows: list[Row]) -> str:
    header = ["goal", "what", "figure", "target", "met?"]
    table = [header] + [row.cells() for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI: the code runs)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure measured")
    args = parser.parse_args(argv)
    quick = ["--quick"] if args.quick else []
    started = time.perf_counter()

    native = worker("percall.py", *quick)
    pure = worker("percall.py", *quick, env=user_env(AUTONVTX_PURE_PYTHON="1"))
    library = worker("percall.py", *quick, "--tool", "none")
    rows = goal1_rows(native, "", target=True)
    rows += recorder_rows(native)
    rows += goal1_rows(pure, " (pure-Python fallback)", target=False)
    rows.append(goal2_row(native))
    rows += goal3_rows(args.quick, library)
    rows += startup_rows(args.quick)
    rows += wholesale_rows(args.quick)
    rows += goal5_rows(native)

    print(f"autonvtx benchmarks: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"native per-call path: {'yes' if native['native'] else 'NO (fallback)'}"
          f"{' (quick: sizes too small for the figures to mean anything)' if args.quick else ''}")
    print(format_table(rows))
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"python": sys.version, "rows": [vars(r) for r in rows],
                       "percall": native, "percall_pure": pure, "percall_no_tool": library},
                      out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
