"""Stream an Nsight Systems SQLite export: NVTX ranges and GPU work with the calls that launched it."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from autonvtx.errors import AutonvtxError
from autonvtx.report.nsys.schema import Schema, Table, discover, meta_value, quote, string_table

# NVTX_EVENTS.eventType (ENUM_NSYS_EVENT_TYPE): push/pop and start/end ranges, also in their
# NVTXT form (ranges read from .nvtxt files). Marks (34), thread names (39) and domain
# creation (75) are not ranges.
PUSH_POP_TYPES = (59, 70)
START_END_TYPES = (60, 71)
OPEN_TYPES = PUSH_POP_TYPES + START_END_TYPES  # the ranges count_open_ranges counts
DOMAIN_CREATE_TYPE = 75
THREAD_NAME_TYPE = 39

# CUPTI_ACTIVITY_KIND_RUNTIME.eventClass (ENUM_NSYS_EVENT_CLASS) of the rows nsys adds for a
# call's CUDA backtrace: they repeat the call's correlationId (2022.2 writes one per launch),
# so joining them too would count each kernel twice.
BACKTRACE_CLASSES = (67, 68, 69)

KERNEL, MEMCPY, MEMSET = 0, 1, 2
_WORK_TABLES = (
    (KERNEL, "CUPTI_ACTIVITY_KIND_KERNEL"),
    (MEMCPY, "CUPTI_ACTIVITY_KIND_MEMCPY"),
    (MEMSET, "CUPTI_ACTIVITY_KIND_MEMSET"),
)

# A range as the sweep reads it: (globalTid, start, end, is_start_end, domainId, name).
RangeRow = tuple[int, int, int, int, int, str | None]
# GPU work joined to its launch: (globalTid, call start, kind, gpu start, gpu end, device,
# kernel name (a StringIds id or inline text), bytes).
LaunchRow = tuple[int, int, int, int, int, int, object, int | None]
# An SQL query and its arguments.
Query = tuple[str, tuple[object, ...]]
# The launches as the native sweep joins them (export.launch_join): the calls' query, and per
# kind of work its query with whether the call must be of the same process.
LaunchJoin = tuple[Query, list[tuple[Query, bool]]]
# The launches' order (columns of LaunchRow): the call's start, then every other column.
LAUNCH_ORDER = "2, 3, 1, 4, 5, 6, 7, 8"
# Which threads a stream covers: None for all, else (keep, globalTids): those only, or all but those.
ThreadFilter = tuple[bool, tuple[int, ...]] | None


class ReportError(AutonvtxError):
    """A profile that cannot be read as asked (message starts with the file's path)."""


@dataclass(frozen=True)
class WorkTable:
    """One GPU activity table and how to read it."""

    kind: int
    table: Table
    name_column: str | None
    bytes_column: str | None
    device_column: str | None
    process_column: str | None


class NsysExport:
    """An open export: the schema found in it and streams over what the report needs."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.uri = connect_uri(path)  # what the native sweep opens too
        self.connection = _connect(path)
        try:
            self.schema: Schema = discover(self.connection)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # SQLite's message may quote bytes
            self.connection.close()
            raise ReportError(
                f"{path}: not an SQLite database ({exc}); expected an Nsight Systems export (nsys export --type sqlite)"
            ) from None
        if not self.schema.is_nsys:
            self.connection.close()
            raise ReportError(
                f"{path}: an SQLite file without Nsight Systems tables (no StringIds, NVTX_EVENTS or CUPTI_ACTIVITY_KIND_*); expected an nsys export --type sqlite file"
            )
        self._sqlite = self.connection  # its errors unwrapped, for the questions that expect one
        self.connection = _GuardedConnection(self.connection, path)  # type: ignore[assignment]
        self.strings = string_table(self.schema)
        self.nvtx = self._nvtx_table()
        self.runtime = self._runtime_table()
        self.work = [w for w in (self._work_table(kind, base) for kind, base in _WORK_TABLES) if w is not None]
        self._open_ranges: int | None = None
        self._rowids: dict[str, bool] = {}
        self._check_integers()

    def _check_integers(self) -> None:
        """Refuse, naming the column, an export whose times or ids hold text, reals or blobs (the
        sweep does arithmetic on them); one scan per table, in SQLite."""
        checks: list[tuple[Table, list[str | None]]] = []
        if self.nvtx is not None:
            checks.append(
                (
                    self.nvtx,
                    [self.nvtx.column(c) for c in ("start", "end", "eventType", "globalTid", "domainId", "textId")],
                )
            )
        if self.runtime is not None:
            checks.append(
                (self.runtime, [self.runtime.column(c) for c in ("start", "globalTid", "correlationId", "eventClass")])
            )
        for work in self.work:
            checks.append(
                (
                    work.table,
                    [work.table.column(c) for c in ("start", "end", "correlationId")]
                    + [work.device_column, work.process_column, work.bytes_column],
                )
            )
        for table, columns in checks:
            named = list(dict.fromkeys(c for c in columns if c is not None))
            if named and native_check is not None:  # one pass in C, the same answer (tests/test_sweep_native.py)
                # The NVTX table's pass also counts the ranges that never ended (count_open_ranges).
                kind, end = table.column("eventType"), table.column("end")
                opened = (
                    (named.index(kind), named.index(end), OPEN_TYPES) if table is self.nvtx and kind and end else None
                )
                try:
                    done = native_check.wrong_type(
                        self.uri,
                        f"SELECT {', '.join(map(quote, named))} FROM {quote(table.name)}",
                        tuple(named),
                        opened,
                    )
                except native_check.SQLiteError as exc:  # SQLite's message, as below
                    raise damaged(self.path, exc) from None
                if done is not NotImplemented:
                    found, open_ranges = done
                    if found is not None:
                        raise ReportError(_wrong_type(self.path, table.name, *found))
                    if opened is not None:
                        self._open_ranges = open_ranges
                    continue
            # One scan per table for all its columns; only a table with a wrong value is scanned
            # again, column by column, to name the column.
            # typeof(c) NOT IN ('integer', 'null'), written as SQLite evaluates it a third faster.
            wrong = [f"(typeof({quote(c)}) != 'integer' AND {quote(c)} IS NOT NULL)" for c in named]
            if not wrong or not self._any_row(table, " OR ".join(wrong)):
                continue
            for column, condition in zip(named, wrong):
                row = self.connection.execute(
                    f"SELECT typeof({quote(column)}) FROM {quote(table.name)} WHERE {condition} LIMIT 1"
                ).fetchone()
                if row is not None:
                    raise ReportError(_wrong_type(self.path, table.name, column, row[0]))

    def _any_row(self, table: Table, condition: str) -> bool:
        sql = f"SELECT 1 FROM {quote(table.name)} WHERE {condition} LIMIT 1"
        return self.connection.execute(sql).fetchone() is not None

    def close(self) -> None:
        self.connection.close()

    @property
    def version(self) -> str | None:
        return meta_value(self.connection, self.schema, "EXPORT_PRODUCT_VERSION")

    def _nvtx_table(self) -> Table | None:
        table = self.schema.table("NVTX_EVENTS")
        if table is None or not table.has("start", "eventType", "globalTid"):
            return None
        return table

    def _runtime_table(self) -> Table | None:
        table = self.schema.table("CUPTI_ACTIVITY_KIND_RUNTIME")
        if table is None or not table.has("start", "globalTid", "correlationId"):
            return None
        return table

    def _work_table(self, kind: int, base: str) -> WorkTable | None:
        table = self.schema.table(base)
        if table is None or not table.has("start", "end", "correlationId"):
            return None
        return WorkTable(
            kind,
            table,
            table.column("shortName", "demangledName", "name", "mangledName") if kind == KERNEL else None,
            table.column("bytes") if kind != KERNEL else None,
            table.column("deviceId", "device"),
            table.column("globalPid", "globalTid"),
        )

    def text_sql(self, text: str | None, text_id: str | None, alias: str) -> tuple[str, str]:
        """(select expression, join clause) for a text that may be inline, interned, or both."""
        if text_id is not None and self.strings is not None:
            join = f" LEFT JOIN {quote(self.strings.name)} {alias} ON {alias}.id = {text_id}"
            if text is not None:
                return f"COALESCE({text}, {alias}.value)", join
            return f"{alias}.value", join
        return (text if text is not None else "NULL"), ""

    def capture_end(self) -> int:
        """The last timestamp of any range or GPU work: where a never-ended range is cut."""
        ends = []
        if self.nvtx is not None:
            ends.append(
                self._scalar(
                    f"SELECT MAX(MAX(start), COALESCE(MAX({quote(self.nvtx.columns['end'])}), 0)) FROM {quote(self.nvtx.name)}"
                    if "end" in self.nvtx.columns
                    else f"SELECT MAX(start) FROM {quote(self.nvtx.name)}"
                )
            )
        for work in self.work:
            ends.append(self._scalar(f"SELECT MAX({quote(work.table.columns['end'])}) FROM {quote(work.table.name)}"))
        return max((e for e in ends if e is not None), default=0)

    def _scalar(self, sql: str, args: tuple[object, ...] = ()) -> int | None:
        row = self.connection.execute(sql, args).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def _open_condition(self) -> str:
        return f'(eventType IN ({", ".join(map(str, OPEN_TYPES))}) AND "end" IS NULL)'

    def count_open_ranges(self) -> int:
        """Ranges that never ended in the capture (counted once: a scan of the NVTX table)."""
        if self._open_ranges is None:
            self._open_ranges = 0
            if self.nvtx is not None and "end" in self.nvtx.columns:
                self._open_ranges = (
                    self._scalar(f"SELECT COUNT(*) FROM {quote(self.nvtx.name)} WHERE {self._open_condition()}") or 0
                )
        return self._open_ranges

    def ranges(self, threads: ThreadFilter = None) -> Iterator[RangeRow]:
        """Every NVTX range, ordered by start (an enclosing range before the ones it encloses)."""
        query = self.ranges_query(threads)
        if query is None:
            return iter(())
        return self.connection.execute(*query)

    def ranges_query(self, threads: ThreadFilter = None, ordered: bool = True) -> Query | None:
        """The query `ranges` runs (None: the export has no NVTX ranges); the native sweep runs it
        too. Ordered by start, then end latest first, then rowid (where the table has rowids), so
        that no query plan decides the order of ranges that start and end together. Not
        `ordered`: the same rows unordered, each with its rowid last, for the native sweep to
        order itself."""
        if self.nvtx is None:
            return None
        t = self.nvtx
        if "end" not in t.columns:
            end = "n.start"
        elif self.count_open_ranges():
            end = f"COALESCE(n.{quote(t.columns['end'])}, {self.capture_end()})"
        else:
            end = f"n.{quote(t.columns['end'])}"  # the scans for the capture's end are not needed
        text = t.column("text")
        text_id = t.column("textId")
        name = self.lazy_text_sql(f"n.{quote(text)}" if text else None, f"n.{quote(text_id)}" if text_id else None)
        domain = f"COALESCE(n.{quote(t.columns['domainid'])}, 0)" if "domainid" in t.columns else "0"
        start_end = ", ".join(str(x) for x in START_END_TYPES)
        types = ", ".join(str(x) for x in PUSH_POP_TYPES + START_END_TYPES)
        sql = (
            f"SELECT n.globalTid, n.start, {end} AS e, n.eventType IN ({start_end}), {domain}, {name}"
            + ("" if ordered else ", n.rowid")
            + f" FROM {quote(t.name)} n WHERE n.eventType IN ({types}){_thread_condition('n.globalTid', threads)}"
            + (f" ORDER BY n.start, e DESC{', n.rowid' if self._has_rowid(t) else ''}" if ordered else "")
        )
        return sql, ()

    def _has_rowid(self, table: Table) -> bool:
        """Whether `table` has rowids (a WITHOUT ROWID table or a view has none)."""
        if table.name not in self._rowids:
            try:
                self._sqlite.execute(f"SELECT rowid FROM {quote(table.name)} LIMIT 0")
                self._rowids[table.name] = True
            except sqlite3.Error:
                self._rowids[table.name] = False
        return self._rowids[table.name]

    def lazy_text_sql(self, text: str | None, text_id: str | None) -> str:
        """A text inline or interned; the StringIds lookup only runs when the inline text is NULL."""
        if text_id is not None and self.strings is not None:
            lookup = f"(SELECT value FROM {quote(self.strings.name)} WHERE id = {text_id})"
            return f"COALESCE({text}, {lookup})" if text is not None else lookup
        return text if text is not None else "NULL"

    def thread_loads(self) -> dict[int, int]:
        """NVTX events per thread: how to split the sweep between processes."""
        if self.nvtx is None:
            return {}
        return {
            int(gtid): int(count)
            for gtid, count in self.connection.execute(
                f"SELECT globalTid, COUNT(*) FROM {quote(self.nvtx.name)} GROUP BY globalTid"
            )
            if gtid is not None
        }

    def size_hint(self) -> int:
        """About how many NVTX events the export holds (MAX(rowid) is a b-tree lookup, not a scan)."""
        if self.nvtx is None:
            return 0
        try:
            return self._scalar(f"SELECT MAX(rowid) FROM {quote(self.nvtx.name)}") or 0
        except sqlite3.Error:  # a WITHOUT ROWID table or a view
            return 0

    def launches(self, device: int | None = None, threads: ThreadFilter = None) -> Iterator[LaunchRow]:
        """GPU work joined to the runtime call that launched it, ordered by the call's start."""
        query = self.launches_query(device, threads)
        if query is None:
            return iter(())
        return self.connection.execute(*query)

    def launches_query(self, device: int | None = None, threads: ThreadFilter = None) -> Query | None:
        """The query `launches` runs (None: no GPU work or no runtime calls to tie it to)."""
        if self.runtime is None or not self.work:
            return None
        parts = []
        args: list[object] = []
        for work in self.work:
            parts.append(self._launch_select(work, device, args) + _thread_condition("r.globalTid", threads))
        # By the call's start, then every column: which of two launches of one call comes first
        # would otherwise be the query plan's choice (it changes with --gpu), and the native
        # sweep's join (launch_join) orders them the same way.
        return " UNION ALL ".join(parts) + f" ORDER BY {LAUNCH_ORDER}", tuple(args)

    def launch_join(self, device: int | None = None, threads: ThreadFilter = None) -> LaunchJoin | None:
        """What the native sweep reads to join launches itself, in place of `launches_query`
        (None: no launches): the runtime calls (correlationId, globalTid, start), and per kind of
        work its rows (correlationId, globalPid or NULL, kind, start, end, device, name, bytes)
        with whether a call must be of the same process (as `_launch_select` joins them)."""
        if self.runtime is None or not self.work:
            return None
        r = self.runtime
        backtraces = ", ".join(str(c) for c in BACKTRACE_CLASSES)
        where = f" WHERE r.eventClass NOT IN ({backtraces})" if r.has("eventClass") else " WHERE 1"
        calls: Query = (
            f"SELECT r.correlationId, r.globalTid, r.start FROM {quote(r.name)} r{where}"
            + _thread_condition("r.globalTid", threads),
            (),
        )
        parts: list[tuple[Query, bool]] = []
        for work in self.work:
            w = work.table
            dev, name, size = _work_columns(work)
            pid = f"k.{quote(work.process_column)}" if work.process_column else "NULL"
            sql = (
                f"SELECT k.correlationId, {pid}, {work.kind}, k.start, k.{quote(w.columns['end'])}, {dev}, {name}, {size} "
                f"FROM {quote(w.name)} k" + (f" WHERE {dev} = ?" if device is not None else "")
            )
            args: tuple[object, ...] = () if device is None else (device,)
            parts.append(((sql, args), work.process_column is not None))
        return calls, parts

    def work_size_hint(self) -> int:
        """About how many runtime calls and GPU work rows the export holds (MAX(rowid) each)."""
        total = 0
        for table in ([self.runtime] if self.runtime else []) + [work.table for work in self.work]:
            try:
                total += self._scalar(f"SELECT MAX(rowid) FROM {quote(table.name)}") or 0
            except sqlite3.Error:  # a WITHOUT ROWID table or a view
                return 0
        return total

    def _launch_select(self, work: WorkTable, device: int | None, args: list[object]) -> str:
        assert self.runtime is not None
        w = work.table
        dev, name, size = _work_columns(work)
        # correlationId is unique within a process, not across processes: join within the
        # process (globalPid, or globalTid, >> 24 drops the thread id bits).
        same_process = (
            f" AND (r.globalTid >> 24) = (k.{quote(work.process_column)} >> 24)" if work.process_column else ""
        )
        conditions = []
        if self.runtime.has("eventClass"):
            conditions.append(f"r.eventClass NOT IN ({', '.join(str(c) for c in BACKTRACE_CLASSES)})")
        if device is not None:
            conditions.append(f"{dev} = ?")
            args.append(device)
        where = " WHERE " + " AND ".join(conditions) if conditions else " WHERE 1"
        return (
            f"SELECT r.globalTid, r.start, {work.kind}, k.start, k.{quote(w.columns['end'])}, {dev}, {name}, {size} "
            f"FROM {quote(w.name)} k JOIN {quote(self.runtime.name)} r ON r.correlationId = k.correlationId{same_process}{where}"
        )

    def work_totals(self) -> dict[int, tuple[int, int, int]]:
        """Per kind: (count, summed ns, bytes) over the whole capture, launched or not."""
        totals = {}
        for work in self.work:
            w = work.table
            size = f"SUM({quote(work.bytes_column)})" if work.bytes_column else "0"
            row = self.connection.execute(
                f"SELECT COUNT(*), COALESCE(SUM({quote(w.columns['end'])} - start), 0), COALESCE({size}, 0) FROM {quote(w.name)}"
            ).fetchone()
            totals[work.kind] = (int(row[0]), int(row[1]), int(row[2]))
        return totals

    def devices(self) -> list[int]:
        found: set[int] = set()
        for work in self.work:
            if work.device_column:
                found.update(
                    int(row[0])
                    for row in self.connection.execute(
                        f"SELECT DISTINCT {quote(work.device_column)} FROM {quote(work.table.name)}"
                    )
                    if row[0] is not None
                )
        return sorted(found)

    def names_of(self, keys: Iterable[object]) -> dict[object, str]:
        """`string` of many keys at once: one query a few hundred ids, not one query each."""
        found = {key: "" if key is None else str(key) for key in keys}
        ids = [key for key in found if isinstance(key, int)]
        if self.strings is None:
            return found
        for at in range(0, len(ids), 500):  # below SQLite's 999 host parameters of old builds
            chunk = ids[at : at + 500]
            marks = ", ".join("?" * len(chunk))
            query = f"SELECT id, value FROM {quote(self.strings.name)} WHERE id IN ({marks})"
            for key, value in self.connection.execute(query, chunk):
                found[key] = str(value)
        return found

    def string(self, key: object) -> str:
        """A kernel name as stored: a StringIds id resolved, inline text as is."""
        if isinstance(key, int) and self.strings is not None:
            row = self.connection.execute(
                f"SELECT value FROM {quote(self.strings.name)} WHERE id = ?", (key,)
            ).fetchone()
            if row is not None:
                return str(row[0])
        return "" if key is None else str(key)


class _GuardedCursor:
    """A cursor whose SQLite errors (a file damaged past its first pages) read as ReportError."""

    def __init__(self, cursor: sqlite3.Cursor, path: str) -> None:
        self.cursor, self.path = cursor, path

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self.cursor
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise damaged(self.path, exc) from None

    def fetchone(self) -> Any:
        try:
            return self.cursor.fetchone()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise damaged(self.path, exc) from None

    def fetchall(self) -> list[Any]:
        try:
            return self.cursor.fetchall()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise damaged(self.path, exc) from None


class _GuardedConnection:
    """The export's connection: every query's SQLite error names the file in one line."""

    def __init__(self, connection: sqlite3.Connection, path: str) -> None:
        self.connection, self.path = connection, path

    def execute(self, sql: str, args: Sequence[object] = ()) -> _GuardedCursor:
        try:
            return _GuardedCursor(self.connection.execute(sql, args), self.path)
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise damaged(self.path, exc) from None

    def close(self) -> None:
        self.connection.close()


def _wrong_type(path: str, table: str, column: str, type_name: str) -> str:
    return (
        f"{path}: {table}.{column} holds a {type_name} value; expected "
        "integers, as nsys writes them (the export was damaged or not written by nsys)"
    )


def native_sweep_module() -> ModuleType | None:
    """The native sweep's module (report/nsys/_native/): its `run` is sweep.Sweep in C and its
    `wrong_type` the integer check below (sweep_check.c). None where it was not built or cannot
    find SQLite in the process; the Python twins run then."""
    try:
        from autonvtx.report.nsys import _sweep
    except ImportError:
        return None
    return _sweep if _sweep.unavailable() is None else None


native_check = native_sweep_module()


def damaged(path: str, exc: object) -> ReportError:
    """The error of an export SQLite cannot read (`exc`: SQLite's error or its message)."""
    return ReportError(
        f"{path}: cannot read the export ({exc}); expected an intact Nsight Systems export (nsys export --type sqlite)"
    )


def _work_columns(work: WorkTable) -> tuple[str, str, str]:
    """A kind of work's device, kernel name and bytes as SQL on its table `k` (a constant where
    the table has no such column): the launches' query and the native sweep's join read the same."""
    dev = f"k.{quote(work.device_column)}" if work.device_column else "0"
    name = f"k.{quote(work.name_column)}" if work.name_column else "NULL"
    size = f"k.{quote(work.bytes_column)}" if work.bytes_column else "NULL"
    return dev, name, size


def _thread_condition(column: str, threads: ThreadFilter) -> str:
    """SQL restricting `column` to some threads: (True, ids) keeps them, (False, ids) leaves them out."""
    if threads is None:
        return ""
    keep, ids = threads
    listed = ", ".join(str(int(i)) for i in ids) or "NULL"
    return f" AND {column} {'IN' if keep else 'NOT IN'} ({listed})"


def _connect(path: str) -> sqlite3.Connection:
    if not os.path.exists(path):
        raise ReportError(
            f"{path}: no such file; expected an Nsight Systems export (.sqlite or .nsys-rep) or an autonvtx trace (.json)"
        )
    try:
        connection = sqlite3.connect(connect_uri(path), uri=True)
        # NVTX text is whatever bytes the program gave: text that is not UTF-8 reads with U+FFFD.
        connection.text_factory = lambda raw: raw.decode("utf-8", "replace")
        connection.execute("PRAGMA query_only = 1")
        return connection
    except sqlite3.Error as exc:
        raise ReportError(f"{path}: cannot open as SQLite ({exc}); expected an Nsight Systems export") from None


def connect_uri(path: str) -> str:
    # Read-only and immutable: the report never writes into the user's export, and
    # immutable skips locking (exports on read-only or network file systems open too).
    return "file:" + _uri_path(os.path.abspath(path)) + "?mode=ro&immutable=1"


def _uri_path(path: str) -> str:
    from urllib.parse import quote as url_quote

    return url_quote(path)
