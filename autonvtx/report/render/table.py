"""The one text-table builder: right-aligned figures, then the range's name, fitted to a terminal.

Every text table (`summary`, `report`, `diff`, `--across ranks`) is built here, so a name is
treated alike everywhere: on a terminal it is cut to the terminal's width keeping its start and
its distinguishing end (`torch:bert.encoder.layer.{n}...attention.self.query`: the end is what
tells sibling modules apart); written to a file or a pipe it is never cut, since nothing there
wraps it and a script reading it needs the whole name.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from typing import IO, NamedTuple

ELLIPSIS = "..."  # ASCII: no terminal or log encoding mangles it
GAP = "  "  # between columns
MIN_NAME = 24  # a name keeps this much room however many figure columns there are
RULE_MAX = 40  # the rule under the names is no longer than this
# Where a name must be cut, this share of the room shows its start, the rest its end.
_HEAD_SHARE = 1 / 3


def terminal_width(stream: IO[str] | None) -> int | None:
    """The width a table written to `stream` fits: the terminal's (``COLUMNS`` wins, as
    `shutil.get_terminal_size` reads it); None where `stream` is no terminal: names are not cut."""
    try:
        is_terminal = stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # a closed or detached stream
        return None
    return shutil.get_terminal_size().columns if is_terminal else None


def middle_cut(text: str, room: int) -> str:
    """`text` in at most `room` characters: its start, ``...``, and its end (the longer part)."""
    if len(text) <= room:
        return text
    if room <= len(ELLIPSIS) + 1:
        return text[-room:] if room > 0 else ""
    keep = room - len(ELLIPSIS)
    head = int(keep * _HEAD_SHARE)
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head) :]


def end_cut(text: str, room: int) -> str:
    """`text` in at most `room` characters, cut at its end (for prose lines such as top kernels)."""
    return text if len(text) <= room else text[: max(room - len(ELLIPSIS), 1)] + ELLIPSIS


class Line(NamedTuple):
    """One row of a table: its figure cells, its name, and lines printed under it (indented).
    A named tuple: a per-name report makes tens of thousands, and a tuple is made fastest."""

    cells: Sequence[str]
    name: str
    under: Sequence[str] = ()


Painter = Callable[[int, str, str], str]  # (column, cell as given, cell aligned) -> what is printed


def build_table(
    headers: Sequence[str],
    lines: Sequence[Line],
    *,
    width: int | None,
    name_header: str = "Range",
    left_first: bool = False,
    paint: Painter | None = None,
    header_paint: Callable[[str], str] | None = None,
    under_indent: str = "      ",
) -> list[str]:
    """The header, a rule and a line per row: figure columns aligned right (the first left with
    `left_first`), then the name, cut in its middle to what `width` leaves (None: never cut).
    `paint` may color a figure cell; `header_paint` the header line."""
    columns = list(zip(*(line.cells for line in lines))) or [()] * len(headers)
    widths = [max(len(h), max(map(len, column), default=0)) for h, column in zip(headers, columns)]
    used = sum(widths) + len(GAP) * len(widths)
    room = None if width is None else max(width - used, MIN_NAME)

    # Written for speed too: a per-name report prints tens of thousands of rows, each aligned by
    # one printf-style format (about twice as fast as str.format) where nothing paints its cells.
    template = GAP.join([("%%-%ds" if left_first and i == 0 else "%%%ds") % w for i, w in enumerate(widths)] + ["%s"])

    def aligned(*cells: str) -> str:
        return template % cells

    def row(cells: Sequence[str], name: str, painted: bool) -> str:
        if room is not None and len(name) > room:
            name = middle_cut(name, room)
        if len(cells) == len(widths) and not (painted and paint is not None):
            return aligned(*cells, name).rstrip()
        out = [cell.rjust(w) for cell, w in zip(cells, widths)]
        if left_first and cells:
            out[0] = cells[0].ljust(widths[0])
        if painted and paint is not None:
            out = [paint(i, cell, padded) for i, (cell, padded) in enumerate(zip(cells, out))]
        out.append(name)
        return GAP.join(out).rstrip()

    longest = max([len(name_header)] + [len(line.name) for line in lines])
    rule_name = "-" * min(longest, room or longest, RULE_MAX)
    head = row(headers, name_header, False)
    out = [header_paint(head) if header_paint else head, row(["-" * w for w in widths], rule_name, False)]
    if room is None and paint is None:  # a file or a pipe: each line one format call, no cut
        append = out.append
        count = len(widths)
        for cells, name, under in lines:
            append((template % (*cells, name)).rstrip() if len(cells) == count else row(cells, name, True))
            for text in under:
                append(under_indent + text)
        return out
    for line in lines:
        out.append(row(line.cells, line.name, True))
        for text in line.under:
            out.append(under_indent + (text if width is None else end_cut(text, width - len(under_indent))))
    return out
