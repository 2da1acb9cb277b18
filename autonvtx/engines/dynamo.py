"""torch.compile (dynamo) sees through the wrap engine's wrappers to the functions they wrap.

A wrapper proxies `__class__`, so dynamo takes it for a plain function and inlines it; for a
function with a closure it then guards on `wrapper.__closure__` (and `__code__`) with
accessors written in C that accept only real functions, and compiling fails
("ClosureGuardAccessor: Not a function", torch 2.13, _dynamo/guards.py): a decorated module
function called from compiled code, a method of a `transformers` layer. Dynamo unwraps its
own wrappers the same way (its `_torchdynamo_inline` attribute), but that attribute would
have to sit in the wrapped function's `__dict__`, which `functools.wraps` copies onto later
wrappers (dynamo would then trace past them). So where dynamo makes a function variable
(`UserFunctionVariable`, and `UserMethodVariable` for methods; globals reach them too),
autonvtx's wrapper is replaced by the function it wraps and the source by
`<source>.__wrapped__`: dynamo inlines and guards the real function. Inside a compiled graph
there is no range (an NVTX call cannot be traced; the torch plugin's ranges leave compiled
code alone the same way); called eagerly, the wrapper ranges as before.

These names are private to torch: where one is missing or differs (another release),
nothing is changed there.
"""

from __future__ import annotations

import types

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

from autonvtx.engines import is_marked

FUNCTIONS = "torch._dynamo.variables.functions"
_PATCHED = "__autonvtx_sees_through__"


def is_wrapper(fn: Any) -> bool:
    """Whether `fn` is one of autonvtx's wrappers around a function (not a replacement
    function of a plugin, which dynamo traces as any function)."""
    return type(fn) is not types.FunctionType and is_marked(fn) and hasattr(fn, "__wrapped__")


def see_through_wrappers(functions: types.ModuleType) -> None:
    """Make dynamo's function variables (module `FUNCTIONS`) unwrap autonvtx's wrappers."""
    from torch._dynamo.source import AttrSource  # imported by `functions` already

    def inner_source(source: Any) -> Any:
        return None if source is None else AttrSource(source, "__wrapped__")

    user_function = getattr(functions, "UserFunctionVariable", None)
    user_method = getattr(functions, "UserMethodVariable", None)
    if isinstance(user_function, type):
        _patch_init(user_function, _function_init(inner_source))
    if isinstance(user_method, type):
        _patch_init(user_method, _method_init(inner_source))


def _patch_init(cls: type, make: Callable[[Callable[..., None]], Callable[..., None]]) -> None:
    original = vars(cls).get("__init__")
    if not callable(original) or getattr(original, _PATCHED, False):
        return
    patched = make(original)
    setattr(patched, _PATCHED, True)  # once per process, whoever asks again
    patched.__wrapped__ = original  # type: ignore[attr-defined]
    type.__setattr__(cls, "__init__", patched)


def _function_init(inner_source: Callable[[Any], Any]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def make(original: Callable[..., None]) -> Callable[..., None]:
        def __init__(self: Any, fn: Any, *args: Any, **kwargs: Any) -> None:
            if is_wrapper(fn):
                fn = fn.__wrapped__
                if kwargs.get("source") is not None:
                    kwargs["source"] = inner_source(kwargs["source"])
            original(self, fn, *args, **kwargs)

        return __init__

    return make


def _method_init(inner_source: Callable[[Any], Any]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    # A method's guards read its function through `source_fn` (the class's __dict__ entry),
    # or `<bound method source>.__func__` without one (UserMethodVariable.__init__).
    def make(original: Callable[..., None]) -> Callable[..., None]:
        def __init__(self: Any, fn: Any, obj: Any, source_fn: Any = None, **kwargs: Any) -> None:
            if is_wrapper(fn):
                fn = fn.__wrapped__
                if source_fn is None and kwargs.get("source") is not None:
                    from torch._dynamo.source import AttrSource

                    source_fn = AttrSource(kwargs["source"], "__func__")
                source_fn = inner_source(source_fn)
            original(self, fn, obj, source_fn, **kwargs)

        return __init__

    return make
