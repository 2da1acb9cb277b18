"""Cost of one NVTX push/pop pair with the native recorder recording vs attached as a no-op tool.

    python benchmarks/bench_recorder.py            # ~5 s
    python benchmarks/bench_recorder.py --quick    # CI smoke run
    python benchmarks/bench_recorder.py --spill    # with the spiller writing as under autonvtx run

Everything runs in one process: the recorder is attached once (NVTX_INJECTION64_PATH set before
nvtx is imported) and switched between modes with ``set_mode``, so the only difference between
the rows is what the tool does with each event. The calls go through nvtx's Cython entry points
with a pre-built domain and attributes (no per-call Python attribute building).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autonvtx import environment  # noqa: E402
from autonvtx.recorder import native  # noqa: E402


def best_ns_per_pair(loop: Callable[[int], None], pairs: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        loop(pairs)
        best = min(best, (time.perf_counter_ns() - start) / pairs)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny N, one repeat (CI)")
    parser.add_argument("--pairs", type=int, default=None, help="push/pop pairs per run")
    parser.add_argument(
        "--spill",
        action="store_true",
        help="record as autonvtx run does: a record directory, so the spiller writes "
        "events to a file every 100 ms while the loops run",
    )
    args = parser.parse_args()
    pairs = args.pairs or (20_000 if args.quick else 1_000_000)
    repeats = 1 if args.quick else 3

    library = native.library_path()
    if library is None:
        print("bench_recorder: the native recorder is not built (pip install -e .)", file=sys.stderr)
        return 2
    # The recorder must be the NVTX tool before nvtx's first call, hence before importing it.
    os.environ[environment.NVTX_INJECTION64_PATH] = library
    spill_directory = tempfile.TemporaryDirectory() if args.spill else None
    if spill_directory is not None:
        os.environ[environment.RECORD_DIR] = spill_directory.name
    else:
        os.environ.pop(environment.RECORD_DIR, None)  # no exit-time file from a benchmark
    os.environ[environment.RECORD_LIMIT_MB] = "4096"
    os.environ[environment.RECORDER_MODE] = "noop"
    import nvtx
    from nvtx._lib import pop_range, push_range

    from autonvtx.recorder.native import STATS_FLAT
    from autonvtx.recorder.recording import read_recording, scan_recording
    from autonvtx.recorder.writer import export

    domain = nvtx.get_domain("bench")
    handle = domain.handle
    plain = domain.get_event_attributes(message="step", color="green")
    rich = domain.get_event_attributes(message="step", color="green", category="io", payload=7)
    control = native.control()
    if not control.is_attached():
        print("bench_recorder: NVTX did not attach the recorder", file=sys.stderr)
        return 2

    def empty(n: int) -> None:
        for _ in range(n):
            pass

    def cython_pairs(n: int) -> None:
        for _ in range(n):
            push_range(plain, handle)
            pop_range(handle)

    def cython_rich_pairs(n: int) -> None:
        for _ in range(n):
            push_range(rich, handle)
            pop_range(handle)

    def annotate_pairs(n: int) -> None:
        for _ in range(n):
            with nvtx.annotate("step", color="green", domain="bench"):
                pass

    # Reading back first, on a fixed-size recording: the timed rows below record many more
    # events than a reading benchmark needs.
    read_pairs = pairs // 4
    control.set_mode("record")
    cython_rich_pairs(read_pairs)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bench.anr")
        start = time.perf_counter()
        flushed = control.flush(path)
        flush_s = time.perf_counter() - start
        start = time.perf_counter()
        recording = read_recording(path)
        read_s = time.perf_counter() - start
        start = time.perf_counter()
        exported = export([(path, 0, scan_recording(path))], stats_mode=STATS_FLAT)
        native_s = time.perf_counter() - start
    assert len(recording.ranges) == read_pairs == exported.ranges

    # nvtx.annotate builds its attributes on every call (~1.5 us): fewer pairs keep it short.
    rows = [("python loop only", "noop", empty, pairs)]
    for mode in ("noop", "record"):
        rows += [
            (f"push/pop, registered message [{mode}]", mode, cython_pairs, pairs),
            (f"push/pop, + category + payload [{mode}]", mode, cython_rich_pairs, pairs),
            (f"nvtx.annotate context manager [{mode}]", mode, annotate_pairs, pairs // 10),
        ]

    results: dict[str, float] = {}
    before = control.stats()
    recorded_ns = 0.0
    for label, mode, loop, n in rows:
        control.set_mode(mode)  # type: ignore[arg-type]
        ns = best_ns_per_pair(loop, n, repeats)
        if mode == "record":
            recorded_ns += ns * n * repeats
        results[label] = ns
    control.set_mode("noop")
    after = control.stats()
    events = after.events - before.events
    print(f"{pairs:,} push/pop pairs per run, best of {repeats}; ns per pair (push + pop):")
    for label, *_ in rows:
        print(f"  {label:<48} {results[label]:8.1f}")
    for kind in ("push/pop, registered message", "push/pop, + category + payload", "nvtx.annotate context manager"):
        ratio = results[f"{kind} [record]"] / results[f"{kind} [noop]"]
        extra = results[f"{kind} [record]"] - results[f"{kind} [noop]"]
        print(f"  record/noop {kind:<40} {ratio:6.2f}x  (+{extra:.1f} ns/pair)")
    per_event = (results["push/pop, registered message [record]"] - results["push/pop, registered message [noop]"]) / 2
    if per_event > 0:
        print(
            f"recorder cost per event (record - noop): {per_event:.1f} ns = {1e9 / per_event:,.0f} events/s per thread"
        )
    print(f"events recorded: {events:,}  dropped: {after.dropped - before.dropped:,}")
    if events:
        print(f"events/s into the buffers (recording loops, Python included): {events / (recorded_ns / 1e9):,.0f}")
        print(f"bytes per event: {(after.bytes_used - before.bytes_used) / events:.1f}")

    print(
        f"flush: {flushed.bytes / 2**20:.1f} MiB, {flushed.events:,} events in {flush_s:.3f} s; "
        f"read back {len(recording.ranges):,} ranges in {read_s:.2f} s "
        f"({flushed.events / read_s:,.0f} events/s) by the Python reader, "
        f"in {native_s:.3f} s ({flushed.events / native_s:,.0f} events/s) by the native exporter (statistics)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
