"""Option groups more than one command declares: the rule options (`run`, `list`, `export`)
and the options that shape a summary table (`run --summary`, `summary`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from autonvtx.cli.ruleargs import RuleArgs
from autonvtx.engines import ENGINES

__all__ = ["RULE_OPTIONS", "RuleArgs", "rule_options", "summary_options"]


# The rule options of `run`, `list` and `export` (and %autonvtx in IPython), declared once.
RULE_OPTIONS = [
    click.option(
        "--config",
        "configs",
        multiple=True,
        metavar="FILE",
        help="Rules file (.toml, .yaml, .yml, or Nsight Systems' functions-trace .json); repeatable,"
        " merged in order. Default: ./autonvtx.toml, else [tool.autonvtx] in ./pyproject.toml.",
    ),
    click.option(
        "--preset",
        "presets",
        multiple=True,
        metavar="NAME",
        help="Shipped or installed rules for a framework (e.g. torch, pandas); repeatable. See 'autonvtx presets'.",
    ),
    click.option(
        "-t",
        "--target",
        "targets",
        multiple=True,
        metavar="GLOB",
        help="Quick rule: annotate modules matching GLOB (e.g. 'mypkg.*'); repeatable.",
    ),
    click.option(
        "--include",
        "includes",
        multiple=True,
        metavar="GLOB",
        help="With -t: only qualified names matching GLOB (e.g. 'Trainer.*'); repeatable.",
    ),
    click.option(
        "--exclude",
        "excludes",
        multiple=True,
        metavar="GLOB",
        help="With -t: never qualified names matching GLOB (e.g. '_*'); repeatable.",
    ),
    click.option(
        "--engine",
        type=click.Choice(ENGINES),
        default=None,
        help="How rules put ranges on functions: code (sys.monitoring, Python 3.12+, replaces"
        " nothing), wrap (wrappers), auto (code where it can run; the default, or the config's"
        " [autonvtx] engine).",
    ),
]


def rule_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--config, --preset, -t/--target, --include, --exclude, --engine: the command receives
    them as one `rules: RuleArgs` argument."""

    @functools.wraps(command)
    def with_rules(
        *args: Any,
        configs: tuple[str, ...],
        presets: tuple[str, ...],
        targets: tuple[str, ...],
        includes: tuple[str, ...],
        excludes: tuple[str, ...],
        engine: str | None,
        **kwargs: Any,
    ) -> Any:
        rules = RuleArgs(configs, presets, targets, includes, excludes, engine)
        return command(*args, rules=rules, **kwargs)

    for option in reversed(RULE_OPTIONS):
        with_rules = option(with_rules)
    return with_rules


def summary_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that shape a summary table: the view options every table command shares."""
    from autonvtx.cli.views import side_table_options, view_options

    return view_options(side_table_options(command))
