"""Generators, coroutines and async generators with a range around each resumption: the
wrapper engine's stand-ins, on the native path (a real generator or async generator delegating
to the native client's RangedSteps; coroutines take the client's proxy, no stand-in) and the
pure-Python one."""

from __future__ import annotations

import sys
import types
from functools import partial

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Generator
    from typing import Any

    Thunk = Callable[[], None]
    # wrapt's wrapper signature: (wrapped, instance, args, kwargs) -> result.
    Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]

# What a generator-like function's call returns, numbered as the native client numbers them
# (nvtxclient.h, enum suspending_kind).
_GENERATOR, _ITERABLE_COROUTINE, _COROUTINE, _ASYNC_GENERATOR = range(4)
COROUTINE = _COROUTINE
_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80
_CO_ITERABLE_COROUTINE = 0x100
_CO_ASYNC_GENERATOR = 0x200


def suspending_kind(flags: int) -> int | None:
    """What calls of a function with code flags `flags` return, as the native client numbers
    it (its drive() takes the number); None when they return what the body returns."""
    # In this order: a generator-based coroutine (types.coroutine) is a generator too.
    if flags & _CO_ASYNC_GENERATOR:
        return _ASYNC_GENERATOR
    if flags & _CO_COROUTINE:
        return _COROUTINE
    if flags & _CO_GENERATOR:
        return _ITERABLE_COROUTINE if flags & _CO_ITERABLE_COROUTINE else _GENERATOR
    return None


def native_wrapper(drive: Callable[[Any, int], Any], kind: int) -> Wrapper:
    """The wrapt wrapper that passes what the call returns to a native Range's drive()."""

    # Only for what is not a plain function (a wrapt decorator's wrapper, say): plain
    # functions take the native client's ranged wrapper, which drives in C with no frame here.
    def call_suspending(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return drive(wrapped(*args, **kwargs), kind)

    return call_suspending


def pure_wrapper(kind: int, push: Thunk, pop: Thunk) -> Wrapper:
    """The wrapt wrapper that drives what the call returns through a pure-Python stand-in."""
    return _suspending_call(*_PURE_DRIVERS[kind], push, pop)


def pure_call_wrapper(start: Callable[[], int], end: Callable[[int], None]) -> Wrapper:
    """The wrapt wrapper giving a coroutine call one start/end range, from its first resumption
    to its end, on the pure-Python path."""
    return _suspending_call(types.CoroutineType, _pure_spanned_coroutine, start, end)


def _suspending_call(kind: type, ranged: Callable[..., Any], push: Any, pop: Any) -> Wrapper:
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


# The native drivers (steps.c): what the program gets stays a real generator or async
# generator; the native RangedSteps it delegates to pushes and pops around each resumption of
# the driven one. A coroutine needs none: the native client hands the program a proxy of its
# own coroutine (coroutine.c).
if sys.version_info >= (3, 12):
    # 3.12+ resumes the native object through tp_iternext, which keeps a returned value in
    # `returned` instead of raising StopIteration(value) (RangedSteps' iternext says why); a
    # value that came back otherwise (through throw()) is what `yield from` gave. Read as an
    # attribute, not a call.
    def _drive_generator(steps: Any) -> Generator[Any, Any, Any]:
        value = yield from steps
        return steps.returned if value is None else value

else:

    def _drive_generator(steps: Any) -> Generator[Any, Any, Any]:
        return (yield from steps)


# A generator-based coroutine (types.coroutine) must stay awaitable: types.coroutine sets
# CO_ITERABLE_COROUTINE on the function's code in place, hence a copy of the function.
_drive_iterable_coroutine = types.coroutine(
    types.FunctionType(_drive_generator.__code__, _drive_generator.__globals__, "_drive_iterable_coroutine")
)


def _ranged_generator(inner: Any, push: Thunk, pop: Thunk) -> Generator[Any, Any, Any]:
    """The pure-Python path: `yield from inner` spelled out (PEP 380), with a range around
    each resumption of inner.

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
# steps are its send()/throw() calls made by the event loop.
_ranged_steps = types.coroutine(
    types.FunctionType(_ranged_generator.__code__, _ranged_generator.__globals__, "_ranged_steps")
)


class _CoroutineCloser:
    """Holds the coroutine a pure-Python stand-in drives, and closes it when the stand-in lets
    go of it: a stand-in closed before it ever ran runs nothing, and the coroutine it drives
    would warn "was never awaited" although the program closed it as it should. Closing
    is what the coroutine's own finalizer does a moment later otherwise."""

    __slots__ = ("coroutine",)

    def __init__(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self.coroutine = coroutine

    def __del__(self) -> None:
        self.coroutine.close()


async def _ranged_coroutine(closer: _CoroutineCloser, push: Thunk, pop: Thunk) -> Any:
    # A real coroutine object (inspect.iscoroutine, asyncio.create_task and `await` accept it)
    # that drives the coroutine one step at a time through _ranged_steps.
    return await _ranged_steps(closer.coroutine, push, pop)


async def _spanned_coroutine(closer: _CoroutineCloser, start: Callable[[], int], end: Callable[[int], None]) -> Any:
    # Its body runs at the first resumption (a coroutine never awaited gets no range) and its
    # `finally` however the awaited one ends: a return, an exception, a cancellation, or a
    # close() when this one is dropped while suspended.
    span = start()
    try:
        return await closer.coroutine
    finally:
        end(span)


def _pure_spanned_coroutine(inner: Coroutine[Any, Any, Any], start: Any, end: Any) -> Any:
    return _spanned_coroutine(_CoroutineCloser(inner), start, end)


def _pure_coroutine(inner: Coroutine[Any, Any, Any], push: Thunk, pop: Thunk) -> Any:
    # The closer is made here, not in the coroutine's body, which may never run.
    return _ranged_coroutine(_CoroutineCloser(inner), push, pop)


async def _ranged_async_generator(inner: Any, steps: Callable[[Any], Any]) -> Any:
    """`async for` delegation spelled out: each asend/athrow/aclose awaitable is driven
    through `steps(awaitable)`, which puts a range around each of its steps (a native
    RangedSteps, or _ranged_steps on the pure-Python path)."""
    # `box` as in _ranged_generator: nothing yielded or sent stays alive while suspended.
    try:
        box = [await steps(inner.asend(None))]
    except StopAsyncIteration:
        return
    while True:
        try:
            box.append((yield box.pop()))
        except GeneratorExit:
            await steps(inner.aclose())
            raise
        except BaseException as exc:
            try:
                box.append(await steps(inner.athrow(exc)))
            except StopAsyncIteration:
                return
        else:
            try:
                box.append(await steps(inner.asend(box.pop())))
            except StopAsyncIteration:
                return


def _pure_async_generator(inner: Any, push: Thunk, pop: Thunk) -> Any:
    return _ranged_async_generator(inner, partial(_ranged_steps, push=push, pop=pop))


# By kind: the object a call returns, and the pure-Python driver around each resumption.
_PURE_DRIVERS: dict[int, tuple[type, Callable[..., Any]]] = {
    _GENERATOR: (types.GeneratorType, _ranged_generator),
    _ITERABLE_COROUTINE: (types.GeneratorType, _ranged_steps),
    _COROUTINE: (types.CoroutineType, _pure_coroutine),
    _ASYNC_GENERATOR: (types.AsyncGeneratorType, _pure_async_generator),
}


# The native client's drivers, in enum suspending_kind's order, the coroutine's left out (its
# set_drivers() takes them).
NATIVE_DRIVERS = (_drive_generator, _drive_iterable_coroutine, _ranged_async_generator)
