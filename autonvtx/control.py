"""The one place that assembles instrumentation: matcher, walk, engine, import hook, plugins
and reporting. `autonvtx run`, the child-process bootstrap, the start-up hook and the public
API all go through `Instrumentation`; nothing else builds this machinery."""

from __future__ import annotations

import atexit
import os
import sys
import types

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

from autonvtx.engines.kinds import WRAP, EngineUnavailableError, choose_engine
from autonvtx.environment import BUDGET, FLIGHT_WATCH, is_tool_configured
from autonvtx.importer import ImportHook
from autonvtx.matching import Matcher
from autonvtx.modulepath import ModulePlans
from autonvtx.reexports import rebind_reexports
from autonvtx.walk import Walker

if TYPE_CHECKING:
    from autonvtx.config import Config
    from autonvtx.engines import Engine
    from autonvtx.engines.plan import PlanEngine
    from autonvtx.plugins import Plugin, PluginActivator
    from autonvtx.regions import RegionInstaller

NO_TOOL_NOTE = (
    "no NVTX tool is attached, so selected functions are left unwrapped; "
    "to see their ranges run under Nsight Systems "
    "(nsys profile -t nvtx autonvtx run ...) or add --trace/--summary"
)
# The same in a Jupyter kernel (%autonvtx), where neither can be added to a running process.
NO_TOOL_NOTE_KERNEL = (
    "no NVTX tool is attached to this kernel, so selected functions are left unwrapped; "
    "to see their ranges install a kernel that records (in a terminal: autonvtx kernel install "
    "-t 'mypkg.*' --trace DIR, or --nsys) and switch this notebook to it (Kernel > Change kernel > "
    "Python (autonvtx))"
)


class Instrumentation:
    """Rules and plugins of one `Config`, installed into this process and taken back out.

    `install()` puts the import hook in place, walks the target modules already imported and
    activates plugins when their framework is imported; `uninstall()` removes the hook and, when
    made `restorable`, puts back every function it replaced. Without an NVTX tool attached no
    range could be seen: every decision is still made and reported, and nothing is changed.
    `plugins` are the config's plugins, loaded by the caller (so bad plugins stop a run before
    its target starts); None loads them here.

    A `plan` (`list`, `run --dry-run`, `export`) makes the same decisions with the plan engine
    (shaped as the engine a run would use), applies none, places regions without attaching
    them and arms no plugin; `plan_engine` holds what it decided.
    """

    def __init__(
        self,
        config: Config,
        *,
        plugins: list[Plugin] | None = None,
        restorable: bool = False,
        plan: bool = False,
    ) -> None:
        self.config = config
        self.matcher = Matcher(config)
        self.applies = is_tool_configured() or plan
        if self.applies and not plan and os.environ.get(BUDGET):
            from autonvtx import budget  # only a run with --budget loads it (start-up)

            budget.arm_from_environment()
        if self.applies and not plan and os.environ.get(FLIGHT_WATCH):
            from autonvtx import flightwatch  # only a run with profile --flight loads it (start-up)

            flightwatch.arm_from_environment()
        self._restorable = restorable
        # Which engine rules use; `engine_note` says why the one asked for could not be used.
        self.engine, self.engine_note = choose_engine(config.settings.engine)
        self.plan_engine: PlanEngine | None = None
        if plan:
            from autonvtx.engines.plan import PlanEngine  # a run never needs it (start-up)

            self.plan_engine = PlanEngine(reaches_nested=self.engine.reaches_nested)
        self.walker = Walker(
            self.matcher, self.plan_engine, apply=self.applies, make_engine=self._make_engine, verb=self.engine.verb
        )
        self.regions: RegionInstaller | None = None
        if config.regions:
            # Imported only then: a run without regions does not pay for it (start-up).
            from autonvtx.regions import RegionInstaller

            self.regions = RegionInstaller(config, apply=not plan)
        # Without regions the hook asks the matcher and hands modules to the walk directly
        # (what should_consider_module() and instrument() below would do, a call less for
        # each import and two for each target module: hundreds when a package is targeted
        # wholesale, issue 24).
        self.hook = ImportHook(self, self) if self.regions is not None else ImportHook(self.matcher, self.walker)
        if self.regions is None:  # then modules one rule selects as a whole may go the C way
            self.walker.plans = ModulePlans(self.hook, self.walker, self.matcher)
        self.activator: PluginActivator | None = None
        if config.plugins and not plan:
            # Imported only then: a run without plugins does not pay for it (start-up).
            from autonvtx.plugins import PluginActivator, load_plugins

            found = load_plugins(config) if plugins is None else plugins
            self.activator = PluginActivator(config, found)

    def _make_engine(self) -> Engine:
        # Made when the first target module is walked: a process that imports no target never
        # loads an engine.
        try:
            engine = self.engine.build(self.config, restorable=self._restorable)
        except EngineUnavailableError as why_not:
            if self.engine is WRAP:
                raise
            # Taken since choose_engine() asked (another tool claimed the last free id).
            self.engine_note = f"the {self.engine.name} engine cannot run ({why_not}); using the wrap engine"
            self.engine = WRAP
            self.walker.verb = WRAP.verb
            engine = WRAP.build(self.config, restorable=self._restorable)
        if self.engine.replaces_functions:
            from autonvtx.engines.dynamo import FUNCTIONS, see_through_wrappers

            # torch.compile must inline the functions, not the wrappers (engines/dynamo.py).
            self.hook.when_imported(FUNCTIONS, see_through_wrappers)
        return engine

    @property
    def installed(self) -> bool:
        return self.hook.installed

    def install(self) -> None:
        """Hook imports, instrument the target modules already imported, arm the plugins."""
        if self.hook.installed:
            return
        if self.activator is not None:
            self.activator.install(self.hook)
        self.hook.install()
        # The modules imported before: their packages' names for what was wrapped, too.
        rebind_reexports(self.walker.reports, self.walker.built_engine)
        _installed.append(self)

    def uninstall(self) -> None:
        """Remove the import hook (sys.meta_path as found) and, if restorable, every wrapper."""
        self.hook.uninstall()
        if self in _installed:
            _installed.remove(self)
        engine = self.walker.built_engine
        if self._restorable and engine is not None:
            engine.restore()
        if self.activator is not None and self._restorable:
            self.activator.restore()
        if self.regions is not None and self._restorable:
            self.regions.uninstall()

    def should_consider_module(self, name: str) -> bool:
        """Whether the import hook hands `name` to instrument(): rules or regions name it."""
        return self.matcher.should_consider_module(name) or (
            self.regions is not None and self.regions.should_consider_module(name)
        )

    def instrument(self, module: types.ModuleType) -> None:
        """What the import hook calls for each module it hands over: the rules' walk, then
        the regions."""
        if self.matcher.should_consider_module(module.__name__):
            self.walker.instrument(module)
        if self.regions is not None:
            self.regions.module_executed(module)

    def instrument_module(self, module: types.ModuleType) -> None:
        """Walk `module` now: one the hook cannot see (`__mp_main__` re-run by multiprocessing;
        a notebook's `__main__`, walked incrementally: only what is new since the last call)."""
        if module.__name__ == "__main__":
            self._instrument_main(module)
        else:
            self.instrument(module)

    def _instrument_main(self, module: types.ModuleType) -> None:
        if self.matcher.should_consider_module("__main__"):
            self.walker.instrument_main(module)
        if self.regions is not None:
            self.regions.module_executed(module)

    @property
    def main_hook(self) -> Callable[[types.ModuleType], object] | None:
        """What the runner calls after each top-level statement of `__main__`, when rules or
        regions target it (the script never passes through the import hook)."""
        if self.regions is not None and self.regions.should_consider_module("__main__"):
            return self._instrument_main
        if self.matcher.should_consider_module("__main__"):
            return self.walker.instrument_main
        return None

    # Reporting: every caller prints from here, so -v, the API and children agree.
    def print_start_notes(self) -> None:
        """Said once before the program runs: no NVTX tool attached (nothing will be seen), or
        why the engine asked for cannot run."""
        no_tool = NO_TOOL_NOTE_KERNEL if "ipykernel" in sys.modules else NO_TOOL_NOTE
        note = no_tool if not self.applies else self.engine_note
        if note is not None:
            print(f"autonvtx: {note}", file=sys.stderr)

    def warnings(self) -> list[str]:
        """Patterns that matched nothing (typos are the most common mistake), and regions that
        found no function, could not be placed, or whose capture window never opened."""
        lines = [f"warning: {line}" for line in self.matcher.unmatched_patterns()]
        if self.regions is not None:
            lines += self.regions.exit_lines()
        return lines

    def engine_line(self) -> str:
        """Which engine the rules use, and why when it is not the one asked for."""
        if self.engine_note is not None:
            return self.engine_note
        return self.engine.line()

    def report_lines(self, *, detailed: bool) -> list[str]:
        """-v: a line per module (-vv: every decision with its reason), then totals and notes."""
        lines: list[str] = []
        reports = sorted(self.walker.reports.items())
        for _, module_report in reports:
            lines.extend(module_report.lines() if detailed else [module_report.summary()])
        for module, why in sorted(self.hook.skipped.items()):
            lines.append(f"{module}: not instrumented ({why})")
        wrapped = sum(len(r.wrapped) for _, r in reports)
        skipped = sum(len(r.skipped) for _, r in reports)
        lines.append(self.engine_line())
        lines.append(
            f"{self.walker.verb} {_count(wrapped, 'function')} in {_count(len(reports), 'module')} ({skipped} skipped)"
        )
        if self.activator is not None:
            lines.extend(self.activator.notes)
        if self.regions is not None:
            lines.extend(self.regions.report_lines())
        from autonvtx.nativeparts import missing_lines  # a native part that failed to build, and why

        lines.extend(missing_lines())
        return lines

    def process_line(self, label: str) -> str:
        """One line for a child process: what it wrapped (its parent warns about patterns)."""
        reports = self.walker.reports.values()
        wrapped = sum(len(r.wrapped) for r in reports)
        modules = sum(1 for r in reports if r.wrapped)
        return (
            f"process {os.getpid()} ({label}): {self.walker.verb} {_count(wrapped, 'function')}"
            f" in {_count(modules, 'module')}"
        )

    def print_report(self, verbose: int, file: Any = None) -> None:
        """What `autonvtx run` prints at exit: warnings, then with -v what was instrumented."""
        out = sys.stderr if file is None else file
        lines = self.warnings()
        if verbose:
            lines += self.report_lines(detailed=verbose > 1)
        for line in lines:
            print(f"autonvtx: {line}", file=out)


# Installed in this process, oldest first: a Jupyter kernel started by `autonvtx run`
# (autonvtx.kernel) walks its cells' `__main__`, which no import hook sees, through them.
_installed: list[Instrumentation] = []


def installed() -> list[Instrumentation]:
    """The instrumentations installed in this process now (install() and not uninstall())."""
    return list(_installed)


def silence_exit_reports() -> None:
    """No installed instrumentation prints its report at exit (warnings about patterns that
    never matched): where they could not mean anything (no program ran, or broad rules)."""
    for instrumentation in _installed:
        atexit.unregister(instrumentation.print_report)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
