"""Module calls: a replacement of `nn.Module._call_impl` that ranges each call by its name."""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autonvtx import shapes as shapes_of
from autonvtx.plugins.torch.backward import BackwardRanges
from autonvtx.plugins.torch.memory import MemoryMarks
from autonvtx.plugins.torch.naming import ModuleNamer, Table

if TYPE_CHECKING:
    from autonvtx.plugins import PluginContext
    from autonvtx.ranges import Emitter


class _CallState(threading.local):
    """Per thread: the naming tables of the roots being called, innermost last."""

    def __init__(self) -> None:
        self.tables: list[Table] = []


class CallOptions:
    """What a module call's range carries beyond its name (each off unless asked for)."""

    __slots__ = ("backward", "shapes", "memory")

    def __init__(
        self, backward: BackwardRanges | None = None, shapes: bool = False, memory: MemoryMarks | None = None
    ) -> None:
        self.backward = backward
        self.shapes = shapes
        self.memory = memory

    def any(self) -> bool:
        return self.backward is not None or self.shapes or self.memory is not None


def patch_module_call(
    torch: types.ModuleType,
    namer: ModuleNamer,
    is_compiling: Callable[[], bool],
    context: PluginContext,
    options: CallOptions,
) -> None:
    # Module._call_impl, not global forward hooks: any global hook sends every module call
    # down _call_impl's slow path (hook lists rebuilt per call, ~3x the cost, measured), and
    # a post-hook is skipped when forward raises unless registered with always_call (2.1+).
    # A replaced _call_impl keeps the fast path, and try/finally pops on exceptions. Built by
    # hand, not by wrap_method: the emitter comes from the naming table of the root model
    # being called, which this call may have to push first (and pop after).
    Module = torch.nn.Module
    # Before torch 2.1, __call__ was _call_impl itself (no _wrapped_call_impl in between).
    impl = vars(Module).get("_call_impl")
    call_is_impl = impl is not None and vars(Module).get("__call__") is impl
    state = _CallState()
    skip = _dynamo_skipper(torch, context)
    make = _plain_maker(state, namer, is_compiling, skip)
    if options.any():
        make = _extended_maker(torch, state, namer, is_compiling, options, skip)

    if not context.replace(Module, "_call_impl", make):
        return  # the context noted why
    if call_is_impl:
        context.replace(Module, "__call__", lambda original: vars(Module)["_call_impl"])
    context.note("nn.Module calls: ranges named by model path")


def _dynamo_skipper(torch: types.ModuleType, context: PluginContext) -> Callable[[Callable[..., Any]], None]:
    """What marks a function of ours so that dynamo does not compile a frame of it on its own:
    after a graph break in a module's forward, dynamo runs the frames above it eagerly and
    would try to compile ours too (one more frame evaluated and one more graph break logged
    than without autonvtx). What torch._dynamo.skip does, through torch._C alone: importing
    torch._dynamo costs seconds, and a program that never compiles never needs it. Inlining,
    when dynamo traces a module call from a compiled frame, is unaffected (is_compiling()
    folds to True there), and frames our functions call are compiled as before."""
    eval_frame = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)

    def skip(function: Callable[..., Any]) -> None:
        try:
            action = eval_frame._FrameAction  # type: ignore[union-attr]
            strategy = eval_frame._FrameExecStrategy(action.SKIP, action.DEFAULT)  # type: ignore[union-attr]
            eval_frame.set_code_exec_strategy(function.__code__, strategy)  # type: ignore[union-attr]
        except Exception as exc:  # another torch layout: dynamo may count one more frame
            context.note(f"{function.__qualname__}: not marked skipped for dynamo ({type(exc).__name__}: {exc})")

    return skip


def _plain_maker(
    state: _CallState,
    namer: ModuleNamer,
    is_compiling: Callable[[], bool],
    skip: Callable[[Callable[..., Any]], None],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    enter = namer.enter

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _call_impl(self: Any, *args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                # Dynamo folds this to True and inlines the original: nothing of ours is traced.
                return original(self, *args, **kwargs)
            tables = state.tables
            if tables:
                emitter = tables[-1].emitters.get(id(self))
                if emitter is not None:
                    emitter.push()
                    try:
                        return original(self, *args, **kwargs)
                    finally:
                        emitter.pop()
            try:
                table, emitter = enter(self, tables)
            except Exception:  # naming must never break the program's forward: no range then
                return original(self, *args, **kwargs)
            tables.append(table)
            emitter.push()
            try:
                return original(self, *args, **kwargs)
            finally:
                emitter.pop()
                tables.pop()

        skip(_call_impl)
        return _call_impl

    return make


def _extended_maker(
    torch: types.ModuleType,
    state: _CallState,
    namer: ModuleNamer,
    is_compiling: Callable[[], bool],
    options: CallOptions,
    skip: Callable[[Callable[..., Any]], None],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """_plain_maker's call with a backward range, shapes in the name, or memory marks."""
    enter = namer.enter
    variant = namer.variant
    backward = options.backward
    with_shapes = options.shapes
    memory = options.memory
    grad_enabled: Callable[[], bool] = torch.is_grad_enabled
    sequence_nr: Callable[[], int] = torch._C._autograd._get_sequence_nr
    shapes_key = shapes_of.key_function()  # C where built: no Python frame per module call
    shapes_suffix = shapes_of.suffix
    # Set while a torch.compile'd callable runs: then dynamo compiles any Python frame it has
    # not been told to skip, and would trace the helpers below (ranged() is skipped, what it
    # calls is not). A C call.
    eval_frame = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    dynamo_callback: Callable[[], Any] = getattr(eval_frame, "get_eval_frame_callback", _none)

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def ranged(table: Table, module: Any, emitter: Emitter, args: Any, kwargs: Any) -> Any:
            base = emitter
            if with_shapes:
                try:
                    key = shapes_key(args, kwargs)
                except Exception:  # an odd array-like: the call is ranged without shapes
                    key = ()
                if key:
                    emitter = variant(table, module, base, key, shapes_suffix, None)
            first = sequence_nr() if backward is not None and grad_enabled() else -1
            emitter.push()
            # Memory marks go inside the range: the first after its push, the last before its pop.
            entry = memory.begin() if memory is not None else None
            try:
                result = original(module, *args, **kwargs)
            finally:
                if entry is not None:
                    memory.end(entry)  # type: ignore[union-attr]
                emitter.pop()
            if first >= 0:
                back = variant(table, module, base, "backward", _BACKWARD_SUFFIX, "backward")
                backward.attach(back.native or _PythonRange(back), args, kwargs, result, first)  # type: ignore[union-attr]
            return result

        def _call_impl(self: Any, *args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                return original(self, *args, **kwargs)
            tables = state.tables
            if tables:
                table = tables[-1]
                emitter = table.emitters.get(id(self))
                if emitter is not None:
                    if dynamo_callback() is not None:
                        # The compiled module's own call: its range, nothing more (C calls).
                        emitter.push()
                        try:
                            return original(self, *args, **kwargs)
                        finally:
                            emitter.pop()
                    return ranged(table, self, emitter, args, kwargs)
            try:
                table, emitter = enter(self, tables)
            except Exception:  # naming must never break the program's forward: no range then
                return original(self, *args, **kwargs)
            tables.append(table)
            try:
                return ranged(table, self, emitter, args, kwargs)
            finally:
                tables.pop()

        skip(ranged)
        skip(_call_impl)
        return _call_impl

    return make


def _none() -> None:
    return None


def _BACKWARD_SUFFIX(key: Any) -> str:
    return " [backward]"


class _PythonRange:
    """start()/end(id) for an emitter without autonvtx's native client (the `nvtx` package's
    start/end ranges, same domain and message)."""

    __slots__ = ("message", "domain")

    def __init__(self, emitter: Emitter) -> None:
        self.message = emitter.message
        self.domain = emitter.domain

    def start(self) -> int:
        import nvtx  # loaded already: the emitters came from it

        return int(nvtx.start_range(message=self.message, domain=self.domain))

    def end(self, ident: int) -> None:
        import nvtx

        nvtx.end_range(ident)
