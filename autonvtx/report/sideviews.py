"""The tables that take the statistics table's place when asked: `--pair backward` (a module's
forward and backward side by side) and `--memory` (the torch plugin's memory figures per
range), for `summary`, `run --summary` and `report`, on recordings and Nsight Systems exports.

Each is arranged by the one view (`stats.view.arrange`: --filter, --top per --by group) and
written through the renderer registry (tables "pairs" and "memory"), as every other table is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autonvtx.recorder.model import ProcessRecording
from autonvtx.report import memory, pairing
from autonvtx.report.render.renderers import RowsDocument, render
from autonvtx.report.sidechecks import MEMORY_SORT, MEMORY_SORTS, PAIRS_SORT, asked, sort_of
from autonvtx.stats.model import ViewOptions
from autonvtx.stats.view import View, arrange


def _view(options: ViewOptions) -> View:
    """--top and --filter, as the view takes them for a side table."""
    return View(top=options.top, filter=options.filter)


def unarranged(options: ViewOptions) -> ViewOptions:
    """The statistics view a side table is built from: every row (its own --top and --filter
    apply to pairs, not to the rows they are made of)."""
    import dataclasses

    return dataclasses.replace(options, top=None, filter=None, tree=False)


def pairs_table(
    rows: Sequence[Any], options: ViewOptions, form: str, notes: Sequence[str] = (), gpu: bool = False
) -> str:
    """`--pair backward` over statistics rows or report rows (`gpu`: an export's, with GPU
    work), arranged and rendered in `form`."""
    sort_of(options, (), "--pair", PAIRS_SORT)
    pairs = pairing.backward_pairs(rows, gpu)
    view = _view(options)
    arranged = arrange(pairs, view, pairing.order(pairing.has_gpu(pairs)))
    extra = [pairing.NO_PAIRS] if not pairs and form != "text" else []
    if pairs and not arranged and view.filter is not None:
        extra.append(f"--filter {view.filter!r} matches no paired module")
    return render("pairs", form, RowsDocument(arranged, [*notes, *extra]))


def memory_table(
    found: tuple[list[memory.MemoryRow], int], options: ViewOptions, form: str, notes: Sequence[str] = ()
) -> str:
    """`--memory`: the memory rows (and the count of marks not joined to a range) arranged and
    rendered in `form`; says so when there are none."""
    rows, unjoined = found
    view = _view(options)
    sort = sort_of(options, MEMORY_SORTS, "--memory", MEMORY_SORT)
    arranged = arrange(rows, view, memory.order(sort))
    extra = ([memory.NO_FIGURES] if not rows else []) + memory.unjoined_note(unjoined)
    if rows and not arranged and view.filter is not None:
        extra.append(f"--filter {view.filter!r} matches no range with memory figures")
    return render("memory", form, RowsDocument(arranged, [*notes, *extra]))


def recording_memory(
    recordings: Sequence[ProcessRecording], options: ViewOptions, form: str, notes: Sequence[str] = ()
) -> str:
    rows = memory.from_recordings(recordings, options.by, options.each)
    return memory_table(rows, options, form, notes)


def directory_memory(directory: str, options: ViewOptions, form: str, notes: Sequence[str] = ()) -> str:
    """`run --summary --memory`: the figures read back from the run's .anr files."""
    from autonvtx.recorder.recording import read_directory

    return recording_memory(read_directory(directory), options, form, notes)


def export_memory(
    path: str, options: ViewOptions, form: str, notes: Sequence[str] = (), *, strip_ids: bool = False
) -> str:
    """`report --memory` on an Nsight Systems export (`strip_ids`: --strip-ids)."""
    from autonvtx.report.views import range_naming

    rename = range_naming(strip_ids, options.each)
    return memory_table(memory.from_export(path, options.by, rename), options, form, notes)


def statistics_view(options: ViewOptions) -> ViewOptions:
    """The view `run --summary`'s statistics rows are made with: every row when a side table
    is asked for, else `options` as they are."""
    return unarranged(options) if asked(options) is not None else options


def write_side_table(stats: Sequence[Any], directory: str, outputs: Any, notes: Sequence[str]) -> bool:
    """`run --summary --pair/--memory`: the table to stderr ("-") or to the --summary file (its
    extension picks the form), from the run's statistics rows or its .anr files; False when no
    side table was asked for."""
    import os
    import sys

    from autonvtx.recorder.outputs import SUMMARY_TO_STDERR
    from autonvtx.report.render.render import FORMAT_OF_SUFFIX, write_text_file

    options = outputs.summary_options
    side = asked(options) if options is not None else None
    if side is None:
        return False
    target = os.fspath(outputs.summary)
    form = "text" if target == SUMMARY_TO_STDERR else FORMAT_OF_SUFFIX.get(os.path.splitext(target)[1].lower(), "text")
    shown_notes = notes if target == SUMMARY_TO_STDERR else ()
    if side == "pairs":
        table = pairs_table(stats, options, form, shown_notes)
    else:
        table = directory_memory(directory, options, form, shown_notes)
    if target == SUMMARY_TO_STDERR:
        sys.stderr.write(table)
        sys.stderr.flush()
    else:
        write_text_file(target, table)
    return True
