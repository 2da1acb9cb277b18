"""What an Nsight Systems SQLite export holds: its tables and columns, found by looking."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

# Tables whose presence marks a file as an Nsight Systems export (any one is enough); every
# schema from 2020 to 2026 has StringIds and at least one of the others.
_NSYS_MARKERS = (
    "StringIds",
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "TARGET_INFO_SESSION_START_TIME",
    "EXPORT_META_DATA",
    "META_DATA_EXPORT",
    "ANALYSIS_DETAILS",
)

# Some exports version a table by suffix (CUPTI_ACTIVITY_KIND_KERNEL_V2, ..._V3): the base
# name finds it, and the highest version wins when several are present.
_VERSION_SUFFIX = re.compile(r"^(?P<base>.+?)_V(?P<version>\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Table:
    """One table as the file holds it: its real name and its columns (lower case -> real)."""

    name: str
    columns: dict[str, str]
    rows_hint: int = -1

    def column(self, *candidates: str) -> str | None:
        """The real name of the first candidate column the table has, or None."""
        for candidate in candidates:
            real = self.columns.get(candidate.lower())
            if real is not None:
                return real
        return None

    def has(self, *names: str) -> bool:
        return all(name.lower() in self.columns for name in names)


@dataclass(frozen=True)
class Schema:
    """The tables of one export, by base name (upper case, version suffix removed)."""

    tables: dict[str, Table] = field(default_factory=dict)

    def table(self, base: str) -> Table | None:
        return self.tables.get(base.upper())

    @property
    def is_nsys(self) -> bool:
        return any(self.table(name) is not None for name in _NSYS_MARKERS)


def quote(name: str) -> str:
    """An identifier quoted for SQL (names come from the file itself, never from users)."""
    return '"' + name.replace('"', '""') + '"'


def discover(connection: sqlite3.Connection) -> Schema:
    """Read sqlite_master and each table's PRAGMA table_info into a Schema."""
    names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    chosen: dict[str, tuple[int, str]] = {}
    for name in names:
        match = _VERSION_SUFFIX.match(name)
        base, version = (match.group("base"), int(match.group("version"))) if match else (name, 1)
        key = base.upper()
        if key not in chosen or version > chosen[key][0]:
            chosen[key] = (version, name)
    tables = {}
    for key, (_, name) in chosen.items():
        columns = {row[1].lower(): row[1] for row in connection.execute(f"PRAGMA table_info({quote(name)})")}
        tables[key] = Table(name, columns)
    return Schema(tables)


def string_table(schema: Schema) -> Table | None:
    """The interned-strings table (StringIds: id, value), if the export has one."""
    table = schema.table("StringIds")
    if table is not None and table.has("id", "value"):
        return table
    return None


def meta_value(connection: sqlite3.Connection, schema: Schema, key: str) -> str | None:
    """A value from the export's metadata table (EXPORT_META_DATA, later META_DATA_EXPORT)."""
    for base in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        table = schema.table(base)
        if table is not None and table.has("name", "value"):
            row = connection.execute(f"SELECT value FROM {quote(table.name)} WHERE name = ? LIMIT 1", (key,)).fetchone()
            if row is not None:
                return str(row[0])
    return None
