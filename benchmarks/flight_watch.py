"""What `profile --flight RANGE` (the in-process watch) costs a call: of a function whose range is
not the watched one, and of the watched one.

    python benchmarks/flight_watch.py                 # the wrap engine (and the code engine on 3.12+)
    python benchmarks/flight_watch.py --quick

One child per engine, with an NVTX tool attached that does nothing (the recorder in its no-op
mode: under Nsight Systems each push and pop costs more, the same with and without the watch).
In the child, `other()` and `step()` get ranges from install(); each is called in a timed loop
without the watch (the baseline) and with `step` watched, in the same process (`other` in
alternation, five times each, and a second time without the watch: the row `other=` is how far
two measurements of the same code differ on this host): the ratio for `other` is what --flight
costs every range but the watched one; the ratio for `step` is the watched range's own cost (three clock reads and the
median's bookkeeping per instance, which a step of milliseconds does not notice).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autonvtx import environment  # noqa: E402
from autonvtx.recorder import native  # noqa: E402

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import autonvtx
    from autonvtx import _nvtxclient

    def other():
        pass

    def step():
        pass

    calls, engine = int(sys.argv[1]), sys.argv[2]

    def per_call(function):
        start = time.perf_counter_ns()
        for _ in range(calls):
            function()
        return (time.perf_counter_ns() - start) / calls

    def best(function):
        return min(per_call(function) for _ in range(5))

    autonvtx.install(targets=["__main__"], engine=engine)
    f_other, f_step = globals()["other"], globals()["step"]  # what install() left in __main__
    per_call(f_other), per_call(f_step)  # first calls make the ranges
    before = {"step": best(f_step)}
    # A factor no instance reaches: the watch runs, no window opens (nothing is captured here).
    _nvtxclient.watch_flight("step", 1e9, 10, 20, 5)
    after = {"step": best(f_step)}
    # `other` alternately with the watch armed and not (order and drift of the host cancel).
    # Twice without the watch too: how far two measurements of the same code differ here.
    unwatched, again, watched = [], [], []
    for _ in range(5):
        _nvtxclient.close_flight()
        unwatched.append(per_call(f_other))
        again.append(per_call(f_other))
        _nvtxclient.watch_flight("step", 1e9, 10, 20, 5)
        watched.append(per_call(f_other))
    before["other"], after["other"] = min(unwatched), min(watched)
    before["noise"], after["noise"] = min(unwatched), min(again)
    print(json.dumps({"before": before, "after": after}))
    """
)


def run_child(engine: str, calls: int) -> dict[str, dict[str, float]]:
    library = native.library_path()
    if library is None:
        raise SystemExit("the native recorder is not built")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    env[environment.NVTX_INJECTION64_PATH] = library
    env[environment.RECORDER_MODE] = "noop"
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", CHILD, str(calls), engine], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    result: dict[str, dict[str, float]] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed calls (CI)")
    args = parser.parse_args()
    calls = 20_000 if args.quick else 500_000
    engines = ["wrap"] + (["code"] if sys.version_info >= (3, 12) else [])
    print(f"a call of an empty function with its range, {calls:,} calls, best of 5, Python {sys.version.split()[0]}")
    print(f"{'engine':8} {'range':8} {'unwatched ns':>13} {'watched ns':>11} {'ratio':>7}")
    for engine in engines:
        r = run_child(engine, calls)
        for name, label in (("other", "other"), ("noise", "other="), ("step", "step*")):
            before, after = r["before"][name], r["after"][name]
            print(f"{engine:8} {label:8} {before:>13.1f} {after:>11.1f} {after / before:>6.2f}x")
    print(
        "step*: the watched range (--flight step); other: every other range;"
        " other=: other measured twice without the watch (this host's noise)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
