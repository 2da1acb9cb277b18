"""torch.compile (dynamo) sees through the wrap engine's wrappers to the functions they wrap.

A wrapper proxies `__class__`, so dynamo takes it for a plain function and inlines it; for a
function with a closure it then guards on `wrapper.__closure__` with an accessor written in C
that accepts only real functions, and compiling fails ("ClosureGuardAccessor: Not a function",
torch 2.13, _dynamo/guards.py). Dynamo's variable builder already unwraps its own wrappers
through `unwrap_with_attr_name_if_wrapper` (value, attribute name); autonvtx's wrappers are
unwrapped the same way, through `__wrapped__`, so dynamo inlines and guards the function
itself. Inside a compiled graph there is no range (an NVTX call cannot be traced; the torch
plugin's ranges skip compiled code the same way); called eagerly the wrapper ranges as before.

The name is private to torch: where it is missing (another torch version), nothing is done.
"""
from __future__ import annotations

import types
from typing import Any, Callable

from autonvtx.engines import is_marked

BUILDER = "torch._dynamo.variables.builder"
_UNWRAP = "unwrap_with_attr_name_if_wrapper"
_PATCHED = "__autonvtx_sees_through__"


def see_through_wrappers(builder: types.ModuleType) -> None:
    """Make dynamo's variable builder (module `BUILDER`) unwrap autonvtx's wrappers."""
    original = getattr(builder, _UNWRAP, None)
    if not callable(original) or getattr(original, _PATCHED, False):
        return
    builder.__dict__[_UNWRAP] = _unwrapping(original)


def _unwrapping(original: Callable[[Any], tuple[Any, str | None]]) -> Callable[[Any], tuple[Any, str | None]]:
    def unwrap_with_attr_name_if_wrapper(fn: Any) -> tuple[Any, str | None]:
        if is_marked(fn) and type(fn) is not types.FunctionType:
            inner = getattr(fn, "__wrapped__", None)
            if inner is not None:
                # The source becomes `<source>.__wrapped__`: guards read the real function.
                return inner, "__wrapped__"
        return original(fn)

    setattr(unwrap_with_attr_name_if_wrapper, _PATCHED, True)  # patched once per process
    unwrap_with_attr_name_if_wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return unwrap_with_attr_name_if_wrapper
