"""Code objects of functions: the code a call runs, and the code defined inside it (the walk
selects nested functions by their `co_qualname`; the code engine monitors code objects)."""

from __future__ import annotations

import types

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from typing import Any

_CODE = types.CodeType


def code_of(func: Any) -> types.CodeType | None:
    """The code object a call of `func` runs: a function's own, or the function a wrapt
    decorator's wrapper (or any `__wrapped__` chain) leads to; None for builtins."""
    seen = 0
    while type(func) is not types.FunctionType and seen < 100:
        inner = getattr(func, "__wrapped__", None)
        if inner is None:
            return None
        func, seen = inner, seen + 1
    code = func.__code__
    return code if isinstance(code, types.CodeType) else None


def nested_codes(code: types.CodeType) -> list[types.CodeType]:
    """The code objects defined inside `code`, at any depth (functions, methods of classes
    defined in functions, lambdas, generator expressions), outermost first."""
    if _CODE not in map(type, code.co_consts):
        return []  # most functions define none: one scan in C, no Python loop
    found: list[types.CodeType] = []
    pending = [code]
    while pending:
        current = pending.pop()
        for const in current.co_consts:
            if type(const) is _CODE:
                found.append(const)
                pending.append(const)
    return found


def code_named(func: Any, qualname: str) -> types.CodeType | None:
    """The code object that runs as `qualname`: the one defining that name, on `func` or along
    its `__wrapped__` chain (functools.wraps); else `func`'s own code when it is no closure
    or is generated (code compiled with exec, as attrs and dataclasses make `__init__`, is
    named by the function it became). None for a closure of another name: a factory's function, or a decorator's
    wrapper without `__wrapped__`, whose code serves every function it decorates."""
    own: types.CodeType | None = None
    for _ in range(100):
        code: types.CodeType | None = func.__code__ if type(func) is types.FunctionType else None
        if code is not None:
            if code.co_qualname == qualname:
                return code
            if own is None:
                own = code
        func = getattr(func, "__wrapped__", None)
        if func is None:
            break
    if own is not None and ("<locals>" not in own.co_qualname or generated(own)):
        return own
    return None


def generated(code: types.CodeType) -> bool:
    """Whether `code` was compiled from text a library generated (its file name in angle
    brackets, as `exec` of a string gives): dataclasses' `__init__` is a closure of
    `__create_fn__`, but each class's is compiled for it alone, so its function names it.
    Frozen modules' code (`<frozen ...>`) is written code."""
    filename = code.co_filename
    return filename.startswith("<") and filename.endswith(">") and not filename.startswith("<frozen ")
