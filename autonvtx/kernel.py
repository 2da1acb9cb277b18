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
        return KernelSpec(name, display_name or default_display_name(name, nsys=True), tuple(argv), "message")
    return KernelSpec(name, display_name or default_display_name(name, nsys=False), tuple(run))


# A kernelspec's name as Jupyter accepts it (jupyter_client's kernel name pattern: ASCII
# letters, digits, '.', '_', '-'), not starting with '.': the name is a directory Jupyter
# replaces whole, so '.' or '..' would be the kernels directory or its parent.
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_name(name: str) -> None:
    """UsageError unless `name` is a kernelspec name: checked before anything is written or removed."""
    if not name or name.startswith(".") or not set(name) <= _NAME_CHARACTERS:
        raise UsageError(
            f"kernel install: --name {name!r}: expected a kernelspec name: ASCII letters, digits, '.', '_'"
            " and '-', not starting with '.' (e.g. 'autonvtx-train')"
        )


def default_display_name(name: str, *, nsys: bool) -> str:
    """What the kernel menu shows when --display-name is not given: the name says which kernel."""
    what = "autonvtx, Nsight Systems" if nsys else "autonvtx"
    return f"Python ({what})" if name == DEFAULT_NAME else f"Python ({what}: {name})"


def install_spec(spec: KernelSpec, *, user: bool, prefix: str | None) -> str:
    """Write `spec` where Jupyter finds kernels (the user's, or under `prefix`); its directory.
    Only that directory is ever replaced, and only when autonvtx wrote it."""
    check_name(spec.name)
    try:
        from jupyter_client.kernelspec import KernelSpecManager  # only this command needs Jupyter
    except ImportError:
        raise UsageError(
            f"kernel install: jupyter_client is not installed in {sys.executable}; expected"
            " ipykernel there (pip install ipykernel)"
        ) from None
    manager = KernelSpecManager()
    _check_replaceable(manager, spec.name, user=user, prefix=prefix)
    with tempfile.TemporaryDirectory() as source:
        # TemporaryDirectory is 0700, and Jupyter copies the mode: a kernel under --sys-prefix
        # must be readable by everyone who uses that environment, as files written there are.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(source, 0o777 & ~umask)
        with open(os.path.join(source, "kernel.json"), "w", encoding="utf-8") as file:
            json.dump(spec.kernel_json(), file, indent=1)
        _copy_logos(source)
        return str(manager.install_kernel_spec(source, spec.name, user=user, prefix=prefix))


def _check_replaceable(manager: Any, name: str, *, user: bool, prefix: str | None) -> None:
    # Jupyter removes a kernel's directory before writing it again: a kernel autonvtx did not
    # write (python3, another tool's) is the user's, never replaced from here.
    # Where jupyter_client puts it (KernelSpecManager.install_kernel_spec lowercases the name).
    kernels = (
        manager.user_kernel_dir
        if user
        else os.path.join(os.path.abspath(prefix or sys.prefix), "share", "jupyter", "kernels")
    )
    destination = os.path.join(kernels, name.lower())
    kernel_json = os.path.join(destination, "kernel.json")
    if not os.path.lexists(destination):
        return
    try:
        with open(kernel_json, encoding="utf-8") as file:
            created_by = json.load(file)["metadata"]["autonvtx"]["created_by"]
    except (OSError, ValueError, KeyError, TypeError):
        created_by = None
    if os.path.islink(destination) or created_by != "autonvtx kernel install":
        raise UsageError(
            f"kernel install: --name {name!r}: {destination} holds a kernel autonvtx did not write;"
            " expected another --name (nothing was changed)"
        )


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
