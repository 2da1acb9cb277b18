"""Types of the native twin of the per-name table's writing and sorting (autonvtx/report/_native/rowtext.c)."""

from collections.abc import Callable
from typing import Any

def gpu_table(
    rows: list[Any],
    total_gpu_ns: int,
    headers: tuple[str, ...],
    shown: Callable[[str, str], str],
    printable: Callable[[str], str],
    /,
) -> str | None: ...
def sort_rows(rows: list[Any], field: str, /) -> bool: ...
def format_duration(ns: int, /) -> str | None: ...
