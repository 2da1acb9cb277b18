"""multiprocessing children: the main script they re-run gets its ranges, their events get written.

- spawn and forkserver children re-run the parent's main script as `__mp_main__` through
  runpy (multiprocessing.spawn._fixup_main_from_path / _from_name), past every import hook:
  it is instrumented right after, as the runner instruments `__main__`.
- fork and forkserver children end with `os._exit()` after `BaseProcess._bootstrap()`
  (multiprocessing.popen_fork, multiprocessing.forkserver), past atexit and the recorder's
  own exit hook: their events are flushed when `_bootstrap` returns, as coverage.py's
  multiproc support saves its data there.
- every multiprocessing child leaves a note naming itself (its process name), so a child that
  dies before writing its events is named in the trace.
- a child names itself before a SIGTERM can end it: a pool ends its workers as soon as its
  tasks are done (`with Pool()`), and those still starting up appeared under their command
  line, or not at all, varying run to run. A spawn child is started with SIGTERM blocked (the
  mask survives exec; CPython starts its resource tracker so, resource_tracker.py) and
  unblocks it once named; a fork child is named in the at-fork hook, which runs while the
  recorder still holds SIGTERM back (recorder/shutdown.py blocks it around each fork and
  releases it in its own hook, registered after ours).
- every multiprocessing child where autonvtx handles SIGTERM (recording, or ending through
  another NVTX tool's exit, termination.py) is watched from `_bootstrap` on: a SIGTERM that
  one of its other threads takes ends it even while its main thread waits in C
  (recorder/shutdown.py).
"""

from __future__ import annotations

import _thread
import functools
import os
import sys
import types

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from typing import Any

    from autonvtx.control import Instrumentation
else:  # its C half: the same functions and numbers, without building the enums of `signal`
    import _signal as signal

# What the `-c` code of an interpreter multiprocessing started begins with (Lib/multiprocessing/
# spawn.py get_command_line, forkserver.py ensure_running, resource_tracker.py ensure_running).
_SPAWN_CODE = "from multiprocessing.spawn import"
_FORKSERVER_CODE = "from multiprocessing.forkserver import"
_HELPER_CODE = "from multiprocessing."

_instrumentation: Instrumentation | None = None
_record = False
_silence_forks = False
_exits_normally = False  # a spawn child returns from _bootstrap into sys.exit(): atexit flushes
_fork_hook_registered = False
# In a process starting a child, on the starting thread: the Process object and whether its
# child starts with SIGTERM blocked by us (a fork child keeps the forking thread's copy).
_starting = _thread._local()  # threading.local, without importing threading (start-up)
# In a spawn child's preparation data: the parent blocked SIGTERM for it (unknown keys are
# ignored by multiprocessing.spawn.prepare).
_UNBLOCK_KEY = "autonvtx_unblock_sigterm"


def multiprocessing_role(orig_argv: list[str] | None = None) -> str | None:
    """What multiprocessing started this interpreter as: "spawn" (a child that re-runs the main
    script), "forkserver", "helper" (the resource tracker), or None."""
    argv = sys.orig_argv if orig_argv is None else orig_argv
    code = _command_code(argv)
    if code is None:
        return None
    if code.startswith(_SPAWN_CODE):
        return "spawn"
    if code.startswith(_FORKSERVER_CODE):
        return "forkserver"
    if code.startswith(_HELPER_CODE):
        return "helper"
    return None


def _command_code(argv: list[str]) -> str | None:
    """The code of `python [options] -c CODE ...`; None when the interpreter runs anything else."""
    i = 1
    while i < len(argv):
        option = argv[i]
        if option == "-c":
            return argv[i + 1] if i + 1 < len(argv) else None
        if option in ("-m", "-", "--") or not option.startswith("-"):
            return None  # a module, stdin or a script: what follows is the program's
        i += 2 if option in ("-W", "-X") else 1
    return None


def install(instrumentation: Instrumentation | None, *, record: bool, role: str | None) -> None:
    """Prepare this process's multiprocessing children (and itself, when it is one).

    `instrumentation` instruments `__mp_main__` (None: no rules); `record`: this run records, so
    each multiprocessing child notes itself and flushes its events.
    """
    global _instrumentation, _record, _exits_normally
    _instrumentation = instrumentation
    _record = record
    _exits_normally = role == "spawn"
    _register_fork_hook()
    if role in ("spawn", "forkserver"):
        # Imported now, before the child runs anything: it is about to import them anyway.
        import multiprocessing.process
        import multiprocessing.spawn

        if instrumentation is not None:
            _patch_main_fixups(multiprocessing.spawn)
        if record:
            _patch_process_bootstrap(multiprocessing.process)
            _patch_prepare(multiprocessing.spawn)
    if record:
        # Imported now in a recording process (about 5 ms): its children are named from here.
        import multiprocessing.process
        import multiprocessing.spawn

        _patch_process_start(multiprocessing.process, multiprocessing.spawn)


def silence_fork_children() -> None:
    """`--no-children`: a child forked from this process records nothing (its recorder turns
    into a tool that does nothing) and its events never join the trace."""
    global _silence_forks
    _silence_forks = True
    _register_fork_hook()


def _register_fork_hook() -> None:
    global _fork_hook_registered
    if not _fork_hook_registered:
        os.register_at_fork(after_in_child=_after_fork)
        _fork_hook_registered = True


def _after_fork() -> None:
    global _exits_normally
    _exits_normally = False  # a multiprocessing fork child ends by os._exit()
    try:
        if _silence_forks:
            from autonvtx.recorder import native

            native.control().set_mode("noop")
        elif _record or _handles_sigterm():  # recorded, or ended through another NVTX tool
            process = sys.modules.get("multiprocessing.process")
            if process is not None:
                _patch_process_bootstrap(process)
            started = getattr(_starting, "process", None) if _record else None  # the forking thread's, copied
            if started is not None:
                # Named now, while the recorder holds SIGTERM back; the SIGTERM handler is the
                # parent's until _bootstrap (starting a watcher thread here, with SIGTERM still
                # blocked, would leave it unable to see the signal).
                _note(str(started.name))
    except Exception:  # the child runs on, unrecorded
        pass


# Registered on import: `autonvtx run` and the child bootstrap import this module before the
# recorder registers its own at-fork hooks, and after-fork hooks run in registration order.
_register_fork_hook()


def _patch_process_bootstrap(process_module: types.ModuleType) -> None:
    base = process_module.BaseProcess
    original = base.__dict__["_bootstrap"]
    if getattr(original, "__autonvtx_original__", None) is not None:
        return

    @functools.wraps(original)
    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        _process_started(self)
        try:
            return original(self, *args, **kwargs)
        finally:
            if _record and not _exits_normally:
                from autonvtx.recorder.shutdown import flush_process

                flush_process()

    _bootstrap.__autonvtx_original__ = original  # type: ignore[attr-defined]
    base._bootstrap = _bootstrap


def is_sigterm_held() -> bool:
    """Whether this thread starts with SIGTERM blocked (a spawn child: its parent held it back
    until the child names itself in multiprocessing.spawn.prepare)."""
    return signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, set())


def _handles_sigterm() -> bool:
    """Whether autonvtx's SIGTERM handler is set in this process (a recording, or another NVTX
    tool's ending, termination.py); no import where it cannot be."""
    shutdown = sys.modules.get("autonvtx.recorder.shutdown")
    return shutdown is not None and bool(shutdown.handles_sigterm())


def _process_started(process: Any) -> None:
    try:
        if not _record:
            # Under another NVTX tool the child inherited the handler that ends it through C
            # exit(): watched as a recording child is (shutdown.watch_sigterm).
            from autonvtx.recorder.shutdown import watch_sigterm

            watch_sigterm()
            return
        from autonvtx.recorder.shutdown import follow_exit

        # The SIGTERM handler first: a child terminated before it is set leaves no note either,
        # rather than a note that reads as a crash.
        follow_exit()
        _note(str(process.name))
    except Exception:
        pass


def _note(name: str) -> None:
    from autonvtx.ranks import detect_rank, label_with_rank
    from autonvtx.recorder.session import note_process

    note_process(label_with_rank(name, detect_rank()))


def _patch_process_start(process_module: types.ModuleType, spawn: types.ModuleType) -> None:
    """In the parent: a spawn child starts with SIGTERM blocked (the mask survives exec) until
    it has named itself; a fork child finds its Process object (see the module's docstring)."""
    base = process_module.BaseProcess
    original = base.__dict__["start"]
    if getattr(original, "__autonvtx_original__", None) is not None:
        return

    @functools.wraps(original)
    def start(self: Any) -> None:
        _starting.process = self
        _starting.spawn = _start_method(self) == "spawn"
        _starting.mask = None
        try:
            original(self)
        finally:
            previous, _starting.mask = _starting.mask, None
            _starting.process = None
            _starting.spawn = False
            if previous is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    start.__autonvtx_original__ = original  # type: ignore[attr-defined]
    base.start = start
    preparation = spawn.get_preparation_data
    if getattr(preparation, "__autonvtx_original__", None) is None:

        @functools.wraps(preparation)
        def get_preparation_data(name: str) -> dict[str, Any]:
            data: dict[str, Any] = preparation(name)
            # Blocked here, just before the spawn: not earlier, since starting the resource
            # tracker (on the first spawn) unblocks SIGTERM (resource_tracker.ensure_running).
            if getattr(_starting, "spawn", False) and _starting.mask is None:
                _starting.mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                # A program that blocked SIGTERM itself leaves its children so.
                if signal.SIGTERM not in _starting.mask:
                    data[_UNBLOCK_KEY] = True
            return data

        get_preparation_data.__autonvtx_original__ = preparation  # type: ignore[attr-defined]
        spawn.get_preparation_data = get_preparation_data  # type: ignore[attr-defined]


def _start_method(process: Any) -> str | None:
    method = getattr(process, "_start_method", None)
    if method is not None:
        return str(method)
    try:  # a plain Process: the default context's method, which start() is about to fix too
        import multiprocessing

        return multiprocessing.get_start_method()
    except Exception:
        return None


def _patch_prepare(spawn: types.ModuleType) -> None:
    """In a spawn or forkserver child: name itself as soon as its name arrives, then take the
    SIGTERM the parent held back for it."""
    original = spawn.prepare
    if getattr(original, "__autonvtx_original__", None) is not None:
        return

    @functools.wraps(original)
    def prepare(data: dict[str, Any]) -> None:
        # Before the main script is re-run (in prepare): no thread it starts inherits the mask.
        try:
            from autonvtx.recorder.shutdown import flush_on_sigterm, follow_exit

            if data.get(_UNBLOCK_KEY):
                flush_on_sigterm()  # the handler, for a SIGTERM held back until now
                if "name" in data:
                    _note(str(data["name"]))
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            # Then the rest (its watcher thread now starts with SIGTERM unblocked, as it must).
            follow_exit()
            if "name" in data and not data.get(_UNBLOCK_KEY):
                _note(str(data["name"]))
        except Exception:
            pass
        original(data)

    prepare.__autonvtx_original__ = original  # type: ignore[attr-defined]
    spawn.prepare = prepare  # type: ignore[attr-defined]


def _patch_main_fixups(spawn: types.ModuleType) -> None:
    for name in ("_fixup_main_from_path", "_fixup_main_from_name"):
        original = getattr(spawn, name, None)
        if original is None or getattr(original, "__autonvtx_original__", None) is not None:
            continue
        patched = _instrumenting(original)
        patched.__autonvtx_original__ = original  # type: ignore[attr-defined]
        setattr(spawn, name, patched)


def _instrumenting(fixup: Callable[[str], None]) -> Callable[[str], None]:
    @functools.wraps(fixup)
    def fixup_then_instrument(argument: str) -> None:
        fixup(argument)
        main = sys.modules.get("__mp_main__")
        if isinstance(main, types.ModuleType) and _instrumentation is not None:
            instrument_mp_main(_instrumentation, main)

    return fixup_then_instrument


def instrument_mp_main(instrumentation: Instrumentation, main: types.ModuleType) -> None:
    """Instrument the main script multiprocessing re-ran as `__mp_main__`; never raises.

    runpy ran it in a temporary module and copied its globals into `main`: the script's
    functions still look names up in the temporary globals, so each name rebound to a wrapper
    in `main` is rebound there too (else calls from one function to another would miss it).
    """
    try:
        if not instrumentation.should_consider_module("__mp_main__"):
            return
        namespace = vars(main)
        before = dict(namespace)
        instrumentation.instrument_module(main)
        rebound = {name: value for name, value in namespace.items() if before.get(name) is not value}
        script_globals = {
            id(value.__globals__): value.__globals__
            for value in before.values()
            if type(value) is types.FunctionType and value.__globals__ is not namespace
        }
        for globals_ in script_globals.values():
            for name, wrapper in rebound.items():
                if globals_.get(name) is before.get(name):
                    globals_[name] = wrapper
    except Exception:  # the script runs on with what could be wrapped
        pass
