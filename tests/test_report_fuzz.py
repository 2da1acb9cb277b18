"""`autonvtx report` on damaged Nsight Systems exports: a seeded fuzz over copies of the real
exports in tests/fixtures/nsys (text that is not UTF-8, values of the wrong type, missing
tables and columns, dangling string ids, corrupt and cut files). Every case ends in a report
or a one-line `autonvtx: <file>: ...` message, never a traceback."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_file

FIXTURES = REPO / "tests" / "fixtures" / "nsys"
EXPORTS = sorted(FIXTURES.glob("*.sqlite"))
CASES = 200
TABLES = (
    "NVTX_EVENTS",
    "StringIds",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "ThreadNames",
    "TARGET_INFO_GPU",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
)
ODD_VALUES = ("'abc'", "NULL", "1.5", "x'00ff'", "-1", "9223372036854775807", "CAST(x'ff41fe' AS TEXT)", "''")


def _tables(db: sqlite3.Connection) -> list[str]:
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return [t for t in TABLES if t in present] or sorted(present)


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]


def _edit(db: sqlite3.Connection, rng: random.Random) -> None:
    """One damage done through SQLite: the file stays a valid database."""
    table = rng.choice(_tables(db))
    columns = _columns(db, table)
    how = rng.randrange(5)
    if how == 0:  # text that is not UTF-8, where names live
        for target, column in (("NVTX_EVENTS", "text"), ("StringIds", "value")):
            if column in _columns(db, target):
                db.execute(
                    f"UPDATE \"{target}\" SET \"{column}\" = CAST(x'ff6361' || x'e9' AS TEXT) "
                    f"WHERE rowid % {rng.randint(1, 5)} = 0"
                )
    elif how == 1 and columns:  # a value of the wrong type in some rows
        column = rng.choice(columns)
        db.execute(f'UPDATE "{table}" SET "{column}" = {rng.choice(ODD_VALUES)} WHERE rowid % {rng.randint(1, 4)} = 0')
    elif how == 2:  # a table gone
        db.execute(f'DROP TABLE "{table}"')
    elif how == 3 and columns:  # a column renamed away
        db.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{rng.choice(columns)}" TO "gone_{rng.randrange(99)}"')
    else:  # rows gone: dangling ids, ends without starts
        db.execute(f'DELETE FROM "{table}" WHERE rowid % {rng.randint(2, 5)} = 0')


def damaged_exports(directory: Path, seed: int, count: int) -> list[Path]:
    """`count` damaged copies of the fixture exports."""
    rng = random.Random(seed)
    paths = []
    for i in range(count):
        source = EXPORTS[0] if i % 10 else EXPORTS[-1]  # the small export most, the large one too
        path = directory / f"case{i}.sqlite"
        shutil.copyfile(source, path)
        if rng.random() < 0.8:
            with sqlite3.connect(path) as db:
                for _ in range(rng.randint(1, 3)):
                    try:
                        _edit(db, rng)
                    except sqlite3.DatabaseError:
                        pass  # an edit SQLite refuses (a primary key's type): the next one

            db.close()
        if rng.random() < 0.25:  # bytes damaged under SQLite: a malformed or cut file
            data = bytearray(path.read_bytes())
            if rng.random() < 0.5:
                data = data[: rng.randrange(len(data))]
            else:
                for _ in range(rng.randint(1, 20)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
            path.write_bytes(bytes(data))
        paths.append(path)
    return paths


DRIVER = """
import sys, traceback
from autonvtx.cli import main
OPTIONS = ([], ["--tree"], ["--format", "json"], ["--by", "thread", "--sort", "kernels"], ["--tree", "--format", "csv"])
for i, path in enumerate(sys.argv[1:]):
    options = OPTIONS[i % len(OPTIONS)]
    try:
        main(["report", path, *options])
        print(f"{path}: report", file=sys.stderr, flush=True)
    except SystemExit as exit:
        print(f"{path}: status {exit.code}", file=sys.stderr, flush=True)
    except BaseException:
        print(f"{path}: Traceback", file=sys.stderr, flush=True)
        traceback.print_exc()
"""


@pytest.mark.skipif(not EXPORTS, reason="no fixture exports in tests/fixtures/nsys")
def test_report_on_damaged_exports_never_raises(tmp_path: Path) -> None:
    paths = damaged_exports(tmp_path, seed=10, count=CASES)
    driver = make_file(tmp_path / "driver.py", DRIVER)
    run = subprocess.run(
        [sys.executable, str(driver), *map(str, paths)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=1200,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr.count("\n") >= CASES
    failures = [line for line in run.stderr.splitlines() if line.endswith(": Traceback")]
    assert not failures, (
        f"{len(failures)} of {CASES} tracebacks:\n" + run.stderr[run.stderr.find("Traceback (most recent") :][:3000]
    )
    refusals = [line for line in run.stderr.splitlines() if line.startswith("autonvtx: ")]
    for line in refusals:  # one line, location first: the file
        assert line.startswith(f"autonvtx: {tmp_path}") or "autonvtx: report" in line or "note" in line, line
    assert sum(line.endswith(": report") for line in run.stderr.splitlines()) > CASES // 3, run.stderr[:2000]


def report(tmp_path: Path, path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", str(path), *options],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.skipif(not EXPORTS, reason="no fixture exports in tests/fixtures/nsys")
def test_nvtx_text_that_is_not_utf8_reads_with_replacement_characters(tmp_path: Path) -> None:
    path = tmp_path / "bytes.sqlite"
    shutil.copyfile(EXPORTS[0], path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE StringIds SET value = CAST(x'636166e9' AS TEXT) WHERE value = 'MPI_Init'")
    db.close()
    run = report(tmp_path, path, "--format", "json")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "caf\ufffd" in run.stdout and "MPI_Init" not in run.stdout


@pytest.mark.skipif(not EXPORTS, reason="no fixture exports in tests/fixtures/nsys")
def test_a_column_of_the_wrong_type_is_named_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "typed.sqlite"
    shutil.copyfile(EXPORTS[0], path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE NVTX_EVENTS SET start = 'soon' WHERE rowid = 3")
    db.close()
    run = report(tmp_path, path)
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr == (
        f"autonvtx: {path}: NVTX_EVENTS.start holds a text value; expected integers, as nsys "
        "writes them (the export was damaged or not written by nsys)\n"
    )
