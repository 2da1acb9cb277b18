"""The `autonvtx` command line: parsing and wiring only, one module per group of commands."""
from __future__ import annotations

import sys
from typing import Any, Sequence

import click

# Each command module registers its commands on the group when imported; `run` (start-up
# matters most there) now, the others when asked for (group.COMMAND_MODULES).
from autonvtx.cli.group import cli
from autonvtx.cli.run import TargetRun
from autonvtx.errors import AutonvtxError

__all__ = ["cli", "main"]


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry: controlled errors print one line, never a traceback."""
    try:
        result = cli.main(args=list(argv) if argv is not None else None, prog_name="autonvtx", standalone_mode=False)
        if isinstance(result, TargetRun):
            result.execute()  # outside click's contexts: a click program must not see ours
        return result
    except AutonvtxError as error:
        for line in str(error).splitlines():  # one problem a line (a config's, all at once)
            print(f"autonvtx: {line}", file=sys.stderr)
        raise SystemExit(error.exit_status) from None
    except click.exceptions.Abort:
        print("autonvtx: aborted", file=sys.stderr)
        raise SystemExit(130) from None
    except click.ClickException as error:
        context = getattr(error, "ctx", None)
        subcommand = context.command_path.partition(" ")[2] if context is not None else ""
        where = f"{subcommand}: " if subcommand else ""
        print(f"autonvtx: {where}{error.format_message()}", file=sys.stderr)
        raise SystemExit(error.exit_code) from None
