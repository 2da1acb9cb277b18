"""`--budget PCT`: ranges that cost too much for the functions they cover are turned off while
the program runs.

Each selected function's first `MEASURED_CALLS` ranges are timed where they are made (the
native client, range.c): its own time between push and pop, and the time the push and pop
themselves take with the NVTX tool attached (the recorder, Nsight Systems: several times the
recorder's cost under nsys). When the range costs more than PCT% of the function's mean own
time, no further range is made for it: the wrap engine's wrapper calls the function directly,
the code engine disables its sys.monitoring events once none of its ranges is open. Ranges
already open are closed as they would have been; every range kept is exact.

The setting travels to child processes in AUTONVTX_BUDGET."""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable

from autonvtx import environment
from autonvtx.errors import UsageError

# The calls a function's range cost is measured over before it is kept or turned off.
MEASURED_CALLS = 100

_armed: list[float] = []


def parse_percent(text: str, where: str = "--budget") -> float:
    """The budget `text` gives, a percentage in (0, 100]; UsageError naming `where` otherwise."""
    try:
        percent = float(text)
    except (TypeError, ValueError):
        percent = float("nan")
    if not 0 < percent <= 100:  # NaN fails too
        raise UsageError(f"{where}: expected a percentage above 0 and at most 100, got {text!r}")
    return percent


def arm(percent: float, verbose: int = 0) -> Callable[[], None] | None:
    """Measure and turn off ranges in this process from now on (ranges made before keep theirs
    unmeasured); `verbose`: a line on stderr as each function is turned off. Returns what ends
    the budget again (install()'s uninstall calls it); None where the native client is missing
    (the pure-Python path has no budget)."""
    from autonvtx import ranges

    client = ranges.native_client() if ranges.is_native() else None
    set_budget = getattr(client, "set_budget", None)
    if set_budget is None:
        if not _armed:
            print("autonvtx: --budget needs autonvtx's native client; every range is kept", file=sys.stderr)
            _armed.append(percent)  # said once
        return None
    set_budget(percent, MEASURED_CALLS, verbose > 0)
    if not _armed:
        atexit.register(_say_what_was_turned_off)
    _armed[:] = [percent]
    inherited = os.environ.get(environment.BUDGET)
    os.environ[environment.BUDGET] = repr(percent)  # children: the same budget

    def disarm() -> None:
        """No range is measured or turned off from now on, and children get the environment's
        budget as it was; what was turned off is still named at exit."""
        set_budget(0.0, 0, False)
        if inherited is None:
            os.environ.pop(environment.BUDGET, None)
        else:
            os.environ[environment.BUDGET] = inherited

    return disarm


def arm_option(text: str, verbose: int = 0) -> None:
    """`run --budget TEXT`: checked (UsageError, before anything starts), then armed."""
    arm(parse_percent(text), verbose)


def arm_from_environment() -> None:
    """arm() with AUTONVTX_BUDGET's percentage, when the parent's run set one (AUTONVTX_VERBOSE:
    its -v)."""
    text = os.environ.get(environment.BUDGET)
    verbose = os.environ.get(environment.VERBOSE, "")
    if text and not _armed:
        try:
            arm(parse_percent(text, environment.BUDGET), int(verbose) if verbose.isdigit() else 0)
        except UsageError as bad:
            print(f"autonvtx: {bad}; no budget", file=sys.stderr)


def turned_off() -> list[tuple[str, str, float, float]]:
    """(domain, message, mean range cost ns, mean own ns) of each function turned off so far."""
    from autonvtx import ranges

    read = getattr(ranges.native_client(), "budget_turned_off", None)
    return list(read()) if read is not None else []


def exit_line(percent: float, off: list[tuple[str, str, float, float]]) -> str:
    """The one line a process prints at exit about what its budget turned off: each function
    once (installed again, a function is measured and turned off again)."""
    firsts: dict[tuple[str, str], tuple[str, str, float, float]] = {}
    for entry in off:
        firsts.setdefault(entry[:2], entry)
    off = list(firsts.values())
    shown = ", ".join(f"{name} ({cost:.0f} ns a range, {own:.0f} ns a call)" for _, name, cost, own in off[:10])
    more = f" and {len(off) - 10} more" if len(off) > 10 else ""
    return (
        f"autonvtx: --budget {percent:g}%: ranges turned off after {MEASURED_CALLS} calls for "
        f"{len(off)} function{'s' if len(off) != 1 else ''} whose range cost more than that share of "
        f"their time: {shown}{more}"
    )


def _say_what_was_turned_off() -> None:  # registered by arm() when the budget is armed
    off = turned_off()
    if off and _armed:
        print(exit_line(_armed[0], off), file=sys.stderr)
