"""The per-module path in C (issue 24). Once the walk has walked one module that a rule
selects as a whole, the next modules that rule selects alike go from their loader straight to
the native walk in one C call (a native ModulePath, _native/modulepath.c), instead of through
ImportHook.module_executed, Walker.instrument and ModuleWalk: in a package targeted wholesale,
those hundred Python lines a module were half of what the import cost per function. Every
module the native path cannot decide from its caches still takes the Python way, which hands
this its plan for the modules after it."""

from __future__ import annotations

import types
import warnings

from autonvtx.config import AUTO_PALETTE
from autonvtx.decisions import MEMBER, ModuleReport
from autonvtx.valuekinds import KINDS, kind_of
from autonvtx.walk import REFUSED_PACKAGES, WRAPPABLE_DUNDERS, ModuleWalk

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from autonvtx.config import Rule
    from autonvtx.importer import ImportHook
    from autonvtx.matching import Matcher
    from autonvtx.walk import Walker


class ModulePlans:
    """Takes the walk's plans (walk.py calls add() after each native walk of a module its
    rules select as a whole) into a native ModulePath, made with the first, which then takes
    the import hook's place for every module executed after it."""

    def __init__(self, hook: ImportHook, walker: Walker, matcher: Matcher) -> None:
        self._hook = hook
        self._walker = walker
        self._matcher = matcher
        self._path: Any = None
        self._known: set[int] = set()  # ids of the Selections planned (the matcher holds them)

    def add(self, selection: Any, reason: str, rule: Rule, engine: Any, module: str) -> None:
        """`module` was walked natively for `selection`: walk its like the same way (where
        that cannot be set up, they keep the Python way; the module walked is not affected)."""
        if id(selection) in self._known:
            return
        self._known.add(id(selection))
        try:
            self._add(selection, reason, rule, engine, module)
        except Exception as exc:  # the Python way serves: say so, once
            warnings.warn(f"autonvtx: the native per-module path is off: {exc!r}", RuntimeWarning, 2)

    def _add(self, selection: Any, reason: str, rule: Rule, engine: Any, module: str) -> None:
        from autonvtx import ranges  # loaded with the engine already; not at start-up

        walkers = getattr(engine, "uniform_walkers", {}).get(id(rule))
        native = ranges._native
        # Only the native walk itself (not a benchmark's timed stand-in for it).
        if walkers is None or native is None or ranges.uniform_walk_function() is not native.walk_uniform:
            return
        path = self._path if self._path is not None else self._make_path(native)
        if path is None:
            return
        config = self._matcher.config
        path.add_plan(
            selection,
            reason,
            rule.builtins,
            walkers,
            config.color_setting(rule) == "auto",
            config.style(rule, module).color,
        )

    def _make_path(self, native: types.ModuleType) -> Any:
        make = getattr(native, "ModulePath", None)
        if make is None:  # a client built from older sources
            return None
        hook, matcher = self._hook, self._matcher
        self._path = make(
            hook.module_executed,
            hook.triggers,
            matcher._considered,
            matcher.uniform_known,
            self._walker._reports,
            self._new_report,
            self._callbacks_for,
            _failed,
            KINDS,
            kind_of,
            WRAPPABLE_DUNDERS,
            MEMBER,
            REFUSED_PACKAGES,
            AUTO_PALETTE,
        )
        hook.on_executed = self._path  # the stand-in loaders made from now on call it
        loader = getattr(native, "ChainedLoader", None)
        if loader is not None:
            hook.use_native(loader, getattr(native, "ChainedFinder", None), matcher._considered)
        return self._path

    def _new_report(self, name: str, reason: str) -> tuple[ModuleReport, list[Any], list[Any], list[str]]:
        walker = self._walker
        report = walker._reports[name] = ModuleReport(name, walker.verb, reason)
        return report, report._names, report._skips, report.rebound

    def _callbacks_for(
        self,
        module: types.ModuleType,
        namespace: dict[str, Any],
        name: str,
        report: ModuleReport,
        classes_seen: set[int],
    ) -> tuple[Any, ...]:
        # The Python walk's methods, for what the C walk hands on (a module's first such name).
        walk = ModuleWalk(self._walker, module, namespace, name, report)
        walk.classes_seen = classes_seen
        return walk._visit_global, walk._visit_member, walk._wrap, walk._failed, walk._remember


def _failed(report: ModuleReport | str, exc: Exception) -> None:
    # As the Python way reports it: the walk's failure in the module's report (_instrument_items),
    # one before it (the report not made; the module's name given) as a warning
    # (ImportHook._not_instrumented); never into the import.
    if isinstance(report, str):
        warnings.warn(f"autonvtx: {report}: not instrumented: {exc!r}", RuntimeWarning, 2)
    else:
        report.skip("<module>", f"instrumentation failed: {type(exc).__name__}: {exc}")
