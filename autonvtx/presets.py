"""Presets: named config files shipped in configs/ or by other packages (entry points)."""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autonvtx.config import _did_you_mean
from autonvtx.errors import ConfigError

# Third-party packages register presets in this entry-point group; each entry point loads to
# a path (str or os.PathLike), an importlib.resources Traversable, or a callable returning one:
#     [project.entry-points."autonvtx.presets"]
#     mylib = "mylib.profiling:AUTONVTX_PRESET"
ENTRY_POINT_GROUP = "autonvtx.presets"

# configs/ at the top of the source tree; installed as autonvtx/configs (a symlink in the
# checkout, so that both find the same files).
_SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")


@dataclass(frozen=True)
class Preset:
    """A preset's name, where it comes from (`autonvtx` or the distribution shipping it)
    and, for third-party presets, the entry point to load for its path."""

    name: str
    source: str
    path: str | None = None
    entry_point: Any = None

    def resolve(self) -> str:
        """The preset file's path; ConfigError if a third-party entry point is broken."""
        if self.path is not None:
            return self.path
        return _entry_point_path(self)


def shipped_presets() -> dict[str, Preset]:
    """The presets shipped with autonvtx, by name (found by listing files: no imports)."""
    try:
        names = sorted(os.listdir(_SHIPPED))
    except OSError:
        return {}
    return {
        name[:-5]: Preset(name[:-5], "autonvtx", os.path.join(_SHIPPED, name))
        for name in names
        if name.endswith(".toml") and not name.startswith(("_", "."))
    }


def third_party_presets() -> dict[str, Preset]:
    """Presets registered by installed distributions in the `autonvtx.presets` group."""
    # importlib.metadata's entry_points(group=...) selection and Distribution on entry
    # points are 3.10+; importlib-metadata backports 3.12's behaviour (deduplicated dists).
    if sys.version_info >= (3, 12):
        from importlib.metadata import entry_points
    else:
        from importlib_metadata import entry_points
    found: dict[str, Preset] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        source = getattr(dist, "name", None) or ep.value.partition(":")[0]
        found.setdefault(ep.name, Preset(ep.name, source, entry_point=ep))
    return found


def all_presets() -> dict[str, Preset]:
    """Every preset by name; a shipped preset wins over a third-party one of the same name."""
    presets = third_party_presets()
    presets.update(shipped_presets())
    return dict(sorted(presets.items()))


def resolve_presets(names: Sequence[str]) -> list[str]:
    """The files of the --preset names, in order; ConfigError for an unknown name."""
    return [preset_path(name, "--preset") for name in names]


def preset_path(name: str, where: str) -> str:
    """The file of preset `name`; ConfigError located at `where` if there is none."""
    known = shipped_presets()
    preset = known.get(name)
    if preset is None:
        known = all_presets()  # reads installed distributions' metadata: only when needed
        preset = known.get(name)
    if preset is None:
        listed = ", ".join(map(repr, known)) or "none are installed"
        raise ConfigError(
            f"{where}: unknown preset {name!r}; expected one of {listed}"
            + _did_you_mean(name, known)
            + " (see 'autonvtx presets')"
        )
    return preset.resolve()


def describe(preset: Preset) -> str:
    """The preset's one line: its `description`, else a note on why there is none."""
    from autonvtx.config import read_description

    try:
        return read_description(preset.resolve()) or "(no description)"
    except ConfigError as exc:
        return f"(unreadable: {exc})"


# Extracted resources (a preset inside a zip) live until the process ends.
_extracted = contextlib.ExitStack()


def _entry_point_path(preset: Preset) -> str:
    ep = preset.entry_point
    where = f"preset {preset.name!r} (entry point {ep.value!r} of {preset.source})"
    try:
        value = ep.load()
        if callable(value) and not hasattr(value, "read_text"):
            value = value()
    except Exception as exc:
        raise ConfigError(f"{where}: cannot load ({type(exc).__name__}: {exc})") from None
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
    elif hasattr(value, "read_text"):
        from importlib.resources import as_file

        path = os.fspath(_extracted.enter_context(as_file(value)))
    else:
        raise ConfigError(
            f"{where}: expected a path or an importlib.resources file, got {type(value).__name__}"
        )
    if not os.path.isfile(path):
        raise ConfigError(f"{where}: no such file {path!r}")
    return path


# `autonvtx init`.
# Frameworks init looks for (top-level module names, found with find_spec: nothing is
# imported), each with the preset that suits it when one is shipped or installed.
FRAMEWORKS = ("torch", "numba", "tensorflow", "jax", "numpy", "pandas", "cupy", "cudf")
_NOT_PROJECT_DIRS = frozenset({"tests", "test", "docs", "doc", "examples", "benchmarks", "build", "dist"})


def installed_frameworks() -> list[str]:
    """The FRAMEWORKS importable here, without importing them."""
    import importlib.util

    found = []
    for name in FRAMEWORKS:
        try:
            if importlib.util.find_spec(name) is not None:
                found.append(name)
        except (ImportError, ValueError):
            pass
    return found


def project_packages(cwd: str) -> list[str]:
    """The Python packages of the project in `cwd` (flat or src/ layout)."""
    found = []
    for root in (cwd, os.path.join(cwd, "src")):
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue
        for entry in entries:
            if (
                entry.isidentifier()
                and entry not in _NOT_PROJECT_DIRS
                and os.path.isfile(os.path.join(root, entry, "__init__.py"))
            ):
                found.append(entry)
    return found


def starter_text(cwd: str, *, table: str = "autonvtx", rules: str = "rules") -> str:
    """A commented starter config for the project in `cwd` and the frameworks installed."""
    frameworks = installed_frameworks()
    available = set(all_presets())
    with_preset = [name for name in frameworks if name in available]
    packages = project_packages(cwd)
    lines = [
        "# autonvtx: which functions get NVTX ranges (written by `autonvtx init`).",
        "# Check what these rules select with `autonvtx list MODULE`, then run",
        "# `autonvtx run --summary SCRIPT` (or under `nsys profile -t cuda,nvtx`).",
        "",
    ]
    if frameworks:
        lines.append("# Frameworks installed here: " + ", ".join(frameworks) + ".")
    if with_preset:
        lines.append("# Their presets (`autonvtx presets` lists all) are enabled below. Each acts")
        lines.append("# only in a program that imports its framework; remove those you do not want.")
    lines += [f"[{table}]"]
    presets_line = "presets = [" + ", ".join(f'"{n}"' for n in with_preset) + "]"
    lines.append(presets_line if with_preset else '# presets = ["torch"]')
    lines += [
        '# domain = "autonvtx"       # NVTX domain of every range unless a rule says otherwise',
        '# message = "{qualname}"    # fields: {module} {qualname} {name} {class} {file} {line}',
        '# color = "auto"            # "auto": a stable color per module; or a name, or "#rrggbb"',
        "",
    ]
    modules = [glob for name in packages for glob in (name, f"{name}.*")] or ["__main__"]
    what = (
        "your project's packages" if packages else "the functions your script defines (__main__)"
    )
    lines += [
        f"# One rule: {what}.",
        f"[[{rules}]]",
        "modules = [" + ", ".join(f'"{m}"' for m in modules) + "]   # globs over dotted module names",
        '# include = ["*"]             # globs over qualified names: "train", "Trainer.*", "*.forward"',
        'exclude = ["_*", "*._*"]      # private helpers stay quiet',
        '# color = "green"',
        '# category = "model"',
        "",
    ]
    return "\n".join(lines)


def write_starter(cwd: str, *, pyproject: bool = False) -> str:
    """Write ./autonvtx.toml (or append [tool.autonvtx] to ./pyproject.toml); refuse to
    overwrite. Returns the line to print."""
    from autonvtx.errors import UsageError

    if pyproject:
        path = os.path.join(cwd, "pyproject.toml")
        existing = ""
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                existing = f.read()
            from autonvtx.config import _parse

            tool = _parse("pyproject.toml", path, "toml").get("tool")
            if isinstance(tool, dict) and "autonvtx" in tool:
                raise UsageError("init: pyproject.toml: already has a [tool.autonvtx] table; left as it is")
        text = starter_text(cwd, table="tool.autonvtx", rules="tool.autonvtx.rules")
        separator = "" if not existing or existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
        with open(path, "a", encoding="utf-8") as f:
            f.write(separator + text)
        return "autonvtx: added [tool.autonvtx] to pyproject.toml"
    path = os.path.join(cwd, "autonvtx.toml")
    text = starter_text(cwd)
    try:
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise UsageError("init: autonvtx.toml: already exists; left as it is") from None
    return "autonvtx: wrote autonvtx.toml"
