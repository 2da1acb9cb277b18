"""Types of the native twin of report.nsys.sweep.Sweep (autonvtx/report/nsys/_native/sweep.c)."""

from collections.abc import Callable
from typing import Any

class SQLiteError(Exception): ...

def run(
    uri: str,
    ranges: tuple[str, tuple[object, ...]] | None,
    launches: tuple[str, tuple[object, ...]]
    | tuple[tuple[str, tuple[object, ...]], list[tuple[tuple[str, tuple[object, ...]], bool]]]
    | None,
    group_of: Callable[[int], str],
    rename: Callable[[str], str] | None,
    only_with_work: bool,
    renumbered: dict[tuple[int, int], int],
    hint: int = 0,
    rows: tuple[type, type, type, Callable[[int], str], Callable[[Any], Any], int, bool] | None = None,
    order: bool = False,
    /,
) -> tuple[Any, ...] | None: ...
def wrong_type(
    uri: str, sql: str, columns: tuple[str, ...], counted: bool = False, /
) -> tuple[tuple[str, str] | None, int] | Any: ...
def unavailable() -> str | None: ...
