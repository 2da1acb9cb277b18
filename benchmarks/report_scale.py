"""How long `autonvtx report` takes on a large export: the real torch fixture copied end to end.

    python benchmarks/report_scale.py                 # a 2 GB synthetic export (the issue's target)
    python benchmarks/report_scale.py --size-mb 200   # a quicker run; the line printed says how it scales

The synthetic export is the 2-GPU PyTorch fixture (Nsight Systems 2026.2) repeated: every copy
of its NVTX ranges, runtime calls, kernels, memcpys and memsets is shifted past the previous one
in time and in correlationId, so the report does the same work per copy as on the fixture. Range
names repeat from copy to copy (a real run's op_ids would keep growing). The report on the
fixture itself is the baseline: the scaled run's seconds per row against the fixture's is the
ratio printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autonvtx.report.nsys.workers import available_cpus  # noqa: E402
from autonvtx.report.profile import ReportOptions, read_profile  # noqa: E402
from autonvtx.report.render.text import report_text as format_text  # noqa: E402
from autonvtx.report.views import export_order  # noqa: E402
from autonvtx.stats.view import View, arrange  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "nsys" / "torch-2gpu-nsys2026.2.sqlite"
TIMED = (
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)


def build(target: Path, size_mb: float) -> int:
    """Write the scaled export; return its number of rows in the timed tables."""
    db = sqlite3.connect(target)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    db.execute("ATTACH DATABASE ? AS src", (f"file:{FIXTURE}?mode=ro",))
    tables = db.execute("SELECT name, sql FROM src.sqlite_master WHERE type = 'table'").fetchall()
    for name, sql in tables:
        db.execute(sql)
        if name not in TIMED:
            db.execute(f'INSERT INTO main."{name}" SELECT * FROM src."{name}"')
    first, last = db.execute('SELECT MIN(start), MAX("end") FROM src.NVTX_EVENTS').fetchone()
    for name in TIMED[1:]:
        low, high = db.execute(f'SELECT MIN(start), MAX("end") FROM src."{name}"').fetchone()
        first, last = min(first, low), max(last, high)
    period = last - first + 1000
    correlation = 1 + max(
        db.execute(f'SELECT MAX(correlationId) FROM src."{name}"').fetchone()[0] for name in TIMED[1:]
    )
    db.commit()
    per_copy = sum(db.execute(f'SELECT COUNT(*) FROM src."{name}"').fetchone()[0] for name in TIMED)
    copy = 0
    while True:
        for name in TIMED:
            columns = [row[1] for row in db.execute(f'PRAGMA src.table_info("{name}")')]
            shifted = []
            for column in columns:
                if column in ("start", "end"):
                    shifted.append(f'"{column}" + {copy * period}')
                elif column == "correlationId":
                    shifted.append(f'"{column}" + {copy * correlation}')
                else:
                    shifted.append(f'"{column}"')
            db.execute(f'INSERT INTO main."{name}" SELECT {", ".join(shifted)} FROM src."{name}"')
        db.commit()
        copy += 1
        if target.stat().st_size >= size_mb * 1e6:
            break
    db.close()
    return copy * per_copy


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the report's worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_report(path: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one report, as `autonvtx report PATH --top 20` makes it."""
    began, cpu = time.perf_counter(), cpu_seconds()
    report = read_profile(str(path), ReportOptions())
    format_text(report, arrange(report.rows, View(sort="gpu", top=20), export_order("gpu")))
    return time.perf_counter() - began, cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--size-mb", type=float, default=2000, help="size of the synthetic export (default 2000 = 2 GB)"
    )
    parser.add_argument("--keep", metavar="PATH", help="write the synthetic export here and keep it")
    args = parser.parse_args()
    fixture_rows = sum(
        sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True).execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]
        for name in TIMED
    )
    baseline = min(timed_report(FIXTURE)[0] for _ in range(3))
    print(
        f"fixture: {FIXTURE.stat().st_size / 1e6:.1f} MB, {fixture_rows:,} rows: {baseline:.3f} s "
        f"({fixture_rows / baseline:,.0f} rows/s)"
    )
    directory = tempfile.mkdtemp(prefix="autonvtx-report-scale-")
    target = Path(args.keep) if args.keep else Path(directory) / "scaled.sqlite"
    if target.exists():
        target.unlink()
    began = time.perf_counter()
    rows = build(target, args.size_mb)
    size = target.stat().st_size
    print(f"synthetic export: {size / 1e6:,.0f} MB, {rows:,} rows, written in {time.perf_counter() - began:.1f} s")
    seconds, cpu = timed_report(target)
    ratio = (seconds / rows) / (baseline / fixture_rows)
    print(
        f"report: {seconds:.1f} s ({rows / seconds:,.0f} rows/s), {cpu:.1f} CPU s over {available_cpus()} CPUs; "
        f"seconds per row vs the fixture: {ratio:.2f}x (load average {os.getloadavg()[0]:.1f})"
    )
    if size < 2e9:
        print(f"extrapolated to 2 GB at the same rows/s: {seconds * 2e9 / size:.0f} s ({cpu * 2e9 / size:.0f} CPU s)")
    if not args.keep:
        target.unlink()
        os.rmdir(directory)


if __name__ == "__main__":
    main()
