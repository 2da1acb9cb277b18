"""A child's own `__main__`: `python script.py` (or `-m module`, `-c code`) started by a
program under autonvtx whose rules (or regions) select `__main__`.

Python runs that code itself, past every import hook, so the walk never sees the functions it
defines. CPython announces the run first, with an audit event ("cpython.run_file",
"cpython.run_module", "cpython.run_command", 3.8+); the hook installed here answers the first
one by running the target through the runner instead, as `autonvtx run` runs its own: one
top-level statement at a time, the walk after each. The runner always ends with a SystemExit
carrying what the interpreter would exit with, and an exception out of an audit hook ends the
interpreter's own run: it handles that SystemExit as the program's (the same status, message
or silence), then finalizes as usual (atexit handlers, threads joined).

An audit hook cannot be removed: after the first event it returns at once.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import types
    from collections.abc import Callable
    from typing import Any

    from autonvtx.runner import Target

_EVENTS = frozenset({"cpython.run_file", "cpython.run_module", "cpython.run_command"})


def follow(on_main_statement: Callable[[types.ModuleType], object]) -> None:
    """Run this process's `__main__` through the runner, with `on_main_statement` after each of
    its top-level statements, when the interpreter is about to run a script, module or -c."""
    pending = [on_main_statement]

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event not in _EVENTS or not pending:
            return
        hook = pending.pop()
        target = _target(event, args)
        if target is None:
            return  # the interpreter runs it, as it would have
        from autonvtx import runner

        try:
            resolved = runner.resolve(target)
        except Exception:
            return  # not found, or not readable: the interpreter says so in its own words
        runner.execute(resolved, on_main_statement=hook)  # raises SystemExit

    # CPython calls audit hooks with tracing off (no sys.settrace, no sys.monitoring events)
    # unless the hook says it can be traced: the program, its debugger and coverage, and the
    # code engine's events all run inside this one.
    audit.__cantrace__ = True  # type: ignore[attr-defined]
    sys.addaudithook(audit)


def _target(event: str, args: tuple[Any, ...]) -> Target | None:
    """What the interpreter is about to run, as `autonvtx run` would be given it; None for
    what this does not take over."""
    from autonvtx.runner import Target

    if not args or not isinstance(args[0], str) or not sys.argv:
        return None
    rest = tuple(sys.argv[1:])
    if event == "cpython.run_command":
        return Target("code", args[0], rest)
    if event == "cpython.run_module":
        if sys.argv[0] == "-m":
            return Target("module", args[0], rest)
        # A directory or zip file given as the script: runpy runs its __main__ module.
        return Target("script", sys.argv[0], rest) if args[0] == "__main__" else None
    # cpython.run_file: the file's absolute path; sys.argv[0] is the path as given.
    given = sys.argv[0]
    return Target("script", given if _same_file(given, args[0]) else args[0], rest)


def _same_file(given: str, path: str) -> bool:
    try:
        return os.path.abspath(given) == os.path.abspath(path)
    except (OSError, ValueError):
        return False
