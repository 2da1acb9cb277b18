"""Turn a selected function into NVTX ranges: attributes prepared once, push/pop per call."""
from __future__ import annotations

import os
import sys
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
    kind = _suspending_kind(getattr(getattr(func, "__code__", None), "co_flags", 0))
    if kind is not None:
        if emitter.native is not None and _drivers_set:
            return _native_suspending_call(emitter.native.drive, kind)
        return _suspending_call(*_PURE_DRIVERS[kind], push, pop)

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


# What a generator-like function's call returns, numbered as the native client numbers them
# (nvtxclient.h, enum suspending_kind).
_GENERATOR, _ITERABLE_COROUTINE, _COROUTINE, _ASYNC_GENERATOR = range(4)
_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80
_CO_ITERABLE_COROUTINE = 0x100
_CO_ASYNC_GENERATOR = 0x200


def _suspending_kind(flags: int) -> int | None:
    # In this order: a generator-based coroutine (types.coroutine) is a generator too.
    if flags & _CO_ASYNC_GENERATOR:
        return _ASYNC_GENERATOR
    if flags & _CO_COROUTINE:
        return _COROUTINE
    if flags & _CO_GENERATOR:
        return _ITERABLE_COROUTINE if flags & _CO_ITERABLE_COROUTINE else _GENERATOR
    return None


def _native_suspending_call(drive: Callable[[Any, int], Any], kind: int) -> Wrapper:
    # Only for what is not a plain function (a wrapt decorator's wrapper, say): plain
    # functions take the native client's ranged wrapper, which drives in C with no frame here.
    def call_suspending(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return drive(wrapped(*args, **kwargs), kind)

    return call_suspending


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


# The native drivers (steps.c): what the program gets stays a real generator, coroutine or
# async generator; the native RangedSteps it delegates to pushes and pops around each
# resumption of the driven one.
def _drive_generator(steps: Any) -> Generator[Any, Any, Any]:
    return (yield from steps)


# A generator-based coroutine (types.coroutine) must stay awaitable: types.coroutine sets
# CO_ITERABLE_COROUTINE on the function's code in place, hence a copy of the function.
_drive_iterable_coroutine = types.coroutine(
    types.FunctionType(
        _drive_generator.__code__, _drive_generator.__globals__, "_drive_iterable_coroutine"
    )
)


async def _drive_coroutine(steps: Any) -> Any:
    return await steps


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
    types.FunctionType(
        _ranged_generator.__code__, _ranged_generator.__globals__, "_ranged_steps"
    )
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


def _set_native_drivers() -> bool:
    set_drivers = getattr(_client, "set_drivers", None)
    if set_drivers is None:  # not built, or built from older sources
        return False
    # In enum suspending_kind's order.
    set_drivers(_drive_generator, _drive_iterable_coroutine, _drive_coroutine, _ranged_async_generator)
    return True


_drivers_set = _set_native_drivers()


# ---- The code engine's layer (Python 3.12+, PEP 669) ----

# Tool ids tried in this order: 3 and 4 have no role sys.monitoring names; then the optimizer's,
# the debugger's, the profiler's (cProfile takes 2 on 3.12+) and last coverage.py's (1), the
# tool most often run together with autonvtx.
_TOOL_IDS = (4, 3, 5, 0, 2, 1)


def monitoring_available() -> str | None:
    """None when the code engine can run here (CodeMonitor.install() would succeed), else a
    one-line reason: Python before 3.12, AUTONVTX_PURE_PYTHON set, the native client not
    built (or built without it), no free sys.monitoring tool id, or a CodeMonitor already
    installed."""
    if sys.version_info < (3, 12):
        return f"Python {sys.version_info[0]}.{sys.version_info[1]} has no sys.monitoring (3.12+)"
    if _native is None:
        if _client is not None:
            return f"{environment.PURE_PYTHON} is set"
        return "autonvtx's native client (autonvtx._nvtxclient) is not built"
    if not hasattr(_native, "monitoring_push"):
        return "autonvtx's native client was built without the code engine (rebuild: pip install -e .)"
    if CodeMonitor.active is not None:
        return f"autonvtx already monitors code with sys.monitoring tool id {CodeMonitor.active.tool_id}"
    if _free_tool_id() is None:
        holders = ", ".join(f"{i}: {sys.monitoring.get_tool(i)!r}" for i in range(6))
        return f"no free sys.monitoring tool id (held: {holders})"
    return None


def _free_tool_id() -> int | None:
    return next((i for i in _TOOL_IDS if sys.monitoring.get_tool(i) is None), None)


class CodeMonitor:
    """NVTX ranges on code objects through sys.monitoring (PEP 669): every function made from
    a monitored code object gets its range, however it is referenced, and no function object
    is replaced.

    install() claims a free tool id ("autonvtx") and registers native callbacks: push on
    PY_START, PY_RESUME and PY_THROW, pop on PY_RETURN, PY_YIELD and PY_UNWIND, so a
    generator or coroutine gets a range per resumption and every exit pops. monitor(code,
    emitter) attaches the emitter's native range to the code object (a code extra, found in
    O(1) by the callbacks) and turns on the local events for it. PY_UNWIND and PY_THROW can
    only be global: for code without a range the callback returns at once. A frame already
    running when its code gets monitored pushed nothing, and its exit pops nothing (the native
    callbacks keep each thread's open ranges). uninstall() turns off every event this monitor
    turned on, detaches every range and frees the tool id. One CodeMonitor is installed at a
    time in a process."""

    # The installed one (the code extra index the callbacks read is per process).
    active: CodeMonitor | None = None

    def __init__(self) -> None:
        self.tool_id: int | None = None
        self._codes: set[types.CodeType] = set()

    def install(self) -> str | None:
        """Claim a tool id and register the callbacks: None, or why the code engine cannot
        run here (monitoring_available()), with nothing changed."""
        if self.tool_id is not None:
            return None
        reason = monitoring_available()
        if reason is not None:
            return reason
        monitoring = sys.monitoring
        for tool_id in _TOOL_IDS:
            try:
                monitoring.use_tool_id(tool_id, "autonvtx")
            except ValueError:  # taken (by another thread since monitoring_available())
                continue
            break
        else:
            return "no free sys.monitoring tool id"
        events, client = monitoring.events, _native
        for event in (events.PY_START, events.PY_RESUME, events.PY_THROW):
            monitoring.register_callback(tool_id, event, client.monitoring_push)
        for event in (events.PY_RETURN, events.PY_YIELD, events.PY_UNWIND):
            monitoring.register_callback(tool_id, event, client.monitoring_pop)
        monitoring.set_events(tool_id, events.PY_UNWIND | events.PY_THROW)
        self.tool_id = tool_id
        CodeMonitor.active = self
        return None

    def monitor(self, code: types.CodeType, emitter: Emitter | Any) -> None:
        """Give every run of `code` the range of `emitter` (an Emitter made by emitter_for()
        on the native path, or its `native` Range); replaces a range given before."""
        tool_id = self._installed_tool_id()
        prepared = emitter.native if isinstance(emitter, Emitter) else emitter
        if prepared is None:
            raise ValueError("CodeMonitor.monitor: the emitter has no native range (pure-Python path)")
        _native.attach(code, prepared)
        sys.monitoring.set_local_events(tool_id, code, _LOCAL_EVENTS)
        self._codes.add(code)

    def unmonitor(self, code: types.CodeType) -> None:
        """Stop giving `code` ranges; nothing happens for code this monitor does not monitor."""
        if code not in self._codes:
            return
        self._codes.discard(code)
        sys.monitoring.set_local_events(self._installed_tool_id(), code, 0)
        _native.detach(code)

    def is_monitored(self, code: types.CodeType) -> bool:
        return code in self._codes

    def monitored(self) -> int:
        """How many code objects this monitor gives ranges."""
        return len(self._codes)

    def uninstall(self) -> None:
        """Undo install() and every monitor(): no event, callback, range or tool id of
        autonvtx's is left. A frame that is running now keeps the range it pushed open."""
        tool_id = self.tool_id
        if tool_id is None:
            return
        monitoring = sys.monitoring
        for code in self._codes:
            monitoring.set_local_events(tool_id, code, 0)
            _native.detach(code)
        self._codes.clear()
        monitoring.set_events(tool_id, 0)
        events = monitoring.events
        for event in (events.PY_START, events.PY_RESUME, events.PY_THROW, events.PY_RETURN,
                      events.PY_YIELD, events.PY_UNWIND):
            monitoring.register_callback(tool_id, event, None)
        monitoring.free_tool_id(tool_id)
        self.tool_id = None
        if CodeMonitor.active is self:
            CodeMonitor.active = None

    def _installed_tool_id(self) -> int:
        if self.tool_id is None:
            raise RuntimeError("CodeMonitor is not installed")
        return self.tool_id


_LOCAL_EVENTS = (
    sys.monitoring.events.PY_START
    | sys.monitoring.events.PY_RESUME
    | sys.monitoring.events.PY_RETURN
    | sys.monitoring.events.PY_YIELD
    if sys.version_info >= (3, 12)
    else 0
)
