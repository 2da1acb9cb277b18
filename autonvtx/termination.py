"""How an instrumented process ends under another NVTX tool (Nsight Systems), so that the tool
keeps what the process emitted.

nsys's injection library holds a process's NVTX events until C `exit()` runs its exit hooks
(measured with nsys 2022.4.2, README "Nothing lost under nsys"): a process killed by SIGTERM's
default action, or ended by `os._exit()`, loses every range it had not handed over, which is
usually all of them. Two common endings do exactly that: `multiprocessing` ends pool workers
with SIGTERM (`Pool.terminate()`, `with Pool() as p`), and its fork and forkserver children
end with `os._exit()` after `BaseProcess._bootstrap()` returns.

So, where another tool is attached: SIGTERM (where it has its default action) ends the process
through C `exit(143)` instead, after nothing of Python's: no `finally`, no `atexit`, as the
signal would; only C exit hooks (the tool's among them) run. A parent reads status 143, what a
shell reports for SIGTERM; a Python parent sees 143 where it would have seen -15, the one
difference (dying of the signal after the hooks ran is not possible: they run last). And a
multiprocessing fork child that returns from `_bootstrap()` ends through `exit(code)` rather
than `os._exit(code)`, with the same status; and a SIGTERM that arrives while the process is
already exiting (after its atexit handlers) is ignored, since Python restores the default action
while it finalizes, before the C exit hooks run. In a fork child the tool also starts afresh: the
domain handles and registered strings the parent had are unknown to it, and events made with
them are dropped, so every prepared range asks for its handles again (`ranges.rebind`). The
signal plumbing (a handler in the main thread,
a watcher thread in children for a main thread blocked in C) is the recorder's own
(recorder/shutdown.py), with this ending as its action.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys

from autonvtx import environment

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from typing import Any
else:  # its C half: the same functions and numbers, without building the enums of `signal`
    import _signal as signal

_following_pid = 0
_fork_hook_registered = False
_exit: Callable[[int], None] | None = None
_ignore_sigterm: Callable[[], None] | None = None


def other_tool_attached() -> bool:
    """Whether the NVTX tool this process loads is another one than autonvtx's recorder."""
    current = os.environ.get(environment.NVTX_INJECTION64_PATH)
    if not current:
        return False
    from autonvtx.recorder import library_path

    ours = library_path()
    return ours is None or os.path.realpath(current) != os.path.realpath(ours)


def follow_tool_exit(*, watch: bool) -> bool:
    """Under another NVTX tool, end this process through C exit() on SIGTERM and, in its
    multiprocessing fork children, at their end (see the module's docstring). `watch`: also when
    the main thread is stuck in C (children only: a thread makes Python 3.12+ warn at each fork).
    Once per process; never raises; False where nothing was set up."""
    global _following_pid, _exit, _ignore_sigterm
    if _following_pid == os.getpid() or not other_tool_attached():
        return False
    try:
        _exit, _ignore_sigterm = _libc_functions()
        from autonvtx.recorder.shutdown import on_sigterm

        if on_sigterm(_end_on_sigterm, watch=watch, through_exit=True):
            # Registered now, before the program's own: it runs after them.
            atexit.register(_ignore_late_sigterm)
        _register_fork_hook()
    except Exception:  # the program runs on, as it would have without us
        return False
    _following_pid = os.getpid()
    return True


def _libc_functions() -> tuple[Callable[[int], None], Callable[[], None]]:
    """C exit(), and signal(SIGTERM, SIG_IGN) callable from any thread; loaded now, never
    inside a signal handler."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc_exit = libc.exit
    libc_exit.argtypes = [ctypes.c_int]
    libc_exit.restype = None
    libc_signal = libc.signal
    libc_signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc_signal.restype = ctypes.c_void_p
    sigterm, sig_ign = int(signal.SIGTERM), int(signal.SIG_IGN)

    def ignore_sigterm() -> None:
        libc_signal(sigterm, sig_ign)

    return libc_exit, ignore_sigterm


def _end_on_sigterm() -> None:
    end_process(128 + signal.SIGTERM)


def _ignore_late_sigterm() -> None:
    """At exit, once the program's atexit handlers ran: a SIGTERM from now on is ignored. Python
    puts SIGTERM back to its default action while it finalizes, and one arriving before the C
    exit hooks ran would lose everything the tool holds: a pool ends a worker that is already
    exiting (its task loop saw the pool's sentinel) as readily as an idle one. The process ends
    as it was ending, with its own status. Set through Python (atexit runs in the main thread):
    a handler set behind its back would be put back to the default action all the same."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:  # not the main thread: an embedding's own finalization
        pass


def end_by_sigint_after_finalizing() -> None:
    """After an uncaught KeyboardInterrupt: the process ends by SIGINT once the interpreter has
    finalized (the native client's C exit hook), unless another NVTX tool is attached or the
    client is missing, where it ends by its exit status (130)."""
    if other_tool_attached():
        return
    try:
        from autonvtx import _nvtxclient
    except ImportError:
        return
    _nvtxclient.end_by_sigint_after_finalizing()


def end_process(status: int) -> None:
    """End the process through C exit(status): the C exit hooks run (the NVTX tool writes what it
    holds), nothing of Python's does. A second SIGTERM cannot cut that short."""
    if _exit is not None and _ignore_sigterm is not None:
        _ignore_sigterm()
        try:
            from autonvtx import _nvtxclient

            # A library destructor exit() runs may wait forever for a lock another thread
            # holds (OpenBLAS joining its threads): _exit(status) ends it after the grace period.
            _nvtxclient.sigterm_deadline_exiting(status)
        except Exception:
            pass
        _exit(status)
    os._exit(status)


def _register_fork_hook() -> None:
    global _fork_hook_registered
    if not _fork_hook_registered:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook_registered = True


def _after_fork_in_child() -> None:
    global _following_pid
    _following_pid = os.getpid()  # the handler and the C exit came with the fork
    try:
        from autonvtx import ranges

        ranges.rebind()  # nsys starts afresh in a fork child: handles made before it are dropped
    except Exception:
        pass
    process = sys.modules.get("multiprocessing.process")
    if process is not None:
        try:
            _end_bootstrap_through_exit(process.BaseProcess)
        except Exception:
            pass


def _end_bootstrap_through_exit(base: Any) -> None:
    """In a fork child: a multiprocessing process started here ends through exit(code), where
    multiprocessing would call os._exit(code) (popen_fork.Popen._launch, forkserver)."""
    original = base.__dict__["_bootstrap"]
    if getattr(original, "__autonvtx_ends_through_exit__", False):
        return

    @functools.wraps(original)
    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        code = original(self, *args, **kwargs)
        end_process(code if isinstance(code, int) else 1)
        return code  # not reached

    _bootstrap.__autonvtx_ends_through_exit__ = True  # type: ignore[attr-defined]
    base._bootstrap = _bootstrap
