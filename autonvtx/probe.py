"""Whether a directory takes a new file, found by making one: `os.access` says yes to root on a
read-only mount, in /proc, and in a directory made immutable."""

from __future__ import annotations

import os


def cannot_create_in(directory: str, name: str) -> str | None:
    """Why a file cannot be created in `directory` (the system's words), or None when it can.
    The probe is a hidden file named after `name` and this process, removed at once."""
    probe = os.path.join(directory or ".", f".{name}.{os.getpid()}.probe.tmp")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        return None
    except OSError as error:
        return error.strerror or str(error)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return None
