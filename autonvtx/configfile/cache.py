"""Config files parsed once: what a TOML or YAML file holds is kept (marshal) in the user's
cache directory, so a run whose config did not change imports neither tomllib nor PyYAML
(tomllib alone is about a third of `autonvtx run --config`'s start-up, issue 24).

An entry holds the file's whole text next to its data and is used only for exactly that text
(of that format, on this Python), so an edit is never missed; entries are written as Python
writes its bytecode caches: atomically, and not under PYTHONDONTWRITEBYTECODE. Data marshal
cannot hold (TOML dates) is not kept. Any trouble with the cache is no more than a miss: an
unreadable, corrupt or foreign entry (one this user does not own, or others may write: a
cache directory shared with other users) is not used, and a directory that cannot be written
(a read-only home) keeps nothing. Concurrent runs each write their own temporary file (created
exclusively: an existing file or link there is never followed) and the last rename wins, with
the same content. At most MAX_ENTRIES entries are kept: writing past that removes the oldest.
"""

from __future__ import annotations

import marshal
import os
import sys

from autonvtx.environment import XDG_CACHE_HOME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Bumped when what an entry holds changes.
_FORMAT = 1
MAX_ENTRIES = 64
_SUFFIX = f".py{sys.version_info[0]}{sys.version_info[1]}"
# A stable checksum without zlib (an extension module and its library to load: start-up): the
# text's bytes as one integer, modulo the Mersenne prime 2**61 - 1.
_MODULUS = (1 << 61) - 1


def directory() -> str:
    """Where entries live: $XDG_CACHE_HOME/autonvtx/configs, else ~/.cache/autonvtx/configs."""
    base = os.environ.get(XDG_CACHE_HOME) or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autonvtx", "configs")


def _entry_path(kind: str, text: str) -> str:
    encoded = text.encode("utf-8", "surrogatepass")
    checksum = int.from_bytes(encoded, "little") % _MODULUS
    return os.path.join(directory(), f"{kind}-{checksum:016x}-{len(encoded)}{_SUFFIX}")


def load(kind: str, text: str) -> Any | None:
    """The data kept for `text` (of format `kind`), or None."""
    try:
        with open(_entry_path(kind, text), "rb") as f:
            if not _is_trusted(os.fstat(f.fileno())):
                return None
            entry = marshal.loads(f.read())
    except Exception:  # noqa: BLE001 - unreadable or not marshal data (marshal says so in several ways): a miss
        return None
    if not (isinstance(entry, tuple) and len(entry) == 4 and entry[:3] == (_FORMAT, kind, text)):
        return None  # another text with the same checksum and length, or an older format
    return entry[3]


def _is_trusted(status: os.stat_result) -> bool:
    # This user's, and writable by no one else: what it holds is what a run of ours wrote.
    getuid = getattr(os, "getuid", None)  # POSIX only
    return (getuid is None or status.st_uid == getuid()) and not status.st_mode & 0o022


def keep(kind: str, text: str, data: Any) -> None:
    """Keep `data`, parsed from `text`, for the next run; nothing when that cannot be done."""
    if sys.dont_write_bytecode:
        return
    try:
        payload = marshal.dumps((_FORMAT, kind, text, data))
    except ValueError:  # values marshal cannot hold (dates)
        return
    path = _entry_path(kind, text)
    temporary = f"{path}.{os.getpid()}-{os.urandom(4).hex()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(temporary, "xb") as f:  # exclusive: never through a file or link already there
            f.write(payload)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return
    _prune(os.path.dirname(path))


def _prune(where: str) -> None:
    """Remove the oldest entries past MAX_ENTRIES (each edit of a config adds one)."""
    try:
        names = [name for name in os.listdir(where) if name.endswith(_SUFFIX)]
        if len(names) <= MAX_ENTRIES:
            return
        ages = []
        for name in names:
            try:
                ages.append((os.stat(os.path.join(where, name)).st_mtime, name))
            except OSError:
                pass  # removed by a concurrent run meanwhile
        for _, name in sorted(ages)[: len(ages) - MAX_ENTRIES]:
            try:
                os.unlink(os.path.join(where, name))
            except OSError:
                pass
    except OSError:
        pass
