"""What the side tables (`report.sideviews`: `--pair backward`, `--memory`) refuse, checked
where the view options are read: `run --summary` checks them before the program starts. Needs
nothing of the report (the command line imports it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autonvtx.errors import UsageError

if TYPE_CHECKING:
    from autonvtx.stats.model import ViewOptions


def asked(options: ViewOptions) -> str | None:
    """Which side table the view options ask for ("pairs", "memory"), None for the usual one;
    refuses what cannot be shown together."""
    pair = options.pair
    wants_memory = options.memory
    if pair is None and not wants_memory:
        return None
    if pair is not None and wants_memory:
        raise UsageError("--pair and --memory: each is a table of its own; expected one of them")
    option = "--pair" if pair is not None else "--memory"
    if options.tree:
        raise UsageError(f"{option}: a flat table, one row per name; --tree does not apply")
    if options.group != "name":
        raise UsageError(f"{option}: rows are range names; --group {options.group} does not apply")
    return "pairs" if pair is not None else "memory"


def check(options: ViewOptions) -> None:
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


def sort_of(options: ViewOptions, allowed: tuple[str, ...], option: str, says: str) -> str | None:
    """The --sort a side table was given (None or "total": its own order); refuses the others."""
    sort = options.sort
    if sort in (None, "total"):
        return None
    if sort not in allowed:
        raise UsageError(f"--sort {sort}: {option} {says}")
    return "count" if sort == "instances" else str(sort)
