"""The `autonvtx` command group: every command module registers itself on it."""

from __future__ import annotations

import importlib

import click

from autonvtx.errors import did_you_mean

# Where each command lives (a module registers its commands when imported). Only the module of
# the command asked for is imported: `autonvtx run` does not load the others (start-up).
COMMAND_MODULES = {
    "run": "autonvtx.cli.run",  # its common forms are read without click (cli.runargs)
    "summary": "autonvtx.cli.recorded",
    "recover": "autonvtx.cli.recorded",
    "merge": "autonvtx.cli.recorded",
    "report": "autonvtx.cli.report",
    "profile": "autonvtx.cli.profile",
    "diff": "autonvtx.cli.diff",
    "presets": "autonvtx.cli.rules",
    "list": "autonvtx.cli.rules",
    "export": "autonvtx.cli.rules",
    "init": "autonvtx.cli.rules",
    "kernel": "autonvtx.cli.kernel",
}


class CommandGroup(click.Group):
    """A group whose commands' modules are imported when a command is looked up by name, and
    all at once when the commands are listed (`autonvtx --help`)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if cmd_name not in self.commands and module is not None:
            importlib.import_module(module)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # click's message names only the commands already imported, and not where to look.
        name = args[0] if args else ""
        if name and not name.startswith("-") and not ctx.resilient_parsing and self.get_command(ctx, name) is None:
            names = sorted(set(self.commands) | set(COMMAND_MODULES))
            raise click.UsageError(f"No such command {name!r}{did_you_mean(name, names)} (see 'autonvtx --help')", ctx)
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for module in sorted(set(COMMAND_MODULES.values())):
            importlib.import_module(module)
        return super().list_commands(ctx)


def print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--version: the version, the Python, and each native part built or missing (and why)."""
    if not value or ctx.resilient_parsing:
        return
    import platform
    import sys

    from autonvtx import __version__
    from autonvtx.nativeparts import status_lines

    click.echo(f"autonvtx {__version__} (Python {platform.python_version()}, {sys.executable})")
    for line in status_lines():
        click.echo(f"  {line}")
    ctx.exit()


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=print_version,
    help="Show the version and which native parts are built, then exit.",
)
def cli() -> None:
    """NVTX ranges on any Python program's own functions, without touching its source."""
