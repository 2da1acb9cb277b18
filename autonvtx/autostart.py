"""Process start-up: the one function that instruments a Python process as it starts, from one
of two sources (coverage.py's `process_startup` works this way):

- the parent's resolved configuration (AUTONVTX_CONFIG, with the recording's variables): a child
  of `autonvtx run`, called from the bootstrap's `sitecustomize` (`propagate.bootstrap`);
- a rules file (AUTONVTX_RULES): any Python process, called from the `autonvtx-autostart.pth`
  line the package installs in site-packages.

`autonvtx run` itself, `install()` and the IPython magic build the same `Instrumentation` from
their own options; nothing else assembles the machinery.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import TYPE_CHECKING

from autonvtx import environment

if TYPE_CHECKING:
    from autonvtx.config import Config
    from autonvtx.control import Instrumentation

_started = False


def process_startup() -> None:
    """Instrument this process from the parent's run or from AUTONVTX_RULES; once per process.

    Never raises, whatever the config or a plugin does (SystemExit and KeyboardInterrupt too:
    an exception out of site.py's start-up is "Fatal Python error: init_import_site" and the
    program never starts): the trouble is one line on stderr and the program runs untouched.
    """
    global _started
    if _started:
        return
    where = f"warning: process {os.getpid()}"
    try:
        rules = _resolve_rules()
        under_run = _is_under_run()
        if under_run and "sitecustomize" not in sys.modules:
            return  # the .pth line ran first: the bootstrap's sitecustomize calls again, later
        _started = True
        if not os.environ.get(environment.CONFIG) and rules is not None:
            where = f"{environment.RULES}={rules[0]}"
        _start(rules[1] if rules is not None else None, under_run=under_run)
    except BaseException as error:  # everything: see the docstring
        _say(f"{where}: not instrumented: {_describe(error)}")


def _resolve_rules() -> tuple[str, str] | None:
    """(the AUTONVTX_RULES value as given, its absolute path), with the absolute path put back
    into the environment: every child (started in any directory) reads the same file."""
    given = os.environ.get(environment.RULES)
    if not given:
        return None
    try:
        absolute = os.path.abspath(given)
    except (OSError, ValueError):  # a deleted working directory, an embedded NUL
        return given, given
    if absolute != given:
        os.environ[environment.RULES] = absolute
    return given, absolute


def _is_under_run() -> bool:
    """Whether `autonvtx run` started this process: its bootstrap is on sys.path."""
    from autonvtx.propagate.children import BOOTSTRAP_DIR

    return any(_absolute(entry) == BOOTSTRAP_DIR for entry in sys.path)


def _start(rules: str | None, *, under_run: bool) -> None:
    """The rules (the parent's resolved config, else the AUTONVTX_RULES file) and, under
    `autonvtx run`, what carries the run: thread names, multiprocessing support, and a note
    that this process is recorded."""
    from autonvtx.propagate import children, threads, workers

    if os.environ.get(environment.CHILDREN) == "off":
        children.forget_run()  # --no-children: this process and its children run untouched
        return
    if children.is_autonvtx_command():
        return  # `autonvtx run` sets itself up from its own options
    role = workers.multiprocessing_role()
    if role == "helper":
        return  # multiprocessing's resource tracker: none of the program's code runs there
    parent_config = os.environ.get(environment.CONFIG)
    instrumentation = None
    if parent_config:
        instrumentation = _instrument_child(parent_config)
    elif rules is not None:
        instrumentation = _install_rules(rules)
    if instrumentation is not None and role is None:
        _follow_main(instrumentation)
    threads.install()
    if under_run:
        _carry_run(instrumentation, role)
    from autonvtx import termination

    # Under nsys: SIGTERM and os._exit keep its ranges. A spawn child is watched (its main
    # thread may wait in C when SIGTERM comes) wherever it was started from; not the first
    # process, nor a forkserver (a thread there would make each of its forks warn).
    termination.follow_tool_exit(watch=under_run or role == "spawn")


def _follow_main(instrumentation: Instrumentation) -> None:
    """When the rules or regions select `__main__`, this process's own script (or -m, -c) runs
    through the runner, the walk after each top-level statement, as under `autonvtx run`."""
    hook = instrumentation.main_hook
    if hook is not None:
        from autonvtx.propagate import mainrun

        mainrun.follow(hook)


def _carry_run(instrumentation: Instrumentation | None, role: str | None) -> None:
    from autonvtx.propagate import children, workers

    recording = bool(os.environ.get(environment.RECORD_DIR))
    workers.install(instrumentation, record=recording, role=role)
    if recording and role in (None, "spawn"):
        from autonvtx.recorder.session import note_process
        from autonvtx.recorder.shutdown import follow_exit

        # Registered now, before the program's own atexit handlers: it runs after them. A
        # spawn child whose parent held SIGTERM back does it once named (workers' prepare).
        if not (role == "spawn" and workers.is_sigterm_held()):
            follow_exit()
        if role is None:  # a multiprocessing child notes itself under its process name
            note_process(children.process_label())


def _instrument_child(config_text: str) -> Instrumentation | None:
    """The parent's rules and plugins, installed as `autonvtx run` installs them (without its
    warnings: unmatched patterns are the parent's to report, a child rarely imports every
    target); None when no NVTX tool is attached (nothing would be seen)."""
    from autonvtx.config import Config

    if not environment.is_tool_configured():
        return None
    return _install(Config.from_json(config_text), detailed=False)


def _install_rules(path: str) -> Instrumentation:
    """AUTONVTX_RULES: the file's rules and plugins (a bad file stops here, with its message)."""
    from autonvtx.configfile import load_rules

    return _install(load_rules([path]), detailed=True)


def _install(config: Config, *, detailed: bool) -> Instrumentation:
    """Install `config`; with AUTONVTX_VERBOSE, say at exit what this process instrumented
    (`detailed`, at -vv: every decision; a child of `autonvtx run` leaves those to -v's parent)."""
    from autonvtx.control import Instrumentation

    instrumentation = Instrumentation(config)
    if environment.verbosity():
        atexit.register(_report, instrumentation, detailed and environment.verbosity() > 1)
    instrumentation.install()
    return instrumentation


def _report(instrumentation: Instrumentation, detailed: bool) -> None:
    from autonvtx.propagate.children import process_label

    _say(instrumentation.process_line(process_label()))
    if detailed:
        for line in instrumentation.report_lines(detailed=True):
            _say(line)


def _describe(error: BaseException) -> str:
    from autonvtx.errors import AutonvtxError

    if isinstance(error, AutonvtxError):
        return str(error)
    if isinstance(error, SystemExit):
        return f"SystemExit({error.code!r}) raised while starting (a plugin or a module it imports exits)"
    return repr(error)


def _absolute(entry: str) -> str:
    try:
        return os.path.abspath(entry or os.curdir)
    except (OSError, ValueError):
        return entry


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"autonvtx: {line}\n")
    except Exception:
        pass
