"""Which of autonvtx's native parts this installation has, and why one is missing.

The recorder library is required (the build fails without it); the NVTX client, the
script compiler and the report's native sweep are optional (setup.py builds them with
`optional=True`). When an optional part fails to build, setup.py says so in the build output
and writes its reason to `BUILD_RECORD` beside the package, so `autonvtx --version` and
`autonvtx run -v` can name it, and what is lost, long after the build output is gone."""

from __future__ import annotations

import importlib
import os

# Written by setup.py's build_ext into the package: one `module: reason` line per optional
# part that did not build. Absent when every part built.
BUILD_RECORD = "native-build-failures.txt"

# (what `--version` calls it, its module, what is lost without it)
OPTIONAL_PARTS = (
    (
        "native client",
        "autonvtx._nvtxclient",
        "no regions or capture windows, no code engine, no native walk; ranges go through the slower nvtx package",
    ),
    ("script compiler", "autonvtx._sourcecode", "scripts are compiled by compile(), about 3 ms slower at start-up"),
    (
        "report table writer",
        "autonvtx.report._rowtext",
        "report tables written to a file or a pipe are formatted in Python, several times slower",
    ),
    (
        "native report sweep",
        "autonvtx.report.nsys._sweep",
        "reports on Nsight Systems exports sweep in Python, reading them several times slower",
    ),
)


def build_failures(package_dir: str | None = None) -> dict[str, str]:
    """What setup.py recorded as not built: {module: reason}."""
    directory = package_dir or os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(directory, BUILD_RECORD), encoding="utf-8") as file:
            lines = file.read().splitlines()
    except OSError:
        return {}
    failures = {}
    for line in lines:
        module, sep, reason = line.partition(": ")
        if sep:
            failures[module.strip()] = reason.strip()
    return failures


def missing_reason(module: str, package_dir: str | None = None) -> str | None:
    """None when `module` imports (and, where it has `unavailable()`, can run); else why not: the
    build's recorded reason, the import's, or what it lacks at run time."""
    try:
        loaded = importlib.import_module(module)
    except ImportError as error:
        recorded = build_failures(package_dir).get(module)
        if recorded:
            return f"its build failed: {recorded}"
        if getattr(error, "name", None) == module:
            return "not built in this installation (no build record: installed without building it?)"
        return f"it does not load: {error}"
    lacking = getattr(loaded, "unavailable", None)
    why = lacking() if callable(lacking) else None
    return f"it cannot run here: {why}" if isinstance(why, str) else None


def status_lines(package_dir: str | None = None) -> list[str]:
    """One line per native part: built, or missing with why and what is lost."""
    from autonvtx.recorder import LIBRARY_NAME, library_path

    lines = []
    if library_path() is not None:
        lines.append(f"native recorder: built ({LIBRARY_NAME})")
    else:
        lines.append(f"native recorder: MISSING ({LIBRARY_NAME} is not in this installation): --trace cannot record")
    for title, module, loss in OPTIONAL_PARTS:
        why = missing_reason(module, package_dir)
        lines.append(f"{title}: built ({module})" if why is None else f"{title}: MISSING ({module}): {why}; {loss}")
    return lines


def missing_lines(package_dir: str | None = None) -> list[str]:
    """status_lines() for the parts that are missing only (nothing when all are built)."""
    return [line for line in status_lines(package_dir) if ": MISSING (" in line]
