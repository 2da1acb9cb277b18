"""Option groups more than one command declares: the rule options (`run`, `list`, `export`)
and the options that shape a summary table (`run --summary`, `summary`)."""
from __future__ import annotations

from typing import Any, Callable

import click


# The rule options of `run`, `list` and `export` (and %autonvtx in IPython), declared once.
RULE_OPTIONS = [
    click.option(
        "--config", "configs", multiple=True, metavar="FILE",
        help="Rules file (.toml, .yaml, .yml, or Nsight Systems' functions-trace .json); repeatable,"
        " merged in order. Default: ./autonvtx.toml, else [tool.autonvtx] in ./pyproject.toml.",
    ),
    click.option(
        "--preset", "presets", multiple=True, metavar="NAME",
        help="Shipped or installed rules for a framework (e.g. torch, pandas); repeatable."
        " See 'autonvtx presets'.",
    ),
    click.option(
        "-t", "--target", "targets", multiple=True, metavar="GLOB",
        help="Quick rule: annotate modules matching GLOB (e.g. 'mypkg.*'); repeatable.",
    ),
    click.option(
        "--include", "includes", multiple=True, metavar="GLOB",
        help="With -t: only qualified names matching GLOB (e.g. 'Trainer.*'); repeatable.",
    ),
    click.option(
        "--exclude", "excludes", multiple=True, metavar="GLOB",
        help="With -t: never qualified names matching GLOB (e.g. '_*'); repeatable.",
    ),
    click.option(
        "--engine", type=click.Choice(["auto", "code", "wrap"]), default=None,
        help="How rules put ranges on functions: code (sys.monitoring, Python 3.12+, replaces"
        " nothing), wrap (wrappers), auto (code where it can run; the default, or the config's"
        " [autonvtx] engine).",
    ),
]


def rule_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--config, --preset, -t/--target, --include, --exclude, --engine."""
    for option in reversed(RULE_OPTIONS):
        command = option(command)
    return command


def summary_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that shape a summary table, shared by `run --summary` and `summary`."""
    options = [
        click.option("--tree", is_flag=True, help="Summary: one row per call path, indented by nesting."),
        click.option("--group", "group_by", type=click.Choice(["name", "class"]), default="name",
                     help="Summary: class folds 'a.b.3.attn (Attention)' rows into one per class."),
        click.option("--skip-first", type=click.IntRange(min=0), default=0, metavar="N",
                     help="Summary: leave out each range name's first N instances (warm-up)."),
        click.option("--by", type=click.Choice(["process", "rank", "thread"]), help="Summary: a table per group."),
        click.option("--sort", type=click.Choice(["total", "self", "count", "mean", "max"]), default="total",
                     help="Summary: the column rows are sorted by (largest first)."),
        click.option("--top", type=click.IntRange(min=1), metavar="N", help="Summary: only the first N rows."),
        click.option("--filter", "name_filter", metavar="GLOB", help="Summary: only ranges whose name matches."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def make_summary_options(values: dict[str, Any]) -> Any:
    from autonvtx.recorder.summary import SummaryOptions

    return SummaryOptions(tree=values["tree"], group=values["group_by"], skip_first=values["skip_first"],
                          by=values["by"], sort=values["sort"], top=values["top"], filter=values["name_filter"])


SUMMARY_OPTION_DEFAULTS = {"tree": False, "group_by": "name", "skip_first": 0, "by": None, "sort": "total",
                           "top": None, "name_filter": None}
