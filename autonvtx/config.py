"""autonvtx's configuration as values: settings, rules, range styles (frozen values), and
what makes a color, a glob or a message template valid. Reading files is `configfile`'s job."""

from __future__ import annotations

import re

from autonvtx.errors import ConfigError, did_you_mean
from autonvtx.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MESSAGE_FIELDS = ("module", "qualname", "name", "class", "file", "line")

# Origin of the rule built from -t/--target, --include, --exclude.
COMMAND_LINE_ORIGIN = "command line"
_COMMAND_LINE_FLAGS = {"modules": "--target", "include": "--include", "exclude": "--exclude"}


class Settings(Value):
    """Global keys of the `[autonvtx]` table: the defaults every rule falls back to."""

    __slots__ = ("domain", "message", "color", "engine")
    domain: str
    message: str
    color: str
    # How rules put ranges on functions: "code" (sys.monitoring, 3.12+), "wrap" (wrappers),
    # "auto" (code where it can run, else wrap).
    engine: str

    def __init__(
        self, domain: str = "autonvtx", message: str = "{qualname}", color: str = "auto", engine: str = "auto"
    ) -> None:
        self._set(domain, message, color, engine)


# A rule's `coroutine` values: a coroutine call gets one range over its whole await (the
# default), or one range per resumption (its CPU time per step).
COROUTINE_CALL = "call"
COROUTINE_RESUMPTIONS = "resumptions"
COROUTINE_MODES = (COROUTINE_CALL, COROUTINE_RESUMPTIONS)


class Rule(Value):
    """One `[[rules]]` entry (or the command-line rule); `origin` says where it was written.

    `reading_of` is set on the rules read from one entry of an Nsight Systems JSON file (its
    location): a name `a.f` there is `a.f` in the module or `f` in submodule `a`, and the reader
    writes a rule per reading. A name is unmatched when no reading of it matched."""

    __slots__ = (
        "modules",
        "include",
        "exclude",
        "color",
        "domain",
        "category",
        "message",
        "builtins",
        "origin",
        "reading_of",
        "coroutine",
        "shapes",
    )
    modules: tuple[str, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    color: str | None
    domain: str | None
    category: str | None
    message: str | None
    builtins: bool
    origin: str
    reading_of: str
    # A coroutine call's ranges: "call" (one from its first resumption to its end) or
    # "resumptions" (one per resumption); None: the default, "call".
    coroutine: str | None
    shapes: bool  # the range's message carries the shapes and dtypes of array-like arguments

    def __init__(
        self,
        modules: tuple[str, ...],
        include: tuple[str, ...] = ("*",),
        exclude: tuple[str, ...] = (),
        color: str | None = None,
        domain: str | None = None,
        category: str | None = None,
        message: str | None = None,
        builtins: bool = False,
        origin: str = "",
        reading_of: str = "",
        coroutine: str | None = None,
        shapes: bool = False,
    ) -> None:
        self._set(
            modules, include, exclude, color, domain, category, message, builtins, origin, reading_of, coroutine, shapes
        )

    def where(self, key: str) -> str:
        """The location of one of this rule's keys, as messages name it."""
        if self.origin == COMMAND_LINE_ORIGIN:
            return _COMMAND_LINE_FLAGS.get(key, f"--{key}")
        return f"{self.origin}.{key}"


class Region(Value):
    """One `[[regions]]` entry: ranges inside the functions `function` selects. `loop` ("first",
    or the line a loop starts on) gives a range per iteration; `lines` (first, last) a range
    each time those lines run; neither, a range per call. `capture` is the iteration window
    [from, to) to profile. "auto" (the --capture shortcut) is the first loop, else each call."""

    __slots__ = ("function", "loop", "lines", "name", "capture", "domain", "color", "category", "origin")
    function: str
    loop: str | int | None
    lines: tuple[int, int] | None
    name: str | None
    capture: tuple[int, int] | None
    domain: str | None
    color: str | None
    category: str | None
    origin: str

    def __init__(
        self,
        function: str,
        loop: str | int | None = None,
        lines: tuple[int, int] | None = None,
        name: str | None = None,
        capture: tuple[int, int] | None = None,
        domain: str | None = None,
        color: str | None = None,
        category: str | None = None,
        origin: str = "",
    ) -> None:
        self._set(function, loop, lines, name, capture, domain, color, category, origin)

    def where(self, key: str) -> str:
        """The location of one of this region's keys, as messages name it."""
        if self.origin.startswith("--"):
            return self.origin
        return f"{self.origin}.{key}"

    @property
    def module_glob(self) -> str:
        return self.function.partition(":")[0]

    @property
    def qualname_glob(self) -> str:
        return self.function.partition(":")[2]


class RangeStyle(Value):
    """What a range emitted for a function selected by a rule looks like."""

    __slots__ = ("domain", "message", "color", "category", "coroutine")
    domain: str
    message: str
    color: int
    category: str | None
    coroutine: str  # COROUTINE_CALL or COROUTINE_RESUMPTIONS

    def __init__(self, domain: str, message: str, color: int, category: str | None, coroutine: str = "call") -> None:
        self._set(domain, message, color, category, coroutine)


Scalar = str | int | float | bool
# A plugin's options: (plugin name, ((key, value), ...)), hashable and frozen like the rest.
PluginOptions = tuple[tuple[str, tuple[tuple[str, Scalar], ...]], ...]


class Config(Value):
    """The resolved configuration: settings, rules in precedence order, and their sources.

    `plugins` are the framework plugins to activate (built-in short names such as "torch",
    or dotted module names), in the order first listed; `plugin_options` holds each plugin's
    `[autonvtx.plugin.<name>]` table, later sources overriding earlier ones key by key;
    `preset_sources` are the sources that are presets.
    """

    __slots__ = ("settings", "rules", "sources", "plugins", "plugin_options", "preset_sources", "regions")
    settings: Settings
    rules: tuple[Rule, ...]
    sources: tuple[str, ...]
    plugins: tuple[str, ...]
    plugin_options: PluginOptions
    preset_sources: tuple[str, ...]
    regions: tuple[Region, ...]

    def __init__(
        self,
        settings: Settings | None = None,
        rules: tuple[Rule, ...] = (),
        sources: tuple[str, ...] = (),
        plugins: tuple[str, ...] = (),
        plugin_options: PluginOptions = (),
        preset_sources: tuple[str, ...] = (),
        regions: tuple[Region, ...] = (),
    ) -> None:
        self._set(
            settings if settings is not None else Settings(),
            rules,
            sources,
            plugins,
            plugin_options,
            preset_sources,
            regions,
        )

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

    def color_setting(self, rule: Rule | Region) -> str:
        """The color that holds for `rule` (or a region): its own, else the config's ("auto":
        each module its own, style() and region_style() make it)."""
        return rule.color if rule.color is not None else self.settings.color

    def style(self, rule: Rule, module: str) -> RangeStyle:
        """The range attributes for a function of `module` selected by `rule`."""
        color = self.color_setting(rule)
        return RangeStyle(
            domain=rule.domain if rule.domain is not None else self.settings.domain,
            message=rule.message if rule.message is not None else self.settings.message,
            color=auto_color(module) if color == "auto" else parse_color(color),
            category=rule.category,
            coroutine=rule.coroutine if rule.coroutine is not None else COROUTINE_CALL,
        )

    def region_style(self, region: Region, module: str) -> RangeStyle:
        """The range attributes of `region`'s ranges in a function of `module`."""
        color = self.color_setting(region)
        return RangeStyle(
            domain=region.domain if region.domain is not None else self.settings.domain,
            message=region.name or "",
            color=auto_color(module) if color == "auto" else parse_color(color),
            category=region.category,
        )

    def to_json(self) -> str:
        data = self.as_dict()
        data["plugin_options"] = {name: dict(options) for name, options in self.plugin_options}
        return compact_json({"version": 1, **data})

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
                plugin_options=freeze_options(data.get("plugin_options", {})),
                preset_sources=tuple(data.get("preset_sources", ())),
                regions=tuple(_region_from_json(region) for region in data.get("regions", ())),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"resolved configuration: unreadable ({exc})") from None


def compact_json(value: object) -> str:
    """`json.dumps(value, separators=(",", ":"), sort_keys=True)`, without importing json for
    what a Config holds (a run with rules hands its config to children: start-up, issue 24):
    printable ASCII strings, ints, finite floats, booleans, None, lists, tuples, str-keyed dicts.
    Anything else goes to json itself."""
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return f'"{value}"'
    elif value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    elif isinstance(value, int):
        return int.__repr__(value)
    elif isinstance(value, float):
        if value - value == 0:  # finite: json spells the others Infinity and NaN
            return float.__repr__(value)
    elif isinstance(value, (list, tuple)):
        return "[" + ",".join(compact_json(item) for item in value) + "]"
    elif isinstance(value, dict) and all(type(key) is str for key in value):
        return "{" + ",".join(f"{compact_json(key)}:{compact_json(value[key])}" for key in sorted(value)) + "}"
    import json

    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def freeze_options(options: dict[str, dict[str, Scalar]]) -> PluginOptions:
    """Plugin option tables as a frozen, hashable value."""
    # Sorted, so that a config survives its JSON round trip (sort_keys) unchanged.
    return tuple((name, tuple(sorted(options[name].items()))) for name in sorted(options))


def _rule_from_json(data: dict[str, Any]) -> Rule:
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return Rule(**fields)


def _region_from_json(data: dict[str, Any]) -> Region:
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return Region(**fields)


# A region's name: the message fields, and {i}, the iteration (or call) index from 0.
REGION_NAME_FIELDS = ("i",) + MESSAGE_FIELDS


def region_name_problem(template: str) -> str | None:
    """Why `template` is not a valid region `name`, or None."""
    return template_problem(template, REGION_NAME_FIELDS, plain=("i",))


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
AUTO_PALETTE = (
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
            + did_you_mean(text.lower(), COLOR_NAMES)
        )
    return 0xFF000000 | rgb


def auto_color(module_name: str) -> int:
    """A stable color for a module: the same in every process and run (crc32, not hash())."""
    import zlib  # imported here: start-up cost of a run with no rules (issue 6)

    return 0xFF000000 | AUTO_PALETTE[zlib.crc32(module_name.encode()) % len(AUTO_PALETTE)]


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
    return template_problem(template, MESSAGE_FIELDS)


def template_problem(template: str, fields: tuple[str, ...], plain: tuple[str, ...] = ()) -> str | None:
    """Why `template` is not a format string over `fields` (those in `plain` without a spec
    or conversion), or None."""
    import string  # imported here: start-up cost of a run with no rules (issue 6)

    allowed = ", ".join(f"{{{f}}}" for f in fields)
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return f"bad template {template!r}: {exc}"
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if field not in fields:
            return f"unknown field {{{field}}} in {template!r}; expected {allowed}" + did_you_mean(field, fields)
        if field in plain and (spec or conversion):
            return (
                f"bad template {template!r}: {{{field}}} takes no format spec or conversion; expected plain {{{field}}}"
            )
        if conversion not in (None, "r", "s", "a") or "{" in (spec or ""):
            return f"bad template {template!r}: unsupported conversion or nested field"
    return None
