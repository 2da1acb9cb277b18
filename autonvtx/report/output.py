"""`autonvtx report`: build the report as asked, shape it, and write it where asked."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import IO

from autonvtx.errors import UsageError
from autonvtx.recorder.trace import write_atomically
from autonvtx.report.formats import FORMATTERS
from autonvtx.report.profile import ReportOptions, read_profile
from autonvtx.report.views import Shaping, shape_rows, shape_tree

_EXTENSION_FORMATS = {".csv": "csv", ".json": "json", ".txt": "text"}


@dataclass(frozen=True)
class ReportRequest:
    """Everything `autonvtx report` was asked, as the command line gave it."""

    profile: str
    tree: bool = False
    by: str | None = None
    sort: str | None = None
    top: int | None = None
    pattern: str | None = None
    strip_ids: bool = False
    fmt: str | None = None
    output: str | None = None
    html: str | None = None
    html_by: str = "gpu"


def produce(request: ReportRequest) -> str | None:
    """Write the outputs asked for; return the text for standard output (None when -o took it)."""
    _check_output_paths(request)
    report = read_profile(request.profile, ReportOptions(by=request.by, strip_ids=request.strip_ids))
    sort = request.sort or ("gpu" if report.has_gpu else "cpu")
    shaping = Shaping(sort=sort, top=request.top, pattern=request.pattern)
    rows = shape_rows(report.rows, shaping)
    tree = shape_tree(report.tree, shaping) if request.tree else None
    fmt = request.fmt or _EXTENSION_FORMATS.get(os.path.splitext(request.output or "")[1].lower(), "text")
    text = FORMATTERS[fmt](report, rows, tree)
    if request.html is not None:
        from autonvtx.report.page import render_page

        size_by = request.html_by if report.has_gpu else "cpu"
        page = render_page(report, rows, shape_tree(report.tree, Shaping(sort=size_by, pattern=request.pattern)), size_by)
        _write(request.html, page)
    if request.output is None:
        return text
    _write(request.output, text)
    return None


def _check_output_paths(request: ReportRequest) -> None:
    """Fail before the (possibly long) read when an output cannot be written."""
    for option, path in (("-o", request.output), ("--html", request.html)):
        if path is None:
            continue
        directory = os.path.dirname(os.path.abspath(path)) or "."
        if os.path.isdir(path):
            raise UsageError(f"report: {option} '{path}': is a directory; expected a file path")
        if not os.path.isdir(directory):
            raise UsageError(f"report: {option} '{path}': no such directory '{directory}'")
    if request.html is not None and request.output is not None and os.path.abspath(request.html) == os.path.abspath(request.output):
        raise UsageError(f"report: -o and --html name the same file '{request.output}'; expected two paths")


def _write(path: str, text: str) -> None:
    def write(stream: IO[str]) -> None:
        stream.write(text)

    write_atomically(path, write)
