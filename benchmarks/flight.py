"""What `--flight` costs: the program's per-range time, the memory of a long run, and the time the
recorder's thread takes to write a window.

    python benchmarks/flight.py              # 3M steps (about a minute on a loaded 2-core host)
    python benchmarks/flight.py --steps 300000 --quick

Each row runs a child process with the recorder attached as `autonvtx run --trace` attaches it
(spilling to a record directory), with and without `--flight`'s settings: `--flight` as with
`--summary` (every event also goes to the record directory), and `--flight` alone (the ring only). Per-range cost: a
push/pop pair timed in the child with the recorder recording, over the same child's pair with the
recorder attached as a no-op tool (`set_mode`), so each ratio is within one process; the two
ratios should match, since --flight changes nothing on the program's threads. Memory: the
child's peak RSS (VmHWM) after N steps, each step a range with one range nested in it (one slow
step in every 100,000 fires a window). Window: flight.json's `write_ns` (wall) and
`write_cpu_ns` (the recorder thread's CPU time), the longest of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autonvtx import environment  # noqa: E402
from autonvtx.recorder import native  # noqa: E402
from autonvtx.recorder.flight import DEFAULT_BUFFER_MB, Flight, flight_settings, windows  # noqa: E402

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import nvtx
    from nvtx._lib import lib as nvtx_lib
    from autonvtx.recorder import native

    steps, pairs = int(sys.argv[1]), int(sys.argv[2])
    domain = nvtx.get_domain("bench")
    step_names = [domain.get_event_attributes(message=f"step {i}") for i in range(1000)]
    inner = domain.get_event_attributes(message="inner")
    push, pop = domain.push_range, domain.pop_range

    def per_pair(n):
        start = time.perf_counter_ns()
        for _ in range(n):
            push(inner)
            pop()
        return (time.perf_counter_ns() - start) / n

    control = native.control()
    per_pair(1000)  # the thread's first chunk, the tool's first call
    record = min(per_pair(pairs) for _ in range(3))
    control.set_mode("noop")
    noop = min(per_pair(pairs) for _ in range(3))
    control.set_mode("record")
    for i in range(steps):
        push(step_names[i % 1000])
        push(inner)
        if i % 100000 == 99999:
            time.sleep(0.02)
        pop()
        pop()
    with open("/proc/self/status") as status:
        hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    print(json.dumps({"record_ns": record, "noop_ns": noop, "peak_rss_mib": hwm / 1024}))
    """
)


def run_child(steps: int, pairs: int, flight: bool, keep_events: bool = True) -> dict[str, float]:
    library = native.library_path()
    if library is None:
        raise SystemExit("the native recorder is not built")
    with tempfile.TemporaryDirectory() as directory:
        env = dict(os.environ)
        env[environment.NVTX_INJECTION64_PATH] = library
        env[environment.RECORD_DIR] = directory
        env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if flight:
            settings = flight_settings(
                Flight(range="step {i}"), os.path.join(directory, "bench.json"), keep_events=keep_events
            )
            env.update(settings)
            env[environment.RECORD_LIMIT_MB] = str(DEFAULT_BUFFER_MB)
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(steps), str(pairs)], env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        result: dict[str, float] = json.loads(done.stdout)
        written = windows(directory)
        result["windows"] = len(written)
        result["write_ms_max"] = max((w.info["write_ns"] / 1e6 for w in written), default=0.0)
        result["write_cpu_ms_max"] = max((w.info["write_cpu_ns"] / 1e6 for w in written), default=0.0)
        result["spilled_mib"] = sum(
            os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory) if name.endswith(".anr")
        ) / (1 << 20)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3_000_000)
    parser.add_argument("--quick", action="store_true", help="fewer timed pairs (CI)")
    args = parser.parse_args()
    pairs = 20_000 if args.quick else 300_000
    print(f"{args.steps:,} steps (a range with one nested), Python {sys.version.split()[0]}")
    print(
        f"{'':14} {'record/noop':>10} {'record ns':>10} {'peak RSS':>10} {'windows':>8} {'write max':>10}"
        f" {'its CPU':>9} {'on disk':>12}"
    )
    rows = (("spill only", False, True), ("--flight", True, True), ("--flight alone", True, False))
    for title, flight, keep_events in rows:
        r = run_child(args.steps, pairs, flight, keep_events)
        print(
            f"{title:14} {r['record_ns'] / r['noop_ns']:>9.2f}x"
            f" {r['record_ns']:>10.0f} {r['peak_rss_mib']:>7.1f} MiB {int(r['windows']):>8}"
            f" {r['write_ms_max']:>7.2f} ms {r['write_cpu_ms_max']:>6.2f} ms {r['spilled_mib']:>8.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
