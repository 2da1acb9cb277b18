"""Jupyter kernels that run under autonvtx: a kernelspec whose kernel process is
`autonvtx run [rules] [--trace ...] -c '<launch()>'` (under `nsys profile` with `nsys`), and
`launch()`, which starts ipykernel inside that run and walks the cells' `__main__` after each
cell, so functions defined in cells get their ranges as a script's do."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autonvtx import cells
from autonvtx.errors import UsageError

# The kernel's target, run by `autonvtx run -c`: a `-m` module would be `__main__` itself, and
# rules selecting `__main__` (functions defined in cells) would select its functions too.
LAUNCH = "from autonvtx.kernel import launch; launch()"
DEFAULT_NAME = "autonvtx"
# Nsight Systems in front of the kernel: CUDA and NVTX, no CPU sampling (a range timeline).
NSYS_OPTIONS = ("profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw", "none")


@dataclass(frozen=True)
class KernelSpec:
    """What `autonvtx kernel install` writes: Jupyter's kernel.json, as values."""

    name: str
    display_name: str
    argv: tuple[str, ...]
    # Under nsys the kernel's process is nsys's: a SIGINT there would end the capture, so
    # Jupyter interrupts through a message (ipykernel's control channel) instead.
    interrupt_mode: str = "signal"

    def kernel_json(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "display_name": self.display_name,
            "language": "python",
            "interrupt_mode": self.interrupt_mode,
            "metadata": {"debugger": False, "autonvtx": {"created_by": "autonvtx kernel install"}},
        }


def kernel_spec(
    rule_args: Sequence[str],
    *,
    name: str = DEFAULT_NAME,
    display_name: str | None = None,
    trace_dir: str | None = None,
    nsys: str | None = None,
    python: str = sys.executable,
) -> KernelSpec:
    """The kernelspec of a kernel run by `autonvtx run RULE_ARGS`: recorded into
    `trace_dir/NAME-<pid>.json` (one trace per kernel session), or under the `nsys` executable
    (one report per session, `NAME-<pid>.nsys-rep` in the notebook's directory), or neither
    (ranges for a tool attached some other way, e.g. `%autonvtx` needs none)."""
    if trace_dir is not None and nsys is not None:
        raise UsageError("kernel install: --trace and --nsys: choose one; expected our recorder or Nsight Systems")
    run = [python, "-m", "autonvtx", "run", *rule_args]
    if trace_dir is not None:
        run += ["--trace", os.path.join(os.path.abspath(trace_dir), f"{name}-{{pid}}.json")]
    run += ["-c", LAUNCH, "-f", "{connection_file}"]
    if nsys is not None:
        argv = [nsys, *NSYS_OPTIONS, "-o", f"{name}-%p", *run]
        return KernelSpec(name, display_name or "Python (autonvtx, Nsight Systems)", tuple(argv), "message")
    return KernelSpec(name, display_name or "Python (autonvtx)", tuple(run))


def install_spec(spec: KernelSpec, *, user: bool, prefix: str | None) -> str:
    """Write `spec` where Jupyter finds kernels (the user's, or under `prefix`); its directory."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager  # only this command needs Jupyter
    except ImportError:
        raise UsageError(
            f"kernel install: jupyter_client is not installed in {sys.executable}; expected"
            " ipykernel there (pip install ipykernel)"
        ) from None
    with tempfile.TemporaryDirectory() as source:
        with open(os.path.join(source, "kernel.json"), "w", encoding="utf-8") as file:
            json.dump(spec.kernel_json(), file, indent=1)
        _copy_logos(source)
        return str(KernelSpecManager().install_kernel_spec(source, spec.name, user=user, prefix=prefix))


def _copy_logos(source: str) -> None:
    # ipykernel's own logos, so the launcher shows Python's: the kernel is Python's.
    try:
        import ipykernel
    except ImportError:
        return
    resources = os.path.join(os.path.dirname(ipykernel.__file__), "resources")
    for name in ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg"):
        if os.path.isfile(os.path.join(resources, name)):
            shutil.copy(os.path.join(resources, name), source)


def launch() -> None:
    """The kernel: ipykernel's app with arguments from the command line (`-f CONNECTION_FILE`),
    and, after each cell, a walk of `__main__` by the rules `autonvtx run` installed."""
    from ipykernel.kernelapp import IPKernelApp

    app: Any = IPKernelApp.instance()  # ipykernel ships no type information
    app.initialize(sys.argv[1:])
    app.shell.events.register("post_run_cell", walk_cells)
    cells.add_to(app.shell, __name__, "walk_cells")  # and after each definition: a call in its cell
    app.start()


def walk_cells(*_: object) -> None:
    """Instrument what the cells defined so far in `__main__` (IPython's user module): only what
    is new since the last walk is looked at. Called from inside cells too: never raises."""
    from autonvtx.control import installed

    main = sys.modules.get("__main__")
    if main is None:
        return
    for instrumentation in installed():
        try:
            instrumentation.instrument_module(main)
        except Exception:  # the walk reports what it could not do; a cell must not fail for it
            pass
