"""What a value's type makes it for the walk (data, a class, a function, a builtin, ...):
decided once per type, not per value (a package targeted wholesale has tens of thousands of
globals and class members, nearly all data). The native walk (autonvtx/_native/uniform.c)
reads the same table and numbers."""

from __future__ import annotations

import functools
import types

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from typing import Any

from autonvtx.engines import RANGE_MARK, loaded_function_wrapper

DATA, CLASS, RANGE_WRAPPER, FUNCTION, BUILTIN, STATIC_OR_CLASS, PROPERTY, OTHER_CALLABLE = range(8)
KINDS: dict[type, int] = {}

_BUILTIN_TYPES = (types.BuiltinFunctionType,)
_METHOD_LIKE = (functools.cached_property, functools.partialmethod, functools.singledispatchmethod)


def is_builtin(value: Any) -> bool:
    return kind_of(type(value)) == BUILTIN


def kind_of(kind: type) -> int:
    try:
        return KINDS[kind]
    except KeyError:
        pass
    if issubclass(kind, type):
        found = CLASS
    elif any(RANGE_MARK in vars(k) for k in kind.__mro__):
        found = RANGE_WRAPPER
    elif kind is types.FunctionType or is_wrapt_function_wrapper(kind):
        found = FUNCTION
    elif kind is staticmethod or kind is classmethod:
        found = STATIC_OR_CLASS
    elif issubclass(kind, property):
        found = PROPERTY
    elif is_builtin_type(kind):
        found = BUILTIN
    elif issubclass(kind, _METHOD_LIKE) or any("__call__" in vars(k) for k in kind.__mro__):
        found = OTHER_CALLABLE  # callable(value), from its type as callable() decides
    else:
        found = DATA
    if len(KINDS) < 10_000:  # types made on the fly are not kept alive without bound
        KINDS[kind] = found
    return found


def is_builtin_type(kind: type) -> bool:
    # Cython compiles a module's functions to its own function type, one per Cython version.
    # NumPy >= 1.25 makes its public functions C callables of type _ArrayFunctionDispatcher
    # (NEP 18 dispatch), which behave like builtins.
    return (
        kind in _BUILTIN_TYPES
        or kind.__name__.endswith("cython_function_or_method")
        or kind.__name__ == "_ArrayFunctionDispatcher"
    )


def is_wrapt_function_wrapper(kind: type) -> bool:
    """Whether `kind` is a wrapt FunctionWrapper (a wrapt decorator's): a function to wrap.
    Asked of what is loaded, not by importing wrapt: a program that never imported wrapt has
    none, and a run that wraps nothing never pays for importing it."""
    wrapper = loaded_function_wrapper()
    return wrapper is not None and issubclass(kind, wrapper)
