"""The renderer registry: every output form of every table, looked up by (table, form).

As pyinstrument's `renderers/`: a command builds its table's document once (the arranged rows
and what heads them), then asks the registry for the form the user chose; a form is added by
registering one function, and every renderer has the same signature, `(document, rendering) ->
str`. The HTML pages (`report.render.page`, `report.render.diffpage`) are entries like the others: they
receive the same documents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from autonvtx.report.figures import Report, Row, TreeNode
from autonvtx.stats.model import RangeStats

TABLES = ("summary", "report", "diff", "across", "pairs", "memory")


@dataclass(frozen=True)
class Rendering:
    """How the output is shown: `width`, a terminal's, which text tables fit (None: a file or a
    pipe, names never cut); `color` for a terminal; `size_by`, what sizes the boxes of a page."""

    width: int | None = None
    color: bool = False
    size_by: str = "gpu"


@dataclass
class SummaryDocument:
    """A recording's statistics table (`summary`, `run --summary`)."""

    stats: Sequence[RangeStats]
    notes: Sequence[str] = ()
    empty: str | None = None  # why it has no rows, where --filter emptied it


@dataclass
class ReportDocument:
    """`report`'s table: the report, its arranged rows, its arranged tree (--tree or a page), and
    for a recording the statistics rows the text table prints."""

    report: Report
    rows: Sequence[Row]
    tree: Sequence[TreeNode] | None = None
    stats: Sequence[RangeStats] | None = None


@dataclass
class DiffDocument:
    """`diff`'s table: the comparison, its arranged rows, and the whole tree a page draws."""

    diff: Any  # report.compare.diff.Diff (not imported here: diff imports the view layer, not renderers)
    rows: Sequence[Any]
    tree_rows: Sequence[Any] = field(default_factory=list)


@dataclass
class AcrossDocument:
    """`report --across ranks`: the ranks side by side and their arranged rows."""

    spread: Any  # report.compare.across.Spread
    rows: Sequence[Any]


@dataclass
class RowsDocument:
    """A side table (`report.sideviews`: `--pair backward`, `--memory`): its arranged rows and notes."""

    rows: Sequence[Any]
    notes: Sequence[str] = ()


D = TypeVar("D")
Renderer = Callable[[Any, Rendering], str]
_REGISTRY: dict[tuple[str, str], Renderer] = {}


def register(table: str, form: str) -> Callable[[Callable[[D, Rendering], str]], Callable[[D, Rendering], str]]:
    """Decorate a renderer of `table` in `form` ("text", "csv", "json", "html")."""
    assert table in TABLES, table

    def add(function: Callable[[D, Rendering], str]) -> Callable[[D, Rendering], str]:
        _REGISTRY[(table, form)] = function
        return function

    return add


def render(table: str, form: str, document: Any, rendering: Rendering = Rendering()) -> str:
    """`document` of `table` in `form`, by its registered renderer."""
    found = _REGISTRY.get((table, form))
    if found is None:
        from autonvtx.errors import UsageError

        forms = ", ".join(f for t, f in _REGISTRY if t == table)
        raise UsageError(f"--format {form}: {table} is not written as {form}; expected one of {forms}")
    return found(document, rendering)


def forms(table: str) -> tuple[str, ...]:
    """The forms `table` is written in."""
    return tuple(f for t, f in _REGISTRY if t == table)


# The entries. Each imports its module when called: a command loads only the forms it writes
# (the HTML pages and their assets are large).


@register("summary", "text")
def _summary_text(document: SummaryDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.text import stats_text

    return stats_text(
        document.stats, notes=document.notes, color=rendering.color, empty=document.empty, width=rendering.width
    )


@register("summary", "csv")
def _summary_csv(document: SummaryDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.data import stats_csv

    return stats_csv(document.stats)


@register("summary", "json")
def _summary_json(document: SummaryDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.data import stats_json

    empty = [document.empty] if document.empty and not document.stats and document.empty not in document.notes else []
    return stats_json(document.stats, notes=list(document.notes) + empty)


@register("report", "text")
def _report_text(document: ReportDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.text import report_text

    return report_text(document.report, document.rows, document.tree, document.stats, width=rendering.width)


@register("report", "csv")
def _report_csv(document: ReportDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.data import report_csv

    return report_csv(document.report, document.rows, document.tree)


@register("report", "json")
def _report_json(document: ReportDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.data import report_json

    return report_json(document.report, document.rows, document.tree)


@register("report", "html")
def _report_page(document: ReportDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.page import render_page

    return render_page(document.report, document.rows, document.tree or [], rendering.size_by)


@register("diff", "text")
def _diff_text(document: DiffDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.diffformats import format_text

    return format_text(document.diff, document.rows, rendering.width)


@register("diff", "csv")
def _diff_csv(document: DiffDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.diffformats import format_csv

    return format_csv(document.diff, document.rows)


@register("diff", "json")
def _diff_json(document: DiffDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.diffformats import format_json

    return format_json(document.diff, document.rows)


@register("diff", "html")
def _diff_page(document: DiffDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.diffpage import render_diff_page

    return render_diff_page(document.diff, document.rows, document.tree_rows)


@register("across", "text")
def _across_text(document: AcrossDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.acrossformats import format_text

    return format_text(document.spread, document.rows, rendering.width)


@register("across", "csv")
def _across_csv(document: AcrossDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.acrossformats import format_csv

    return format_csv(document.spread, document.rows)


@register("across", "json")
def _across_json(document: AcrossDocument, rendering: Rendering) -> str:
    from autonvtx.report.render.acrossformats import format_json

    return format_json(document.spread, document.rows)


@register("pairs", "text")
def _pairs_text(document: RowsDocument, rendering: Rendering) -> str:
    from autonvtx.report.pairing import pairs_text

    return pairs_text(document.rows, document.notes)


@register("pairs", "csv")
def _pairs_csv(document: RowsDocument, rendering: Rendering) -> str:
    from autonvtx.report.pairing import pairs_csv

    return pairs_csv(document.rows)


@register("pairs", "json")
def _pairs_json(document: RowsDocument, rendering: Rendering) -> str:
    from autonvtx.report.pairing import pairs_json

    return pairs_json(document.rows, document.notes)


@register("memory", "text")
def _memory_text(document: RowsDocument, rendering: Rendering) -> str:
    from autonvtx.report.memory import memory_text

    return memory_text(document.rows, document.notes)


@register("memory", "csv")
def _memory_csv(document: RowsDocument, rendering: Rendering) -> str:
    from autonvtx.report.memory import memory_csv

    return memory_csv(document.rows)


@register("memory", "json")
def _memory_json(document: RowsDocument, rendering: Rendering) -> str:
    from autonvtx.report.memory import memory_json

    return memory_json(document.rows, document.notes)
