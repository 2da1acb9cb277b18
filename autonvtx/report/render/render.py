"""One renderer family, one dispatch: the statistics model and the report as text, CSV, JSON or HTML.

Every command that writes a table (`run --summary`, `summary`, `report`) picks its form here, from
`--format` or from the output file's extension, and refuses an extension it does not write.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO, Union

from autonvtx.errors import UsageError
from autonvtx.probe import cannot_create_in
from autonvtx.recorder.outputs import SUMMARY_SUFFIXES
from autonvtx.recorder.trace import write_atomically
from autonvtx.report.render import text
from autonvtx.report.render.renderers import Rendering, SummaryDocument, render
from autonvtx.report.render.table import terminal_width
from autonvtx.stats.model import RangeStats

StrPath = Union[str, "os.PathLike[str]"]
FORMATS = ("text", "csv", "json")
FORMAT_OF_SUFFIX = {".txt": "text", ".csv": "csv", ".json": "json"}
assert tuple(FORMAT_OF_SUFFIX) == SUMMARY_SUFFIXES


def format_of(option: str, path: str) -> str:
    """The form a table file is written in, from its extension; UsageError for any other."""
    extension = os.path.splitext(path)[1].lower()
    form = FORMAT_OF_SUFFIX.get(extension)
    if form is None:
        raise UsageError(f"{option}: {path!r} must end in .txt, .csv or .json (the forms a table is written in)")
    return form


def render_stats(
    stats: Sequence[RangeStats], form: str, *, notes: Sequence[str] = (), color: bool = False, empty: str | None = None
) -> str:
    """The statistics table in `form` ("text", "csv" or "json"); `empty`: why it has no rows
    (in the JSON form, among the notes)."""
    return render("summary", form, SummaryDocument(stats, notes, empty), Rendering(color=color))


def write_summary(
    stats: Sequence[RangeStats], destination: StrPath, *, notes: Sequence[str] = (), empty: str | None = None
) -> None:
    """Write the table to stderr (``"-"``) or to a file whose extension picks the form (`empty`:
    why it may have no rows, as `render_stats` takes it).

    Files are written atomically. Stderr, because stdout belongs to the program that was run.
    An extension that names no form writes the text table (`check_summary_path` refused it
    before the run, where a user named it).
    """
    target = os.fspath(destination)
    if target == "-":
        shown = Rendering(width=terminal_width(sys.stderr), color=text.use_color(sys.stderr))
        sys.stderr.write(render("summary", "text", SummaryDocument(stats, notes, empty), shown))
        sys.stderr.flush()
        return
    form = FORMAT_OF_SUFFIX.get(os.path.splitext(target)[1].lower(), "text")
    write_text_file(target, render_stats(stats, form, notes=notes, empty=empty))


def check_output_paths(command: str, outputs: Sequence[tuple[str, str | None]], *, fmt: str | None = None) -> None:
    """Every output a command was given, checked before any input is read (reading can take
    minutes): each writable, no two the same file, and a table file's extension a form it is
    written in unless --format says which. `outputs`: (option, path or None) pairs, the table's
    option (-o) first."""
    named = [(option, path) for option, path in outputs if path is not None]
    for option, path in named:
        check_writable(command, option, path)
    seen: dict[str, str] = {}
    for option, path in named:
        other = seen.setdefault(os.path.abspath(path), option)
        if other != option:
            raise UsageError(f"{command}: {other} and {option} name the same file '{path}'; expected two paths")
    if outputs and outputs[0][1] is not None and fmt is None:
        format_of(f"{command}: {outputs[0][0]}", outputs[0][1])


def check_writable(command: str, option: str, path: str | None) -> None:
    """Fail before a (possibly long) read when `path`, given to `option`, cannot be written:
    a directory, or a file in a directory that does not exist or takes no new file."""
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise UsageError(f"{command}: {option} '{path}': is a directory; expected a file path")
    if not os.path.isdir(directory):
        raise UsageError(f"{command}: {option} '{path}': no such directory '{directory}'")
    why = cannot_create_in(directory, os.path.basename(path))
    if why is not None:
        raise UsageError(
            f"{command}: {option} '{path}': cannot write in '{directory}' ({why}); expected a writable directory"
        )


def write_text_file(path: StrPath, content: str) -> None:
    """`content` into `path`, atomically."""

    def write(stream: IO[str]) -> None:
        stream.write(content)

    write_atomically(path, write)
