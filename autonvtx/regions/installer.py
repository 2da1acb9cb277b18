"""Regions installed into a process: the functions each region names are found as their modules
execute, placed (loop, line span or call) and given native regions on their code objects."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import types
from collections.abc import Iterator
from fnmatch import fnmatchcase
from typing import Any

from autonvtx import ranges
from autonvtx.codes import code_of, nested_codes
from autonvtx.config import Config, Region
from autonvtx.forklocks import renewed_in_fork_child
from autonvtx.regions.capture import CaptureWindow
from autonvtx.regions.locate import Placement, place
from autonvtx.regions.monitor import RegionMonitor, monitoring_problem

# A region that cannot be placed in this many functions is said function by function; past it,
# in one line.
_SAID_ONE_BY_ONE = 3
_DEFAULT_NAMES = {"loop": "{qualname} {i}", "call": "{qualname} {i}"}
# What a glob never places regions in: the code that emits the ranges (walk.REFUSED_PACKAGES,
# the same packages the rules never instrument).
_MACHINERY = ("autonvtx", "wrapt", "nvtx")


def regions_available() -> str | None:
    """None when regions can run in this process, else why not."""
    return monitoring_problem()


class RegionInstaller:
    """Finds, places and (when `apply`) monitors the config's regions. `resolved` holds a line
    per region placed (for -v, `list` and dry runs); `problems` a line per region that could
    not be placed, naming its file and key."""

    def __init__(self, config: Config, *, apply: bool = True) -> None:
        self.config = config
        self.regions = config.regions
        self.resolved: list[str] = []
        self.problems: list[str] = []
        self.skipped: list[str] = []  # every function a region selected but could not be placed in
        self._unplaced: dict[int, list[str]] = {}  # region index -> those lines, once past a few
        self.note: str | None = None
        self._apply = apply
        self._monitor: RegionMonitor | None = None
        self._done: set[tuple[int, int]] = set()  # (region index, id(code)) placed
        self._found: set[int] = set()  # regions that found a function
        self._attached: dict[int, list[tuple[Placement, Any]]] = {}  # by id(code): see monitor
        self._windows: list[tuple[CaptureWindow, Any]] = []
        self._keep: list[Any] = []  # every native Region stays alive: open ranges point at them
        # Functions selected and not yet run: placed at their first call (regions.c's PY_START)
        self._pending: dict[int, list[tuple[Region, str]]] = {}  # by id(code)
        self._placing = renewed_in_fork_child(threading.RLock())

    def should_consider_module(self, name: str) -> bool:
        return any(fnmatchcase(name, region.module_glob) for region in self.regions)

    def module_executed(self, module: types.ModuleType) -> None:
        """Place the regions whose functions `module` defines (again after each statement of
        `__main__`: only code not placed before is looked at)."""
        name = getattr(module, "__name__", "")
        if name.partition(".")[0] in _MACHINERY:
            return
        running: set[int] | None = None
        for index, region in enumerate(self.regions):
            if not fnmatchcase(name, region.module_glob):
                continue
            for code in _codes(vars(module), name, region.qualname_glob):
                if (index, id(code)) not in self._done:
                    self._done.add((index, id(code)))
                    self._found.add(index)
                    if running is None:
                        running = _running_codes() if self._apply else set()
                    if id(code) in running or not self._defer(region, name, code):
                        self._place(region, name, code)

    def _defer(self, region: Region, module: str, code: types.CodeType) -> bool:
        """Place `region` in `code` at the function's next call (or a generator's resumption): a
        glob that selects thousands of functions (`*:*`) costs what the program runs, not a
        parse of every module's source. False when it cannot wait: a dry run places at once,
        and so does a function running now (install() from inside it), which no call announces."""
        if not self._apply:
            return False
        pending = self._pending.get(id(code))
        if pending is None:
            monitor = self._installed_monitor()
            if monitor is None or id(code) in self._attached or not monitor.defer(code, self._place_pending):
                return False
            pending = self._pending[id(code)] = []
        pending.append((region, module))
        return True

    def _place_pending(self, code: types.CodeType) -> None:
        """regions.c at `code`'s first call: the regions waiting for it are placed. Never
        raises into the program's call: a failure is a problem said at exit."""
        with self._placing:  # threads calling it first at once: one places, the others wait
            entries = self._pending.pop(id(code), None)
            if entries is None:
                return
            for region, module in entries:
                try:
                    self._place(region, module, code)
                except Exception as error:  # a placement bug must not break the user's program
                    where = f"{region.where('function')}: {module}:{code.co_qualname}"
                    self.problems.append(f"{where}: not placed: {error}")
            if id(code) not in self._attached and self._monitor is not None:
                self._monitor.forget(code)

    def place_source(self, module: str, source: str, filename: str) -> None:
        """Place the regions in the functions a script's source defines, without running it
        (a dry run of `__main__`)."""
        try:
            top = compile(source, filename, "exec")
        except (SyntaxError, ValueError):
            return
        for index, region in enumerate(self.regions):
            if not fnmatchcase(module, region.module_glob):
                continue
            for code in nested_codes(top):
                if fnmatchcase(code.co_qualname, region.qualname_glob) and (index, id(code)) not in self._done:
                    self._done.add((index, id(code)))
                    self._found.add(index)
                    self._place(region, module, code)

    def unplaced_lines(self) -> list[str]:
        """Regions that could not be placed, and those that found no function (so far). A region
        whose glob selected many functions it could not be placed in is one line, not one per
        function (a `*:*` region once printed thousands)."""
        lines = list(self.problems)
        for index, unplaced in sorted(self._unplaced.items()):
            if len(unplaced) <= _SAID_ONE_BY_ONE:
                continue
            region = self.regions[index]
            first = unplaced[0]
            lines.append(
                f"{first.partition(': ')[0]}: {region.function!r}: {len(unplaced)} functions it selects could not be "
                f"placed (the first: {first.partition(': ')[2]}); -v lists them"
            )
        for index, region in enumerate(self.regions):
            if index not in self._found:
                lines.append(f"{region.where('function')}: {region.function!r} matched no function")
        return lines

    def _place(self, region: Region, module: str, code: types.CodeType) -> None:
        placement = place(region, code)
        key = "lines" if region.lines is not None else "loop" if region.loop is not None else "function"
        if isinstance(placement, str):
            line = f"{region.where(key)}: {module}:{code.co_qualname}: {placement}"
            index = next(i for i, r in enumerate(self.regions) if r is region)
            unplaced = self._unplaced.setdefault(index, [])
            unplaced.append(line)
            self.skipped.append(line)
            if len(unplaced) == _SAID_ONE_BY_ONE + 1:  # from now on one line says them all
                for said in unplaced[:_SAID_ONE_BY_ONE]:
                    self.problems.remove(said)
            elif len(unplaced) <= _SAID_ONE_BY_ONE:
                self.problems.append(line)
            return
        where = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
        self.resolved.append(f"region {module}:{code.co_qualname} ({where}): {placement.description}")
        if self._apply:
            self._attach(region, module, code, placement)

    def _installed_monitor(self) -> RegionMonitor | None:
        """The monitor, installed at the first need; None (and regions off, said) if it cannot be."""
        if self._monitor is None and self._apply:
            problem = monitoring_problem()
            monitor = RegionMonitor()
            problem = problem or monitor.install()
            if problem is not None:
                self.note = f"regions are off: {problem}"
                self._apply = False
                return None
            self._monitor = monitor
        return self._monitor

    def _attach(self, region: Region, module: str, code: types.CodeType, placement: Placement) -> None:
        if self._installed_monitor() is None:
            return
        assert self._monitor is not None
        style = self.config.region_style(region, module)
        domain, color, category = ranges.style_arguments(style)
        text, pieces = _name(
            style.message or _DEFAULT_NAMES.get(placement.kind, "{qualname} lines"), module, code, placement
        )
        window = None
        start, stop = region.capture if region.capture is not None else (-1, -1)
        if region.capture is not None:
            window = CaptureWindow(f"{module}:{code.co_qualname}", start, stop)
        client = ranges.native_client()
        native = client.Region(  # type: ignore[union-attr]
            domain,
            text,
            color,
            category,
            placement.enter,
            placement.lo,
            placement.hi,
            placement.is_loop,
            pieces,
            start,
            stop,
            window,
        )
        self._keep.append(native)
        if window is not None:
            if not self._windows:
                atexit.register(self.close_windows)
            self._windows.append((window, native))
        held = self._attached.setdefault(id(code), [])
        held.append((placement, native))
        # Outermost first: regions.c closes and opens in this order.
        held.sort(key=lambda item: (item[0].lo, -item[0].hi))
        self._monitor.attach(code, tuple(n for _, n in held), any(p.kind == "call" for p, _ in held))

    def iteration_counts(self) -> list[int]:
        """How many iterations (or entries) each attached region began, in attach order."""
        return [native.count for native in self._keep]

    def close_windows(self) -> None:
        """At exit: a window still open closes (the loop ended inside it)."""
        for _, native in self._windows:
            native.close_window()

    def exit_lines(self) -> list[str]:
        """Warnings at exit: regions that found no function or could not be placed, windows
        that never opened."""
        lines = [
            f"warning: {line} in this process" if "matched no function" in line else f"warning: {line}"
            for line in self.unplaced_lines()
        ]
        for window, native in self._windows:
            lines.extend(window.exit_lines(native.count))
        if self.note is not None:
            lines.append(f"warning: {self.note}")
        return lines

    def report_lines(self) -> list[str]:
        """-v: each region placed, the window notes, and why regions are off if they are."""
        lines = list(self.resolved)
        if any(len(unplaced) > _SAID_ONE_BY_ONE for unplaced in self._unplaced.values()):
            lines.extend(f"not placed: {line}" for line in self.skipped)
        for window, _ in self._windows:
            lines.extend(window.notes)
        return lines

    def uninstall(self) -> None:
        self._pending.clear()
        if self._monitor is not None:
            self._monitor.uninstall()
            self._monitor = None


def _name(template: str, module: str, code: types.CodeType, placement: Placement) -> tuple[str, Any]:
    """The region's message, and its pieces around {i} (None when it has no {i})."""
    label = ranges.Label(module, code.co_qualname, os.path.basename(code.co_filename), code.co_firstlineno)
    if placement.kind == "lines" and template == "{qualname} lines":
        template = f"{{qualname}} lines {placement.lo}-{placement.hi}"
    text = template.format(
        i="\0",
        module=label.module,
        qualname=label.qualname,
        name=label.name,
        file=label.file,
        line=label.line,
        **{"class": label.class_},
    )
    if "\0" not in text:
        return text, None
    return text.replace("\0", "{i}"), tuple(piece.encode() for piece in text.split("\0"))


def _running_codes() -> set[int]:
    """The ids of the code objects on every thread's stack now."""
    found: set[int] = set()
    for frame in sys._current_frames().values():
        at: types.FrameType | None = frame
        while at is not None:
            found.add(id(at.f_code))
            at = at.f_back
    return found


def _codes(namespace: dict[str, Any], module: str, glob: str) -> Iterator[types.CodeType]:
    """The code objects of `module`'s functions, methods and nested functions whose
    co_qualname matches `glob`."""
    seen: set[int] = set()
    for value in list(namespace.values()):
        for code in _top_codes(value, module):
            for candidate in (code, *nested_codes(code)):
                if id(candidate) not in seen and fnmatchcase(candidate.co_qualname, glob):
                    seen.add(id(candidate))
                    yield candidate


def _top_codes(value: Any, module: str) -> Iterator[types.CodeType]:
    if isinstance(value, type):
        if getattr(value, "__module__", None) != module:
            return
        for member in list(vars(value).values()):
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            if callable(member) and getattr(member, "__module__", None) == module:
                code = code_of(member)
                if code is not None:
                    yield code
        return
    if callable(value) and getattr(value, "__module__", None) == module:
        code = code_of(value)
        if code is not None:
            yield code
