"""Turn a selected function into NVTX ranges: attributes prepared once, push/pop per call."""
from __future__ import annotations

import os
import types
from functools import partial
from types import ModuleType
from typing import Any, Callable, Coroutine, Generator, NamedTuple

from autonvtx import environment
from autonvtx.config import RangeStyle


def _load_client() -> ModuleType | None:
    try:
        from autonvtx import _nvtxclient
    except ImportError:  # not built (no compiler, no NVTX headers): the pure-Python path serves
        return None
    return _nvtxclient


# autonvtx's native NVTX client, or None when it is not built.
_client = _load_client()
# The client when it serves the per-call range path; None (AUTONVTX_PURE_PYTHON=1, or not
# built) sends every range through the `nvtx` package instead, with the same events (same
# domain, registered message, color and category).
_native = None if os.environ.get(environment.PURE_PYTHON, "") not in ("", "0") else _client

Thunk = Callable[[], None]
# wrapt's wrapper signature: (wrapped, instance, args, kwargs) -> result.
Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


# Label and Emitter are made once per wrapped function, thousands of times when a package is
# targeted wholesale: named tuples build in a fraction of a frozen dataclass's time
# (benchmarks/wholesale.py).
class Label(NamedTuple):
    """What a range's message template can name about the function it covers."""

    module: str
    qualname: str
    file: str
    line: int

    @property
    def name(self) -> str:
        return self.qualname.rpartition(".")[2]

    @property
    def class_(self) -> str:
        head, _, _ = self.qualname.rpartition(".")
        # "f.<locals>.g" has no class: only a dotted prefix made of class names is one.
        return "" if "<locals>" in head else head

    def format(self, template: str) -> str:
        if template == "{qualname}":  # the default: no formatting needed
            return self.qualname
        return template.format(
            module=self.module,
            qualname=self.qualname,
            name=self.name,
            file=self.file,
            line=self.line,
            **{"class": self.class_},
        )


def label_for(func: Any, module: str, qualname: str) -> Label:
    """The label of `func`, known in `module` as `qualname`; file and line come from its code."""
    code = getattr(func, "__code__", None)
    filename = getattr(code, "co_filename", "") or ""
    return Label(module, qualname, os.path.basename(filename), getattr(code, "co_firstlineno", 0) or 0)


class Emitter(NamedTuple):
    """A range ready to emit: `push()` and `pop()` take no arguments and allocate nothing.
    `native` is the native client's prepared range when it serves this emitter."""

    message: str
    domain: str
    push: Thunk
    pop: Thunk
    native: Any = None


def _nothing() -> None:
    pass


def is_native() -> bool:
    """Whether ranges go through autonvtx's native client (else through the `nvtx` package)."""
    return _native is not None


_new_tuple = tuple.__new__  # a NamedTuple without its Python-level __new__ (thousands are made)


def emitter_for(style: RangeStyle, label: Label) -> Emitter:
    """Register the message string and category, build the event attributes, bind push/pop."""
    return emitter_with_message(style, label.format(style.message))


def emitter_with_message(style: RangeStyle, message: str) -> Emitter:
    """emitter_for() with the message already made from the style's template."""
    if _native is not None:
        return _native_emitter(_native, style, message)
    # Imported here, not at module level: `nvtx` imports numpy when it is installed, and the
    # import hook must be in place before anything heavy is imported (numpy may be a target).
    from nvtx._lib import lib

    domain = _domain(style.domain)
    if domain is lib.dummy_domain:
        # No NVTX tool is attached (nsys absent, recorder not injected): nothing would be seen.
        return Emitter(message, style.domain, _nothing, _nothing)
    attributes = domain.get_event_attributes(
        message=message, color=style.color, category=style.category
    )
    # The module-level push_range/pop_range take the C handles directly; Domain.push_range
    # takes **kwargs and costs a dict per call. partial() keeps the call in C.
    return Emitter(
        message,
        style.domain,
        partial(lib.push_range, attributes, domain.handle),
        partial(lib.pop_range, domain.handle),
    )


def _native_emitter(client: ModuleType, style: RangeStyle, message: str) -> Emitter:
    prepared = client.Range(style.domain, message, style.color, _category_id(style))
    emitter: Emitter = _new_tuple(
        Emitter, (message, style.domain, prepared.push, prepared.pop, prepared)
    )
    return emitter


def _category_id(style: RangeStyle) -> int:
    if style.category is None:
        return 0
    # Category ids come from the `nvtx` package's Domain, which numbers and names them per
    # domain: the program's own nvtx.annotate(category=...) then agrees with autonvtx on
    # every id (two numberings would name one id twice, the last name winning).
    domain = _domain(style.domain)
    return domain.get_category_id(style.category) if _is_enabled(domain) else 0


def style_arguments(style: RangeStyle) -> tuple[str, int, int]:
    """(domain, color, category id): what a ranged_wrapper_factory() maker takes of a style,
    worked out once per style rather than once per function."""
    return style.domain, style.color, _category_id(style)


RangedMaker = Callable[[Any, str, str, int, int], Any]


def ranged_wrapper_factory(wrapper_type: type | None) -> RangedMaker | None:
    """`make(func, domain, message, color, category)`: a `wrapper_type` (from
    ranged_function_type) around `func`, whose calls push, call and pop in C; None when `func`
    suspends (generators and coroutines get a range per resumption: wrapper_for()). One C call
    per function, no Python frame: the instrumenter makes thousands when a package is
    targeted wholesale. None without the native client."""
    # getattr: an extension built from older sources (an editable install not rebuilt) lacks
    # it, and the slower path serves the same ranges.
    native_make = getattr(_native, "ranged_wrapper", None)
    if native_make is None or wrapper_type is None:
        return None
    make: RangedMaker = partial(native_make, wrapper_type)
    return make


def _is_enabled(domain: Any) -> bool:
    from nvtx._lib import lib

    return domain is not lib.dummy_domain


def ranged_function_type(base: type, name: str) -> type | None:
    """A subclass `name` ("module.Class") of `base` (autonvtx's wrapt FunctionWrapper for plain
    functions) whose instances, `cls(function, emitter.native)`, push, call and pop in C and
    bind like functions; None without the native client."""
    if _native is None:
        return None
    made: type = _native.ranged_function_type(base, name)
    return made


def is_native_range(wrapper: Any) -> bool:
    """Whether `wrapper` (a wrapper_for() result) is a native range, for ranged_function_type."""
    return _native is not None and type(wrapper) is _native.Range


def name_thread(tid: int, name: str) -> None:
    """Name the OS thread `tid` (``threading.get_native_id()``) for NVTX tools
    (nvtxNameOsThreadA). Does nothing when the native extension ``autonvtx._nvtxclient`` is
    not built: the `nvtx` package has no binding for it. AUTONVTX_PURE_PYTHON does not turn
    it off (it selects the per-call range path only)."""
    if _client is not None:
        _client.name_os_thread(tid, name)


def _domain(name: str) -> Any:
    # nvtx.get_domain caches Domain objects per name (lru_cache), so autonvtx shares the
    # domain, its registered strings and its category ids with the program's own nvtx calls.
    import nvtx

    return nvtx.get_domain(name)


def wrapper_for(func: Any, emitter: Emitter) -> Wrapper:
    """The wrapt wrapper for `func`: one range per call, or per resumption for generators,
    coroutines and async generators (a range never stays open across a suspension, so ranges
    of interleaved tasks or generators cannot mis-nest on a thread)."""
    push, pop = emitter.push, emitter.pop
    flags = getattr(getattr(func, "__code__", None), "co_flags", 0)
    for flag, kind, ranged in _SUSPENDING:
        if flags & flag:
            return _suspending_call(kind, ranged, push, pop)

    if emitter.native is not None:
        # Called as wrapt calls a wrapper, it pushes, calls and pops in C; and plain functions
        # skip wrapt's call path altogether (ranged_function_type).
        native: Wrapper = emitter.native
        return native

    def call(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        push()
        try:
            return wrapped(*args, **kwargs)
        finally:
            pop()

    return call


def _suspending_call(kind: type, ranged: Callable[..., Any], push: Thunk, pop: Thunk) -> Wrapper:
    def call_suspending(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        inner = wrapped(*args, **kwargs)
        if type(inner) is not kind:
            return inner  # a decorator in between changed what the call returns
        return _named_like(ranged(inner, push, pop), inner)

    return call_suspending


def _named_like(outer: Any, inner: Any) -> Any:
    # Generator, coroutine and async generator objects have writable names, shown by reprs,
    # asyncio task reprs and "never awaited" warnings: the driver takes the driven one's.
    outer.__name__ = inner.__name__
    outer.__qualname__ = inner.__qualname__
    return outer


_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80
_CO_ASYNC_GENERATOR = 0x200


def _ranged_generator(inner: Any, push: Thunk, pop: Thunk) -> Generator[Any, Any, Any]:
    """`yield from inner` spelled out (PEP 380), with a range around each resumption of inner.

    Values pass through `box`, which is empty whenever this frame is suspended: a plain
    generator keeps neither what it yielded nor what it was sent alive while it waits, and
    programs rely on that (more-itertools' islice_extended tests check it with weakrefs).
    """
    push()
    try:
        box = [inner.send(None)]
    except StopIteration as stop:
        return stop.value
    finally:
        pop()
    while True:
        try:
            box.append((yield box.pop()))
        except GeneratorExit:
            push()
            try:
                inner.close()
            finally:
                pop()
            raise
        except BaseException as exc:
            push()
            try:
                box.append(inner.throw(exc))
            except StopIteration as stop:
                return stop.value
            finally:
                pop()
        else:
            push()
            try:
                box.append(inner.send(box.pop()))
            except StopIteration as stop:
                return stop.value
            finally:
                pop()


# The same driver as a generator-based coroutine, so that `await` accepts it: a coroutine's
# steps are its send()/throw() calls made by the event loop. types.coroutine sets
# CO_ITERABLE_COROUTINE on the function's code in place, hence a copy of the function.
_ranged_steps = types.coroutine(
    types.FunctionType(
        _ranged_generator.__code__, _ranged_generator.__globals__, "_ranged_steps"
    )
)


async def _ranged_coroutine(inner: Coroutine[Any, Any, Any], push: Thunk, pop: Thunk) -> Any:
    # A real coroutine object (inspect.iscoroutine, asyncio.create_task and `await` accept it)
    # that drives `inner` one step at a time through _ranged_steps.
    return await _ranged_steps(inner, push, pop)


async def _ranged_async_generator(inner: Any, push: Thunk, pop: Thunk) -> Any:
    """`async for` delegation spelled out: each asend/athrow/aclose awaitable is driven
    step by step, with a range around each step."""
    # `box` as in _ranged_generator: nothing yielded or sent stays alive while suspended.
    try:
        box = [await _ranged_steps(inner.asend(None), push, pop)]
    except StopAsyncIteration:
        return
    while True:
        try:
            box.append((yield box.pop()))
        except GeneratorExit:
            await _ranged_steps(inner.aclose(), push, pop)
            raise
        except BaseException as exc:
            try:
                box.append(await _ranged_steps(inner.athrow(exc), push, pop))
            except StopAsyncIteration:
                return
        else:
            try:
                box.append(await _ranged_steps(inner.asend(box.pop()), push, pop))
            except StopAsyncIteration:
                return


# What wrapper_for() checks a function's code flags for, in this order (a generator-based
# coroutine is a generator): the object its call returns, and the driver that puts a range
# around each resumption of it.
_SUSPENDING = (
    (_CO_ASYNC_GENERATOR, types.AsyncGeneratorType, _ranged_async_generator),
    (_CO_COROUTINE, types.CoroutineType, _ranged_coroutine),
    (_CO_GENERATOR, types.GeneratorType, _ranged_generator),
)
