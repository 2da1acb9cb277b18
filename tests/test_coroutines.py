"""The wrapper engine's coroutines (the native client's RangedCoroutine, coroutine.c): the
program's own coroutine behind a proxy, a range around each resumption (`coroutine =
"resumptions"`), observed through the recorder; what the program can tell about it is what it could tell about the coroutine."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_under_recorder

from autonvtx import ranges

needs_native = pytest.mark.skipif(ranges._client is None, reason="autonvtx._nvtxclient is not built in this checkout")

# Each wrapped the two ways the engine wraps: the ranged function wrapper (plain functions,
# the call in C) and a wrapt wrapper calling Range.drive (a decorator in between).
PROLOGUE = """
import asyncio, collections.abc, gc, inspect, sys, traceback, types, weakref
from autonvtx import ranges
from autonvtx.config import RangeStyle
from autonvtx.engines import wrap

make = ranges.ranged_wrapper_factory(wrap._RangedFunctionWrapper)
# A range per resumption (`coroutine = "resumptions"`); test_coroutine_calls.py has the default.
style = RangeStyle("autonvtx", "{qualname}", 0xFF00FF00, None, "resumptions")

def ranged(func, how):
    if how == "ranged":
        return make(func, "autonvtx", func.__qualname__, 0xFF00FF00, ranges.COROUTINE_STEPS)
    wrapper = ranges.wrapper_for(func, ranges.emitter_with_message(style, func.__qualname__))
    return lambda *args, **kwargs: wrapper(func, None, args, kwargs)
"""

LOOKS_PROGRAM = (
    PROLOGUE
    + """
async def fetch(x):
    await asyncio.sleep(0)
    return x

for how in ("ranged", "drive"):
    c = ranged(fetch, how)(1)
    print(inspect.iscoroutine(c), asyncio.iscoroutine(c), isinstance(c, collections.abc.Coroutine),
          inspect.isawaitable(c), isinstance(c, collections.abc.Iterable), c.__class__ is types.CoroutineType)
    print(c.__name__, c.__qualname__, c.cr_code is fetch.__code__, c.cr_frame.f_code is fetch.__code__,
          c.cr_await, c.cr_running, inspect.getcoroutinestate(c), repr(c).startswith("<coroutine object fetch at"))
    c.__qualname__ = "renamed"
    print(c.__qualname__, asyncio.run(c), inspect.getcoroutinestate(c))
"""
)


@needs_native
def test_a_wrapped_coroutine_reads_as_the_coroutine(tmp_path: Path) -> None:
    (rec,), out = run_under_recorder(tmp_path, LOOKS_PROGRAM)
    assert (
        out.splitlines()
        == [
            "True True True True False True",
            "fetch fetch True True None False CORO_CREATED True",
            "renamed 1 CORO_CLOSED",
        ]
        * 2
    )
    # asyncio.run: two resumptions each (the sleep(0) suspends once).
    assert [r.name for r in rec.ranges] == ["fetch"] * 4
    assert not [r for r in rec.ranges if r.is_open]


BEHAVES_PROGRAM = (
    PROLOGUE
    + """
async def value(x):
    return x

async def nothing():
    pass

async def boom():
    raise ValueError("boom")

async def sleeper():
    await asyncio.sleep(10)

@types.coroutine
def suspend():
    yield

async def pauses():
    await suspend()

class Box:
    pass

async def main(how):
    got = [await ranged(value, how)((1, 2)), await ranged(nothing, how)()]
    got.append(await asyncio.ensure_future(ranged(value, how)(7)))
    try:
        await ranged(boom, how)()
    except ValueError as error:   # the program's frames only, none of autonvtx's
        got.append([frame.name for frame in traceback.extract_tb(error.__traceback__)])
    shared = ranged(sleeper, how)()
    task = asyncio.ensure_future(shared)
    await asyncio.sleep(0)
    try:
        await shared               # a second awaiter, refused as for a coroutine
    except RuntimeError as error:
        got.append(str(error))
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        got.append(shared.cr_frame is None)
    try:
        await asyncio.wait_for(ranged(sleeper, how)(), 0.001)
    except (asyncio.TimeoutError, TimeoutError):
        got.append("timeout")
    returned = await ranged(value, how)(Box())
    alive = weakref.ref(returned)
    del returned                   # nothing of ours keeps what a coroutine returned
    got.append(alive() is None)
    return got

for how in ("ranged", "drive"):
    print(asyncio.run(main(how)))
    c = ranged(value, how)(3)
    try:
        c.send(None)
    except StopIteration as stop:
        print(type(stop).__name__, stop.value, stop.args)
    c = ranged(value, how)(4)
    c.close()                       # before it ran: nothing runs, no warning
    print(inspect.getcoroutinestate(c))
    c = ranged(pauses, how)()
    alive = weakref.ref(c)
    c.send(None)
    try:
        c.throw(KeyError("k"))
    except KeyError:
        print("thrown", inspect.getcoroutinestate(c))
    del c
    gc.collect()
    print(alive() is None)
"""
)


@needs_native
def test_a_wrapped_coroutine_behaves_as_the_coroutine(tmp_path: Path) -> None:
    stderr: list[str] = []
    (rec,), out = run_under_recorder(tmp_path, BEHAVES_PROGRAM, env={"PYTHONWARNINGS": "error"}, stderr=stderr)
    assert (
        out.splitlines()
        == [
            "[(1, 2), None, 7, ['main', 'boom'], 'coroutine is being awaited already', True, 'timeout', True]",
            "StopIteration 3 (3,)",
            "CORO_CLOSED",
            "thrown CORO_CLOSED",
            "True",
        ]
        * 2
    )
    assert "Warning" not in stderr[0], stderr[0]
    assert rec.unmatched_pops == 0 and not [r for r in rec.ranges if r.is_open]
    names = [r.name for r in rec.ranges]
    # Per wrapping: value x3 and nothing once in main, boom, sleeper's two resumptions (its
    # start, then the cancellation thrown in) and the timed-out one's two; value, twice more
    # by hand; the closed one: none; the one thrown into: start and throw.
    once = ["value"] * 3 + ["nothing", "boom"] + ["sleeper"] * 4 + ["value"] + ["pauses"] * 2
    assert sorted(names) == sorted(once * 2)


AS_PLAIN_PROGRAM = (
    PROLOGUE
    + """
import functools, warnings

def shared(fn):                    # one inner code object for every function it decorates
    @functools.wraps(fn)
    async def inner(x=0):
        return await fn(x)
    return inner

@shared
async def first(x):
    return x

@shared
async def second(x):
    return x

async def inner_pause():
    await asyncio.sleep(0)
    return "inner"

async def outer():
    await asyncio.sleep(0)
    return await ranged(inner_pause, "ranged")()

@types.coroutine
def legacy(c):
    return (yield from c)          # a generator-based coroutine delegating to a coroutine

async def main():
    got = [await ranged(first, "ranged")(1), await ranged(second, "ranged")(2)]
    got.append(await first(3))     # the function itself, not through its wrapper: no range
    got.append(await legacy(ranged(first, "ranged")(4)))
    got.append(await ranged(outer, "ranged")())
    return got

print(asyncio.run(main()))

def plain_generator(c):
    return (yield from c)

for c in (first(7), ranged(first, "ranged")(7)):   # what only a generator-based coroutine may do
    for attempt in (lambda: next(plain_generator(c)), lambda: iter(c)):
        try:
            attempt()
        except TypeError as error:
            print(error)
    print(hasattr(c, "__iter__"))
    c.close()
@types.coroutine
def suspend():
    yield

async def waits_once():
    await suspend()
    return "done"

g = legacy(ranged(waits_once, "ranged")())  # throw() and close() reach it through `yield from`
g.send(None)
try:
    g.throw(KeyError("k"))
except KeyError:
    print("thrown", inspect.getgeneratorstate(g))
g = legacy(ranged(waits_once, "ranged")())
g.send(None)
g.close()
print("closed", inspect.getgeneratorstate(g))
wrapper = ranged(first, "ranged")
c = wrapper(5)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    del c
    gc.collect()
print([str(w.message) for w in caught])
first.__defaults__ = (6,)          # what the function is now, the wrapper calls
first.__qualname__ = "renamed"
c = wrapper()
print(c.__qualname__, asyncio.run(c))
"""
)


@needs_native
def test_a_wrapped_coroutine_is_ranged_as_the_program_calls_it(tmp_path: Path) -> None:
    (rec,), out = run_under_recorder(tmp_path, AS_PLAIN_PROGRAM)
    assert out.splitlines() == [
        "[1, 2, 3, 4, 'inner']",
        *[
            "cannot 'yield from' a coroutine object in a non-coroutine generator",
            "'coroutine' object is not iterable",
            "False",
        ]
        * 2,
        "thrown GEN_CLOSED",
        "closed GEN_CLOSED",
        "[\"coroutine 'first' was never awaited\"]",
        "renamed 6",
    ]
    assert rec.unmatched_pops == 0 and not [r for r in rec.ranges if r.is_open]
    # Each wrapper its own name although both functions share one code object (the range is
    # named when the wrapper is made); the direct call and the coroutine never awaited none;
    # outer three times (its sleep suspends it, then inner_pause's), inner_pause twice, each
    # inside one of outer's; waits_once started, then thrown into, then again closed.
    names = [r.name for r in rec.ranges]
    assert sorted(names) == sorted(
        ["first", "second", "first", "first"] + ["outer"] * 3 + ["inner_pause"] * 2 + ["waits_once"] * 4
    )
    outers = [r for r in rec.ranges if r.name == "outer"]
    inners = [r for r in rec.ranges if r.name == "inner_pause"]
    for outer, inner in zip(outers[1:], inners):
        assert outer.start_ns <= inner.start_ns <= inner.end_ns <= outer.end_ns
