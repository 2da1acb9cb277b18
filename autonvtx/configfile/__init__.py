"""Read configuration: config files (TOML, YAML, pyproject, Nsight Systems' JSON), presets they
name, discovery in the working directory, and the command-line rule, merged into one `Config`."""

from __future__ import annotations

import os

from autonvtx.config import (
    COMMAND_LINE_ORIGIN,
    Config,
    Region,
    Rule,
    Scalar,
    Settings,
    freeze_options,
    module_glob_problem,
    name_glob_problem,
)
from autonvtx.environment import RULES
from autonvtx.errors import ConfigError

# The readers of files (and tomllib, through them) are imported when a file is read: a run with
# no config, or with -t only, does not load them (start-up, issue 24).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from autonvtx.configfile.tables import FileConfig
    from autonvtx.presets import Preset

__all__ = ["DISCOVERED", "describe_preset", "discover", "load_config", "load_rules", "read_description"]

# Where a run without --config, --preset or -t looks for rules, in this order.
DISCOVERED = ("autonvtx.toml", "pyproject.toml")


def load_config(
    config_paths: Sequence[str],
    *,
    targets: Sequence[str] = (),
    includes: Sequence[str] = (),
    excludes: Sequence[str] = (),
    cwd: str | None = None,
    extra_sources: Sequence[str] = (),
    engine: str | None = None,
    captures: Sequence[str] = (),
    near: str | None = None,
) -> Config:
    """Merge presets, config files and the command-line rule, in that order of precedence;
    `engine` (--engine) overrides what the files say; `captures` are --capture windows; `near`
    is the script's directory, where discovery looks after the working directory."""
    base = cwd if cwd is not None else os.getcwd()
    for flag, values in (("--include", includes), ("--exclude", excludes)):
        if values and not targets:
            raise ConfigError(f"{flag}: applies to the -t/--target rule; expected -t/--target with it")
    files = [("preset", p) for p in extra_sources] + [("--config", p) for p in config_paths]
    preset_sources = list(extra_sources)
    if not files and not targets:
        files = discover(base, near)
    loaded_files = _load_files(files, base)
    if any(loaded.presets for _, loaded in loaded_files):
        # Presets a file names come before every file, as --preset ones do.
        count = len(extra_sources)
        named = _named_presets(loaded_files, base)
        loaded_files[count:count] = named
        preset_sources += [path for path, _ in named]
    settings: dict[str, str] = {}
    rules: list[Rule] = []
    regions: list[Region] = []
    sources: list[str] = []
    plugins: list[str] = []
    options: dict[str, dict[str, Scalar]] = {}
    for path, loaded in loaded_files:
        settings.update(loaded.settings)
        rules.extend(loaded.rules)
        regions.extend(loaded.regions)
        plugins.extend(name for name in loaded.plugins if name not in plugins)
        for name, table in loaded.plugin_options.items():
            options.setdefault(name, {}).update(table)
        sources.append(path)
    if targets:
        rules.append(_command_line_rule(targets, includes, excludes))
        sources.append(COMMAND_LINE_ORIGIN)
    if captures:
        from autonvtx.configfile.regions import capture_region  # only --capture needs it

        regions.extend(capture_region(spec) for spec in captures)
    if engine is not None:
        from autonvtx.engines import ENGINES

        if engine not in ENGINES:
            raise ConfigError(f"--engine: unknown engine {engine!r}; expected one of {', '.join(map(repr, ENGINES))}")
        settings["engine"] = engine
    return Config(
        Settings(**settings),
        tuple(rules),
        tuple(sources),
        plugins=tuple(plugins),
        plugin_options=freeze_options(options),
        preset_sources=tuple(preset_sources),
        regions=tuple(regions),
    )


def load_rules(
    configs: Sequence[str] = (),
    *,
    presets: Sequence[str] = (),
    targets: Sequence[str] = (),
    includes: Sequence[str] = (),
    excludes: Sequence[str] = (),
    cwd: str | None = None,
    engine: str | None = None,
    captures: Sequence[str] = (),
    near: str | None = None,
) -> Config:
    """What `autonvtx run`'s rule options say: named presets, config files (or the discovered
    one), the -t rule and --engine, merged."""
    sources: list[str] = []
    if presets:
        # Imported only then: start-up cost of a run without --preset (issue 6).
        from autonvtx.presets import resolve_presets

        sources = resolve_presets(presets)
    return load_config(
        configs,
        targets=targets,
        includes=includes,
        excludes=excludes,
        cwd=cwd,
        extra_sources=sources,
        engine=engine,
        captures=captures,
        near=near,
    )


def _load_files(files: list[tuple[str, str]], base: str) -> list[tuple[str, FileConfig]]:
    """Each (option that gave it, path) of `files` read; every problem of every file at once."""
    if not files:
        return []
    from autonvtx.configfile.problems import Problems
    from autonvtx.configfile.tables import load_file

    problems = Problems()
    loaded_files = []
    for arg, path in files:
        with problems.collect():
            loaded_files.append((path, load_file(arg, path, base)))
    problems.raise_any()
    return loaded_files


def _named_presets(loaded_files: list[tuple[str, FileConfig]], base: str) -> list[tuple[str, FileConfig]]:
    """The preset files that the files' `presets` keys name, transitively, each once, in
    the order first named; none of those already loaded."""
    # Imported here: a run whose files name no preset never loads it (start-up).
    from autonvtx.configfile.tables import load_file
    from autonvtx.presets import preset_path

    seen = {os.path.abspath(os.path.join(base, path)) for path, _ in loaded_files}
    found: list[tuple[str, FileConfig]] = []
    pending = list(loaded_files)
    while pending:
        path, loaded = pending.pop(0)
        for i, name in enumerate(loaded.presets):
            where = f"{path}: {loaded.table}.presets[{i}]"
            preset = preset_path(name, where)
            if os.path.abspath(preset) in seen:
                continue
            seen.add(os.path.abspath(preset))
            entry = (preset, load_file("preset", preset, base))
            found.append(entry)
            pending.append(entry)
    return found


def discover(base: str, near: str | None = None) -> list[tuple[str, str]]:
    """The config a run without --config, --preset or -t uses: the file AUTONVTX_RULES names,
    else the first of DISCOVERED in `base`, then in `near` (the script's directory), as
    [(where it came from, path relative to base)]; or []."""
    named = os.environ.get(RULES)
    if named:
        return [(RULES, named)]
    directories = [base]
    if near is not None and os.path.abspath(near) != os.path.abspath(base):
        directories.append(near)
    for directory in directories:
        for name in DISCOVERED:
            path = os.path.join(directory, name)
            if not os.path.isfile(path):
                continue
            shown = os.path.relpath(path, base) if directory != base else name
            if name == "pyproject.toml":
                from autonvtx.configfile.formats import parse_file

                data = parse_file(shown, path, "toml")
                tool = data.get("tool")
                if not (isinstance(tool, dict) and "autonvtx" in tool):
                    continue
            return [("discovered", shown)]
    return []


def _command_line_rule(targets: Sequence[str], includes: Sequence[str], excludes: Sequence[str]) -> Rule:
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


def read_description(path: str) -> str | None:
    """The `description` of the preset or config file at `path` (see `tables.read_description`)."""
    from autonvtx.configfile import tables

    return tables.read_description(path)


def describe_preset(preset: Preset) -> str:
    """The preset's one line: its `description`, else a note on why there is none."""
    try:
        return read_description(preset.resolve()) or "(no description)"
    except ConfigError as exc:
        return f"(unreadable: {exc})"
