"""Turn a selected function into NVTX ranges: attributes prepared once, push/pop per call."""

from __future__ import annotations

import os
import sys
import types
from functools import partial
from types import ModuleType

from autonvtx import environment, resumptions, toolids
from autonvtx.config import COROUTINE_RESUMPTIONS, RangeStyle
from autonvtx.rangetuples import Emitter as Emitter, Label as Label, label_for as label_for

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from autonvtx.resumptions import Wrapper as Wrapper

    RangedMaker = Callable[[Any, str, str, int, int], Any]


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
    attributes = domain.get_event_attributes(message=message, color=style.color, category=style.category)
    span = (
        None
        if style.coroutine == COROUTINE_RESUMPTIONS
        else (partial(domain.start_range, attributes), domain.end_range)
    )
    # The module-level push_range/pop_range take the C handles directly; Domain.push_range
    # takes **kwargs and costs a dict per call. partial() keeps the call in C.
    return Emitter(
        message,
        style.domain,
        partial(lib.push_range, attributes, domain.handle),
        partial(lib.pop_range, domain.handle),
        None,
        span,
    )


def _native_emitter(client: ModuleType, style: RangeStyle, message: str) -> Emitter:
    prepared = client.Range(style.domain, message, style.color, _category_and_options(style))
    emitter: Emitter = _new_tuple(Emitter, (message, style.domain, prepared.push, prepared.pop, prepared, None))
    return emitter


def _category_id(style: RangeStyle) -> int:
    if style.category is None:
        return 0
    # Category ids come from the `nvtx` package's Domain, which numbers and names them per
    # domain: the program's own nvtx.annotate(category=...) then agrees with autonvtx on
    # every id (two numberings would name one id twice, the last name winning).
    domain = _domain(style.domain)
    if _is_enabled(domain):
        return int(domain.get_category_id(style.category))
    return _own_category_id(style.domain, style.category)


# Categories numbered by autonvtx itself, per domain, where the `nvtx` package's Domain is a
# dummy although a tool listens: nvtx 0.2.14+ asks nvtxDomainIsEnabled, which older tools (Nsight
# Systems 2022.4) do not answer, so its ids would all be 0 and no category named. The program's
# own nvtx calls are no-ops then: no numbering to agree with.
_own_categories: dict[tuple[str, str], int] = {}


def _own_category_id(domain: str, category: str) -> int:
    name_category = getattr(_client, "name_category", None)
    if name_category is None:
        return 0
    key = (domain, category)
    if key not in _own_categories:
        number = 1 + sum(1 for d, _ in _own_categories if d == domain)
        if not name_category(domain, number, category):
            return 0  # no tool attached
        _own_categories[key] = number
    return _own_categories[key]


# Beside the category id (32 bits in NVTX) in what the native client's Range makers take:
# this range's coroutines get a range per resumption (nvtxclient.h, RANGE_COROUTINE_STEPS).
COROUTINE_STEPS = 1 << 32


def _category_and_options(style: RangeStyle) -> int:
    steps = COROUTINE_STEPS if style.coroutine == COROUTINE_RESUMPTIONS else 0
    return _category_id(style) | steps


def style_arguments(style: RangeStyle) -> tuple[str, int, int]:
    """(domain, color, category id with the range's options): what a ranged_wrapper_factory()
    maker takes of a style, worked out once per style rather than once per function."""
    return style.domain, style.color, _category_and_options(style)


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


def native_client() -> ModuleType | None:
    """autonvtx's native client (regions' callbacks live there), or None when it is not built.
    AUTONVTX_PURE_PYTHON does not turn it off: regions have no pure-Python path (it selects
    the per-call range path only)."""
    return _client


def name_thread(tid: int, name: str) -> None:
    """Name the OS thread `tid` (``threading.get_native_id()``) for NVTX tools
    (nvtxNameOsThreadA). Does nothing when the native extension ``autonvtx._nvtxclient`` is
    not built: the `nvtx` package has no binding for it. AUTONVTX_PURE_PYTHON does not turn
    it off (it selects the per-call range path only)."""
    if _client is not None:
        _client.name_os_thread(tid, name)


def rebind() -> int:
    """Ask the NVTX tool again for the handles of every range prepared so far (a fork child
    under a tool that starts afresh there: Nsight Systems drops its parent's handles); how
    many have a tool. 0 without the native client (the `nvtx` package's ranges are its own)."""
    rebind_ranges = getattr(_client, "rebind_ranges", None)  # absent from older builds
    name_category = getattr(_client, "name_category", None)
    if rebind_ranges is None or name_category is None:
        return 0
    for (domain, category), number in _own_categories.items():
        name_category(domain, number, category)
    return int(rebind_ranges())


def _domain(name: str) -> Any:
    # nvtx.get_domain caches Domain objects per name (lru_cache), so autonvtx shares the
    # domain, its registered strings and its category ids with the program's own nvtx calls.
    import nvtx

    return nvtx.get_domain(name)


def wrapper_for(func: Any, emitter: Emitter) -> Wrapper:
    """The wrapt wrapper for `func`: one range per call, or per resumption for generators and
    async generators (a pushed range never stays open across a suspension, so ranges of
    interleaved tasks or generators cannot mis-nest on a thread); a coroutine's call gets one
    start/end range over its whole await, or a range per resumption where its rule says
    `coroutine = "resumptions"`."""
    push, pop = emitter.push, emitter.pop
    kind = resumptions.suspending_kind(getattr(getattr(func, "__code__", None), "co_flags", 0))
    if kind is not None:
        if emitter.native is not None and _drivers_set:
            return resumptions.native_wrapper(emitter.native.drive, kind)
        if emitter.span is not None and kind == resumptions.COROUTINE:
            return resumptions.pure_call_wrapper(*emitter.span)
        return resumptions.pure_wrapper(kind, push, pop)

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


def uniform_walk_function() -> Callable[..., None] | None:
    """The native client's walk_uniform(application, items, decisions): the walk of a module
    one rule selects as a whole, for either engine (autonvtx/_native/uniform.c); None without
    the native client (or one built from older sources)."""
    walk: Callable[..., None] | None = getattr(_native, "walk_uniform", None)
    if walk is None:
        return None
    return walk


def prepared_range(domain: str, message: str, color: int, category: int) -> Any:
    """A native Range (what CodeMonitor.monitor() takes), with `domain`, `color` and
    `category` as style_arguments() gives them: lighter than an Emitter (no push/pop bound
    methods) where thousands of code objects get one. None without the native client."""
    if _native is None:
        return None
    return _native.Range(domain, message, color, category)


def _set_native_drivers() -> bool:
    set_drivers = getattr(_client, "set_drivers", None)
    if set_drivers is None:  # not built, or built from older sources
        return False
    set_drivers(*resumptions.NATIVE_DRIVERS)
    return True


_drivers_set = _set_native_drivers()


# ---- The code engine's layer (Python 3.12+, PEP 669) ----

_TOOL_IDS = toolids.ENGINE  # the order and why: toolids (regions' order depends on it)


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
        holders = ", ".join(f"{i}: {_sys_monitoring().get_tool(i)!r}" for i in range(6))
        return f"no free sys.monitoring tool id (held: {holders})"
    return None


def _sys_monitoring() -> Any:
    # Python 3.12+ only: callers run once monitoring_available() has said yes.
    return sys.monitoring  # type: ignore[attr-defined, unused-ignore]


def _free_tool_id() -> int | None:
    return next((i for i in _TOOL_IDS if _sys_monitoring().get_tool(i) is None), None)


class CodeMonitor:
    """NVTX ranges on code objects through sys.monitoring (PEP 669): every function made from
    a monitored code object gets its range, however it is referenced, and no function object
    is replaced.

    install() claims a free tool id ("autonvtx") and registers native callbacks: push on
    PY_START, PY_RESUME and PY_THROW, pop on PY_RETURN, PY_YIELD and PY_UNWIND (a range per
    resumption, every exit pops). monitor(code, emitter) attaches the emitter's native range to
    the code object (a code extra, O(1) for the callbacks) and turns on its local events.
    PY_UNWIND and PY_THROW can only be global: for code without a range the callback returns at
    once, and PY_UNWIND is on only while a range of the callbacks is open, where the native
    client can switch it (_unwind_while_open): untargeted exceptions outside them cost nothing.
    A frame running when its code gets monitored pushed nothing, and its exit pops nothing (the
    callbacks keep each thread's open ranges). uninstall() turns off every event this monitor
    turned on, detaches every range and frees the tool id. One is installed at a time."""

    # The installed one (the code extra index the callbacks read is per process).
    active: CodeMonitor | None = None

    def __init__(self) -> None:
        self.tool_id: int | None = None
        self._client: ModuleType | None = None  # the native client, once installed
        # What uninstall() must undo. A list, not a set: 8 bytes a code object where a set
        # takes ~20, thousands of times over; membership is the code extra's (O(1)). And once
        # per module, the report's list of names, where the native walk writes each code it
        # monitors in place of its co_qualname: one entry a function (_walked()).
        self._codes: list[types.CodeType | list[Any]] = []
        self._lazy_checked = False  # _check_lazy_local_events() ran

    def install(self) -> str | None:
        """Claim a tool id and register the callbacks: None, or why the code engine cannot
        run here (monitoring_available()), with nothing changed."""
        if self.tool_id is not None:
            return None
        reason = monitoring_available()
        if reason is not None:
            return reason
        monitoring = _sys_monitoring()
        for tool_id in _TOOL_IDS:
            try:
                monitoring.use_tool_id(tool_id, toolids.ENGINE_NAME)
            except ValueError:  # taken (by another thread since monitoring_available())
                continue
            break
        else:
            return "no free sys.monitoring tool id"
        events, client = monitoring.events, _native
        assert client is not None  # monitoring_available() said so
        # PY_START and PY_RETURN apart: a coroutine's call range opens and closes there only.
        monitoring.register_callback(tool_id, events.PY_START, client.monitoring_start)
        monitoring.register_callback(tool_id, events.PY_RESUME, client.monitoring_push)
        monitoring.register_callback(tool_id, events.PY_THROW, client.monitoring_throw)
        monitoring.register_callback(tool_id, events.PY_RETURN, client.monitoring_return)
        monitoring.register_callback(tool_id, events.PY_YIELD, client.monitoring_pop)
        monitoring.register_callback(tool_id, events.PY_UNWIND, client.monitoring_unwind)
        if not _unwind_while_open(monitoring, tool_id, client):
            monitoring.set_events(tool_id, events.PY_UNWIND | events.PY_THROW)
        self.tool_id, self._client = tool_id, client
        CodeMonitor.active = self
        return None

    def monitor(self, code: types.CodeType, emitter: Emitter | Any) -> None:
        """Give every run of `code` the range of `emitter`: a Range from prepared_range()
        (the lightest), or an Emitter made on the native path (its `native` Range). Replaces
        a range given before."""
        tool_id, client = self._installed()
        prepared = emitter.native if isinstance(emitter, Emitter) else emitter
        if prepared is None:
            raise ValueError("CodeMonitor.monitor: the emitter has no native range (pure-Python path)")
        known = client.has_range(code)
        client.attach(code, prepared)
        _sys_monitoring().set_local_events(tool_id, code, _LOCAL_EVENTS)
        if not known:
            self._codes.append(code)

    def unmonitor(self, code: types.CodeType) -> None:
        """Stop giving `code` ranges; nothing happens for code this monitor does not monitor."""
        if not self.is_monitored(code):
            return
        tool_id, client = self._installed()
        _sys_monitoring().set_local_events(tool_id, code, 0)
        client.detach(code)
        for held in (self._codes, *(h for h in self._codes if isinstance(h, list))):  # O(n): rare
            at = next((i for i, entry in enumerate(held) if entry is code), -1)
            if at >= 0:  # a report's list keeps the name; _walked() passes names by
                held[at] = code.co_qualname
                return

    def monitor_new(self, code: types.CodeType, prepared: Any) -> None:
        """monitor() for code this monitor does not monitor yet (the caller asked
        is_monitored()) and a Range from prepared_range(): the walk's path, thousands of times
        when a package is targeted wholesale, without monitor()'s checks."""
        tool_id, client = self._installed()
        client.attach(code, prepared)
        _sys_monitoring().set_local_events(tool_id, code, _LOCAL_EVENTS)
        self._codes.append(code)

    def uniform_walker(self, domain: str, color: int, category: int, *, no_existing: bool) -> Any:
        """`walk(items, decisions)`: the native walk of a module whose every function gets a
        range styled (domain, color, category) and named by its code (monitor_new() for each,
        in C; walk.py passes its decisions), or None when the native client lacks it.
        `no_existing`: the engine has no stand-in yet that a builtin could be a re-export of."""
        tool_id, client = self._installed()
        walk = uniform_walk_function()
        if walk is None:
            return None
        if not self._lazy_checked:
            self._lazy_checked = True
            _check_lazy_local_events(client, tool_id)
        return partial(
            walk,
            (
                "code",
                domain,
                color,
                category,
                tool_id,
                _sys_monitoring().set_local_events,
                _LOCAL_EVENTS,
                self._codes,
                no_existing,
            ),
        )

    def is_monitored(self, code: types.CodeType) -> bool:
        client = self._client
        return client is not None and bool(client.has_range(code))

    def monitored(self) -> int:
        return sum(1 for _ in self._walked())  # how many code objects this monitor gives ranges

    def _walked(self) -> Iterator[types.CodeType]:
        """Every code object monitored: in _codes, and in the reports' lists there (once each)."""
        seen: set[int] = set()
        for held in self._codes:
            if isinstance(held, list) and id(held) not in seen:
                seen.add(id(held))
                yield from (entry for entry in held if type(entry) is types.CodeType)
            elif type(held) is types.CodeType:
                yield held

    def uninstall(self) -> None:
        """Undo install() and every monitor(): no event, callback, range or tool id of
        autonvtx's is left. A frame that is running now keeps the range it pushed open."""
        if self.tool_id is None:
            return
        tool_id, client = self._installed()
        monitoring = _sys_monitoring()
        for code in self._walked():
            monitoring.set_local_events(tool_id, code, 0)
            client.detach(code)
        for held in (h for h in self._codes if isinstance(h, list)):  # the reports keep names
            held[:] = [entry.co_qualname if type(entry) is types.CodeType else entry for entry in held]
        self._codes.clear()
        client.arm_unwind(-1)
        monitoring.set_events(tool_id, 0)
        events = monitoring.events
        for event in (
            events.PY_START,
            events.PY_RESUME,
            events.PY_THROW,
            events.PY_RETURN,
            events.PY_YIELD,
            events.PY_UNWIND,
        ):
            monitoring.register_callback(tool_id, event, None)
        monitoring.free_tool_id(tool_id)
        self.tool_id = self._client = None
        if CodeMonitor.active is self:
            CodeMonitor.active = None

    def _installed(self) -> tuple[int, ModuleType]:
        if self.tool_id is None or self._client is None:
            raise RuntimeError("CodeMonitor is not installed")
        return self.tool_id, self._client


def _probe() -> None:
    pass


def _gap_probe() -> None:
    pass  # run by _check_lazy_local_events only


def _check_lazy_local_events(client: ModuleType, tool_id: int) -> None:
    """The native walk turns local events on as set_local_events does but leaves the code's
    instrumentation to its first run (globalevents.c, monitoring_turn_on_later): used only
    where get_local_events reads back what it set on a code of ours; 3.13's spare bytes too."""
    check = getattr(client, "lazy_local_events", None)
    turn_on = getattr(client, "turn_on_later", None)
    if check is None or turn_on is None:
        return
    monitoring = _sys_monitoring()
    code = _probe.__code__
    works = bool(turn_on(code, tool_id, _LOCAL_EVENTS)) and (
        monitoring.get_local_events(tool_id, code) == _LOCAL_EVENTS
    )
    monitoring.set_local_events(tool_id, code, 0)
    check(works)
    gap_probe = getattr(client, "gap_probe", None)
    if works and gap_probe is not None and gap_probe(_gap_probe.__code__, 0):
        _gap_probe()
        gap_probe(_gap_probe.__code__, 1)


def _unwind_while_open(monitoring: Any, tool_id: int, client: ModuleType) -> bool:
    """PY_THROW on for good, PY_UNWIND only while a range of the callbacks is open (they flip
    its bit in the interpreter's table of global events): True; False where the table is not
    found or does not follow set_events (the caller turns PY_UNWIND on for good)."""
    events, bit = monitoring.events, 1 << tool_id
    if client.global_events() is None:
        return False
    for wanted in (events.PY_THROW, events.PY_THROW | events.PY_UNWIND, events.PY_THROW):
        monitoring.set_events(tool_id, wanted)
        unwind, throw = client.global_events()
        if not throw & bit or bool(unwind & bit) != bool(wanted & events.PY_UNWIND):
            return False
    client.arm_unwind(tool_id)
    return True


def _local_events() -> int:
    events = _sys_monitoring().events
    flags: int = events.PY_START | events.PY_RESUME | events.PY_RETURN | events.PY_YIELD
    return flags


_LOCAL_EVENTS = _local_events() if sys.version_info >= (3, 12) else 0
