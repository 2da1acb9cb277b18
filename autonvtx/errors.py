"""Errors autonvtx reports to users without a traceback."""

from __future__ import annotations


class AutonvtxError(Exception):
    """A controlled failure: the CLI prints ``autonvtx: <message>`` and exits with ``exit_status``."""

    exit_status = 2


class UsageError(AutonvtxError):
    """The command line asked for something autonvtx cannot do."""


class TargetNotFoundError(AutonvtxError):
    """The script or module to run does not exist (worded as Python words it)."""


class ConfigError(AutonvtxError):
    """A configuration file or rule is invalid."""


class TraceFormatError(AutonvtxError):
    """A trace or recording file could not be read."""


def did_you_mean(word: object, choices: object) -> str:
    """ "; did you mean 'x'?" for the choice closest to a mistyped `word`, or ""."""
    if not isinstance(word, str):
        return ""
    import difflib  # imported here: only a mistake needs it, and it costs start-up (issue 6)

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)  # type: ignore[call-overload]
    return f"; did you mean {close[0]!r}?" if close else ""
