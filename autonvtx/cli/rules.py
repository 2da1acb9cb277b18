"""The commands about rules themselves: `presets`, `list`, `export`, `init`."""

from __future__ import annotations

import os
import sys
from typing import IO

import click

from autonvtx.cli.group import cli
from autonvtx.cli.launch import say_if_no_rules
from autonvtx.cli.options import RuleArgs, rule_options


@cli.command("presets")
def presets_command() -> None:
    """List the presets: shipped with autonvtx and installed by other packages."""
    from autonvtx.configfile import describe_preset
    from autonvtx.presets import all_presets

    known = all_presets()
    width = max((len(name) for name in known), default=0)
    for name, preset in known.items():
        source = "" if preset.source == "autonvtx" else f" [{preset.source}]"
        click.echo(f"{name.ljust(width)}  {describe_preset(preset)}{source}")


@cli.command("list")
@rule_options
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Also print every name skipped, with why.")
@click.argument("modules", nargs=-1, required=True)
def list_command(
    rules: RuleArgs,
    as_json: bool,
    verbose: bool,
    modules: tuple[str, ...],
) -> None:
    """Import MODULE(s) and print, per rule, what it selects and which patterns matched nothing.

    The decisions are the ones `autonvtx run` makes: the same walk, without wrapping.
    """
    from autonvtx import listing
    from autonvtx.plugins import load_plugins

    config = rules.load()
    say_if_no_rules(config, "list")
    load_plugins(config)
    sys.path.insert(0, os.getcwd())  # as `python -c "import MODULE"` would find it
    notes = listing.import_modules(modules, where="list")
    plan = listing.plan_modules(config, modules, notes)
    click.echo(listing.format_json(plan) if as_json else listing.format_text(plan, verbose=verbose), nl=False)


@cli.command("export")
@rule_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["nsys"]),
    default="nsys",
    show_default=True,
    help="nsys: Nsight Systems' --python-functions-trace JSON.",
)
@click.option("-o", "--output", metavar="PATH", help="Write to PATH instead of standard output.")
@click.argument("modules", nargs=-1, required=True)
def export_command(
    rules: RuleArgs,
    fmt: str,
    output: str | None,
    modules: tuple[str, ...],
) -> None:
    """Resolve the rules against MODULE(s) (imported) into another tool's format.

    \b
      autonvtx export --format nsys --preset pandas pandas -o pandas.json
      nsys profile --python-functions-trace=pandas.json python job.py
    """
    from autonvtx import listing

    config = rules.load()
    say_if_no_rules(config, "export")
    sys.path.insert(0, os.getcwd())
    notes = listing.import_modules(modules, where="export")
    plan = listing.plan_modules(config, modules, notes)
    for note in notes:
        print(f"autonvtx: export: {note}", file=sys.stderr)
    for rule, _ in plan.selected:
        for line in plan.unmatched.get(id(rule), []):
            print(f"autonvtx: warning: {line}", file=sys.stderr)
    if plan.plugins:
        names = ", ".join(name for name, _, _, _ in plan.plugins)
        print(
            f"autonvtx: export: plugins ({names}) name their ranges at run time;"
            " Nsight Systems' format cannot express them, so they are not exported",
            file=sys.stderr,
        )
    text = listing.format_nsys_json(plan)
    if output is None:
        click.echo(text, nl=False)
    else:
        from autonvtx.recorder.trace import write_atomically

        # Written beside, then renamed over: a symbolic link at OUTPUT is replaced, its target
        # left as it was, as every other writer of autonvtx does.
        def write(stream: IO[str]) -> None:
            stream.write(text)

        try:
            write_atomically(output, write)
        except OSError as error:
            raise click.UsageError(
                f"-o '{output}': cannot write ({error.strerror or error}); expected a writable file path"
            ) from None


@cli.command("init")
@click.option(
    "--pyproject",
    is_flag=True,
    help="Append a [tool.autonvtx] table to ./pyproject.toml instead of writing ./autonvtx.toml.",
)
def init_command(pyproject: bool) -> None:
    """Write a commented starter config naming the frameworks installed here."""
    from autonvtx.starter import write_starter

    click.echo(write_starter(os.getcwd(), pyproject=pyproject))
