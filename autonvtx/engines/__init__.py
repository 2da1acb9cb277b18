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

`wrap` replaces functions with transparent wrappers (every Python version); `plan` records.
"""
from __future__ import annotations

from typing import Any, Protocol

from autonvtx.config import Rule

# A class attribute of every wrapper type of autonvtx's (rules' and plugins'): the walk knows
# "already wrapped" by it without importing wrapt, and nothing is wrapped twice.
RANGE_MARK = "__autonvtx_range__"


class Engine(Protocol):
    changes_namespaces: bool

    def existing(self, func: Any) -> Any | None: ...

    def apply(self, func: Any, module: str, qualname: str, rule: Rule) -> Any | None: ...

    def bind(self, namespace: dict[str, Any], attr: str, value: Any) -> None: ...

    def set_member(self, cls: type, attr: str, value: Any) -> None: ...

    def remember_reference(self, func: Any, module: Any, attr: str) -> None: ...
