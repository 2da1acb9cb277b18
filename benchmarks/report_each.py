"""What `autonvtx report --each` costs against one hand-written SQL query giving the same table.

    python benchmarks/report_each.py            # the 2-GPU PyTorch fixture, best of 3 (and median)
    python benchmarks/report_each.py --repeat 5
    valgrind --tool=callgrind python benchmarks/report_each.py --only each   # and imports, hand, grouped

With --only, one side runs once and nothing is printed: for counting instructions, which a busy
machine does not skew as it does seconds (each side's count less that of `--only imports`).

The hand query is the per-name definition written as SQL (the one tests/test_report.py holds the
report to): each range name's kernels, kernel time and GPU time, counted once per name however
many of its instances enclose the launch. It produces the table and nothing else (no CPU time,
no instance counts, no top kernels), so it is the floor. The report is timed end to end in this
process: read, sweep, rows, and the whole table written as text to a pipe would get it (every
row, names never cut), for the grouped default and for --each, the three taking turns. Printed:
the least seconds (their CPU seconds, and the median CPU seconds) and each against the hand
query, then --each's CPU time split between reading the export and
writing its table (18,499 rows and their top-kernel lines on the fixture), and the reading again
by the Python sweep (the twin of the native one, which runs where that is not built).
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autonvtx.report.output import ReportRequest, produce  # noqa: E402
from autonvtx.stats.model import ViewOptions  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "nsys" / "torch-2gpu-nsys2026.2.sqlite"

# The launches, each with the thread and time of the runtime call that made it, in a temporary
# table with an index on (thread, time): the range join below is then an index range scan (without
# it SQLite compares every range with every launch: minutes).
LAUNCHES = """
CREATE TEMP TABLE launched AS
WITH rt AS (SELECT globalTid, start, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass NOT IN (67, 68, 69)),
work AS (
  SELECT 'k' AS kind, k.rowid AS id, k."end" - k.start AS ns, k.globalPid AS gpid, k.correlationId AS cid
  FROM CUPTI_ACTIVITY_KIND_KERNEL k
  UNION ALL SELECT 'c', m.rowid, m."end" - m.start, m.globalPid, m.correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY m
  UNION ALL SELECT 's', m.rowid, m."end" - m.start, m.globalPid, m.correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET m)
SELECT w.kind, w.id, w.ns, rt.globalTid AS tid, rt.start AS t
FROM work w JOIN rt ON rt.correlationId = w.cid AND rt.globalTid >> 24 = w.gpid >> 24;
CREATE INDEX temp.launched_at ON launched(tid, t);
"""
PER_NAME = """
WITH r AS (SELECT n.globalTid AS tid, n.start, n."end", n.domainId AS domain, COALESCE(n.text, s.value) AS name
           FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60)),
pairs AS (SELECT DISTINCT r.domain, r.name, l.kind, l.id, l.ns
          FROM r JOIN launched l ON l.tid = r.tid AND l.t BETWEEN r.start AND r."end")
SELECT domain, name, SUM(kind = 'k'), SUM(CASE WHEN kind = 'k' THEN ns ELSE 0 END), SUM(ns)
FROM pairs GROUP BY domain, name
"""


def hand_query(path: Path) -> str:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.executescript(LAUNCHES)
        rows = sorted(db.execute(PER_NAME).fetchall(), key=lambda row: -row[4])
    finally:
        db.close()
    return "".join(
        f"{gpu}\t{kernels}\t{kernel_ns}\t{domain}:{name}\n" for domain, name, kernels, kernel_ns, gpu in rows
    )


def report(path: Path, each: bool) -> str:
    text = produce(ReportRequest(str(path), view=ViewOptions(each=each)))
    assert text is not None
    return text


def interleaved(functions: dict[str, Callable[[], str]], repeat: int) -> dict[str, tuple[float, float, float, str]]:
    """Each function run `repeat` times, taking turns (so that a slower spell of a shared machine
    falls on every side alike): per function its least wall seconds, the CPU seconds of that run
    (this process), its median CPU seconds, and its output."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in functions}
    outputs = dict.fromkeys(functions, "")
    for _ in range(repeat):
        for name, function in functions.items():
            wall, cpu = time.perf_counter(), time.process_time()
            outputs[name] = function()
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    result = {}
    for name, runs in times.items():
        wall, cpu = min(runs)
        result[name] = (wall, cpu, statistics.median(c for _, c in runs), outputs[name])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("imports", "hand", "each", "grouped"), help="run one side once, silently")
    parser.add_argument("export", nargs="?", default=str(FIXTURE))
    args = parser.parse_args()
    path = Path(args.export)
    if args.only is not None:
        if args.only == "hand":
            hand_query(path)
        elif args.only != "imports":
            report(path, args.only == "each")
        return
    report(path, True)  # the first run's imports are not the report's cost
    runs = interleaved(
        {
            "hand": lambda: hand_query(path),
            "report (grouped)": lambda: report(path, False),
            "report --each": lambda: report(path, True),
        },
        args.repeat,
    )
    hand_s, hand_cpu, hand_median, hand = runs.pop("hand")
    print(
        f"hand SQL query: {hand_s:.3f} s ({hand_cpu:.3f} CPU-s; median {hand_median:.3f}), {hand.count(chr(10)):,} rows"
    )
    for label, (seconds, cpu, median, text) in runs.items():
        rows = len(re.findall(r"^ *\S.* ms|^ *\S.* us|^ *\S.* ns", text, re.M))
        print(
            f"{label}: {seconds:.3f} s ({cpu:.3f} CPU-s; median {median:.3f}), {rows:,} table lines; "
            f"{seconds / hand_s:.2f}x the hand query ({cpu / hand_cpu:.2f}x its CPU time, "
            f"{median / hand_median:.2f}x by medians)"
        )
    print(parts(path, args.repeat))


def parts(path: Path, repeat: int) -> str:
    """Where --each's CPU time goes: reading (query, sweep, rows) against arranging and writing
    the text, each the least of `repeat` runs."""
    from autonvtx.report.nsys import sweep
    from autonvtx.report.output import without_cycle_collection
    from autonvtx.report.profile import ReportOptions, read_profile
    from autonvtx.report.render.renderers import Rendering, ReportDocument, render
    from autonvtx.report.views import export_order
    from autonvtx.stats.view import View, arrange

    native = sweep.native
    reads, writes, python_reads = [], [], []
    for _ in range(repeat):
        with without_cycle_collection():  # as `produce` runs
            cpu = time.process_time()
            report = read_profile(str(path), ReportOptions(ViewOptions(each=True), with_tree=False))
            read = time.process_time()
            rows = arrange(report.rows, View(sort="gpu"), export_order("gpu"))
            render("report", "text", ReportDocument(report, rows, None), Rendering())
            written = time.process_time()
            sweep.native = None  # the same read by the Python sweep, its twin
            try:
                read_profile(str(path), ReportOptions(ViewOptions(each=True), with_tree=False))
            finally:
                sweep.native = native
        reads.append(read - cpu)
        writes.append(written - read)
        python_reads.append(time.process_time() - written)
    which = "the native sweep" if native is not None else "the Python sweep (the native one is not built)"
    return (
        f"  of which reading {min(reads):.3f} CPU-s ({which}), arranging and writing the text {min(writes):.3f} CPU-s\n"
        f"  reading by the Python sweep: {min(python_reads):.3f} CPU-s"
    )


if __name__ == "__main__":
    main()
