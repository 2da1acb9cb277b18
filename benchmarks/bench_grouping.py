"""What grouping numbered names into one row ('step {n}') costs against a row per name (--each).

    python benchmarks/bench_grouping.py            # 1,000,000 ranges; the torch export 10 times
    python benchmarks/bench_grouping.py --quick    # 20,000 ranges, one repeat (CI smoke run)

One recording is made (a loop of N ranges; N/1000 distinct names "step {i}" repeated, and one
fixed name inside each), then, in this process, the native exporter's statistics (what `run
--summary` does at exit) and the Python twin's (what `summary` and `report` do on a trace) are
computed grouped and with --each, interleaved, best of the repeats; then `report` on the torch
export in tests/fixtures/nsys (18,499 names, 71 grouped rows). Printed: seconds and the ratio
grouped / --each for each (the same process, the same data: the baseline is --each).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET = """
import sys, nvtx
n, names = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    with nvtx.annotate(f"step {i % names}", domain="d"):
        with nvtx.annotate("load", domain="d"):
            pass
"""


def record(directory: Path, n: int) -> Path:
    from autonvtx import environment
    from autonvtx.recorder import native

    (directory / "target.py").write_text(TARGET)
    out = directory / "rec"
    out.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        environment.NVTX_INJECTION64_PATH: str(native.library_path()),
        environment.RECORD_DIR: str(out),
    }
    env.pop(environment.RECORDER_MODE, None)
    subprocess.run(
        [sys.executable, str(directory / "target.py"), str(n), str(max(n // 1000, 1))],
        env=env,
        check=True,
        cwd=directory,
    )
    return out


def best(repeats: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def compare(title: str, repeats: int, grouped: Callable[[], object], each: Callable[[], object]) -> None:
    # Interleaved: the machine's load moves both sides alike.
    grouped_s, each_s = float("inf"), float("inf")
    for _ in range(repeats):
        grouped_s = min(grouped_s, best(1, grouped))
        each_s = min(each_s, best(1, each))
    print(f"  {title:40} grouped {grouped_s:7.3f} s  --each {each_s:7.3f} s  ratio {grouped_s / each_s:5.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 ranges, one repeat")
    parser.add_argument("--ranges", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    n = args.ranges or (20_000 if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 5)
    from autonvtx.recorder.recording import read_directory
    from autonvtx.recorder.results import Request, write_results
    from autonvtx.report.profile import ReportOptions, read_profile
    from autonvtx.stats.model import ViewOptions
    from autonvtx.stats.python_twin import summarize

    print(
        f"python {sys.version.split()[0]}, {n:,} ranges ({max(n // 1000, 1):,} names 'step i', each with a"
        f" 'load' inside); best of {repeats}, interleaved; load average {os.getloadavg()[0]:.1f}"
    )
    with tempfile.TemporaryDirectory() as temp:
        directory = record(Path(temp), n)
        recordings = read_directory(directory)
        grouped, each = ViewOptions(), ViewOptions(each=True)
        for view, name in ((ViewOptions(tree=True), "tree"), (grouped, "flat")):
            split = ViewOptions(tree=view.tree, each=True)
            compare(
                f"native exporter ({name})",
                repeats,
                lambda: write_results(str(directory), Request(summary="-", options=view)),
                lambda: write_results(str(directory), Request(summary="-", options=split)),
            )
        # Seconds a side at a million ranges: two repeats tell enough.
        compare(
            "Python twin (flat)",
            min(repeats, 2),
            lambda: summarize(recordings, grouped),
            lambda: summarize(recordings, each),
        )
    export = str(REPO / "tests" / "fixtures" / "nsys" / "torch-2gpu-nsys2026.2.sqlite")
    compare(
        "report on the torch export",
        1 if args.quick else 2 * repeats,
        lambda: read_profile(export, ReportOptions()),
        lambda: read_profile(export, ReportOptions(ViewOptions(each=True))),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
