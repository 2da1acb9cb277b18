"""Python child processes run the parent's rules: what `autonvtx run` exports for them.

The parent puts the bootstrap directory (it holds only `sitecustomize.py`) first on PYTHONPATH
and its resolved configuration in AUTONVTX_CONFIG; every Python child, whoever starts it
(subprocess with `sys.executable`, multiprocessing, a launcher), runs
`autostart.process_startup()` during start-up, before its own code. Children forked without exec
inherit the parent's state as it is.
"""

from __future__ import annotations

import os
import sys

from autonvtx import environment, termination
from autonvtx.propagate import threads, workers

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from autonvtx.config import Config

BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap")

# Variables a child that is left alone (--no-children) drops, so that neither it nor its own
# children are recorded or instrumented.
_RUN_VARIABLES = (
    environment.CONFIG,
    environment.VERBOSE,
    environment.CHILDREN,
    environment.RECORD_DIR,
    environment.RECORD_LIMIT_MB,
)


def start(config: Config, *, verbose: int, recording: bool, follow: bool) -> None:
    """Carry `autonvtx run` into this process's threads (their names) and, unless `follow` is
    off (--no-children), into its Python children: `config`'s rules, and the recording."""
    threads.install()
    termination.follow_tool_exit(watch=False)  # under nsys: a SIGTERM keeps nsys's ranges
    if follow:
        instrumenting = _has_rules(config) and environment.is_tool_configured()
        follow_children(config if instrumenting else None, verbose=verbose, recording=recording)
    else:
        leave_children_alone(recording=recording)


def _has_rules(config: Config) -> bool:
    return bool(config.rules or config.plugins or config.regions)


def follow_children(config: Config | None, *, verbose: int, recording: bool) -> None:
    """Have this process's Python children run `config` (None: no rules) and, when this run
    records, record them too. Does nothing when there is neither."""
    if config is None and not recording:
        return
    if config is not None:
        os.environ[environment.CONFIG] = config.to_json()
    else:
        os.environ.pop(environment.CONFIG, None)
    if verbose:
        os.environ[environment.VERBOSE] = str(verbose)
    os.environ.pop(environment.CHILDREN, None)
    _put_bootstrap_first()
    workers.install(None, record=recording, role=None)


def leave_children_alone(*, recording: bool) -> None:
    """`--no-children`: children run untouched; those that inherit the recorder record nothing."""
    if not recording:
        return
    os.environ[environment.CHILDREN] = "off"
    os.environ.pop(environment.CONFIG, None)
    _put_bootstrap_first()
    workers.silence_fork_children()


def process_label() -> str:
    """How this child is named in the trace: its multiprocessing name, else its command line."""
    from autonvtx.ranks import detect_rank, label_with_rank  # start-up cost (issue 6)

    name = None
    process = sys.modules.get("multiprocessing.process")
    if process is not None:
        current = process.current_process()
        if getattr(current, "_parent_pid", None) is not None:
            name = str(current.name)
    if name is None:
        argv = list(getattr(sys, "orig_argv", None) or sys.argv)
        name = " ".join([os.path.basename(argv[0]), *argv[1:]]) if argv else f"pid {os.getpid()}"
    return label_with_rank(name, detect_rank())


def _put_bootstrap_first() -> None:
    # The user's own entries stay exactly as they were (an empty entry means something).
    path = os.environ.get(environment.PYTHONPATH, "")
    if path.split(os.pathsep)[0] != BOOTSTRAP_DIR:
        os.environ[environment.PYTHONPATH] = os.pathsep.join([BOOTSTRAP_DIR, path]) if path else BOOTSTRAP_DIR


def forget_run() -> None:
    """Drop the run's variables, the recorder (if it is ours) and the bootstrap from this
    process's environment: it and its children run as if autonvtx were not there."""
    from autonvtx.recorder import native

    for name in _RUN_VARIABLES:
        os.environ.pop(name, None)
    injected = os.environ.get(environment.NVTX_INJECTION64_PATH)
    ours = native.library_path()
    if injected and ours and os.path.realpath(injected) == os.path.realpath(ours):
        del os.environ[environment.NVTX_INJECTION64_PATH]
    path = os.environ.get(environment.PYTHONPATH, "")
    if path == BOOTSTRAP_DIR:
        del os.environ[environment.PYTHONPATH]
    elif path.startswith(BOOTSTRAP_DIR + os.pathsep):
        os.environ[environment.PYTHONPATH] = path[len(BOOTSTRAP_DIR) + 1 :]


def is_autonvtx_command() -> bool:
    """Whether this process is the `autonvtx` command itself (which sets itself up)."""
    argv = list(getattr(sys, "orig_argv", None) or [])
    if "-m" in argv:
        index = argv.index("-m")
        return argv[index + 1 : index + 2] == ["autonvtx"]
    return len(argv) > 1 and os.path.basename(argv[1]) == "autonvtx"
