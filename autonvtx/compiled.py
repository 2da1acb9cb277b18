"""Module-level callables a compiler made from a function (`step = jax.jit(f)`, `@numba.njit`):
not functions, so the walk passes them by; what `-vv` says of them, and of a plugin's range
around one."""

from __future__ import annotations

import sys
import types

# Frameworks whose preset ranges the calls of what they compile, by the top package of the type.
_PRESETS = {"jax": "jax", "jaxlib": "jax", "numba": "numba"}


def maker(value: object) -> str:
    """`jaxlib's PjitFunction`: the package and type that made `value`."""
    kind = type(value)
    return f"{kind.__module__.partition('.')[0]}'s {kind.__name__}"


def compiled_callables(module_name: str, known: set[str]) -> list[tuple[str, str]]:
    """(name, reason) for each name of the module bound to an object made from one of the
    module's own functions (its `__wrapped__`), other than those in `known`. Read when -vv
    prints, never during the walk."""
    namespace = getattr(sys.modules.get(module_name), "__dict__", None)
    if not isinstance(namespace, dict):
        return []
    found = []
    for name, value in list(namespace.items()):
        if name in known or isinstance(value, (types.FunctionType, type, types.ModuleType)):
            continue
        try:
            inner = getattr(value, "__wrapped__", None)
        except Exception:  # a proxy's __getattr__: not ours to explain
            continue
        if not isinstance(inner, types.FunctionType) or inner.__module__ != module_name:
            continue
        preset = _PRESETS.get(type(value).__module__.partition(".")[0])
        advice = (
            f"--preset {preset} ranges each of its calls"
            if preset
            else "a framework preset may range them (autonvtx presets)"
        )
        found.append(
            (
                name,
                f"compiled: {maker(value)} made from {inner.__qualname__}, not a function; its calls"
                f" run compiled code, not {inner.__qualname__}'s: {advice}",
            )
        )
    return found


def already_ranged(value: object) -> str:
    """The reason a wrapper that carries a range already is left alone: whose it is."""
    inner = getattr(value, "__wrapped__", None)
    if inner is None or isinstance(inner, types.FunctionType):
        return "already wrapped"
    return f"already ranged: a plugin's range around {maker(inner)} (each call)"
