"""Engines apply what the walk decided: the walk says which function gets which range, an
engine makes it so (and a plan engine only records it, for `list`, `--dry-run` and `export`).

An engine is chosen as a record (`kinds.EngineKind`, as coverage.py's core.py chooses its
tracer): `kinds.choose_engine()` returns it with the reason when it is not the one asked for,
and callers read its capabilities and call its factory. The engine it builds has these
members, called by `autonvtx.walk.Walker` (the `Engine` protocol):

    existing(func) -> the stand-in already made for `func` (a re-export is bound to it), or None
    apply(func, module, qualname, rule) -> what the walk binds where `func` was found, or None
                        when nothing is to be bound (the function itself stays in place)
    bind(namespace, attr, value)       put `value` in a module's namespace
    set_member(cls, attr, value)       put `value` on a class without running its metaclass
    remember_reference(func, module, attr)
                        `module.attr` holds `func`, defined in a target not yet walked: rebind
                        it to func's stand-in once there is one
    changes_namespaces  whether the walk may rebind module names (a plan may not)
    reaches_nested      whether it ranges code objects (and so decides about nested functions)
    apply_code(code, module, qualname, rule)   range every run of `code` (reaches_nested only)
    restore()           put back everything it changed; how many functions it restored

`wrap` replaces functions with transparent wrappers (every Python version); `code` turns on
sys.monitoring events for selected code objects and replaces nothing (3.12+; it also decides
about functions nested in others: `reaches_nested`, `apply_code(code, ...)`); `plan` records.
"""

from __future__ import annotations

import sys
import types

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from typing import Any, Protocol
else:
    Protocol = object  # Engine is a plain class at run time (no isinstance() asks for it)

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
    """What the walk asks of an engine (every engine has all of it; `kind` says which to use)."""

    # Whether the walk may rebind module names and class members (a plan may not).
    changes_namespaces: bool
    # Whether it ranges code objects: then it also decides about functions nested in others,
    # and the walk hands it Python functions' code through apply_code().
    reaches_nested: bool

    def existing(self, func: Any) -> Any | None: ...

    def apply(self, func: Any, module: str, qualname: str, rule: Rule) -> Any | None: ...

    def apply_code(self, code: types.CodeType, module: str, qualname: str, rule: Rule) -> None: ...

    def bind(self, namespace: dict[str, Any], attr: str, value: Any) -> None: ...

    def set_member(self, cls: type, attr: str, value: Any) -> None: ...

    def remember_reference(self, func: Any, module: Any, attr: str) -> None: ...

    def restore(self) -> int: ...


# The settings `[autonvtx] engine` and `--engine` accept: "auto" and the name of each kind in
# `autonvtx.engines.kinds` (tests/test_engines.py holds them equal).
ENGINES = ("auto", "code", "wrap")


def loaded_function_wrapper() -> type | None:
    """wrapt's FunctionWrapper type when wrapt (or the part the wrap engine loads) is loaded,
    else None; imports nothing (wrapt 2.x keeps it in `wrapt.__wrapt__`, and its C type in
    `wrapt._wrappers`, all that engines.wraptcore loads; 1.x in `wrappers`)."""
    for name in ("wrapt.__wrapt__", "wrapt._wrappers", "wrapt.wrappers"):
        module = sys.modules.get(name)
        kind = vars(module).get("FunctionWrapper") if module is not None else None
        if isinstance(kind, type):
            return kind
    return None


def key_of(value: Any) -> Any:
    """What an engine's tables know `value` by (wrapping.c's too): a plain function itself
    (identity, and no int per function), anything else its id() (a proxy compares as what it
    wraps)."""
    return value if type(value) is types.FunctionType else id(value)
