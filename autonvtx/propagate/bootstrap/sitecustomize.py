"""autonvtx's child-process bootstrap: the only file of a directory `autonvtx run` puts first on
PYTHONPATH, so that Python runs it at the start of every child interpreter (site.py imports
`sitecustomize`). It hands over to `autonvtx.autostart.process_startup`, then runs the
`sitecustomize` this one hides, as OpenTelemetry's and ddtrace's bootstraps do.
"""

from __future__ import annotations

import os
import sys


def _start_autonvtx() -> None:
    try:
        from autonvtx.autostart import process_startup

        process_startup()  # it never raises; an autonvtx that cannot even be imported might
    except BaseException as error:  # never break the child's start-up: it runs uninstrumented
        try:
            sys.stderr.write(f"autonvtx: warning: process {os.getpid()}: not instrumented: {error!r}\n")
        except Exception:
            pass


def _run_hidden_sitecustomize() -> None:
    """Run the `sitecustomize` later on sys.path (the user's, the distribution's), if any.

    Its errors are not ours to hide: site.py reports them as it would have without us.
    """
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if _absolute(entry) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    # The import system hands out whatever sys.modules holds once this module has executed:
    # `import sitecustomize` then finds the hidden module, as if this one had not been there.
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _absolute(entry: str) -> str:
    try:
        return os.path.abspath(entry or os.curdir)
    except (OSError, ValueError):  # a deleted working directory, an embedded NUL
        return entry


_start_autonvtx()
_run_hidden_sitecustomize()
