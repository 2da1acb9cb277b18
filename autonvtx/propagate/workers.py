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
"""
from __future__ import annotations

import functools
import os
import sys
import types
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from autonvtx.control import Instrumentation

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
        elif _record:
            process = sys.modules.get("multiprocessing.process")
            if process is not None:
                _patch_process_bootstrap(process)
    except Exception:  # the child runs on, unrecorded
        pass


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
            if not _exits_normally:
                from autonvtx.recorder.shutdown import flush_process

                flush_process()

    _bootstrap.__autonvtx_original__ = original  # type: ignore[attr-defined]
    base._bootstrap = _bootstrap


def _process_started(process: Any) -> None:
    try:
        from autonvtx.ranks import detect_rank, label_with_rank
        from autonvtx.recorder.session import note_process
        from autonvtx.recorder.shutdown import follow_exit

        # The SIGTERM handler first: a child terminated before it is set leaves no note either,
        # rather than a note that reads as a crash.
        follow_exit()
        note_process(label_with_rank(str(process.name), detect_rank()))
    except Exception:
        pass


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
