"""The code engine (Python 3.12+): a selected function's code object gets its range through
`sys.monitoring` (PEP 669), so no function object is replaced. Every function ever made from
that code has the range, however it is referenced (a registry, `from x import f` taken earlier,
a `functools.partial`, a closure), and `is`, `id`, pickling and `sys._getframe` see plain
Python. Builtins (`builtins = true` rules) have no code object: they keep the wrap engine."""

from __future__ import annotations

import os
import types

from autonvtx import ranges
from autonvtx.config import Config, Rule, auto_color

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from autonvtx.engines.wrap import WrapEngine


class CodeEngine:
    """Monitors the code of each selected function with autonvtx's native sys.monitoring
    callbacks; binds nothing. `monitor` is an installed `ranges.CodeMonitor`."""

    changes_namespaces = True  # it writes nothing, but a builtin's fallback wrapper is bound
    reaches_nested = True

    def __init__(self, config: Config, monitor: ranges.CodeMonitor, *, restorable: bool = False) -> None:
        self._config = config
        self._monitor = monitor
        self._restorable = restorable
        self._styles: dict[tuple[int, str], Any] = {}
        # Per rule: its style for some module, and whether the color is the module's own
        # ("auto"): then only the color differs from one module to the next.
        self._rule_styles: dict[int, tuple[Any, bool]] = {}
        # Per rule, the native walk by color: hundreds of modules of a package targeted
        # wholesale share a few (the auto colors are a small palette). Emptied when a builtin's
        # stand-in appears (the walks made since look for stand-ins); modulepath.c reads it too.
        self.uniform_walkers: dict[int, dict[int, Any]] = {}
        self._fallback: WrapEngine | None = None

    def apply(self, func: Any, module: str, qualname: str, rule: Rule) -> Any:
        """A builtin (the walk hands Python functions to apply_code): only a wrapper can put
        a range around it."""
        return self._wrap_engine().apply(func, module, qualname, rule)

    def apply_code(self, code: types.CodeType, module: str, qualname: str, rule: Rule) -> None:
        """Give every run of `code` the range `rule` styles for `module:qualname`; the first
        decision about a code object stands (a factory's inner function is met both by the
        name it is bound to and inside its factory)."""
        if self._monitor.is_monitored(code):
            return
        style, domain, color, category = self._styled(rule, module)
        if style.message == "{qualname}":
            # The code's own string when it is the name (one less string per function).
            message = code.co_qualname if code.co_qualname == qualname else qualname
        else:
            label = ranges.Label(module, qualname, os.path.basename(code.co_filename), code.co_firstlineno)
            message = label.format(style.message)
        # A bare Range, not an Emitter: thousands of code objects get one when a package is
        # targeted wholesale, and the callbacks need nothing else.
        self._monitor.monitor_new(code, ranges.prepared_range(domain, message, color, category))

    def uniform_walk(self, module: str, rule: Rule) -> Callable[[list[tuple[str, Any]], tuple[Any, ...]], None] | None:
        """The native walk of `module`, which `rule` selects as a whole (apply_code() for every
        plain function it meets, in C: ranges.CodeMonitor.uniform_walker), or None where it
        cannot serve: a message template other than the name, or no native client. Made once
        per rule and color, not per module (a package targeted wholesale has hundreds)."""
        ruled = self._rule_styles.get(id(rule))
        if ruled is None:
            setting = self._config.color_setting(rule)
            ruled = self._rule_styles[id(rule)] = (self._styled(rule, module), setting == "auto")
        (style, domain, color, category), auto = ruled
        if style.message != "{qualname}" or rule.shapes:
            return None
        if auto:
            color = auto_color(module)  # what Config.style() gives this module
        walkers = self.uniform_walkers.get(id(rule))
        if walkers is None:
            walkers = self.uniform_walkers[id(rule)] = {}
        walker: Callable[[list[tuple[str, Any]], tuple[Any, ...]], None] | None = walkers.get(color)
        if walker is None:
            walker = walkers[color] = self._monitor.uniform_walker(
                domain, color, category, no_existing=self._fallback is None
            )
        return walker

    def _styled(self, rule: Rule, module: str) -> tuple[Any, str, int, int]:
        styled = self._styles.get((id(rule), module))
        if styled is None:
            style = self._config.style(rule, module)
            styled = self._styles[id(rule), module] = (style, *ranges.style_arguments(style))
        return styled

    def existing(self, func: Any) -> Any:
        return self._fallback.existing(func) if self._fallback is not None else None

    def bind(self, namespace: dict[str, Any], attr: str, value: Any) -> None:
        self._wrap_engine().bind(namespace, attr, value)

    def set_member(self, cls: type, attr: str, value: Any) -> None:
        self._wrap_engine().set_member(cls, attr, value)

    def remember_reference(self, func: Any, module: Any, attr: str) -> None:
        pass  # a monitored code object needs no rebinding: every reference runs it

    def restore(self) -> int:
        """Stop monitoring (and unwrap the builtins' fallback wrappers)."""
        restored = self._monitor.monitored()
        self._monitor.uninstall()
        if self._fallback is not None:
            restored += self._fallback.restore()
        return restored

    def _wrap_engine(self) -> WrapEngine:
        if self._fallback is None:
            from autonvtx.engines.wrap import WrapEngine  # wrapt only for a builtin

            self._fallback = WrapEngine(self._config, restorable=self._restorable)
            for walkers in self.uniform_walkers.values():
                walkers.clear()  # made with no_existing: now there is a stand-in to look for
        return self._fallback
