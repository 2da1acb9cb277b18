"""The first process's side of the watcher (`recorder.watcher`): start it, and tell it the end was
normal.

The recorder's exit-time writer runs inside the program's own process, so a program that ends
without running its exit (os._exit, SIGKILL, a crash) writes nothing. The watcher is the lightest
thing that can notice it: a separate process, started once per run, that waits on the program.

It must change nothing the program or its caller sees, hence its shape:
- not a child of the program (started in the background by a shell that ends at once: the
  program's `os.wait()` loops, its child lists and its SIGCHLD never see it), and in a session of
  its own (Ctrl-C and job-control signals for the terminal's foreground group do not reach it);
- an `exec` of a bare interpreter (`-I -S`): it holds none of the program's memory, and its
  stdin and stdout are /dev/null (`autonvtx run ... | cat` ends when the program does); it keeps
  stderr, for what it says;
- the program learns nothing of it: two descriptors are made and closed again, one pipe's write
  end stays open (close-on-exec) until the exit-time writer writes the byte that says "done".
Cost on the start path: a posix_spawn of /bin/sh, waited for (1.3-1.7 ms of CPU; `benchmarks/watcher.py`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass
class Watch:
    """A started watcher: the pipe's write end, and what it was (a program may close its
    descriptors and reuse the number for a file of its own: then the byte is not written)."""

    owner: int  # the pid that started it: a fork child inherits this object, and is not the program
    done_fd: int
    identity: tuple[int, int]

    def say_done(self) -> None:
        """The program's exit has dealt with the outputs: the watcher may go. Once; never raises."""
        if os.getpid() != self.owner or self.done_fd < 0:
            return
        fd, self.done_fd = self.done_fd, -1
        try:
            status = os.fstat(fd)
            if (status.st_dev, status.st_ino) == self.identity:
                os.write(fd, b"\1")
                os.close(fd)
        except OSError:
            pass


def start_watcher(command: list[str], env: dict[str, str]) -> Watch | None:
    """Start the watcher, which runs `command` (with `env`) if this process dies without
    `say_done()`; None where it cannot be done without changing what the program sees."""
    if not _can_watch():
        return None
    try:
        pidfd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):  # Linux < 5.3, or a sandbox without it: the watcher polls
        pidfd = -1
    read_fd, write_fd = os.pipe()  # both close-on-exec
    try:
        for fd in (pidfd, read_fd):  # for the watcher; closed here right after
            if fd >= 0:
                os.set_inheritable(fd, True)
        argv = [sys.executable, "-I", "-S", _watcher_script(), str(os.getpid()), str(pidfd), str(read_fd), *command]
        # sh starts the watcher in the background and ends at once: the watcher is left to init
        # (or the nearest subreaper), and this process only waits for a small shell.
        shell = ["/bin/sh", "-c", '"$0" "$@" &', *argv]
        _wait(
            os.posix_spawn(
                shell[0],
                shell,
                env,
                setsid=True,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                ],
            )
        )
        status = os.fstat(write_fd)
    except OSError:
        os.close(write_fd)
        return None
    finally:
        os.close(read_fd)
        if pidfd >= 0:
            os.close(pidfd)
    return Watch(os.getpid(), write_fd, (status.st_dev, status.st_ino))


def _can_watch() -> bool:
    """Not as pid 1 (an orphan would be the program's own child), not without an interpreter and
    a shell to run, and not with other threads alive (one of them could start a process that
    inherits the descriptors made inheritable for a moment)."""
    if os.getpid() == 1 or not sys.executable or not hasattr(os, "posix_spawn") or not os.path.exists("/bin/sh"):
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _watcher_script() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "watcher.py")


def _wait(pid: int) -> None:
    try:
        os.waitpid(pid, 0)  # retried on EINTR by Python (PEP 475)
    except ChildProcessError:  # reaped by a SIGCHLD handler of the caller's
        pass
