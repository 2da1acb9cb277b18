"""The marks `--flight` leaves under Nsight Systems (`_native/flightwatch.c`): each capture window
opens with one saying which slow instance fired it, read back from an export for the report's notes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autonvtx.report.nsys.schema import quote

if TYPE_CHECKING:
    from autonvtx.report.nsys.export import NsysExport

# nsys's event type of an NVTX mark (ENUM_NSYS_EVENT_TYPE: 34 NvtxMark, 65 NvtxtMark).
MARK_TYPES = (34, 65)
# flightwatch.c's mark: "autonvtx --flight: window N: 'NAME' (instance I of 'RANGE') took ..."
PREFIX = "autonvtx --flight: window "


def flight_triggers(export: NsysExport) -> list[tuple[int, int, str]]:
    """(process id, start ns, text after "window ") of each --flight mark, in time order."""
    table = export.nvtx
    if table is None:
        return []
    text, text_id = table.column("text"), table.column("textId")
    name = export.lazy_text_sql(f"n.{quote(text)}" if text else None, f"n.{quote(text_id)}" if text_id else None)
    types = ", ".join(str(t) for t in MARK_TYPES)
    rows = export.connection.execute(
        f"SELECT n.globalTid, n.start, {name} FROM {quote(table.name)} n"
        f" WHERE n.eventType IN ({types}) ORDER BY n.start"
    ).fetchall()
    found = []
    for global_tid, start, message in rows:
        if isinstance(message, str) and message.startswith(PREFIX):
            # nsys's globalTid holds the process id in bits 24-47.
            found.append(((int(global_tid or 0) >> 24) & 0xFFFFFF, int(start), message[len(PREFIX) :]))
    return found


def flight_notes(export: NsysExport) -> list[str]:
    """A note per --flight window in this capture: which trigger it followed."""
    return [
        f"--flight window {text.partition(':')[0]} of process {pid}: opened after {text.partition(': ')[2]}"
        for pid, _, text in flight_triggers(export)
    ]
