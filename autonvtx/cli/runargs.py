"""`autonvtx run`'s command line read without click: click and what it imports cost about 20 ms
of every run's start (issue 24), so the common forms are parsed here and everything else is left
to click (`cli.run`): --help, every mistake, --summary and the view options that shape it, and
any option this parser does not know.

What this parser accepts, it reads exactly as click does (tests/test_runargs.py holds the two
equal over a corpus of command lines): the arguments are split at the target as
`cli.run.split_target_arguments` splits them, then run's own options are read as click reads
them (`--opt VALUE`, `--opt=VALUE`, `-tVALUE`, `-vv`, the last of a repeated single value).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from autonvtx.cli.launch import Target, TargetKind

# How an option is read: a flag, a count (-v), one value (the last given wins), a value each
# time (a tuple), a non-negative integer, or one of a few choices.
FLAG, COUNT, VALUE, MULTIPLE, INTEGER, CHOICE = "flag", "count", "value", "multiple", "integer", "choice"
FLOAT = "float"

# The target options, as `python` has them: the value is the target.
TARGET_OPTIONS: tuple[tuple[str, TargetKind], ...] = (("-m", "module"), ("-c", "code"))

# run's options that this parser reads: option -> (click's parameter name, how it is read).
OPTIONS = {
    "--config": ("configs", MULTIPLE),
    "--preset": ("presets", MULTIPLE),
    "--target": ("targets", MULTIPLE),
    "-t": ("targets", MULTIPLE),
    "--include": ("includes", MULTIPLE),
    "--exclude": ("excludes", MULTIPLE),
    "--engine": ("engine", CHOICE),
    "--verbose": ("verbose", COUNT),
    "-v": ("verbose", COUNT),
    "--dry-run": ("dry_run", FLAG),
    "--trace": ("trace", VALUE),
    "--buffer-mb": ("buffer_mb", INTEGER),
    "--keep": ("keep", CHOICE),
    "--no-children": ("no_children", FLAG),
    "--capture": ("captures", MULTIPLE),
    "--ranks": ("ranks", VALUE),
    "--flight": ("flight", VALUE),
    "--flight-factor": ("flight_factor", FLOAT),
    "--flight-keep": ("flight_keep", INTEGER),
    "--flight-max": ("flight_max", INTEGER),
    "--flight-warmup": ("flight_warmup", INTEGER),
    "--budget": ("budget", VALUE),
}

# The parameters click passes for these options (and --summary, left to click) when none is given.
DEFAULTS: dict[str, Any] = {
    "configs": (),
    "presets": (),
    "targets": (),
    "includes": (),
    "excludes": (),
    "engine": None,
    "verbose": 0,
    "dry_run": False,
    "trace": None,
    "summary": None,
    "buffer_mb": None,
    "keep": "all",
    "no_children": False,
    "captures": (),
    "ranks": None,
    "flight": None,
    "flight_factor": 3.0,
    "flight_keep": 10,
    "flight_max": 20,
    "flight_warmup": 5,
    "budget": None,
}


class Deferred(Exception):
    """This command line is click's to read (help, a mistake, an option not read here)."""


def parse_run(args: Sequence[str]) -> tuple[dict[str, Any], Target] | None:
    """(click's parameters, the target) for `autonvtx run ARGS`, or None to leave it to click."""
    try:
        return _parse(list(args))
    except Deferred:
        return None


def _parse(args: list[str]) -> tuple[dict[str, Any], Target]:
    params = dict(DEFAULTS)
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            if i + 1 >= len(args):
                raise Deferred  # no target: click's path says so
            return params, ("script", args[i + 1], tuple(args[i + 2 :]))
        for flag, kind in TARGET_OPTIONS:
            if token == flag:
                if i + 1 >= len(args):
                    raise Deferred
                return params, (kind, args[i + 1], tuple(args[i + 2 :]))
            if token.startswith(flag) and not token.startswith("--"):
                return params, (kind, token[len(flag) :], tuple(args[i + 1 :]))
        if not token.startswith("-") or token == "-":
            return params, ("script", token, tuple(args[i + 1 :]))
        name, value, i = _option(args, i)
        _read(params, name, value)
    raise Deferred  # no target: click's path says so


def _option(args: list[str], i: int) -> tuple[str, str | None, int]:
    """(the option at args[i], its value or None, the index after both)."""
    token = args[i]
    if token.startswith("--"):
        name, equals, value = token.partition("=")
        if name not in OPTIONS:
            raise Deferred
        if equals:
            if OPTIONS[name][1] in (FLAG, COUNT):
                raise Deferred  # click: "does not take a value"
            return name, value, i + 1
    elif token[:2] == "-v" and token.strip("v") == "-":
        return "-v", str(len(token) - 1), i + 1  # -v, -vv, ...: a count
    elif token[:2] == "-t":
        if len(token) > 2:
            return "-t", token[2:], i + 1
        name = token
    else:
        raise Deferred  # -h, clusters such as -vt, options run does not have
    if OPTIONS[name][1] in (FLAG, COUNT):
        return name, None, i + 1
    if i + 1 >= len(args):
        raise Deferred  # click: "requires an argument"
    return name, args[i + 1], i + 2  # the next argument, whatever it looks like (as click)


def _read(params: dict[str, Any], option: str, value: str | None) -> None:
    parameter, how = OPTIONS[option]
    if how == FLAG:
        params[parameter] = True
    elif how == COUNT:
        params[parameter] += int(value) if value is not None else 1
    elif how == MULTIPLE:
        params[parameter] += (value,)
    elif how == INTEGER:
        assert value is not None
        if not (value.isascii() and value.isdigit()):
            raise Deferred  # click's conversion (and its message) for anything else
        params[parameter] = int(value)
    elif how == FLOAT:
        assert value is not None
        try:
            params[parameter] = float(value)  # as click's FLOAT reads it
        except ValueError:
            raise Deferred from None  # click's message
    elif how == CHOICE and value not in _choices(parameter):
        raise Deferred  # click names the choices
    else:
        params[parameter] = value


def _choices(parameter: str) -> tuple[str, ...]:
    if parameter == "engine":
        from autonvtx.engines import ENGINES  # only a run with --engine pays for it

        return ENGINES
    return ("all", "last")
