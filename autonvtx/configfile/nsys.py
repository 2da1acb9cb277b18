"""Nsight Systems' --python-functions-trace JSON read as rules (`listing.format_nsys_json` writes it).

The format (Nsight Systems User Guide, "Python Functions Trace"; the files it ships under
PythonFunctionsTrace/) is a JSON list of objects::

    [
        {
            "_comment": "CuPy Annotations",
            "module": "cupy",
            "domain": "CuPy",
            "color": "black",
            "functions": ["random.random", "dot", "sort"]
        }
    ]

`functions` are exact names (no patterns) of functions reachable from `module`; `domain`
and `color` (a color name, or "RRGGBB" hex, with or without "#") are optional; keys starting
with "_" are comments. There is no way to name `__main__`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from autonvtx.config import COLOR_NAMES, Rule
from autonvtx.configfile.problems import Problems
from autonvtx.errors import ConfigError, did_you_mean

_ENTRY_KEYS = ("module", "functions", "domain", "color")
_IDENTIFIER_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z")
_HEX = re.compile(r"#?[0-9a-fA-F]{6}\Z")
# fnmatch's special characters, escaped so an exact name stays exact as a glob.
_GLOB_SPECIAL = re.compile(r"([*?\[])")
_MAX_PARTS = 100  # dotted parts of one name: module path and qualified name together, and more


def _shown(value: Any) -> str:
    """`value` as a message quotes it, cut short."""
    text = repr(value) if not isinstance(value, (list, dict)) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def read_nsys_json(display: str, full: str) -> list[Rule]:
    """The rules meaning what an Nsight Systems functions-trace file means.

    Each function name `a.b.f` of module `m` selects the qualified name `a.b.f` in `m`,
    and also `b.f` in `m.a` and `f` in `m.a.b`, since a dotted head may name a class or a
    submodule and only the import can tell which. autonvtx wraps functions where they are
    defined: a name that `m` only re-exports matches nothing and is reported as unmatched.
    """
    try:
        with open(full, encoding="utf-8") as f:
            data = json.load(f)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{display}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{display}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except RecursionError:  # json recurses per level of nesting
        raise ConfigError(f"{display}: nested too deeply; expected a list of objects") from None
    except OSError as exc:
        raise ConfigError(f"{display}: cannot read ({exc.strerror})") from None
    if not isinstance(data, list):
        raise ConfigError(
            f'{display}: expected a list of {{"module", "functions"}} objects'
            " (Nsight Systems' --python-functions-trace format)"
        )
    rules: list[Rule] = []
    problems = Problems()  # the first problem of every entry, all in one run
    for i, entry in enumerate(data):
        with problems.collect():
            rules.extend(_entry_rules(display, f"[{i}]", entry))
    problems.raise_any()
    return rules


def _entry_rules(display: str, loc: str, entry: Any) -> list[Rule]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{display}: {loc}: expected an object, got {type(entry).__name__}")
    for key in entry:
        if not (isinstance(key, str) and key.startswith("_")) and key not in _ENTRY_KEYS:
            raise ConfigError(
                f"{display}: {loc}.{key}: unknown key; expected {', '.join(_ENTRY_KEYS)}"
                " (keys starting with '_' are comments)" + did_you_mean(key, _ENTRY_KEYS)
            )
    module = entry.get("module")
    if not isinstance(module, str) or not _IDENTIFIER_PATH.match(module):
        raise ConfigError(f"{display}: {loc}.module: expected a dotted module name, got {module!r}")
    if module == "__main__":
        raise ConfigError(
            f"{display}: {loc}.module: Nsight Systems cannot trace '__main__';"
            " use a TOML or YAML config for the script's own functions"
        )
    functions = entry.get("functions")
    if not isinstance(functions, list) or not functions:
        raise ConfigError(f"{display}: {loc}.functions: expected a non-empty list of names")
    for j, name in enumerate(functions):
        if not isinstance(name, str) or not _IDENTIFIER_PATH.match(name):
            raise ConfigError(
                f"{display}: {loc}.functions[{j}]: expected an exact dotted name such as"
                f" 'Class.method' (no patterns), got {_shown(name)}"
            )
        if name.count(".") >= _MAX_PARTS:
            # Each split of a name is a rule of its own: a name of n parts makes n rules of
            # up to n parts, which past any real name only costs time (quadratic).
            raise ConfigError(
                f"{display}: {loc}.functions[{j}]: expected at most {_MAX_PARTS} dotted parts,"
                f" got {name.count('.') + 1} ({_shown(name)})"
            )
    domain = entry.get("domain")
    if domain is not None and (not isinstance(domain, str) or not domain):
        raise ConfigError(f"{display}: {loc}.domain: expected a non-empty string")
    color = _color(display, f"{loc}.color", entry["color"]) if "color" in entry else None
    # Group the names by the module they would be defined in, for each possible split.
    by_module: dict[str, list[str]] = {}
    for name in functions:
        parts = name.split(".")
        for cut in range(len(parts)):
            home = ".".join([module, *parts[:cut]])
            by_module.setdefault(home, []).append(_escape(".".join(parts[cut:])))
    origin = f"{display}: {loc}"
    return [
        Rule(
            modules=(home,),
            include=tuple(dict.fromkeys(names)),
            domain=domain,
            color=color,
            origin=origin,
            reading_of=origin,
        )
        for home, names in by_module.items()
    ]


def _color(display: str, loc: str, value: Any) -> str:
    if isinstance(value, str):
        if _HEX.match(value):
            return "#" + value.lstrip("#").lower()
        if value.lower() in COLOR_NAMES:
            return value.lower()
    raise ConfigError(f"{display}: {loc}: expected a color name or 'RRGGBB' hex, got {value!r}")


def _escape(name: str) -> str:
    return _GLOB_SPECIAL.sub(r"[\1]", name)
