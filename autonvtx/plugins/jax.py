"""JAX plugin: a range around each call of a `jax.jit` function, and around the calls that
wait for results.

What gets a range:

- each call of a function made by `jax.jit` after `import jax` (`@jax.jit`,
  `jax.jit(f, static_argnums=...)`, `@partial(jax.jit, ...)`, `from jax import jit`), named
  like JAX names it: ``jit(train_step)``; category "jit";
- ``jax.block_until_ready``, ``Array.block_until_ready`` (`x.block_until_ready()`) and
  ``jax.device_get``: the places where the host waits for the device; category "sync".

What a `jit(...)` range measures is **dispatch**: JAX runs compiled code asynchronously, so
the call returns once the computation is enqueued, and the range ends then, long before the
device has finished (the device time shows on the GPU rows of Nsight Systems, and the wait
for it in the next ``...block_until_ready`` / ``jax.device_get`` range, or wherever the
program converts a result to NumPy or prints it). The first call for new argument shapes, dtypes or
static arguments also traces the Python function and compiles it with XLA, inside the same
range: expect a long first range, then short ones; a range that stays long on every call
means recompilation. Calls made while JAX is tracing (a jitted function called inside
another one, or under `vmap`/`grad` tracing) get no range: they are inlined, not dispatched.

Functions jitted inside JAX and libraries before `import jax` finished (jax.numpy's own
jitted functions) are not affected: only `jax.jit` as the program calls it is.

Options (`[autonvtx.plugin.jax]`): `sync` (default true: the block_until_ready/device_get
ranges), `domain` (default: the global domain).
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autonvtx.config import RangeStyle
    from autonvtx.plugins import PluginContext
    from autonvtx.ranges import Emitter

TRIGGER = "jax"

OPTIONS: dict[str, type] = {"sync": bool, "domain": str}


def activate(framework: types.ModuleType, context: PluginContext) -> None:
    jax = framework
    options = context.read_options(OPTIONS)
    domain = options.get("domain")
    _patch_jit(jax, context, context.style(domain=domain, category="jit", module="jax"))
    if options.get("sync", True):
        _patch_sync(jax, context, context.style(domain=domain, category="sync", module="jax"))


def plan(framework: types.ModuleType, context: PluginContext) -> list[tuple[str, str, str]]:
    """What activate() would range, for `autonvtx list`."""
    options = context.read_options(OPTIONS)
    entries = [("jax", "jit", "each dispatch of a function it makes, named 'jit(name)'")]
    if options.get("sync", True):
        entries += [
            ("jax", "block_until_ready", "'jax.block_until_ready'"),
            ("jax", "device_get", "'jax.device_get'"),
            ("jax._src.array", "ArrayImpl.block_until_ready", "'Array.block_until_ready'"),
        ]
    return entries


def _is_dispatching_function(jax: types.ModuleType) -> Callable[[tuple[Any, ...]], bool]:
    """A check that a call is a real dispatch, not a call made while JAX traces."""
    # jax._src.core.trace_state_clean(): True when no transformation is tracing (JAX 0.4.36+
    # "stackless" core; older releases have the same function). Private, hence the fallback:
    # a call with a Tracer among its positional arguments is being traced.
    core = sys.modules.get("jax._src.core")
    clean = getattr(core, "trace_state_clean", None)
    if callable(clean):

        def dispatching(args: tuple[Any, ...]) -> bool:
            return bool(clean())

        return dispatching
    tracer = getattr(getattr(jax, "core", None), "Tracer", None)
    if not isinstance(tracer, type):
        return _always

    def no_tracer_among(args: tuple[Any, ...]) -> bool:
        return not any(isinstance(a, tracer) for a in args)

    return no_tracer_among


def _always(args: tuple[Any, ...]) -> bool:
    return True


def _display_name(fun: Any) -> str:
    qualname = getattr(fun, "__qualname__", None) or getattr(fun, "__name__", None)
    if not isinstance(qualname, str):
        return type(fun).__name__
    # "make_step.<locals>.step" reads as "step", as JAX itself shows it.
    return qualname.rpartition("<locals>.")[2]


def _patch_jit(jax: types.ModuleType, context: PluginContext, style: RangeStyle) -> None:
    dispatching = _is_dispatching_function(jax)

    def ranged(jitted: Any, fun: Any) -> Any:
        try:
            emitter = context.emitter(f"jit({_display_name(fun)})", style)
        except Exception as exc:  # never break the program's jax.jit
            context.note(f"jit({fun!r}): no range ({type(exc).__name__}: {exc})")
            return jitted

        def emitter_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Emitter | None:
            return emitter if dispatching(args) else None

        # The rules' wrapper (a wrapt proxy): .lower(), .trace(), .eval_shape(),
        # .clear_cache(), binding as a method and everything else the jitted object offers
        # go straight to it.
        return context.wrap_callable(jitted, emitter_for)

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def jit(*args: Any, **kwargs: Any) -> Any:
            made = original(*args, **kwargs)
            if args:
                return ranged(made, args[0])
            if "fun" in kwargs:  # older JAX accepts fun= by keyword
                return ranged(made, kwargs["fun"])

            # jax.jit(static_argnums=...) without the function: a decorator.
            @functools.wraps(made)
            def decorator(fun: Any) -> Any:
                return ranged(made(fun), fun)

            return decorator

        return jit

    if context.replace(jax, "jit", make):  # or notes why not
        context.note("jax.jit: a range per dispatch of each jitted function")


def _patch_sync(jax: types.ModuleType, context: PluginContext, style: RangeStyle) -> None:
    wrapped = []
    if context.wrap_function(jax, "block_until_ready", "jax.block_until_ready", style):
        wrapped.append("jax.block_until_ready")
    if context.wrap_function(jax, "device_get", "jax.device_get", style):
        wrapped.append("jax.device_get")
    # Arrays are jax._src.array.ArrayImpl, a Python class (its base is the C++ Array).
    array = sys.modules.get("jax._src.array")
    impl = getattr(array, "ArrayImpl", None)
    if isinstance(impl, type) and context.wrap_function(impl, "block_until_ready", "Array.block_until_ready", style):
        wrapped.append("Array.block_until_ready")
    if wrapped:
        context.note(f"waits: {', '.join(wrapped)}")
