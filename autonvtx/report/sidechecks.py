"""What the side tables (`report.sideviews`: `--pair backward`, `--memory`) refuse, checked
where the view options are read: `run --summary` checks them before the program starts. Needs
nothing of the report (the command line imports it)."""

from __future__ import annotations

from typing import Any

from autonvtx.errors import UsageError


def asked(options: Any) -> str | None:
    """Which side table the view options ask for ("pairs", "memory"), None for the usual one;
    refuses what cannot be shown together."""
    pair = getattr(options, "pair", None)
    wants_memory = bool(getattr(options, "memory", False))
    if pair is None and not wants_memory:
        return None
    if pair is not None and wants_memory:
        raise UsageError("--pair and --memory: each is a table of its own; expected one of them")
    option = "--pair" if pair is not None else "--memory"
    if getattr(options, "tree", False):
        raise UsageError(f"{option}: a flat table, one row per name; --tree does not apply")
    if getattr(options, "group", "name") != "name":
        raise UsageError(f"{option}: rows are range names; --group {options.group} does not apply")
    return "pairs" if pair is not None else "memory"


def check(options: Any) -> None:
    """Refuse, before anything runs, what a side table cannot show (`run --summary` checks its
    view options before the program starts)."""
    side = asked(options)
    if side == "pairs":
        sort_of(options, (), "--pair", PAIRS_SORT)
    elif side == "memory":
        sort_of(options, MEMORY_SORTS, "--memory", MEMORY_SORT)


PAIRS_SORT = "sorts its pairs by forward plus backward time, largest first; expected no --sort"
MEMORY_SORTS = ("count", "instances", "name")
MEMORY_SORT = "sorts by the largest rise, or by count or name"


def sort_of(options: Any, allowed: tuple[str, ...], option: str, says: str) -> str | None:
    """The --sort a side table was given (None or "total": its own order); refuses the others."""
    sort = getattr(options, "sort", None)
    if sort in (None, "total"):
        return None
    if sort not in allowed:
        raise UsageError(f"--sort {sort}: {option} {says}")
    return "count" if sort == "instances" else str(sort)
