"""The measuring run, inside the child process `autonvtx suggest` starts: the program run as
`autonvtx run` runs it (`cli.launch.start_run`, the same runner), with the broad rules, plus
two measurements of our own: what one range costs here, and a range around each import that
loads a module, so that time spent importing is told apart from the program's work."""

from __future__ import annotations

import atexit
import json
import sys
import time
import types
from collections.abc import Callable
from typing import Any

from autonvtx.suggest.calls import MARKS_MODULE

# The marks module's source: functions the measuring rules select, so the engine in use (and
# the recorder, or nsys) puts its ranges on them exactly as on the program's functions.
_MARKS_SOURCE = """
def probe():
    return None

def bare():
    return None

class Probe:
    def method(self):
        return None

    def bare(self):
        return None

def importing(name, import_):
    return find_and_load(name, import_)
"""

CALIBRATION_CALLS = 400
CALIBRATION_ROUNDS = 25


def main() -> None:
    """`python -c ... SPEC KIND VALUE ARGS...`: SPEC, a JSON file naming the measuring config,
    the summary to write (none under nsys) and the file for this run's facts."""
    spec_path, kind, value, *args = sys.argv[1:]
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    marks = _marks_module()
    from autonvtx.errors import AutonvtxError

    try:
        run = _start(spec, (kind, value, tuple(args)))
    except AutonvtxError as error:
        for line in str(error).splitlines():
            print(f"autonvtx: suggest: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    _quiet_unmatched_patterns()
    facts: dict[str, Any] = {"range_cost_ns": _calibrate(marks)}
    unmark_imports = _mark_imports(marks)
    started = time.perf_counter_ns()

    _write(spec["facts"], facts)  # the cost, even if the program never reaches Python's exit

    def write_facts() -> None:
        facts["run_ns"] = time.perf_counter_ns() - started
        # Imports after this (the recorder's, writing its summary) are outside the run's time:
        # marked, they would be taken from it, and a short run's time would go below zero.
        unmark_imports()
        _write(spec["facts"], facts)
        if spec["summary"] is not None:
            # The summary is ours to read, in a directory about to go: its "written to" line is not
            # the user's business. Only autonvtx writes to stderr from here on.
            sys.stderr = _LineFilter(sys.stderr, f"autonvtx: summary written to {spec['summary']}")

    atexit.register(write_facts)  # after the recorder's: runs before it writes (atexit is LIFO)
    run.execute()


def _write(path: str, facts: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(facts, out)


class _LineFilter:
    """A text stream that passes everything on except lines starting with `prefix`."""

    def __init__(self, stream: Any, prefix: str) -> None:
        self._stream, self._prefix, self._pending = stream, prefix, ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            if not line.startswith(self._prefix):
                self._stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _start(spec: dict[str, Any], target: Any) -> Any:
    from autonvtx.cli.launch import start_run
    from autonvtx.cli.ruleargs import RuleArgs

    table = None
    if spec["summary"] is not None:
        from autonvtx.cli.views import VIEW_OPTION_DEFAULTS

        table = dict(VIEW_OPTION_DEFAULTS, tree=True, each=True)
    return start_run(
        target,
        rules=RuleArgs(configs=(spec["config"],), engine=spec.get("engine")),
        verbose=0,
        dry_run=False,
        trace=None,
        summary=spec["summary"],
        buffer_mb=spec.get("buffer_mb"),
        keep="all",
        no_children=False,
        captures=(),
        ranks=None,
        table=table,
    )


def _marks_module() -> types.ModuleType:
    """The marks module, in sys.modules before the rules are installed (installing patches the
    modules already imported)."""
    import importlib._bootstrap as bootstrap

    module = types.ModuleType(MARKS_MODULE, "Measurements of `autonvtx suggest`.")
    module.__dict__["find_and_load"] = bootstrap._find_and_load  # type: ignore[attr-defined]
    exec(compile(_MARKS_SOURCE, f"<{MARKS_MODULE}>", "exec"), module.__dict__)
    sys.modules[MARKS_MODULE] = module
    return module


def _quiet_unmatched_patterns() -> None:
    """The broad rules name every package on sys.path; those the program never imports are not
    typos, so `run`'s warning about unmatched patterns is not said."""
    from autonvtx.control import silence_exit_reports

    silence_exit_reports()


def _calibrate(marks: types.ModuleType) -> float:
    """What a range adds to a call here (engine, recorder or nsys, this machine and its load
    now), in ns: the median over rounds of a round of calls to a ranged empty function less
    the round of an unranged one beside it; of a function and of a method looked up on each
    call (a wrapper binds itself then), the dearer. The median, not the best round: the
    program's calls pay what a range typically costs, and on a busy machine that is more."""
    instance = marks.Probe()
    method_cost = _cost(lambda: instance.method(), lambda: instance.bare())  # the same lambda cost on both sides
    return max(_cost(marks.probe, marks.bare), method_cost)


def _cost(ranged: Any, unranged: Any) -> float:
    differences = []
    for _ in range(CALIBRATION_ROUNDS):
        start = time.perf_counter_ns()
        for _ in range(CALIBRATION_CALLS):
            ranged()
        middle = time.perf_counter_ns()
        for _ in range(CALIBRATION_CALLS):
            unranged()
        end = time.perf_counter_ns()
        differences.append((middle - start) - (end - middle))
    differences.sort()
    return max(differences[len(differences) // 2], 1) / CALIBRATION_CALLS


def _mark_imports(marks: types.ModuleType) -> Callable[[], None]:
    """Every import that loads a module goes through `importlib._bootstrap._find_and_load`
    (the `import` statement's C path looks it up on the module each time, and
    `importlib.import_module` calls it by name): the ranged `importing` takes its place.
    Returns what puts the original back."""
    import importlib._bootstrap as bootstrap

    original = bootstrap._find_and_load  # type: ignore[attr-defined]
    bootstrap._find_and_load = marks.importing  # type: ignore[attr-defined]

    def unmark() -> None:
        bootstrap._find_and_load = original  # type: ignore[attr-defined]

    return unmark
