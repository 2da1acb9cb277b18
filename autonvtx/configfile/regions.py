"""`[[regions]]` tables checked and turned into `Region` values, and the --capture shortcut."""

from __future__ import annotations

import re
import sys
from typing import Any

from autonvtx.config import (
    Region,
    glob_problem,
    module_glob_problem,
    parse_color,
    region_name_problem,
)
from autonvtx.configfile.formats import describe_value, tables_in
from autonvtx.configfile.problems import Problems
from autonvtx.errors import ConfigError, did_you_mean

REGION_KEYS = ("function", "loop", "lines", "name", "capture", "domain", "color", "category")
# The Python regions need: sys.monitoring's local LINE events (PEP 669).
NEEDED_PYTHON = (3, 12)


def read_regions(path: str, where: str, value: Any, problems: Problems) -> list[Region]:
    """The regions of a `[[regions]]` list at `where` in `path`; problems go to `problems`."""
    regions = []
    for loc, table in tables_in(path, where, value, problems, "regions"):
        if sys.version_info < NEEDED_PYTHON:
            problems.add(
                f"{path}: {loc}: regions need Python 3.12 or later (sys.monitoring, PEP 669);"
                f" this is Python {sys.version_info[0]}.{sys.version_info[1]}"
            )
            continue
        before = len(problems.messages)
        fields = _region_fields(path, loc, table, problems)
        if len(problems.messages) == before:
            regions.append(Region(origin=f"{path}: {loc}", **fields))
    return regions


def _region_fields(path: str, loc: str, table: dict[str, Any], problems: Problems) -> dict[str, Any]:
    for key in table:
        if key not in REGION_KEYS:
            name = key if isinstance(key, str) else repr(key)
            problems.add(f"{path}: {loc}.{name}: unknown key" + did_you_mean(str(key), REGION_KEYS))
    fields: dict[str, Any] = {}
    if "function" not in table:
        problems.add(f"{path}: {loc}: a region needs 'function' ('module:qualname', globs allowed)")
    for key, check in _CHECKS:
        if key in table:
            try:
                fields[key] = check(table[key])
            except ValueError as exc:
                problems.add(f"{path}: {loc}.{key}: {exc}")
    if "loop" in fields and "lines" in fields:
        problems.add(f"{path}: {loc}.lines: a region has 'loop' or 'lines', not both; expected one of them")
    capture = fields.get("capture")
    if capture is not None and "lines" in fields:
        problems.add(
            f"{path}: {loc}.capture: a window counts loop iterations or calls, not line spans;"
            " expected 'loop' or neither with 'capture'"
        )
    return fields


# Each check returns the value, or raises ValueError saying what is wrong and what was
# expected; _region_fields adds where (file, table, key).
def check_function(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string 'module:qualname', got {describe_value(value)}")
    module, colon, qualname = value.partition(":")
    if not colon or not module or not qualname:
        raise ValueError(f"bad function {value!r}; expected 'module:qualname' such as '__main__:train'")
    problem = module_glob_problem(module) or glob_problem(qualname)
    if problem:
        raise ValueError(problem)
    return value


def _check_loop(value: Any) -> str | int:
    if value == "first" or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value  # type: ignore[no-any-return]
    raise ValueError(f'expected "first" or the line number a loop starts on, got {describe_value(value)}')


def parse_lines(text: Any) -> tuple[int, int]:
    """ "120-134" (or 120, one line) as (120, 134); ValueError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return (text, text)
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text) if isinstance(text, str) else None
    if match is None or not 0 < int(match[1]) <= int(match[2]):
        raise ValueError(f'expected a line span "first-last" such as "120-134", got {describe_value(text)}')
    return (int(match[1]), int(match[2]))


def _check_capture(value: Any) -> tuple[int, int]:
    ok = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 0 <= value[0] < value[1]
    )
    if not ok:
        raise ValueError(
            f"expected [from, to], iterations from <= i < to (0 <= from < to), got {describe_value(value)}"
        )
    return (value[0], value[1])


def _check_name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {describe_value(value)}")
    problem = region_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _string(key: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise ValueError(f"expected a non-empty string, got {describe_value(value)}")
        if key == "color" and value != "auto":
            try:
                parse_color(value)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
        return value

    return check


_CHECKS = (
    ("function", check_function),
    ("loop", _check_loop),
    ("lines", parse_lines),
    ("name", _check_name),
    ("capture", _check_capture),
    ("domain", _string("domain")),
    ("color", _string("color")),
    ("category", _string("category")),
)


def capture_region(spec: str) -> Region:
    """The region --capture 'module:qualname:from-to' asks for: iterations [from, to) of the
    function's first loop, or its calls [from, to) when it has no loop."""
    head, _, span = spec.rpartition(":")
    where = "--capture"
    if sys.version_info < NEEDED_PYTHON:
        raise ConfigError(
            f"{where}: capture windows need Python 3.12 or later (sys.monitoring, PEP 669);"
            f" this is Python {sys.version_info[0]}.{sys.version_info[1]}"
        )
    match = re.fullmatch(r"(\d+)-(\d+)", span)
    if not head or match is None or not int(match[1]) < int(match[2]):
        raise ConfigError(
            f"{where}: bad window {spec!r}; expected 'module:qualname:from-to' such as"
            " '__main__:train:100-110' (iterations from <= i < to)"
        )
    try:
        check_function(head)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return Region(function=head, loop="auto", capture=(int(match[1]), int(match[2])), origin=where)
