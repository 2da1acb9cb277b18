"""Per-call cost of autonvtx's ranges vs a plain call and a hand-written ``@nvtx.annotate``
(issue 6, goals 1 and 2), and the recorder's own rate (goal 5). A worker of ``run.py``:

    python benchmarks/percall.py [--quick] [--tool noop|none]    # prints one JSON object

With ``--tool noop`` (the default) the native recorder is attached as NVTX's tool before
anything calls NVTX, in its no-op mode (what a profiler that ignores the events costs), and
switched to recording in-process for the recorder rows; ``--tool none`` attaches nothing.
AUTONVTX_PURE_PYTHON=1 in the environment measures the pure-Python fallback instead.

Every variant of a shape runs the same loop (``for _ in range(n): <call>``), interleaved
round by round, keeping the fastest round of each, timed in the thread's CPU time: on a busy
machine (other processes on the same cores) that leaves out the time spent preempted, and the
minimum is the round least disturbed otherwise (caches). The loop's own cost cancels in the
differences.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import types
from typing import Any, Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from autonvtx import environment  # noqa: E402
from autonvtx.recorder import native  # noqa: E402

# The functions of each shape, written once: the module autonvtx instruments and the
# hand-annotated twins are made from the same text.
SHAPES_SOURCE = '''
def function(x):
    return x

class Holder:
    def method(self, x):
        return x

def variadic(*args, **kwargs):
    return args

def unselected(x):
    return x
'''

HAND_ANNOTATED_SOURCE = '''
import nvtx

@nvtx.annotate("function", color=COLOR, domain="autonvtx")
def function(x):
    return x

class Holder:
    @nvtx.annotate("Holder.method", color=COLOR, domain="autonvtx")
    def method(self, x):
        return x

@nvtx.annotate("variadic", color=COLOR, domain="autonvtx")
def variadic(*args, **kwargs):
    return args
'''

# shape -> (the call in the timed loop, how the loop reaches the callee)
CALLS = {
    "function": ("f(1)", lambda m: m.function),
    "method": ("f.method(1)", lambda m: m.Holder()),
    "*args/**kwargs": ("f(1, 2, k=3)", lambda m: m.variadic),
}


def make_loop(call: str, callee: Any) -> Callable[[int], None]:
    namespace: dict[str, Any] = {}
    # The callee is a default argument: a fast local in the loop, as in real code's hot loops.
    exec(f"def loop(n, f=f):\n    for _ in range(n):\n        {call}\n", {"f": callee}, namespace)
    loop: Callable[[int], None] = namespace["loop"]
    return loop


def fastest(
    loops: dict[str, Callable[[int], None]],
    n: int,
    rounds: int,
    before: dict[str, Callable[[], None]] | None = None,
) -> dict[str, float]:
    """ns per iteration of each loop: the fastest of `rounds` interleaved rounds. `before[name]`,
    if given, runs untimed before each timing of that loop (switching the recorder's mode)."""
    setup = before or {}
    best = {name: float("inf") for name in loops}
    for name, loop in loops.items():
        setup.get(name, _nothing)()
        loop(max(1, n // 10))  # warm up: specialization, caches, first-call NVTX set-up
    for _ in range(rounds):
        for name, loop in loops.items():
            setup.get(name, _nothing)()
            start = time.thread_time_ns()
            loop(n)
            best[name] = min(best[name], (time.thread_time_ns() - start) / n)
    return best


def _nothing() -> None:
    pass


def instrumented_module(source: str, name: str) -> tuple[types.ModuleType, Any]:
    """`source` run as module `name`, instrumented as `autonvtx run -t name --exclude
    unselected` would; returns the module and its instrumenter."""
    from autonvtx.config import Config, Rule
    from autonvtx.walk import Walker
    from autonvtx.matching import Matcher

    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), vars(module))
    sys.modules[name] = module
    before = dict(vars(module))
    rule = Rule(modules=(name,), exclude=("unselected",), origin="benchmark")
    instrumenter = Walker(Matcher(Config(rules=(rule,))))
    instrumenter.instrument(module)
    module.__dict__["_bench_before"] = before
    return module, instrumenter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny N, two rounds (CI)")
    parser.add_argument("--tool", choices=("noop", "none"), default="noop")
    args = parser.parse_args()
    # Many short rounds: the fastest of them is likelier to have run undisturbed.
    n, rounds = (2_000, 2) if args.quick else (20_000, 51)

    library = native.library_path()
    if args.tool == "noop":
        if library is None:
            print("percall: the native recorder is not built (pip install -e .)", file=sys.stderr)
            return 2
        # The tool must be named before the first NVTX call of any client in this process.
        os.environ[environment.NVTX_INJECTION64_PATH] = library
        os.environ[environment.RECORDER_MODE] = "noop"
        os.environ[environment.RECORD_LIMIT_MB] = "2048"
    else:
        os.environ.pop(environment.NVTX_INJECTION64_PATH, None)
    os.environ.pop(environment.RECORD_DIR, None)  # no exit-time file from a benchmark

    from autonvtx import ranges
    from autonvtx.config import auto_color

    color = auto_color("bench_shapes")
    module, instrumenter = instrumented_module(SHAPES_SOURCE, "bench_shapes")
    plain = types.ModuleType("bench_plain")
    exec(SHAPES_SOURCE, vars(plain))
    result: dict[str, Any] = {
        "native": ranges.is_native(),
        "tool": args.tool,
        "wrapped": instrumenter.engine.wrapped_count(),
        "wrapper_type": type(module.function).__name__,
        "n": n,
        "rounds": rounds,
    }

    # Goal 2: a function no rule selects is left as it is, and nothing traces every call.
    result["unselected_same_object"] = module.unselected is module._bench_before["unselected"]
    result["global_hooks"] = sys.gettrace() is not None or sys.getprofile() is not None
    unselected = fastest(
        {
            "plain": make_loop("f(1)", plain.unselected),
            "instrumented module": make_loop("f(1)", module.unselected),
        },
        n,
        rounds,
    )
    result["unselected_ns"] = unselected

    if args.tool == "none":
        # Library use without a tool (tests, notebooks): wrapped, with a range that knows
        # nobody listens. `autonvtx run` does not wrap at all then (run.py measures that).
        result["shapes"] = {
            shape: fastest(
                {
                    "plain": make_loop(call, reach(plain)),
                    "autonvtx": make_loop(call, reach(module)),
                },
                n,
                rounds,
            )
            for shape, (call, reach) in CALLS.items()
        }
        print(json.dumps(result))
        return 0

    control = native.control()
    hand = types.ModuleType("bench_hand")
    exec(HAND_ANNOTATED_SOURCE.replace("COLOR", str(color)), vars(hand))
    assert control.is_attached(), "NVTX did not attach the recorder"

    def noop() -> None:
        control.set_mode("noop")

    def record() -> None:
        # The events land in the recorder's buffers (memory bound 2 GiB).
        control.set_mode("record")

    shapes: dict[str, dict[str, float]] = {}
    for shape, (call, reach) in CALLS.items():
        plain_loop, auto_loop = make_loop(call, reach(plain)), make_loop(call, reach(module))
        loops = {
            "plain": plain_loop,
            "nvtx.annotate": make_loop(call, reach(hand)),
            "autonvtx": auto_loop,
            "autonvtx [record]": auto_loop,
        }
        modes = {name: record if name.endswith("[record]") else noop for name in loops}
        shapes[shape] = fastest(loops, n, rounds, modes)
        noop()
    result["shapes"] = shapes
    result["recorder"] = recorder_rate(control, ranges, 20_000 if args.quick else 1_000_000, rounds)
    print(json.dumps(result))
    return 0


def recorder_rate(control: Any, ranges: Any, pairs: int, rounds: int) -> dict[str, Any]:
    """Goal 5: events per second into the recorder's buffers, one thread and two at once, with
    the push/pop loop in C (the interpreter's share left out), and bytes per event."""
    if ranges._client is None:
        return {"skipped": "autonvtx._nvtxclient is not built"}
    prepared = ranges._client.Range("bench", "event", 0xFF76B900, 0)
    loop = ranges._client.push_pop_loop

    def timed_loop(out: list[int]) -> None:
        start = time.thread_time_ns()
        loop(prepared, pairs)
        out.append(time.thread_time_ns() - start)

    def rate(threads: int, mode: str) -> float:
        """Events per second of one thread's CPU time, `threads` threads recording at once."""
        control.set_mode(mode)
        best = float("inf")
        for _ in range(2 if rounds < 10 else 7):
            spent: list[int] = []
            workers = [threading.Thread(target=timed_loop, args=(spent,)) for _ in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            best = min(best, max(spent))
        control.set_mode("noop")
        return 2 * pairs * 1e9 / best

    loop(prepared, pairs // 10)  # warm-up: each thread's first chunk
    before = control.stats()
    control.set_mode("record")
    loop(prepared, pairs)
    control.set_mode("noop")
    after = control.stats()
    events = after.events - before.events
    return {
        "events_per_s_1_thread": rate(1, "record"),
        "events_per_s_2_threads": rate(2, "record"),
        "noop_events_per_s_1_thread": rate(1, "noop"),
        "bytes_per_event": (after.bytes_used - before.bytes_used) / max(1, events),
        "events": events,
        "dropped": after.dropped - before.dropped,
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    sys.exit(main())
