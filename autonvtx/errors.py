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
