"""pytest plugin loaded (`-p`) into both runs of a third-party suite: same settings, and a census.

It does the same in the plain and the annotated run, so it cannot cause a difference:
- Hypothesis runs derandomized, without its example database and without deadlines, so the
  two runs draw the same examples and a slower annotated run cannot time out (the suites'
  own profiles keep a 400 ms deadline, which measures speed, not behaviour).
- At the end of the session it writes, to $AUTONVTX_THIRDPARTY_CENSUS, where each module of
  the suite was imported from and how many of the functions defined in it are wrapt wrappers
  after the run: evidence of wrapping that does not depend on autonvtx's own reporting.
"""

from __future__ import annotations

import json
import os
import sys
import types
from typing import Any

import pytest

CENSUS_ENV = "AUTONVTX_THIRDPARTY_CENSUS"
MODULES_ENV = "AUTONVTX_THIRDPARTY_MODULES"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # trylast: after the suite's conftest, which loads its own profile in pytest_configure.
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:
        return
    settings.register_profile(
        "autonvtx-thirdparty",
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    settings.load_profile("autonvtx-thirdparty")


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(CENSUS_ENV)
    if not path:
        return
    tops = [name for name in os.environ.get(MODULES_ENV, "").split(",") if name]
    census: dict[str, Any] = {"python": sys.version, "modules": {}, "functions": 0, "wrapped": 0}
    try:
        import wrapt

        wrapper_type: type | None = wrapt.FunctionWrapper
    except ImportError:
        wrapper_type = None
    seen: set[int] = set()
    for name, module in sorted(sys.modules.items()):
        if not isinstance(module, types.ModuleType):
            continue
        if not any(name == top or name.startswith(top + ".") for top in tops):
            continue
        functions, wrapped = _count(module, name, wrapper_type, seen)
        census["modules"][name] = {
            "file": getattr(module, "__file__", None),
            "functions": functions,
            "wrapped": wrapped,
        }
        census["functions"] += functions
        census["wrapped"] += wrapped
    with open(path, "w", encoding="utf-8") as stream:
        json.dump(census, stream, indent=1)


def _count(module: types.ModuleType, name: str, wrapper_type: type | None, seen: set[int]) -> tuple[int, int]:
    """(functions defined in `module`, how many of them are wrapped), methods included."""
    functions = wrapped = 0
    pending: list[dict[str, Any]] = [dict(vars(module))]
    while pending:
        namespace = pending.pop()
        for value in list(namespace.values()):
            if id(value) in seen:
                continue
            # Read the raw entry: staticmethod/classmethod hold the function (or its wrapper).
            inner = getattr(value, "__func__", None) if isinstance(value, (staticmethod, classmethod)) else None
            candidate = inner if inner is not None else value
            is_wrapper = wrapper_type is not None and isinstance(candidate, wrapper_type)
            if is_wrapper or isinstance(candidate, types.FunctionType):
                if _defined_in(candidate, name):
                    seen.add(id(value))
                    functions += 1
                    wrapped += is_wrapper or _monitored(candidate)
            elif isinstance(value, type) and value.__dict__.get("__module__") == name:
                seen.add(id(value))
                pending.append(dict(vars(value)))
    return functions, wrapped


def _monitored(function: Any) -> bool:
    """Whether autonvtx's code engine gives `function` its range (nothing is wrapped then)."""
    autonvtx = sys.modules.get("autonvtx")
    check = getattr(autonvtx, "is_instrumented", None) if autonvtx is not None else None
    return bool(check(function)) if check is not None else False


def _defined_in(function: Any, module_name: str) -> bool:
    try:
        return getattr(function, "__module__", None) == module_name
    except Exception:  # a proxy whose target refuses attribute access
        return False
