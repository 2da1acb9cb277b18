"""Engines apply what the walk decided: the walk says which function gets which range, an
engine makes it so (and a plan engine only records it, for `list`, `--dry-run` and `export`).

An engine has these methods, called by `autonvtx.walk.Walker`:

    existing(func) -> the stand-in already made for `func` (a re-export is bound to it), or None
    apply(func, module, qualname, rule) -> what the walk binds where `func` was found, or None
                        when nothing is to be bound (the function itself stays in place)
    bind(namespace, attr, value)       put `value` in a module's namespace
    set_member(cls, attr, value)       put `value` on a class without running its metaclass
    remember_reference(func, module, attr)
                        `module.attr` holds `func`, defined in a target not yet walked: rebind
                        it to func's stand-in once there is one
    changes_namespaces  whether the walk may rebind module names (a plan may not)

`wrap` replaces functions with transparent wrappers (every Python version); `code` turns on
sys.monitoring events for selected code objects and replaces nothing (3.12+; it also decides
about functions nested in others: `reaches_nested`, `apply_code(code, ...)`); `plan` records.
"""
from __future__ import annotations

import sys
import types
from typing import Any, Protocol

from autonvtx.config import Rule

# A class attribute of every wrapper type of autonvtx's (rules' and plugins'): the walk knows
# "already wrapped" by it without importing wrapt, and nothing is wrapped twice.
RANGE_MARK = "__autonvtx_range__"


def is_marked(value: Any) -> bool:
    """Whether `value` is autonvtx's own: an instance of a wrapper type carrying RANGE_MARK (a
    class attribute) or a replacement function carrying it (a function attribute)."""
    if type(value) is types.FunctionType:
        return RANGE_MARK in value.__dict__
    return any(RANGE_MARK in vars(k) for k in type(value).__mro__)


class Engine(Protocol):
    changes_namespaces: bool

    def existing(self, func: Any) -> Any | None: ...

    def apply(self, func: Any, module: str, qualname: str, rule: Rule) -> Any | None: ...

    def bind(self, namespace: dict[str, Any], attr: str, value: Any) -> None: ...

    def set_member(self, cls: type, attr: str, value: Any) -> None: ...

    def remember_reference(self, func: Any, module: Any, attr: str) -> None: ...


ENGINES = ("auto", "code", "wrap")


def choose_engine(setting: str) -> tuple[str, str | None]:
    """The engine `[autonvtx] engine = setting` gives here: ("code" or "wrap", None), or
    ("wrap", the one line saying why the code engine cannot run) when it was wanted and cannot.
    `auto` is the code engine on 3.12+ and the wrap engine before, silently."""
    if setting == "wrap":
        return "wrap", None
    if setting == "auto" and sys.version_info < (3, 12):
        return "wrap", None
    from autonvtx import ranges  # the native client says whether its callbacks are there

    reason = ranges.monitoring_available()
    if reason is None:
        return "code", None
    return "wrap", f"engine {setting!r}: the code engine cannot run ({reason}); using the wrap engine"
