"""Config files parsed once: what a TOML or YAML file holds is kept (marshal) in the user's
cache directory, so a run whose config did not change imports neither tomllib nor PyYAML
(tomllib alone is about a third of `autonvtx run --config`'s start-up, issue 24).

An entry holds the file's whole text next to its data and is used only for exactly that text
(of that format, on this Python), so an edit is never missed; entries are written as Python
writes its bytecode caches: atomically, and not under PYTHONDONTWRITEBYTECODE. Data marshal
cannot hold (TOML dates) is not kept. Any trouble with the cache is no more than a miss.
"""
from __future__ import annotations

import marshal
import os
import sys
import zlib

from autonvtx.environment import XDG_CACHE_HOME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Bumped when what an entry holds changes.
_FORMAT = 1


def directory() -> str:
    """Where entries live: $XDG_CACHE_HOME/autonvtx/configs, else ~/.cache/autonvtx/configs."""
    base = os.environ.get(XDG_CACHE_HOME) or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autonvtx", "configs")


def _entry_path(kind: str, text: str) -> str:
    encoded = text.encode("utf-8", "surrogatepass")
    name = f"{kind}-{zlib.crc32(encoded):08x}-{len(encoded)}.py{sys.version_info[0]}{sys.version_info[1]}"
    return os.path.join(directory(), name)


def load(kind: str, text: str) -> Any | None:
    """The data kept for `text` (of format `kind`), or None."""
    try:
        with open(_entry_path(kind, text), "rb") as f:
            entry = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not (isinstance(entry, tuple) and len(entry) == 4 and entry[:3] == (_FORMAT, kind, text)):
        return None  # another text with the same checksum and length, or an older format
    return entry[3]


def keep(kind: str, text: str, data: Any) -> None:
    """Keep `data`, parsed from `text`, for the next run; nothing when that cannot be done."""
    if sys.dont_write_bytecode:
        return
    try:
        payload = marshal.dumps((_FORMAT, kind, text, data))
    except ValueError:  # values marshal cannot hold (dates)
        return
    path = _entry_path(kind, text)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(temporary, "wb") as f:
            f.write(payload)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
