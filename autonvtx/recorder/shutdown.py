"""A recording process writes its events when it ends: at exit, and on SIGTERM from any thread.

SIGTERM is how `multiprocessing` ends pool workers (`Pool.terminate()`, `with Pool()`) and
daemon processes, and how launchers stop jobs. A Python-level handler alone is not enough:
it runs only in the main thread, between bytecodes, and a main thread that enters a blocking
C call just after the signal arrived (a pool worker taking its queue's lock, which its
terminating parent holds) never runs it: the process would live on, and the parent that
waits for it would hang. So in a child the handler is doubled by a thread of ours, woken
through `signal.set_wakeup_fd()` by CPython's C-level handler itself: whichever runs first
writes the events, then the process ends by SIGTERM's default action, with the status it
would have had. The same holds when another thread takes the signal: the kernel hands a
process-directed SIGTERM to any thread that does not block it, a tool's or a library's too
(CUDA's, an NVTX tool's); the C-level handler runs there and the main thread, waiting in C,
never learns of it. The thread acts only while the handler is ours: a program that set its
own keeps it in charge. (Not in the first process: there a SIGTERM
comes from outside, rarely at such a moment, and a thread would make Python 3.12+ warn at each
of its forks.)

The first process's exit-time write (trace, summary) can take seconds: a Ctrl-C or SIGTERM
then stops it (`interruptible`): the partial outputs are removed, the recording is kept for
`autonvtx recover`, and the process ends by that signal.
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from autonvtx import environment


def flush_process() -> None:
    """Write this process's events so far to `$AUTONVTX_RECORD_DIR/<pid>.anr`; never raises.

    Writing again replaces the file with everything recorded until then.
    """
    if not os.environ.get(environment.RECORD_DIR):
        return
    try:
        _recorder_control().flush()
    except Exception as error:
        # Gone (ENOENT): the run's first process already wrote the outputs, removed the
        # directory and named this process as missing. Anything else is said, not swallowed.
        if not isinstance(error, OSError) or error.errno != errno.ENOENT:
            try:
                sys.stderr.write(f"autonvtx: process {os.getpid()}: its events could not be written: {error}\n")
            except Exception:
                pass


def _recorder_control() -> Any:
    from autonvtx.recorder import native

    return native.control()


_followed_pid = 0


def follow_exit() -> None:
    """A child's events are written when it exits, normally or by SIGTERM. Once per process."""
    global _followed_pid
    if _followed_pid == os.getpid():
        return
    _followed_pid = os.getpid()
    try:
        _recorder_control()  # loaded now, not on the way out
    except OSError:
        return
    atexit.register(flush_process)
    on_sigterm(flush_process, watch=True)


class Interrupted(BaseException):
    """A signal (SIGINT, SIGTERM) that stopped the writing of the recording's outputs.

    A BaseException, as KeyboardInterrupt is: nothing on the way may take it for a failure."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def flush_on_sigterm() -> bool:
    """On SIGTERM, write this process's events, then end by SIGTERM (the handler only: a spawn
    child sets it before it unblocks the SIGTERM its parent held back; follow_exit adds the rest).

    What the handler needs is loaded first. A SIGTERM runs the handler at the next bytecode,
    perhaps in the middle of importing the very module the flush needs: it found a partially
    initialised module, the flush failed, and a pool worker its pool ended was named missing
    or "ended abnormally", in a few runs out of ten.
    """
    try:
        _recorder_control()
    except OSError:
        return False
    return on_sigterm(flush_process)


_action: Callable[[], None] | None = None
_action_lock = threading.Lock()
_acted_pid = 0
_acting_thread: int | None = None  # the thread running _action now
_writing_thread: int | None = None  # the thread inside interruptible() now
_watch_fds: tuple[int, int] | None = None  # the wakeup pipe (read end, write end)
_fork_hooks_registered = False
_masks_before_fork: dict[int, set[int | signal.Signals]] = {}  # forking thread -> its mask


def on_sigterm(action: Callable[[], None], *, watch: bool = False, through_exit: bool = False) -> bool:
    """On SIGTERM run `action` (once), then end the process as SIGTERM would; with `watch`, also
    when the main thread cannot run the handler.

    Only where SIGTERM has its default action, or ours already: a program's own handler stays
    in charge. Main thread only (Python sets signal handlers there); False where not set.
    """
    global _action
    try:
        current = signal.getsignal(signal.SIGTERM)
        if current is not signal.SIG_DFL and current is not _handle_sigterm:
            return False
        signal.signal(signal.SIGTERM, _handle_sigterm)
    except ValueError:
        return False
    _action = action
    if watch:
        _watch_wakeups()
    _register_fork_hooks()
    _install_deadline(through_exit)
    return True


# How long SIGTERM's Python handler has to start before the process ends without it (see
# _native/deadline.c): the main thread runs it at its next bytecode, within microseconds unless
# it is blocked in C.
SIGTERM_GRACE_SECONDS = 1.0


def _install_deadline(through_exit: bool) -> bool:
    """SIGTERM ends the process within the grace period even where the Python handler cannot
    run; `through_exit` (another NVTX tool keeps its events in its exit hooks: termination.py)
    through C exit. False where the native client is missing or cannot set it up (the Python
    handler alone then acts)."""
    try:
        from autonvtx import _nvtxclient

        return bool(_nvtxclient.sigterm_deadline(SIGTERM_GRACE_SECONDS, through_exit))
    except Exception:
        return False


def disarm_deadline() -> None:
    """SIGTERM's handler has started acting: it ends the process itself."""
    try:
        from autonvtx import _nvtxclient

        _nvtxclient.sigterm_deadline_disarm()
    except Exception:
        pass


def handles_sigterm() -> bool:
    """Whether autonvtx's handler is SIGTERM's now (not the program's, not the default action).
    Any thread."""
    try:
        return signal.getsignal(signal.SIGTERM) is _handle_sigterm
    except Exception:
        return False


def watch_sigterm() -> bool:
    """Where autonvtx's handler is SIGTERM's: a thread of ours acts on a SIGTERM whichever thread
    took it, also while the main thread is blocked in C (a pool worker waiting in `sem_wait` for
    a task: the signal reached it just before it entered the wait, or reached a thread an NVTX
    tool or a library started, and the Python handler waits for the main thread's next
    bytecode). Once per process; main thread only; False where not set up (the program's own
    handler, the default action, or the program's own wakeup fd)."""
    if not handles_sigterm():
        return False
    _watch_wakeups()
    return _watch_fds is not None


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """While the outputs are written in this thread: SIGINT and SIGTERM raise Interrupted here,
    so that the writing stops and unwinds (removing its partial files) instead of going on for
    seconds, or the process dying in the middle of it."""
    global _writing_thread
    previous, _writing_thread = _writing_thread, threading.get_ident()
    sigint = None
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            sigint = signal.signal(signal.SIGINT, _raise_interrupted)
    except ValueError:  # not the main thread: Python runs no handler here anyway
        pass
    try:
        yield
    finally:
        _writing_thread = previous
        if sigint is not None:
            signal.signal(signal.SIGINT, sigint)


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def die_of(signum: int) -> None:
    """End the process by `signum`'s default action: the exit status a shell shows for it
    (130 for SIGINT, 143 for SIGTERM), what it would have been without us."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if threading.get_ident() == threading.main_thread().ident:
        signal.signal(signum, signal.SIG_DFL)
    else:  # Python sets handlers from the main thread only; the C library does not mind
        _libc_signal(signum, None)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)


def _handle_sigterm(signum: int, frame: FrameType | None) -> None:
    if _writing_thread == threading.get_ident():  # the outputs are being written: stop that
        disarm_deadline()
        raise Interrupted(signum)
    _act_and_die()


def _act_and_die() -> None:
    global _acted_pid, _acting_thread
    disarm_deadline()
    if _acting_thread == threading.get_ident():
        return  # a second SIGTERM, in the middle of the first one's action: it dies after
    with _action_lock:  # the second caller waits until the first has written everything
        if _acted_pid != os.getpid():
            _acted_pid = os.getpid()
            _acting_thread = threading.get_ident()
            try:
                if _action is not None:
                    _action()
            except Exception:
                pass
            finally:
                _acting_thread = None
    _die_of_sigterm()


def _die_of_sigterm() -> None:
    die_of(signal.SIGTERM)


def _libc_signal(signum: int, handler: None) -> None:
    import ctypes

    libc = ctypes.CDLL(None)
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.signal.restype = ctypes.c_void_p
    libc.signal(signum, handler)


def _watch_wakeups() -> None:
    """Start the thread CPython's C-level signal handler wakes (through the wakeup fd)."""
    global _watch_fds
    if _watch_fds is not None:
        # Another at-fork hook may have reset it since (asyncio's does, 3.12+): ours again,
        # unless the program has set its own.
        try:
            current = signal.set_wakeup_fd(_watch_fds[1], warn_on_full_buffer=False)
            if current not in (-1, _watch_fds[1]):
                signal.set_wakeup_fd(current)
        except ValueError:
            pass
        return
    import ctypes  # noqa: F401  (_libc_signal needs it in the watcher, perhaps mid-import elsewhere)

    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:
        previous = None
    if previous != -1:  # not the main thread, or the program's own (asyncio): left to it
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return
    _watch_fds = (read_fd, write_fd)
    # A raw thread: threading.enumerate() and active_count() stay what the program expects.
    _thread.start_new_thread(_watch, (read_fd,))


def _watch(read_fd: int) -> None:
    while True:
        try:
            signals = os.read(read_fd, 64)
        except OSError:
            return
        if not signals:
            return
        # The C-level handler writes the fd whichever Python handler is set: a program that
        # set its own since (a pool initializer, the process's target) keeps it in charge.
        if signal.SIGTERM in signals and handles_sigterm():
            _act_and_die()
            return


def _register_fork_hooks() -> None:
    global _fork_hooks_registered
    if not _fork_hooks_registered:
        os.register_at_fork(
            before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
        )
        _fork_hooks_registered = True


def _before_fork() -> None:
    # SIGTERM is held back while the process forks: CPython drops every signal that reaches a
    # fork child before it has reset its signal state there (_PySignal_AfterFork, bpo-9535),
    # and a child with our handler would then live on. Blocked, it waits until the child is
    # ready for it.
    _masks_before_fork[threading.get_ident()] = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _after_fork_in_parent() -> None:
    _restore_mask()


def _after_fork_in_child() -> None:
    global _action_lock, _watch_fds, _acting_thread, _writing_thread
    _action_lock = threading.Lock()  # another thread may have held it at the fork
    _acting_thread = _writing_thread = None
    inherited, _watch_fds = _watch_fds, None
    if inherited is not None:
        # The parent's pipe: its watcher would read this child's signals.
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:
            pass
        for fd in inherited:
            os.close(fd)
    # Then SIGTERM again (a pending one reaches the Python handler: no wakeup fd yet), and a
    # watcher of the child's own, started with SIGTERM unblocked so that it inherits that mask.
    _restore_mask()
    if inherited is not None and signal.getsignal(signal.SIGTERM) is _handle_sigterm:
        _watch_wakeups()


def _restore_mask() -> None:
    mask = _masks_before_fork.pop(threading.get_ident(), None)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
