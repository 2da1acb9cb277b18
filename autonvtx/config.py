"""Load and validate autonvtx configuration (TOML, YAML, pyproject) into frozen dataclasses."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Union

from autonvtx.errors import ConfigError

MESSAGE_FIELDS = ("module", "qualname", "name", "class", "file", "line")

# Origin of the rule built from -t/--target, --include, --exclude.
COMMAND_LINE_ORIGIN = "command line"
_COMMAND_LINE_FLAGS = {"modules": "--target", "include": "--include", "exclude": "--exclude"}

_SETTINGS_KEYS = ("domain", "message", "color")
# Keys of the [autonvtx] table that are not range settings: `description` is the one line
# `autonvtx presets` prints; `presets` names presets the file builds on (as --preset does);
# `plugins` and the `plugin` table configure framework plugins.
_TABLE_KEYS = _SETTINGS_KEYS + ("description", "presets", "plugins", "plugin")
_RULE_KEYS = ("modules", "include", "exclude", "color", "domain", "category", "message", "builtins")
_DISCOVERED = ("autonvtx.toml", "pyproject.toml")


@dataclass(frozen=True)
class Settings:
    """Global keys of the `[autonvtx]` table: the defaults every rule falls back to."""

    domain: str = "autonvtx"
    message: str = "{qualname}"
    color: str = "auto"


@dataclass(frozen=True)
class Rule:
    """One `[[rules]]` entry (or the command-line rule); `origin` says where it was written."""

    modules: tuple[str, ...]
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    color: str | None = None
    domain: str | None = None
    category: str | None = None
    message: str | None = None
    builtins: bool = False
    origin: str = ""
    reading_of: str = ""
    """Set on the rules read from one entry of an Nsight Systems JSON file (its location):
    a name `a.f` there is `a.f` in the module or `f` in submodule `a`, and the reader writes
    a rule per reading. A name is unmatched when no reading of it matched."""

    def where(self, key: str) -> str:
        """The location of one of this rule's keys, as messages name it."""
        if self.origin == COMMAND_LINE_ORIGIN:
            return _COMMAND_LINE_FLAGS.get(key, f"--{key}")
        return f"{self.origin}.{key}"


@dataclass(frozen=True)
class RangeStyle:
    """What a range emitted for a function selected by a rule looks like."""

    domain: str
    message: str
    color: int
    category: str | None


Scalar = Union[str, int, float, bool]
# A plugin's options: (plugin name, ((key, value), ...)), hashable and frozen like the rest.
PluginOptions = tuple[tuple[str, tuple[tuple[str, Scalar], ...]], ...]


@dataclass(frozen=True)
class Config:
    """The resolved configuration: settings, rules in precedence order, and their sources.

    `plugins` are the framework plugins to activate (built-in short names such as "torch",
    or dotted module names), in the order first listed; `plugin_options` holds each plugin's
    `[autonvtx.plugin.<name>]` table, later sources overriding earlier ones key by key.
    """

    settings: Settings = Settings()
    rules: tuple[Rule, ...] = ()
    sources: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    plugin_options: PluginOptions = ()
    preset_sources: tuple[str, ...] = ()  # the sources that are presets

    def is_preset_rule(self, rule: Rule) -> bool:
        """Whether `rule` comes from a preset (whose patterns cover several versions of a
        framework, so a pattern matching nothing there is no typo)."""
        return rule.origin.partition(": ")[0] in self.preset_sources

    def options_for(self, plugin: str) -> dict[str, Scalar]:
        """The merged `[autonvtx.plugin.<plugin>]` table (empty when none was written)."""
        for name, options in self.plugin_options:
            if name == plugin:
                return dict(options)
        return {}

    def style(self, rule: Rule, module: str) -> RangeStyle:
        """The range attributes for a function of `module` selected by `rule`."""
        color = rule.color if rule.color is not None else self.settings.color
        return RangeStyle(
            domain=rule.domain if rule.domain is not None else self.settings.domain,
            message=rule.message if rule.message is not None else self.settings.message,
            color=auto_color(module) if color == "auto" else parse_color(color),
            category=rule.category,
        )

    def to_json(self) -> str:
        import json  # imported here: start-up cost of a run with no rules (issue 6)

        data = dataclasses.asdict(self)
        data["plugin_options"] = {name: dict(options) for name, options in self.plugin_options}
        return json.dumps({"version": 1, **data}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Config:
        import json  # imported here: start-up cost of a run with no rules (issue 6)

        try:
            data = json.loads(text)
            if data.pop("version") != 1:
                raise ValueError("unsupported version")
            return cls(
                settings=Settings(**data["settings"]),
                rules=tuple(_rule_from_json(rule) for rule in data["rules"]),
                sources=tuple(data["sources"]),
                plugins=tuple(data.get("plugins", ())),
                plugin_options=_freeze_options(data.get("plugin_options", {})),
                preset_sources=tuple(data.get("preset_sources", ())),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"resolved configuration: unreadable ({exc})") from None


def _freeze_options(options: dict[str, dict[str, Scalar]]) -> PluginOptions:
    # Sorted, so that a config survives its JSON round trip (sort_keys) unchanged.
    return tuple((name, tuple(sorted(options[name].items()))) for name in sorted(options))


def _rule_from_json(data: dict[str, Any]) -> Rule:
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return Rule(**fields)


# Colors: a CSS-like set of names, and a palette of well-separated colors for "auto".
# fmt: off
COLOR_NAMES: dict[str, int] = {
    "black": 0x000000, "white": 0xFFFFFF, "gray": 0x808080, "grey": 0x808080,
    "silver": 0xC0C0C0, "red": 0xFF0000, "maroon": 0x800000, "crimson": 0xDC143C,
    "orange": 0xFFA500, "gold": 0xFFD700, "yellow": 0xFFFF00, "olive": 0x808000,
    "lime": 0x00FF00, "green": 0x008000, "teal": 0x008080, "cyan": 0x00FFFF, "aqua": 0x00FFFF,
    "turquoise": 0x40E0D0, "blue": 0x0000FF, "navy": 0x000080, "indigo": 0x4B0082,
    "purple": 0x800080, "violet": 0xEE82EE, "magenta": 0xFF00FF, "fuchsia": 0xFF00FF,
    "pink": 0xFFC0CB, "salmon": 0xFA8072, "coral": 0xFF7F50, "brown": 0xA52A2A, "tan": 0xD2B48C,
    "beige": 0xF5F5DC, "khaki": 0xF0E68C, "lavender": 0xE6E6FA, "orchid": 0xDA70D6,
    "plum": 0xDDA0DD, "chocolate": 0xD2691E,
}
# Kelly's colors of maximum contrast (without white and black), which stay distinct
# from one another on a timeline.
_AUTO_PALETTE = (
    0xF3C300, 0x875692, 0xF38400, 0xA1CAF1, 0xBE0032, 0xC2B280, 0x848482, 0x008856, 0xE68FAC,
    0x0067A5, 0xF99379, 0x604E97, 0xF6A600, 0xB3446C, 0xDCD300, 0x882D17, 0x8DB600, 0x654522,
    0xE25822, 0x2B3D26,
)
# fmt: on
# Patterns are compiled on first use (re caches them), not at import: start-up cost (issue 6).
_HEX_COLOR = r"#[0-9a-fA-F]{6}\Z"


def parse_color(text: str) -> int:
    """A color name or "#rrggbb" as 0xFFRRGGBB; ValueError (with a suggestion) otherwise."""
    if re.match(_HEX_COLOR, text):
        return 0xFF000000 | int(text[1:], 16)
    rgb = COLOR_NAMES.get(text.lower())
    if rgb is None:
        raise ValueError(
            f"unknown color {text!r}; expected a color name, '#rrggbb' or 'auto'"
            + _did_you_mean(text.lower(), COLOR_NAMES)
        )
    return 0xFF000000 | rgb


def auto_color(module_name: str) -> int:
    """A stable color for a module: the same in every process and run (crc32, not hash())."""
    import zlib  # imported here: start-up cost of a run with no rules (issue 6)

    return 0xFF000000 | _AUTO_PALETTE[zlib.crc32(module_name.encode()) % len(_AUTO_PALETTE)]


# Globs.
_MODULE_GLOB = r"[\w*?\[\]!^-]+(?:\.[\w*?\[\]!^-]+)*\Z"  # compiled on first use


def glob_problem(glob: str) -> str | None:
    """Why `glob` is not a usable fnmatch pattern, or None. fnmatch itself treats an
    unbalanced '[' as a literal, which hides typos, so this mirrors its bracket scan."""
    if not glob:
        return "empty glob"
    if any(c.isspace() for c in glob):
        return f"bad glob {glob!r}: contains whitespace"
    i, n = 0, len(glob)
    while i < n:
        c, i = glob[i], i + 1
        if c == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                return f"bad glob {glob!r}: unbalanced '['"
            i = j + 1
    return None


def module_glob_problem(glob: str) -> str | None:
    problem = glob_problem(glob)
    if problem is None and not re.match(_MODULE_GLOB, glob):
        hint = " (it looks like a file path)" if "/" in glob or glob.endswith(".py") else ""
        problem = (
            f"bad module glob {glob!r}{hint}; expected a dotted module name such as"
            " 'mypkg.sub' with optional glob characters * ? [...]"
        )
    return problem


def name_glob_problem(glob: str) -> str | None:
    problem = glob_problem(glob)
    if problem is None and ":" in glob:
        problem = (
            f"bad glob {glob!r}: include/exclude globs match qualified names inside a module"
            " (e.g. 'Trainer.*'); put the module in 'modules'"
        )
    return problem


def message_problem(template: str) -> str | None:
    """Why `template` is not a valid `message`, or None."""
    import string  # imported here: start-up cost of a run with no rules (issue 6)

    allowed = ", ".join(f"{{{f}}}" for f in MESSAGE_FIELDS)
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return f"bad template {template!r}: {exc}"
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if field not in MESSAGE_FIELDS:
            return f"unknown field {{{field}}} in {template!r}; expected {allowed}" + _did_you_mean(
                field, MESSAGE_FIELDS
            )
        if conversion not in (None, "r", "s", "a") or "{" in (spec or ""):
            return f"bad template {template!r}: unsupported conversion or nested field"
    return None


# Loading.
def load_config(
    config_paths: Sequence[str],
    *,
    targets: Sequence[str] = (),
    includes: Sequence[str] = (),
    excludes: Sequence[str] = (),
    cwd: str | None = None,
    extra_sources: Sequence[str] = (),
) -> Config:
    """Merge presets, config files and the command-line rule, in that order of precedence."""
    base = cwd if cwd is not None else os.getcwd()
    for flag, values in (("--include", includes), ("--exclude", excludes)):
        if values and not targets:
            raise ConfigError(
                f"{flag}: applies to the -t/--target rule; expected -t/--target with it"
            )
    files = [("preset", p) for p in extra_sources] + [("--config", p) for p in config_paths]
    preset_sources = list(extra_sources)
    if not files and not targets:
        files = _discover(base)
    problems = Problems()
    loaded_files = []
    for arg, path in files:
        with problems.collect():
            loaded_files.append((path, _load_file(arg, path, base)))
    problems.raise_any()
    if any(loaded.presets for _, loaded in loaded_files):
        # Presets a file names come before every file, as --preset ones do.
        count = len(extra_sources)
        named = _named_presets(loaded_files, base)
        loaded_files[count:count] = named
        preset_sources += [path for path, _ in named]
    settings: dict[str, str] = {}
    rules: list[Rule] = []
    sources: list[str] = []
    plugins: list[str] = []
    options: dict[str, dict[str, Scalar]] = {}
    for path, loaded in loaded_files:
        settings.update(loaded.settings)
        rules.extend(loaded.rules)
        plugins.extend(name for name in loaded.plugins if name not in plugins)
        for name, table in loaded.plugin_options.items():
            options.setdefault(name, {}).update(table)
        sources.append(path)
    if targets:
        rules.append(_command_line_rule(targets, includes, excludes))
        sources.append(COMMAND_LINE_ORIGIN)
    return Config(
        Settings(**settings),
        tuple(rules),
        tuple(sources),
        plugins=tuple(plugins),
        plugin_options=_freeze_options(options),
        preset_sources=tuple(preset_sources),
    )


def _named_presets(
    loaded_files: list[tuple[str, _FileConfig]], base: str
) -> list[tuple[str, _FileConfig]]:
    """The preset files that the files' `presets` keys name, transitively, each once, in
    the order first named; none of those already loaded."""
    from autonvtx.presets import preset_path

    seen = {os.path.abspath(os.path.join(base, path)) for path, _ in loaded_files}
    found: list[tuple[str, _FileConfig]] = []
    pending = list(loaded_files)
    while pending:
        path, loaded = pending.pop(0)
        for i, name in enumerate(loaded.presets):
            where = f"{path}: {loaded.table}.presets[{i}]"
            preset = preset_path(name, where)
            if os.path.abspath(preset) in seen:
                continue
            seen.add(os.path.abspath(preset))
            entry = (preset, _load_file("preset", preset, base))
            found.append(entry)
            pending.append(entry)
    return found


def _discover(base: str) -> list[tuple[str, str]]:
    for name in _DISCOVERED:
        path = os.path.join(base, name)
        if not os.path.isfile(path):
            continue
        if name == "pyproject.toml":
            data = _parse(name, path, "toml")
            tool = data.get("tool")
            if not (isinstance(tool, dict) and "autonvtx" in tool):
                continue
        return [("discovered", name)]
    return []


def _command_line_rule(
    targets: Sequence[str], includes: Sequence[str], excludes: Sequence[str]
) -> Rule:
    for flag, values, check in (
        ("--target", targets, module_glob_problem),
        ("--include", includes, name_glob_problem),
        ("--exclude", excludes, name_glob_problem),
    ):
        for value in values:
            problem = check(value)
            if problem:
                raise ConfigError(f"{flag}: {problem}")
    return Rule(
        modules=tuple(targets),
        include=tuple(includes) or ("*",),
        exclude=tuple(excludes),
        origin=COMMAND_LINE_ORIGIN,
    )


@dataclass
class _FileConfig:
    """What one file contributes, before merging."""

    settings: dict[str, str]
    rules: list[Rule]
    plugins: list[str] = dataclasses.field(default_factory=list)
    plugin_options: dict[str, dict[str, Scalar]] = dataclasses.field(default_factory=dict)
    description: str | None = None
    presets: list[str] = dataclasses.field(default_factory=list)
    table: str = "autonvtx"  # where its [autonvtx] keys live, for messages


class Problems:
    """Every problem found in a config, reported together in one ConfigError, one line
    each, as linters do: a run shows all the mistakes of a file, not the first one."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        self.messages.append(message)

    @contextmanager
    def collect(self) -> Iterator[None]:
        """A check inside that raises ConfigError adds its lines, and the load goes on."""
        try:
            yield
        except ConfigError as exc:
            self.messages.extend(str(exc).splitlines())

    def raise_any(self) -> None:
        if self.messages:
            raise ConfigError("\n".join(self.messages))


def _load_file(arg: str, path: str, base: str) -> _FileConfig:
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
        from autonvtx.nsysjson import read_nsys_json

        return _FileConfig({}, read_nsys_json(path, full))
    data = _parse(path, full, kind)
    if os.path.basename(path) == "pyproject.toml":
        tool = data.get("tool")
        if not (isinstance(tool, dict) and "autonvtx" in tool):
            raise ConfigError(f"{path}: no [tool.autonvtx] table")
        table = tool["autonvtx"]
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: tool.autonvtx: expected a table, got {_describe(table)}")
        rules = table.pop("rules", [])
        problems = Problems()
        _check_keys(path, "tool.autonvtx", table, _TABLE_KEYS + ("rules",), problems)
        loaded = _table(path, "tool.autonvtx", table, problems)
        loaded.rules = _rules(path, "tool.autonvtx.rules", rules, problems)
        problems.raise_any()
        return loaded
    problems = Problems()
    for key in data:
        if key not in ("autonvtx", "rules"):
            hint = " (global settings go in the [autonvtx] table)" if key in _TABLE_KEYS else ""
            problems.add(
                f"{path}: {_key_name(key)}: unknown key{hint}"
                + _did_you_mean(key, ("autonvtx", "rules"))
            )
    table = data.get("autonvtx", {})
    if not isinstance(table, dict):
        problems.add(f"{path}: autonvtx: expected a table, got {_describe(table)}")
        table = {}
    _check_keys(path, "autonvtx", table, _TABLE_KEYS, problems)
    loaded = _table(path, "autonvtx", table, problems)
    loaded.rules = _rules(path, "rules", data.get("rules", []), problems)
    problems.raise_any()
    return loaded


def read_description(path: str) -> str | None:
    """The `description` of a preset file (its one line in `autonvtx presets`)."""
    return _load_file("preset", path, os.getcwd()).description


def _table(path: str, where: str, table: dict[str, Any], problems: Problems) -> _FileConfig:
    loaded = _FileConfig(_settings(path, where, table, problems), [], table=where)
    if "description" in table:
        with problems.collect():
            loaded.description = _string_key(
                path, f"{where}.description", "description", table["description"]
            )
    with problems.collect():
        _table_lists(path, where, table, loaded)
    if "plugin" in table:
        with problems.collect():
            loaded.plugin_options = _plugin_tables(path, f"{where}.plugin", table["plugin"])
    return loaded


def _table_lists(path: str, where: str, table: dict[str, Any], loaded: _FileConfig) -> None:
    if "presets" in table:
        names = table["presets"]
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(
                f"{path}: {where}.presets: expected a list of preset names, got {_describe(names)}"
            )
        loaded.presets = list(names)
    if "plugins" in table:
        names = table["plugins"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(
                f"{path}: {where}.plugins: expected a list of plugin names, got {_describe(names)}"
            )
        for i, name in enumerate(names):
            problem = plugin_name_problem(name)
            if problem:
                raise ConfigError(f"{path}: {where}.plugins[{i}]: {problem}")
        loaded.plugins = list(names)


def _plugin_tables(path: str, where: str, value: Any) -> dict[str, dict[str, Scalar]]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"{path}: {where}: expected a table of plugin tables ([{where}.<name>]),"
            f" got {_describe(value)}"
        )
    tables: dict[str, dict[str, Scalar]] = {}
    for name, options in value.items():
        loc = f"{where}.{_key_name(name)}"
        problem = plugin_name_problem(name) if isinstance(name, str) else "expected a name"
        if problem:
            raise ConfigError(f"{path}: {loc}: {problem}")
        if not isinstance(options, dict):
            raise ConfigError(f"{path}: {loc}: expected a table, got {_describe(options)}")
        for key, option in options.items():
            if not isinstance(option, (str, int, float, bool)):
                raise ConfigError(
                    f"{path}: {loc}.{_key_name(key)}: expected a string, number or boolean,"
                    f" got {_describe(option)}"
                )
        tables[name] = dict(options)
    return tables


_PLUGIN_MODULE = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\Z"  # compiled on first use


def builtin_plugins() -> list[str]:
    """The short names of the plugins shipped in autonvtx/plugins/ (found without importing)."""
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins")
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(
        name[:-3] for name in names if name.endswith(".py") and not name.startswith("_")
    )


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
        " or a dotted module name" + _did_you_mean(name, known)
    )


def _parse(display: str, full: str, kind: str) -> dict[str, Any]:
    try:
        with open(full, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{display}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ConfigError(f"{display}: cannot read ({exc.strerror})") from None
    data = _parse_toml(display, text) if kind == "toml" else _parse_yaml(display, text)
    if data is None:  # an empty YAML document
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{display}: expected a mapping at the top level, got {_describe(data)}")
    return data


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


def _check_keys(
    path: str, where: str, table: dict[Any, Any], allowed: Sequence[str], problems: Problems
) -> None:
    for key in table:
        if key not in allowed:
            name = _key_name(key)
            hint = " (rule keys go in a [[rules]] table)" if name in _RULE_KEYS else ""
            problems.add(
                f"{path}: {where}.{name}: unknown key{hint}" + _did_you_mean(key, allowed)
            )


def _settings(path: str, where: str, table: dict[str, Any], problems: Problems) -> dict[str, str]:
    settings = {}
    for key in _SETTINGS_KEYS:
        if key in table:
            with problems.collect():
                settings[key] = _string_key(path, f"{where}.{key}", key, table[key])
    return settings


def _rules(path: str, where: str, value: Any, problems: Problems) -> list[Rule]:
    if not isinstance(value, list):
        problems.add(
            f"{path}: {where}: expected a list of tables ([[rules]]), got {_describe(value)}"
        )
        return []
    rules = []
    for i, table in enumerate(value):
        loc = f"{where}[{i}]"
        if not isinstance(table, dict):
            problems.add(f"{path}: {loc}: expected a table, got {_describe(table)}")
            continue
        _check_keys(path, loc, table, _RULE_KEYS, problems)
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
        problems.add(
            f"{path}: {loc}.include: empty, and the rule excludes nothing;"
            " expected at least one glob"
        )
    for key in ("color", "domain", "category", "message"):
        if key in table:
            with problems.collect():
                fields[key] = _string_key(path, f"{loc}.{key}", key, table[key])
    if "builtins" in table:
        builtins = table["builtins"]
        if isinstance(builtins, bool):
            fields["builtins"] = builtins
        else:
            problems.add(
                f"{path}: {loc}.builtins: expected true or false, got {_describe(builtins)}"
            )
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
        raise ConfigError(f"{path}: {loc}: expected a list of strings, got {_describe(value)}")
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
        raise ConfigError(f"{path}: {loc}: expected a string, got {_describe(value)}")
    problem = None
    if key == "color" and value != "auto":
        try:
            parse_color(value)
        except ValueError as exc:
            problem = str(exc)
    elif key == "message":
        problem = message_problem(value)
    elif not value:
        problem = "expected a non-empty string"
    if problem:
        raise ConfigError(f"{path}: {loc}: {problem}")
    return value


def _key_name(key: Any) -> str:
    return key if isinstance(key, str) else repr(key)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    kind = {int: "integer", float: "float", str: "string", list: "list", dict: "table"}.get(
        type(value)
    )
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind or type(value).__name__} {text}"


def _did_you_mean(word: Any, choices: Any) -> str:
    if not isinstance(word, str):
        return ""
    import difflib  # imported here: only a mistake needs it, and it costs start-up (issue 6)

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
