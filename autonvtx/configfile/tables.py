"""Config files' tables checked and turned into values: every problem of a file is found in one
run and reported together, each naming the file and the key."""

from __future__ import annotations

import os
import re

from autonvtx.config import (
    COROUTINE_MODES,
    Region,
    Rule,
    Scalar,
    message_problem,
    module_glob_problem,
    name_glob_problem,
    parse_color,
)
from autonvtx.configfile.formats import describe_value, parse_file, tables_in
from autonvtx.configfile.problems import Problems
from autonvtx.engines import ENGINES
from autonvtx.errors import ConfigError, did_you_mean

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

SETTINGS_KEYS = ("domain", "message", "color", "engine")
# Keys of the [autonvtx] table that are not range settings: `description` is the one line
# `autonvtx presets` prints; `presets` names presets the file builds on (as --preset does);
# `plugins` and the `plugin` table configure framework plugins.
TABLE_KEYS = SETTINGS_KEYS + ("description", "presets", "plugins", "plugin")
RULE_KEYS = (
    "modules",
    "include",
    "exclude",
    "color",
    "domain",
    "category",
    "message",
    "builtins",
    "coroutine",
    "shapes",
)


class FileConfig:
    """What one file contributes, before merging (filled in as the file's tables are read)."""

    def __init__(self, settings: dict[str, str], rules: list[Rule], table: str = "autonvtx") -> None:
        self.settings = settings
        self.rules = rules
        self.plugins: list[str] = []
        self.plugin_options: dict[str, dict[str, Scalar]] = {}
        self.description: str | None = None
        self.presets: list[str] = []
        self.table = table  # where its [autonvtx] keys live, for messages
        self.regions: list[Region] = []


def load_file(arg: str, path: str, base: str) -> FileConfig:
    """What the file at `path` (relative to `base`; `arg` names the option that gave it) says."""
    full = os.path.join(base, path)
    if not os.path.isfile(full):
        raise ConfigError(f"{arg}: no such file {path!r}")
    ext = os.path.splitext(path)[1].lower()
    kind = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}.get(ext)
    if kind is None:
        raise ConfigError(
            f"{arg}: {path!r}: unsupported file type; expected .toml, .yaml, .yml"
            " or .json (Nsight Systems' --python-functions-trace format)"
        )
    if kind == "json":
        # Imported here: only this file format needs it.
        from autonvtx.configfile.nsys import read_nsys_json

        return FileConfig({}, read_nsys_json(path, full))
    data = parse_file(path, full, kind)
    if os.path.basename(path) == "pyproject.toml":
        tool = data.get("tool")
        if not (isinstance(tool, dict) and "autonvtx" in tool):
            raise ConfigError(f"{path}: no [tool.autonvtx] table")
        table = tool["autonvtx"]
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: tool.autonvtx: expected a table, got {describe_value(table)}")
        rules = table.pop("rules", [])
        regions = table.pop("regions", None)
        problems = Problems()
        _check_keys(path, "tool.autonvtx", table, TABLE_KEYS + ("rules",), problems)
        loaded = _table(path, "tool.autonvtx", table, problems)
        loaded.rules = _rules(path, "tool.autonvtx.rules", rules, problems)
        if regions is not None:
            loaded.regions = _regions(path, "tool.autonvtx.regions", regions, problems)
        problems.raise_any()
        return loaded
    problems = Problems()
    for key in data:
        if key not in ("autonvtx", "rules", "regions"):
            hint = " (global settings go in the [autonvtx] table)" if key in TABLE_KEYS else ""
            problems.add(
                f"{path}: {_key_name(key)}: unknown key{hint}" + did_you_mean(key, ("autonvtx", "rules", "regions"))
            )
    table = data.get("autonvtx", {})
    if not isinstance(table, dict):
        problems.add(f"{path}: autonvtx: expected a table, got {describe_value(table)}")
        table = {}
    _check_keys(path, "autonvtx", table, TABLE_KEYS, problems)
    loaded = _table(path, "autonvtx", table, problems)
    loaded.rules = _rules(path, "rules", data.get("rules", []), problems)
    if "regions" in data:
        loaded.regions = _regions(path, "regions", data["regions"], problems)
    problems.raise_any()
    return loaded


def _regions(path: str, where: str, value: Any, problems: Problems) -> list[Region]:
    from autonvtx.configfile.regions import read_regions  # only files with regions need it

    return read_regions(path, where, value, problems)


def read_description(path: str) -> str | None:
    """The `description` of a preset file (its one line in `autonvtx presets`)."""
    return load_file("preset", path, os.getcwd()).description


def _table(path: str, where: str, table: dict[str, Any], problems: Problems) -> FileConfig:
    loaded = FileConfig(_settings(path, where, table, problems), [], table=where)
    if "description" in table:
        with problems.collect():
            loaded.description = _string_key(path, f"{where}.description", "description", table["description"])
    with problems.collect():
        _table_lists(path, where, table, loaded)
    if "plugin" in table:
        with problems.collect():
            loaded.plugin_options = _plugin_tables(path, f"{where}.plugin", table["plugin"])
    return loaded


def _table_lists(path: str, where: str, table: dict[str, Any], loaded: FileConfig) -> None:
    if "presets" in table:
        names = table["presets"]
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"{path}: {where}.presets: expected a list of preset names, got {describe_value(names)}")
        loaded.presets = list(names)
    if "plugins" in table:
        names = table["plugins"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{path}: {where}.plugins: expected a list of plugin names, got {describe_value(names)}")
        for i, name in enumerate(names):
            problem = plugin_name_problem(name)
            if problem:
                raise ConfigError(f"{path}: {where}.plugins[{i}]: {problem}")
        loaded.plugins = list(names)


def _plugin_tables(path: str, where: str, value: Any) -> dict[str, dict[str, Scalar]]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"{path}: {where}: expected a table of plugin tables ([{where}.<name>]), got {describe_value(value)}"
        )
    tables: dict[str, dict[str, Scalar]] = {}
    for name, options in value.items():
        loc = f"{where}.{_key_name(name)}"
        problem = plugin_name_problem(name) if isinstance(name, str) else "expected a name"
        if problem:
            raise ConfigError(f"{path}: {loc}: {problem}")
        if not isinstance(options, dict):
            raise ConfigError(f"{path}: {loc}: expected a table, got {describe_value(options)}")
        for key, option in options.items():
            if not isinstance(option, (str, int, float, bool)):
                raise ConfigError(
                    f"{path}: {loc}.{_key_name(key)}: expected a string, number or boolean,"
                    f" got {describe_value(option)}"
                )
        tables[name] = dict(options)
    return tables


_PLUGIN_MODULE = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\Z"  # compiled on first use


def builtin_plugins() -> list[str]:
    """The short names of the plugins shipped in autonvtx/plugins/ (found without importing)."""
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugins")
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    modules = [name[:-3] for name in names if name.endswith(".py")]
    packages = [name for name in names if os.path.isfile(os.path.join(folder, name, "__init__.py"))]
    return sorted(name for name in modules + packages if not name.startswith("_"))


def plugin_name_problem(name: str) -> str | None:
    """Why `name` is not a plugin: a built-in short name or a dotted module name; or None."""
    if "." in name:
        if re.match(_PLUGIN_MODULE, name):
            return None
        return f"bad plugin module {name!r}; expected a dotted module name such as 'mypkg.nvtx_plugin'"
    known = builtin_plugins()
    if name in known:
        return None
    return (
        f"unknown plugin {name!r}; expected one of {', '.join(map(repr, known)) or 'none'}"
        " or a dotted module name" + did_you_mean(name, known)
    )


def _check_keys(path: str, where: str, table: dict[Any, Any], allowed: Sequence[str], problems: Problems) -> None:
    for key in table:
        if key not in allowed:
            name = _key_name(key)
            hint = " (rule keys go in a [[rules]] table)" if name in RULE_KEYS else ""
            problems.add(f"{path}: {where}.{name}: unknown key{hint}" + did_you_mean(key, allowed))


def _settings(path: str, where: str, table: dict[str, Any], problems: Problems) -> dict[str, str]:
    settings = {}
    for key in SETTINGS_KEYS:
        if key in table:
            with problems.collect():
                settings[key] = _string_key(path, f"{where}.{key}", key, table[key])
    return settings


def _rules(path: str, where: str, value: Any, problems: Problems) -> list[Rule]:
    rules = []
    for loc, table in tables_in(path, where, value, problems, "rules"):
        _check_keys(path, loc, table, RULE_KEYS, problems)
        if "modules" not in table:
            problems.add(f"{path}: {loc}: a rule needs 'modules'")
        fields = _rule_fields(path, loc, table, problems)
        if "modules" in fields:
            rules.append(Rule(origin=f"{path}: {loc}", **fields))
    return rules


def _rule_fields(path: str, loc: str, table: dict[str, Any], problems: Problems) -> dict[str, Any]:
    """The valid keys of one rule table; the problems of the others go to `problems`."""
    fields: dict[str, Any] = {}
    for key, check in _GLOB_KEYS:
        if key in table:
            with problems.collect():
                fields[key] = _globs(path, f"{loc}.{key}", table[key], check)
    if fields.get("modules") == ():
        problems.add(f"{path}: {loc}.modules: expected at least one module glob")
    exclude_failed = "exclude" in table and "exclude" not in fields  # already reported
    if fields.get("include") == () and not fields.get("exclude") and not exclude_failed:
        problems.add(f"{path}: {loc}.include: empty, and the rule excludes nothing; expected at least one glob")
    for key in ("color", "domain", "category", "message"):
        if key in table:
            with problems.collect():
                fields[key] = _string_key(path, f"{loc}.{key}", key, table[key])
    if "coroutine" in table:
        mode = table["coroutine"]
        if mode in COROUTINE_MODES:
            fields["coroutine"] = mode
        else:
            expected = " or ".join(f'"{m}"' for m in COROUTINE_MODES)
            problems.add(f"{path}: {loc}.coroutine: expected {expected}, got {describe_value(mode)}")
    for key in ("builtins", "shapes"):
        if key in table:
            flag = table[key]
            if isinstance(flag, bool):
                fields[key] = flag
            else:
                problems.add(f"{path}: {loc}.{key}: expected true or false, got {describe_value(flag)}")
    return fields


_GLOB_KEYS: tuple[tuple[str, Callable[[str], str | None]], ...] = (
    ("modules", module_glob_problem),
    ("include", name_glob_problem),
    ("exclude", name_glob_problem),
)


def _globs(path: str, loc: str, value: Any, check: Callable[[str], str | None]) -> tuple[str, ...]:
    # A single string is accepted as a one-element list: `modules = "mypkg.*"` reads naturally.
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise ConfigError(f"{path}: {loc}: expected a list of strings, got {describe_value(value)}")
    problems = Problems()
    for i, glob in enumerate(items):
        problem = check(glob)
        if problem:
            suffix = f"[{i}]" if isinstance(value, list) else ""
            problems.add(f"{path}: {loc}{suffix}: {problem}")
    problems.raise_any()
    return tuple(items)


def _string_key(path: str, loc: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{path}: {loc}: expected a string, got {describe_value(value)}")
    problem = None
    if key == "color" and value != "auto":
        try:
            parse_color(value)
        except ValueError as exc:
            problem = str(exc)
    elif key == "message":
        problem = message_problem(value)
    elif key == "engine" and value not in ENGINES:
        problem = f"unknown engine {value!r}; expected one of {', '.join(map(repr, ENGINES))}" + did_you_mean(
            value, ENGINES
        )
    elif not value:
        problem = "expected a non-empty string"
    if problem:
        raise ConfigError(f"{path}: {loc}: {problem}")
    return value


def _key_name(key: Any) -> str:
    return key if isinstance(key, str) else repr(key)
