"""The native sweep (autonvtx/report/nsys/_native/sweep.c) against its Python twin
(report.nsys.sweep.Sweep):
the same Tally, field for field and in the same order, on every fixture export, on copies of
them edited to reach every branch of the sweep (start/end ranges, recursion, misnesting, NVTX
domains renumbered, names NULL, empty and not UTF-8, kernel names inline), and on the seeded
damaged copies of test_report_fuzz; the same rows per name (made in C from the sweep's tables,
against views.build_rows on the same Tally: every field, in the same order); the same report
text, CSV and JSON; the same one-line error where SQLite cannot read the export."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager, nullcontext
from pathlib import Path

import pytest
from conftest import REPO
from test_report_fuzz import damaged_exports

from autonvtx import nativeparts
from autonvtx.report.figures import Row
from autonvtx.report.nsys import export as export_module, sweep
from autonvtx.report.nsys.export import NsysExport, ReportError
from autonvtx.report.nsys.labels import read_labels
from autonvtx.report.nsys.sweep import Tally, sweep_export
from autonvtx.report.output import ReportRequest, produce
from autonvtx.report.views import build_rows, range_naming
from autonvtx.stats.model import ViewOptions

FIXTURES = REPO / "tests" / "fixtures" / "nsys"
EXPORTS = sorted(FIXTURES.glob("*.sqlite"))
TORCH = FIXTURES / "torch-2gpu-nsys2026.2.sqlite"
NATIVE = sweep.native

pytestmark = [
    pytest.mark.skipif(NATIVE is None, reason="the native sweep is not built in this installation"),
    pytest.mark.skipif(not EXPORTS, reason="no fixture exports in tests/fixtures/nsys"),
]


@contextmanager
def python_sweep() -> Iterator[None]:
    sweep.native = None
    try:
        yield
    finally:
        sweep.native = NATIVE


def tally_of(path: Path, by: str | None, strip: bool, each: bool, device: int | None) -> Tally:
    return tally_and_rows(path, by, strip, each, device)[0]


def tally_and_rows(path: Path, by: str | None, strip: bool, each: bool, device: int | None) -> tuple[Tally, list[Row]]:
    """The sweep's Tally, its rows made where the native sweep ran (`Tally.rows`), and the rows
    views.build_rows makes from the same Tally."""
    export = NsysExport(str(path))
    try:
        labels = read_labels(export)
        rename = range_naming(strip, each)
        if device is None:
            tally = sweep_export(export, labels, labels.grouping(by), rename, rows=True)
        else:
            tally = sweep_export(export, labels, lambda _tid: f"GPU {device}", rename, True, device, rows=True)
        return tally, build_rows(dataclasses.replace(tally, rows=None), labels.domain, export.names_of)
    finally:
        export.close()


def assert_rows_twins(path: Path, by: str | None, strip: bool, each: bool, device: int | None) -> bool:
    """The native rows equal build_rows's, field for field and in order, where the native sweep
    made them: whether it did."""
    try:
        tally, python = tally_and_rows(path, by, strip, each, device)
    except ReportError:
        return False
    if tally.rows is None:
        return False
    assert len(tally.rows) == len(python), (path.name, by, strip, each, device)
    for native_row, python_row in zip(tally.rows, python):
        assert native_row == python_row, (path.name, by, strip, each, device)
    return True


def both(path: Path, by: str | None, strip: bool, each: bool, device: int | None) -> tuple[object, object]:
    """What the native sweep and the Python one give: a Tally (with its dictionaries' orders,
    which the rows follow) or the error raised."""

    def outcome() -> object:
        try:
            tally = tally_of(path, by, strip, each, device)
        except ReportError as error:
            return ("error", str(error))
        return tally, list(tally.self_kernels), list(tally.outside), list(tally.repeated)

    native = outcome()
    with python_sweep():
        return native, outcome()


def devices(path: Path) -> list[int]:
    try:
        export = NsysExport(str(path))
    except ReportError:
        return []
    try:
        return export.devices()
    except ReportError:
        return []
    finally:
        export.close()


# (by, strip, each): each grouping once, each naming once, and both with --by gpu's first device.
SOME_WAYS = [(None, False, True), ("thread", False, False), ("process", True, True), ("rank", True, False)]
EVERY_WAY = [(by, strip, each) for by in (None, "process", "rank", "thread") for strip in (0, 1) for each in (0, 1)]


def assert_twins(path: Path, ways: list[tuple[str | None, bool, bool]] = SOME_WAYS, gpus: int = 1) -> bool:
    """The two sweeps' Tallies equal, and the native rows build_rows's: whether the native sweep
    made rows every way."""
    made = True
    for by, strip, each in ways:
        native, python = both(path, by, strip, each, None)
        assert native == python, (path.name, by, strip, each)
        made = assert_rows_twins(path, by, strip, each, None) and made
    for device in devices(path)[:gpus]:
        native, python = both(path, None, False, True, device)
        assert native == python, (path.name, "gpu", device)
        made = assert_rows_twins(path, None, False, True, device) and made
    return made


def native_run(path: Path) -> tuple[object, ...] | None:
    """The native sweep's own answer for an export, ungrouped and without rows (None: it leaves
    the export to the Python sweep)."""
    export = NsysExport(str(path))
    try:
        labels = read_labels(export)
        assert NATIVE is not None
        return NATIVE.run(
            export.uri, export.ranges_query(), export.launches_query(), labels.grouping(None), None, False, {}
        )
    finally:
        export.close()


def edited(tmp_path: Path, name: str, *statements: str) -> Path:
    path = tmp_path / f"{name}.sqlite"
    shutil.copyfile(TORCH, path)
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
    db.close()
    return path


# Edits of the real two-GPU export that reach the branches its own ranges do not.
EDITS = {
    # start/end ranges among push/pop ranges of the same names (repeated work), ending early
    "start-end": (
        "UPDATE NVTX_EVENTS SET text = 'twice' WHERE rowid % 7 = 0 OR rowid % 21 = 1",
        "UPDATE NVTX_EVENTS SET eventType = 60 WHERE rowid % 7 = 0",
        'UPDATE NVTX_EVENTS SET "end" = start + ("end" - start) / 3 WHERE rowid % 14 = 0',
    ),
    # a few names shared by nested ranges (recursion: shadowed positions), one NULL, one empty
    "recursion": (
        "UPDATE NVTX_EVENTS SET text = 'same' WHERE rowid % 3 = 0",
        "UPDATE NVTX_EVENTS SET text = 'other' WHERE rowid % 5 = 0",
        "UPDATE NVTX_EVENTS SET text = NULL, textId = NULL WHERE rowid % 11 = 0",
        "UPDATE NVTX_EVENTS SET text = '' WHERE rowid % 13 = 0",
    ),
    # ranges that outlive the range enclosing them
    "misnested": ('UPDATE NVTX_EVENTS SET "end" = "end" + 5000000 WHERE rowid % 4 = 0',),
    # one domainId naming different domains in the two processes (labels renumber it), and
    # domains without a name
    "domains": (
        "UPDATE NVTX_EVENTS SET domainId = rowid % 3",
        "INSERT INTO NVTX_EVENTS (start, eventType, globalTid, domainId, text) "
        "SELECT MIN(start), 75, globalTid, 1, 'first' FROM NVTX_EVENTS WHERE globalTid = (SELECT MIN(globalTid) FROM NVTX_EVENTS)",
        "INSERT INTO NVTX_EVENTS (start, eventType, globalTid, domainId, text) "
        "SELECT MIN(start), 75, globalTid, 1, 'second' FROM NVTX_EVENTS WHERE globalTid = (SELECT MAX(globalTid) FROM NVTX_EVENTS)",
    ),
    # text that is not UTF-8: different bytes that read as the same name
    "not-utf8": (
        "UPDATE NVTX_EVENTS SET text = CAST(x'ff61' AS TEXT) WHERE rowid % 6 = 0",
        "UPDATE NVTX_EVENTS SET text = CAST(x'fe61' AS TEXT) WHERE rowid % 6 = 1",
    ),
    # kernel names inline (text), some NULL, some ids equal to one of those texts' digits
    # (the name column `name` in place of shortName and demangledName, which refuse NULL)
    "kernel-text": (
        'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN "shortName" TO "gone_short"',
        'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN "demangledName" TO "gone_demangled"',
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN name",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET name = CASE WHEN rowid % 5 = 0 THEN NULL "
        "WHEN rowid % 3 = 0 THEN 'k' || (gone_short % 4) ELSE gone_short END",
    ),
    # the same, every kernel as long as the others: top kernels chosen by the tie-breaks
    # (count, then str(kernel): ids as text, inline names, None)
    "kernel-ties": (
        'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN "shortName" TO "gone_short"',
        'ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN "demangledName" TO "gone_demangled"',
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN name",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET name = CASE WHEN rowid % 5 = 0 THEN NULL "
        "WHEN rowid % 3 = 0 THEN 'k' || (gone_short % 4) ELSE gone_short END",
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + 1000',
    ),
    # launches by threads without ranges (work outside every range)
    "outside": (
        "DELETE FROM NVTX_EVENTS WHERE rowid % 2 = 0 AND globalTid = (SELECT MIN(globalTid) FROM NVTX_EVENTS)",
    ),
}


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_the_native_sweep_finds_what_the_python_sweep_finds_on_the_fixture_exports(path: Path) -> None:
    export = NsysExport(str(path))
    try:  # the native part ran, rather than leaving it to the Python sweep
        labels = read_labels(export)
        assert NATIVE is not None
        fields = NATIVE.run(
            export.uri, export.ranges_query(), export.launches_query(), labels.grouping(None), None, False, {}
        )
        assert fields is not None and len(fields[1]) > 1
    finally:
        export.close()
    # Every way on the small export, each way once on the large one (a read there is slow).
    assert assert_twins(path, EVERY_WAY if path.stat().st_size < 2_000_000 else SOME_WAYS, gpus=8)


@pytest.mark.parametrize("name", sorted(EDITS))
def test_the_native_sweep_finds_what_the_python_sweep_finds_on_edited_exports(tmp_path: Path, name: str) -> None:
    path = edited(tmp_path, name, *EDITS[name])
    tally = tally_of(path, "thread", False, True, None)
    reached = {
        "start-end": lambda t: any(t.start_end) and t.repeated,
        "recursion": lambda t: any(t.shadowed) and ((0, "") in t.keys),
        "misnested": lambda t: t.misnested > 0,
        "domains": lambda t: any(domain >= 1 << 40 for domain, _ in t.keys),
        "not-utf8": lambda t: (0, "\ufffda") in t.keys,
        "kernel-text": lambda t: (
            any(isinstance(k, str) for _, k in t.self_kernels) and any(k is None for _, k in t.self_kernels)
        ),
        "outside": lambda t: bool(t.outside),
        "kernel-ties": lambda t: (
            len({k for _, k in t.self_kernels}) > 1
            and len({tuple(seen) for seen in t.self_kernels.values()}) < len(t.self_kernels) / 2
        ),
    }[name]
    assert reached(tally), name  # the edit reaches the branch it is for
    assert assert_twins(path, [(None, False, True), ("thread", True, False)])


# Ties for the orders to break: runtime calls that start together, calls that launch several
# kernels (one correlationId) at one time with names inline, as ids and NULL, and ranges that
# start and end together.
TIES = (
    *EDITS["kernel-text"],
    "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = start / 50000000 * 50000000",
    "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = correlationId - correlationId % 10, "
    'start = start / 100000000 * 100000000, "end" = start / 100000000 * 100000000 + 1000 + rowid % 3',
    "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET correlationId = correlationId - correlationId % 2",
    'UPDATE NVTX_EVENTS SET start = start / 1000000 * 1000000, "end" = "end" / 1000000 * 1000000 + 1000000',
)


def native_fields(path: Path, whole: bool, device: int | None) -> list[object]:
    """The native sweep's fields (dictionaries as their items, in order) with the ranges ordered
    and the launches joined in C (`whole`), or both by SQLite."""
    export = NsysExport(str(path))
    try:
        labels = read_labels(export)
        assert NATIVE is not None
        if whole:
            ranges, launches = export.ranges_query(ordered=False), export.launch_join(device)
        else:
            ranges, launches = export.ranges_query(), export.launches_query(device)
        grouping = labels.grouping("thread")
        fields = NATIVE.run(
            export.uri, ranges, launches, grouping, None, False, labels.renumbered, export.size_hint(), None, whole
        )
    finally:
        export.close()
    assert fields is not None  # the native sweep ran it
    return [list(field.items()) if isinstance(field, dict) else field for field in fields]


def test_ranges_and_launches_ordered_in_c_keep_the_sqls_order_ties_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = edited(tmp_path, "ties", *TIES)
    with closing(sqlite3.connect(path)) as db:  # the edit makes ties of every kind
        for count in (
            "SELECT COUNT(*) - COUNT(DISTINCT start) FROM CUPTI_ACTIVITY_KIND_RUNTIME",
            "SELECT COUNT(*) - COUNT(DISTINCT correlationId || ' ' || start) FROM CUPTI_ACTIVITY_KIND_KERNEL",
            "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL a JOIN CUPTI_ACTIVITY_KIND_KERNEL b "
            "ON a.correlationId = b.correlationId AND a.start = b.start AND typeof(a.name) != typeof(b.name)",
            "SELECT COUNT(*) - COUNT(DISTINCT globalTid || ' ' || start || ' ' || \"end\") FROM NVTX_EVENTS",
        ):
            assert db.execute(count).fetchone()[0] > 50, count
    for device in (None, 0, 1):  # the SQL's plan differs with --gpu: its order must not
        assert native_fields(path, True, device) == native_fields(path, False, device), device
    # sweep_export takes either way by the export's size; the Python sweep agrees with both
    whole = both(path, "thread", False, True, None)
    monkeypatch.setattr(sweep, "WHOLE_AT_MOST", 0)
    assert both(path, "thread", False, True, None) == whole
    assert whole[0] == whole[1]
    assert assert_twins(path, [(None, False, True), ("rank", True, False)], gpus=2)


K = "CUPTI_ACTIVITY_KIND_KERNEL"
R = "CUPTI_ACTIVITY_KIND_RUNTIME"
RUNTIME_COLUMNS = 'start, "end", eventClass, globalTid, correlationId, nameId, returnValue, callchainId'
# What the join and the orders in C must read as SQLite does (each found by a review).
JOINS = {
    # indexes and statistics that make the ordered and the unordered ranges' queries take
    # different paths: ties in rowid order either way
    "plans": (
        "CREATE INDEX by_start ON NVTX_EVENTS(start)",
        "CREATE INDEX by_type ON NVTX_EVENTS(eventType)",
        'UPDATE NVTX_EVENTS SET start = start / 1000000 * 1000000, "end" = "end" / 1000000 * 1000000 + 1000000',
        "UPDATE NVTX_EVENTS SET eventType = 60 WHERE rowid % 7 = 0",
        "ANALYZE",
        "UPDATE sqlite_stat1 SET stat = '1000000 100000' WHERE idx = 'by_type'",
        "UPDATE sqlite_stat1 SET stat = '1000000 1' WHERE idx = 'by_start'",
    ),
    # kernel names of one launch that order differently as bytes (SQLite) and as code points
    # (invalid UTF-8 reads as U+FFFD, below an emoji; its byte 0xf8 is above 0xf0)
    "name-bytes": (
        *EDITS["kernel-text"],
        f"INSERT INTO {K} SELECT * FROM {K} WHERE rowid % 10 = 1",
        f"UPDATE {K} SET name = CAST(x'f8' AS TEXT) WHERE rowid % 10 = 1 AND rowid <= 4010",
        f"UPDATE {K} SET name = CAST(x'f09f9880' AS TEXT) WHERE rowid > 4010",
    ),
    # calls without ids or threads, work without ids or processes; calls that share a correlationId
    "nulls-and-twins": (
        f"UPDATE {R} SET correlationId = NULL WHERE rowid % 7 = 0",
        f"UPDATE {R} SET globalTid = NULL WHERE rowid % 11 = 5",
        f"UPDATE {K} SET correlationId = NULL WHERE rowid % 5 = 0",
        f"UPDATE {K} SET globalPid = NULL WHERE rowid % 4 = 1",
        f'INSERT INTO {R} ({RUNTIME_COLUMNS}) SELECT start + 17, "end" + 17, eventClass, globalTid, '
        f"correlationId, nameId, returnValue, callchainId FROM {R} WHERE rowid % 3 = 0",
        f'INSERT INTO {R} ({RUNTIME_COLUMNS}) SELECT start, "end", eventClass, globalTid + 1, '
        f"correlationId, nameId, returnValue, callchainId FROM {R} WHERE rowid % 5 = 0",
    ),
}


@pytest.mark.parametrize("name", sorted(JOINS))
def test_the_join_and_orders_in_c_read_as_sqlite_does(tmp_path: Path, name: str) -> None:
    path = edited(tmp_path, name, *JOINS[name])
    for device in (None, 0, 1):
        assert native_fields(path, True, device) == native_fields(path, False, device), device
    native, python = both(path, "thread", False, True, None)
    assert native == python


def test_values_the_native_sweep_leaves_to_python_give_the_python_sweeps_tally(tmp_path: Path) -> None:
    # A NULL thread (the Python sweep groups it with no grouping) and sums past 64 bits.
    for path in (
        edited(tmp_path, "null-thread", "UPDATE NVTX_EVENTS SET globalTid = NULL WHERE rowid % 9 = 0"),
        edited(  # start/end ranges of one name on a thread share a node: their CPU times add up
            tmp_path,
            "huge",
            "UPDATE NVTX_EVENTS SET eventType = 60, text = 'huge', \"end\" = 9223372036854775807 WHERE rowid % 500 = 0",
        ),
    ):
        assert native_run(path) is None, path.name
        native, python = both(path, None, False, True, None)
        assert native == python and isinstance(python, tuple)


def test_the_native_sweep_matches_on_damaged_exports(tmp_path: Path) -> None:
    for path in damaged_exports(tmp_path, seed=32, count=24):
        for by, each in ((None, True), ("thread", False)):
            native, python = both(path, by, False, each, None)
            assert native == python, path.name
            assert_rows_twins(path, by, False, each, None)


def test_a_tally_asked_for_rows_only_holds_the_same_rows_and_totals_and_no_nodes() -> None:
    export = NsysExport(str(TORCH))
    try:
        labels = read_labels(export)
        full, lean = (
            sweep_export(export, labels, labels.grouping(None), None, rows=True, rows_only=only)
            for only in (False, True)
        )
    finally:
        export.close()
    assert lean.rows is not None and lean.rows == full.rows and len(lean.rows) > 18_000
    assert (lean.keys, lean.outside, lean.launched, lean.misnested) == (
        full.keys,
        full.outside,
        full.launched,
        full.misnested,
    )
    assert full.totals and full.self_kernels and not (lean.parent or lean.key or lean.totals or lean.self_kernels)


def test_rows_whose_sums_pass_64_bits_are_left_to_build_rows(tmp_path: Path) -> None:
    # One name at two positions (the first range of one thread, a nested range of another): two
    # nodes whose CPU times fit in 64 bits, a row whose sum of them does not. The native sweep
    # runs; its rows are build_rows's.
    first = "SELECT MIN(globalTid) FROM NVTX_EVENTS WHERE eventType = 59"
    last = "SELECT MAX(globalTid) FROM NVTX_EVENTS WHERE eventType = 59"
    path = edited(
        tmp_path,
        "huge-row",
        "UPDATE NVTX_EVENTS SET text = 'huge', \"end\" = start + 5000000000000000000 WHERE rowid IN ("
        f"(SELECT rowid FROM NVTX_EVENTS WHERE eventType = 59 AND globalTid = ({first}) ORDER BY start LIMIT 1), "
        "(SELECT r.rowid FROM NVTX_EVENTS r JOIN NVTX_EVENTS p ON p.globalTid = r.globalTid AND p.rowid != r.rowid "
        'AND p.start < r.start AND p."end" > r."end" WHERE r.eventType = 59 AND p.eventType = 59 '
        f"AND r.globalTid = ({last}) LIMIT 1))",
    )
    fields = native_run(path)
    assert fields is not None and fields[-1] is None  # swept natively, no rows asked for
    tally, python = tally_and_rows(path, None, False, True, None)
    assert tally.rows is None
    export = NsysExport(str(path))
    try:  # asked for rows only: without rows, the nodes stay for build_rows
        labels = read_labels(export)
        lean = sweep_export(export, labels, labels.grouping(None), None, rows=True, rows_only=True)
        assert lean.rows is None and lean == tally
    finally:
        export.close()
    assert [row.cpu_ns for row in python if row.name == "huge"] == [10_000_000_000_000_000_000]
    request = ReportRequest(str(path), view=ViewOptions(each=True), fmt="csv")
    native = produce(request)
    with python_sweep():
        assert produce(request) == native


REQUESTS = [
    (None, ViewOptions(each=True)),
    (None, ViewOptions()),
    (None, ViewOptions(tree=True)),
    (None, ViewOptions(by="gpu")),
    ("csv", ViewOptions(each=True)),
    ("json", ViewOptions(each=True)),
    ("json", ViewOptions(tree=True, by="thread")),
]


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_report_text_csv_and_json_are_the_same_bytes_either_sweep(path: Path) -> None:
    for fmt, view in REQUESTS:
        request = ReportRequest(str(path), view=view, fmt=fmt, strip_ids=view.by == "thread")
        native = produce(request)
        with python_sweep():
            assert produce(request) == native, (fmt, view)


def test_an_export_sqlite_cannot_read_is_the_same_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.sqlite"
    data = TORCH.read_bytes()
    # The schema and first pages intact (the export opens), the tables' later pages overwritten.
    path.write_bytes(data[: len(data) // 2] + b"\xff" * (len(data) - len(data) // 2))
    with pytest.raises(ReportError) as native:
        tally_of(path, None, False, True, None)
    with python_sweep(), pytest.raises(ReportError) as python:
        tally_of(path, None, False, True, None)
    assert str(native.value) == str(python.value)
    assert str(native.value).startswith(f"{path}: cannot read the export (")


def test_autonvtx_version_names_the_native_sweep() -> None:
    assert "native report sweep: built (autonvtx.report.nsys._sweep)" in nativeparts.status_lines()


def test_a_native_sweep_that_cannot_find_sqlite_is_named_missing_with_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(NATIVE, "unavailable", lambda: "sqlite3_step is not visible through Python's _sqlite3 module")
    assert export_module.native_sweep_module() is None  # the Python sweep and the SQL check run then
    assert (
        "native report sweep: MISSING (autonvtx.report.nsys._sweep): it cannot run here: sqlite3_step is not visible "
        "through Python's _sqlite3 module; reports on Nsight Systems exports sweep in Python, reading them several "
        "times slower"
    ) in nativeparts.status_lines()


@contextmanager
def sql_check() -> Iterator[None]:
    """NsysExport's integer check by its SQL (the twin of the native one)."""
    native = export_module.native_check
    export_module.native_check = None
    try:
        yield
    finally:
        export_module.native_check = native


def refusal(path: Path) -> str | None:
    try:
        NsysExport(str(path)).close()
    except ReportError as exc:
        return str(exc)
    return None


# Wrong values in the checked columns of each table: the column named is the first of the table's
# checked columns (in the check's order) holding one, with the type of its first such value.
WRONG = {
    "nvtx-text": ("UPDATE NVTX_EVENTS SET domainId = 'd' WHERE rowid = 40",),
    "nvtx-two-columns": (
        "UPDATE NVTX_EVENTS SET textId = 2.5 WHERE rowid = 7",
        "UPDATE NVTX_EVENTS SET eventType = x'00' WHERE rowid = 900",
        "UPDATE NVTX_EVENTS SET eventType = 'late' WHERE rowid = 901",
    ),
    "nvtx-end-last-row": ('UPDATE NVTX_EVENTS SET "end" = 1000.25 WHERE rowid = (SELECT MAX(rowid) FROM NVTX_EVENTS)',),
    "runtime": ("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = x'0102' WHERE rowid = 5",),
    "kernel": ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 'gpu' WHERE rowid = 4000",),
    "memcpy": ("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 0.5 WHERE rowid = 1",),
    "memset-and-kernel": (
        "UPDATE CUPTI_ACTIVITY_KIND_MEMSET SET start = 'then' WHERE rowid = 3",
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = 9.5 WHERE rowid = 3',
    ),
    "nulls-only": ("UPDATE NVTX_EVENTS SET textId = NULL, domainId = NULL WHERE rowid % 2 = 0",),
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_the_native_integer_check_refuses_as_its_sql_twin_does(tmp_path: Path, name: str) -> None:
    path = edited(tmp_path, name, *WRONG[name])
    native = refusal(path)
    with sql_check():
        python = refusal(path)
    assert native == python
    if name == "nulls-only":
        assert native is None
    else:
        assert native is not None and native.startswith(f"{path}: ") and "holds a" in native


def test_the_native_integer_check_counts_the_ranges_never_ended_as_the_sql_does(tmp_path: Path) -> None:
    path = edited(tmp_path, "open", 'UPDATE NVTX_EVENTS SET "end" = NULL WHERE rowid % 97 = 0')
    counts = []
    for checked in (nullcontext(), sql_check()):
        with checked:
            export = NsysExport(str(path))
            try:
                counts.append((export._open_ranges, export.count_open_ranges()))
            finally:
                export.close()
    with closing(sqlite3.connect(path)) as db:
        expected = db.execute('SELECT COUNT(*) FROM NVTX_EVENTS WHERE "end" IS NULL').fetchone()[0]
    assert expected == 19118 // 97
    assert counts == [(expected, expected), (None, expected)]  # the native pass counted them already
