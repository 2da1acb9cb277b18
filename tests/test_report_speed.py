"""The fast paths of `report --each` write what the general paths write (benchmarks/report_each.py
measures them; here only their output is checked, never their time)."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from autonvtx.report.render.table import Line, build_table
from autonvtx.report.render.text import float_duration, format_duration

REPO = Path(__file__).resolve().parents[1]
EXPORTS = sorted((REPO / "tests" / "fixtures" / "nsys").glob("*.sqlite"))


def test_whole_nanoseconds_read_as_the_floating_point_rule_ties_included() -> None:
    rng = random.Random(32)
    values = list(range(0, 20_000)) + [10**k + d for k in range(3, 16) for d in range(-600, 600)]
    # Ties: a remainder of exactly half the last digit, which the float's binary value rounds
    # either way (1.2345 ms reads 1.234 or 1.235 as the float says, not as a rule of thumb).
    values += [whole * 1_000 + 500 for whole in range(1_000, 200_000, 7)]
    values += [whole * 1_000_000 + 500_000 + d for whole in range(1_000, 60_000, 13) for d in (-1, 0, 1)]
    values += [rng.randrange(10 ** rng.randrange(1, 16)) for _ in range(200_000)]
    wrong = [ns for ns in values if format_duration(ns) != float_duration(ns)]
    assert wrong == []
    assert format_duration(1_234_500) == float_duration(1_234_500)  # a tie, as the float has it
    assert format_duration(12_345_678_901) == "12.346 s" and format_duration(999_999_600) == "1000.000 ms"


def test_a_name_with_percent_signs_and_braces_prints_as_given() -> None:
    lines = [
        Line(("1.000 ms", "50.0%"), "torch:%s %d {0} 100%", ["top: 100% k<%s> (x1)"]),
        Line(("12 ns", "0.0%"), "plain"),
    ]
    table = build_table(("GPU time", "GPU %"), lines, width=None)
    assert table == [
        "GPU time  GPU %  Range",
        "--------  -----  --------------------",
        "1.000 ms  50.0%  torch:%s %d {0} 100%",
        "      top: 100% k<%s> (x1)",
        "   12 ns   0.0%  plain",
    ]
    # A terminal wide enough for every name: the same lines as a file gets.
    assert build_table(("GPU time", "GPU %"), lines, width=500) == table


@pytest.mark.skipif(not EXPORTS, reason="no fixture exports in tests/fixtures/nsys")
def test_the_first_wrong_column_is_named_though_a_later_one_breaks_in_an_earlier_row(tmp_path: Path) -> None:
    path = tmp_path / "typed.sqlite"
    shutil.copyfile(EXPORTS[0], path)
    with sqlite3.connect(path) as db:
        first = db.execute("SELECT MIN(rowid) FROM NVTX_EVENTS").fetchone()[0]
        db.execute('UPDATE NVTX_EVENTS SET "end" = 1.5 WHERE rowid = ?', (first,))
        db.execute("UPDATE NVTX_EVENTS SET start = 'soon' WHERE rowid = ?", (first + 2,))
    db.close()
    run = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr == (
        f"autonvtx: {path}: NVTX_EVENTS.start holds a text value; expected integers, as nsys "
        "writes them (the export was damaged or not written by nsys)\n"
    )
