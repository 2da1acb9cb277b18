"""The `autonvtx` command line: parsing and wiring only, one module per group of commands.

`autonvtx run` in its common forms is parsed without click (`cli.runargs`: start-up, issue 24);
everything else goes to the click group (`cli.group`), which imports a command's module when
the command is asked for.
"""

from __future__ import annotations

import sys

from autonvtx.errors import AutonvtxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["cli", "main"]


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry: controlled errors print one line, never a traceback."""
    from autonvtx.cli.launch import TargetRun

    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        result = _start_run(args) if args[:1] == ["run"] else None
        if result is None:
            result = _click_main(args)
        if isinstance(result, TargetRun):
            result.execute()  # outside click's contexts: a click program must not see ours
        return result
    except AutonvtxError as error:
        for line in str(error).splitlines():  # one problem a line (a config's, all at once)
            print(f"autonvtx: {line}", file=sys.stderr)
        raise SystemExit(error.exit_status) from None


def _start_run(args: list[str]) -> Any:
    """`autonvtx run ARGS` started from the parse of `cli.runargs`, or None when that parser
    leaves the command line to click."""
    from autonvtx.cli.runargs import parse_run

    parsed = parse_run(args[1:])
    if parsed is None:
        return None
    from autonvtx.cli.launch import start_run
    from autonvtx.cli.ruleargs import RuleArgs

    params, target = parsed
    rules = RuleArgs(
        *(params.pop(name) for name in ("configs", "presets", "targets", "includes", "excludes", "engine"))
    )
    return start_run(target, rules=rules, table=None, **params)


def _click_main(args: list[str]) -> Any:
    """The command line as the click group reads it; click's errors as one line each."""
    import click

    from autonvtx.cli.group import cli

    try:
        return cli.main(args=args, prog_name="autonvtx", standalone_mode=False)
    except click.exceptions.Abort:
        print("autonvtx: aborted", file=sys.stderr)
        raise SystemExit(130) from None
    except click.ClickException as error:
        context = getattr(error, "ctx", None)
        subcommand = context.command_path.partition(" ")[2] if context is not None else ""
        where = f"{subcommand}: " if subcommand else ""
        print(f"autonvtx: {where}{error.format_message()}", file=sys.stderr)
        raise SystemExit(error.exit_code) from None


def __getattr__(name: str) -> Any:
    # PEP 562: the click group loads when asked for (tests, docs), not with the package.
    if name == "cli":
        from autonvtx.cli.group import cli

        return cli
    raise AttributeError(f"module 'autonvtx.cli' has no attribute {name!r}")
