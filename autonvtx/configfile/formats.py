"""Config file formats: TOML and YAML parsed into plain data, with the line and column of a
syntax error in the message."""

from __future__ import annotations

import re
import sys

from autonvtx.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from autonvtx.configfile.problems import Problems


def parse_file(display: str, full: str, kind: str) -> dict[str, Any]:
    """The top-level mapping of the `kind` ("toml" or "yaml") file `full`, named `display`."""
    try:
        with open(full, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{display}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ConfigError(f"{display}: cannot read ({exc.strerror})") from None
    from autonvtx.configfile import cache

    data = cache.load(kind, text)
    if isinstance(data, dict):  # this very text, parsed and checked by an earlier run
        return data
    try:
        data = _parse_toml(display, text) if kind == "toml" else _parse_yaml(display, text)
    except RecursionError:  # the parsers recurse per level of nesting
        raise ConfigError(f"{display}: {_TOO_DEEP}") from None
    if data is None:  # an empty YAML document
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{display}: expected a mapping at the top level, got {describe_value(data)}")
    check_shape(display, data)
    cache.keep(kind, text, data)
    return data


# Bounds on what a config may hold, far past any real one: a file past them is hostile or
# broken, and the checks that follow (and their messages) would recurse or take exponential
# time over it.
MAX_DEPTH = 64
MAX_VALUES = 100_000
_TOO_DEEP = f"nested too deeply; expected at most {MAX_DEPTH} levels of tables and lists"


def check_shape(display: str, data: Any) -> None:
    """Refuse `data` nested deeper than MAX_DEPTH, or holding more than MAX_VALUES values once
    YAML aliases are expanded (an alias "bomb" of a few hundred bytes expands to billions, a
    self-referring alias never ends). Iterative, and it stops at the bound."""
    # (value, depth, the entry of the table or list holding it): the chain says, past the
    # depth bound, whether a table or list holds itself.
    stack: list[tuple[Any, int, Any]] = [(data, 0, None)]
    seen = 0
    while stack:
        entry = stack.pop()
        value, depth, _ = entry
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(
                f"{display}: holds more than {MAX_VALUES:,} values (YAML aliases expanded);"
                " expected a config of a few tables and lists"
            )
        if depth > MAX_DEPTH:
            raise ConfigError(f"{display}: {_holds_itself(entry) or _TOO_DEEP}")
        if isinstance(value, dict):
            stack.extend((v, depth + 1, entry) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1, entry) for v in value)


def _holds_itself(entry: tuple[Any, int, Any]) -> str | None:
    ids: set[int] = set()
    while entry is not None:
        value, _, entry = entry
        if id(value) in ids:
            return "a table or list holds itself (a YAML alias inside its own anchor); expected plain values"
        ids.add(id(value))
    return None


def _parse_toml(display: str, text: str) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        # Python < 3.14 has the position only in the message: "... (at line 3, column 7)".
        found = re.search(r" \(at line (\d+), column (\d+)\)$", message)
        if found:
            message = message[: found.start()]
            line, col = found.group(1), found.group(2)
        else:
            message = re.sub(r" \(at end of document\)$", "", message)
            line, col = str(text.count("\n") + 1), str(len(text.rsplit("\n", 1)[-1]) + 1)
        raise ConfigError(f"{display}:{line}:{col}: invalid TOML: {message}") from None


def _parse_yaml(display: str, text: str) -> Any:
    # PyYAML is imported only when a YAML file is loaded: most runs never need it.
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{display}:{mark.line + 1}:{mark.column + 1}" if mark is not None else display
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None


def describe_value(value: Any) -> str:
    """A value as messages show it: its TOML/YAML type, then its repr, cut short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    kind = {int: "integer", float: "float", str: "string", list: "list", dict: "table"}.get(type(value))
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind or type(value).__name__} {text}"


def tables_in(
    path: str, where: str, value: Any, problems: Problems, array: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, table) for each table of the array of tables `value` at `where` (written
    `[[array]]`); what is not a list, or not a table, becomes a problem and is left out."""
    if not isinstance(value, list):
        problems.add(f"{path}: {where}: expected a list of tables ([[{array}]]), got {describe_value(value)}")
        return
    for i, table in enumerate(value):
        loc = f"{where}[{i}]"
        if isinstance(table, dict):
            yield loc, table
        else:
            problems.add(f"{path}: {loc}: expected a table, got {describe_value(table)}")
