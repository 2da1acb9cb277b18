"""The watcher: a small process that outlives a recording run's first process and, if that
process ended without running its exit (os._exit, a signal, a crash), starts the writing of its
outputs from what it spilled.

Run as a script (`python -I -S watcher.py PID PIDFD DONE_FD COMMAND...`, started by
`recorder.watch`), so it imports nothing of autonvtx and starts in a few milliseconds: it only
waits. PIDFD (a pidfd of the program, -1 where the kernel has none) becomes readable when the
program dies; DONE_FD is the read end of a pipe the program writes one byte to once its own exit
has dealt with the outputs. Death without that byte: the watcher becomes COMMAND (exec).
"""

from __future__ import annotations

import os
import select
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

POLL_SECONDS = 0.2  # how often the program is looked at where no pidfd says when it dies
# `--flight`: the record directory whose windows (flight-N/flight.json, written last) the watcher
# has turned into traces while the program runs, by COMMAND + [window directory] in a process of
# its own; the program's exit writes those it did not claim (flight-N/claimed).
# environment.WATCH_FLIGHT_DIR and WATCH_FLIGHT_COMMAND, spelled out: this script imports nothing
# of autonvtx (tests/test_recorder_watcher.py holds them equal).
FLIGHT_DIR = "AUTONVTX_WATCH_FLIGHT_DIR"
FLIGHT_COMMAND = "AUTONVTX_WATCH_FLIGHT_COMMAND"
FLIGHT_SECONDS = 0.5


def main(argv: list[str]) -> None:
    pid, pidfd, done_fd = int(argv[0]), int(argv[1]), int(argv[2])
    command = argv[3:]
    _close_others({pidfd, done_fd})
    try:
        os.chdir("/")  # hold no directory of the user's (a mount to unmount, a folder to remove)
    except OSError:
        pass
    if _program_ended_normally(pid, pidfd, done_fd) or not command:
        os._exit(0)
    os.execv(command[0], command)


def _close_others(keep: set[int]) -> None:
    """Every descriptor but stdio and ours: what the program's parent let it inherit (a pipe a
    reader waits on) must not stay open in a process that outlives the program."""
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, 1024))
    for fd in open_fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:  # the listing's own descriptor, closed already
                pass


def _program_ended_normally(pid: int, pidfd: int, done_fd: int) -> bool:
    """Waits until the program says its end was normal (True) or dies without saying it (False)."""
    poller = select.poll()
    poller.register(done_fd, select.POLLIN)
    if pidfd >= 0:
        poller.register(pidfd, select.POLLIN)
    done_open = True
    flight = _flight_writer()
    timeout = POLL_SECONDS * 1000 if pidfd < 0 else None
    if flight is not None:
        timeout = min(timeout or FLIGHT_SECONDS * 1000, FLIGHT_SECONDS * 1000)
    while True:
        try:
            events = poller.poll(timeout)
        except InterruptedError:
            continue
        if flight is not None:
            try:
                flight()
            except Exception:  # noqa: BLE001 - a window it fails on is written at exit; the watcher must live on
                pass
        for fd, _ in events:
            if fd == done_fd:
                if _read_byte(done_fd):
                    return True
                # End of file: every writer is gone (the program died, or closed its
                # descriptors); the pidfd or the polling below says which.
                poller.unregister(done_fd)
                done_open = False
            elif fd == pidfd:
                return done_open and _read_byte(done_fd)
        if pidfd < 0 and not _is_alive(pid):
            return done_open and _read_byte(done_fd)


def _flight_writer() -> Callable[[], None] | None:
    """What writes new flight windows (None without --flight): each complete window not claimed
    yet is claimed (a directory made: one writer gets it) and written by the command."""
    import json

    directory = os.environ.get(FLIGHT_DIR)
    command = os.environ.get(FLIGHT_COMMAND)
    if not directory or not command:
        return None
    argv = json.loads(command)
    env = {k: v for k, v in os.environ.items() if k not in (FLIGHT_DIR, FLIGHT_COMMAND)}

    writing = [0]  # the writer running, one at a time: many slow steps must not start many processes

    def write_new_windows() -> None:
        if writing[0]:
            try:
                if os.waitpid(writing[0], os.WNOHANG)[0] == 0:
                    return  # still writing
            except ChildProcessError:
                pass
            writing[0] = 0
        try:
            names = sorted(os.listdir(directory), key=lambda name: (len(name), name))
        except OSError:
            return
        for name in names:
            window = os.path.join(directory, name)
            if not name.startswith("flight-") or not os.path.isfile(os.path.join(window, "flight.json")):
                continue
            try:
                os.mkdir(os.path.join(window, "claimed"))
            except OSError:  # claimed already (or the directory is going away)
                continue
            try:
                writing[0] = os.posix_spawn(argv[0], [*argv, window], env)
            except OSError:
                os.rmdir(os.path.join(window, "claimed"))  # the program's exit writes it
            return

    return write_new_windows


def _read_byte(fd: int) -> bool:
    os.set_blocking(fd, False)
    try:
        return bool(os.read(fd, 1))
    except OSError:  # EAGAIN: nothing was written
        return False
    finally:
        os.set_blocking(fd, True)


def _is_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet waited for by its parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X", b"x")


if __name__ == "__main__":
    main(sys.argv[1:])
