"""Presets: named config files shipped in configs/ or by other packages (entry points)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autonvtx.errors import ConfigError, did_you_mean

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
            + did_you_mean(name, known)
            + " (see 'autonvtx presets')"
        )
    return preset.resolve()


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
        raise ConfigError(f"{where}: expected a path or an importlib.resources file, got {type(value).__name__}")
    if not os.path.isfile(path):
        raise ConfigError(f"{where}: no such file {path!r}")
    return path
