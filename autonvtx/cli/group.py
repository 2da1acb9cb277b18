"""The `autonvtx` command group: every command module registers itself on it."""
from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="autonvtx", prog_name="autonvtx")
def cli() -> None:
    """NVTX ranges on any Python program's own functions, without touching its source."""
