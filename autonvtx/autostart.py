"""Start-up without a launcher: a process whose environment names a rules file in
AUTONVTX_RULES instruments itself while Python starts (from the `autonvtx-autostart.pth` line
the package installs in site-packages, as coverage.py's process start-up hook works)."""
from __future__ import annotations

import atexit
import os
import sys

from autonvtx import environment

_started = False


def start() -> None:
    """Install the rules AUTONVTX_RULES names; never raises (a bad file is one line on stderr
    and the program runs uninstrumented). Once per process."""
    global _started
    path = os.environ.get(environment.RULES)
    if _started or not path or _launched_by_autonvtx():
        return
    _started = True
    try:
        _install(path)
    except Exception as error:
        from autonvtx.errors import AutonvtxError

        what = str(error) if isinstance(error, AutonvtxError) else repr(error)
        _say(f"{environment.RULES}={path}: not instrumented: {what}")


def _install(path: str) -> None:
    from autonvtx.configfile import load_rules
    from autonvtx.control import Instrumentation
    from autonvtx.propagate import threads

    instrumentation = Instrumentation(load_rules([os.path.abspath(path)]))
    instrumentation.install()
    threads.install()
    if environment.verbosity():
        atexit.register(_report, instrumentation)


def _report(instrumentation: object) -> None:
    from autonvtx.control import Instrumentation

    if isinstance(instrumentation, Instrumentation):
        argv = list(getattr(sys, "orig_argv", None) or sys.argv)
        label = " ".join([os.path.basename(argv[0]), *argv[1:]]) if argv else "python"
        _say(instrumentation.process_line(label))
        if environment.verbosity() > 1:
            for line in instrumentation.report_lines(detailed=True):
                _say(line)


def _launched_by_autonvtx() -> bool:
    # `autonvtx run` and its children set themselves up from their own options and variables.
    from autonvtx.propagate.children import is_autonvtx_command

    return bool(os.environ.get(environment.CONFIG) or os.environ.get(environment.CHILDREN)) or (
        is_autonvtx_command()
    )


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"autonvtx: {line}\n")
    except Exception:
        pass
