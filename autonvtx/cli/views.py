"""The view options, declared once: `run --summary`, `summary` and `report` take the same flags
with the same meaning (`stats.model.ViewOptions`, applied by `stats.view.arrange`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from autonvtx.stats.model import BY, DIFF_SORTS, GPU_SORTS, GROUPINGS, SORTS, SPREAD_SORTS, STATS_SORTS

if TYPE_CHECKING:
    from autonvtx.stats.model import ViewOptions

# Keys only a comparison of runs has.
DIFF_ONLY_SORTS = tuple(key for key in DIFF_SORTS if key not in STATS_SORTS + GPU_SORTS + SPREAD_SORTS)


# The --sort keys each command's help lists (every key is parsed everywhere, so that one the
# data cannot answer is refused saying why: `summary --sort gpu`, a recording has no GPU data).
RECORDING_SORT_HELP = "The column rows are sorted by, largest first (default: total; cpu = total, instances = count)."
REPORT_SORTS = tuple(key for key in SORTS if key not in DIFF_ONLY_SORTS)
REPORT_SORT_HELP = (
    "The column rows are sorted by, largest first (default: total, or gpu for an export with GPU work; "
    "cpu = total, instances = count; lost and imbalance with --across ranks)."
)
DIFF_SORT_HELP = "The column rows are sorted by (default: the change, real changes first)."


class SortChoice(click.Choice):  # type: ignore[type-arg]
    """--sort parses every key of every table (a key the data cannot answer is refused later,
    saying why); a key no table has is refused naming only this command's keys."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        super().__init__(SORTS)
        self.keys = keys

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value not in SORTS:
            self.fail(f"{value!r} is not a sort key; expected one of {', '.join(self.keys)}", param, ctx)
        return super().convert(value, param, ctx)


def view_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--tree, --group, --each, --skip-first, --by, --sort, --top, --filter, for a recording's
    statistics (`run --summary`, `summary`)."""
    return view_options_for(STATS_SORTS, RECORDING_SORT_HELP)(command)


def view_options_for(sorts: tuple[str, ...], sort_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The view options, with --sort's help listing `sorts`."""
    return lambda command: _view_options(command, sorts, sort_help)


def _view_options(command: Callable[..., Any], sorts: tuple[str, ...], sort_help: str) -> Callable[..., Any]:
    options = [
        click.option("--tree", is_flag=True, help="One row per call path, indented by nesting."),
        click.option(
            "--group",
            "group_by",
            type=click.Choice(GROUPINGS),
            default="name",
            help="class folds 'a.b.3.attn (Attention)' rows into one per class (recordings).",
        ),
        click.option(
            "--each",
            is_flag=True,
            help="A row per recorded name: without it, names that differ only in their numbers "
            "('step 0', 'step 1', ...) share one row, 'step {n}'.",
        ),
        click.option(
            "--skip-first",
            type=click.IntRange(min=0),
            default=0,
            metavar="N",
            help="Leave out each range's first N instances on each thread (warm-up; recordings).",
        ),
        click.option("--by", type=click.Choice(BY), help="A table per process, rank, thread (or GPU, for exports)."),
        click.option(
            "--sort",
            type=SortChoice(sorts),
            default=None,
            metavar="[" + "|".join(sorts) + "]",
            help=sort_help,
        ),
        click.option(
            "--top",
            type=click.IntRange(min=1),
            metavar="N",
            help="Only the first N rows of each group (with --tree: N children per range).",
        ),
        click.option(
            "--filter",
            "name_filter",
            metavar="GLOB",
            help="Only ranges whose name matches GLOB (with --tree: and what encloses them).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def side_table_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with --pair and --memory: tables that take the statistics table's
    place (`report.sideviews`), for `summary`, `run --summary` and `report`."""
    command = click.option(
        "--memory",
        is_flag=True,
        help="CUDA memory per range: allocated at start and end, the peak between (torch plugin's memory option).",
    )(command)
    return click.option(
        "--pair",
        type=click.Choice(["backward"]),
        help="backward: each module's forward and backward ranges side by side (torch backward_modules).",
    )(command)


VIEW_OPTION_DEFAULTS = {
    "tree": False,
    "group_by": "name",
    "each": False,
    "skip_first": 0,
    "by": None,
    "sort": None,
    "top": None,
    "name_filter": None,
    "pair": None,
    "memory": False,
}


def view_from(values: dict[str, Any]) -> ViewOptions:
    """The one carrier of the view options (`stats.model.ViewOptions`) from what click parsed:
    every command that takes them makes it here and hands it on whole."""
    from autonvtx.stats.model import ViewOptions

    return ViewOptions(
        tree=bool(values.get("tree")),
        group=values.get("group_by") or "name",
        skip_first=values.get("skip_first") or 0,
        by=values.get("by"),
        sort=values.get("sort"),
        top=values.get("top"),
        filter=values.get("name_filter"),
        each=bool(values.get("each")),
        pair=values.get("pair"),
        memory=bool(values.get("memory")),
    )


def make_view_options(values: dict[str, Any]) -> ViewOptions:
    """The ViewOptions a recording's statistics are arranged by; GPU-only sort keys refused."""
    from autonvtx.stats.model import STATS_SORTS, check_sort

    options = view_from(values)
    check_sort(options.sort or "total", STATS_SORTS, "an autonvtx recording (no GPU data)")
    if options.by == "gpu":
        from autonvtx.report.viewchecks import no_gpu_data

        raise no_gpu_data(None)
    if options.pair is not None or options.memory:
        from autonvtx.report.sidechecks import check

        check(options)  # before a run starts: its table is written when the program has ended
    return options


def scale_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--jobs, --scheduler and --progress: how many files are read, and where (diff, report --across)."""
    for option in reversed(
        [
            click.option(
                "--jobs",
                "-j",
                type=click.IntRange(min=1),
                metavar="N",
                help="Worker processes reading files (default: one per CPU).",
            ),
            click.option(
                "--scheduler", metavar="ADDRESS", help="Read the files on a Dask cluster (needs autonvtx[dask])."
            ),
            click.option(
                "--progress/--no-progress",
                default=None,
                help="A progress bar on stderr (default: when stderr is a terminal).",
            ),
        ]
    ):
        command = option(command)
    return command
