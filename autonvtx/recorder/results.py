"""A record directory's files turned into the trace and summary the user asked for.

Used at the end of `autonvtx run` and by `autonvtx recover` (the same directory, after the
process that would have written them died). Every file is read by the native exporter in one
pass that writes the trace and counts the statistics together.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autonvtx.errors import TraceFormatError
from autonvtx.recorder.model import ProcessRecording
from autonvtx.stats.model import (
    RangeStats,
    ViewOptions,
    count_text,
    dropped_note,
    filtered_out,
    from_exporter_rows,
    group_title,
    row_order,
    unshaped,
)
from autonvtx.stats.view import arrange

if TYPE_CHECKING:
    from autonvtx.recorder.writer import FileDamage


@dataclass
class Request:
    """What to write, and how to name the processes found."""

    trace: str | None = None
    summary: str | None = None  # "-" for stderr
    labels: Mapping[int, str] = field(default_factory=dict)  # pid -> label
    only_pid: int | None = None  # read only this process's file
    missing: Sequence[Mapping[str, Any]] = ()  # processes noted but without a file
    metadata: Mapping[str, object] = field(default_factory=dict)
    adjust: Callable[[list[ProcessRecording]], None] | None = None  # last touches before writing
    options: ViewOptions = ViewOptions()


@dataclass
class Results:
    recordings: list[ProcessRecording]
    stats: list[RangeStats]
    notes: list[str]
    empty: str | None = None  # why `stats` is empty, where --filter emptied it (also among the notes)


def recording_files(directory: str, only_pid: int | None = None) -> list[Path]:
    from autonvtx.recorder.recording import SUFFIX

    paths = sorted(Path(directory).glob("*" + SUFFIX), key=lambda p: (len(p.stem), p.stem))
    return [p for p in paths if p.is_file() and (only_pid is None or p.stem == str(only_pid))]


NOTE_SUFFIX = ".json"  # `<pid>.json` beside `<pid>.anr`: a child announced itself (session.note_process)


def read_process_notes(directory: str) -> dict[int, dict[str, Any]]:
    """pid -> note, for every readable note in `directory`."""
    notes: dict[int, dict[str, Any]] = {}
    for path in Path(directory).glob("*" + NOTE_SUFFIX):
        try:
            note = json.loads(path.read_text(encoding="utf-8"))
            notes[int(note["pid"])] = {
                "pid": int(note["pid"]),
                "ppid": int(note.get("ppid", 0)),
                "label": str(note.get("label", "")),
            }
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return notes


def write_results(directory: str, request: Request) -> Results:
    """Scan, name, stream; then the summary. The trace is written atomically."""
    from autonvtx.recorder.recording import scan_recording
    from autonvtx.recorder.writer import export, write_trace

    files: list[tuple[str, int, ProcessRecording]] = []
    notes: list[str] = []
    for path in recording_files(directory, request.only_pid):
        try:
            recording = scan_recording(path)
        except TraceFormatError as error:
            notes.append(f"{error}: the events of process {path.stem} are missing")
            continue
        recording.label = request.labels.get(recording.pid, "") or recording.label
        if not recording.ended_normally:
            recording.status = "ended abnormally"
        files.append((str(path), _group_key(request.options.by, recording), recording))
    files.sort(key=lambda f: f[2].pid)
    recordings = [f[2] for f in files]
    for process in request.missing:
        recordings.append(
            ProcessRecording(
                pid=process["pid"], ppid=process["ppid"], label=process["label"], status="recording missing"
            )
        )
    if request.adjust is not None:
        request.adjust(recordings)
    stats_mode = _stats_mode(request.options) if request.summary is not None else 0
    if request.trace is not None:
        exported = write_trace(
            recordings,
            files,
            request.trace,
            metadata=request.metadata,
            stats_mode=stats_mode,
            skip_first=request.options.skip_first,
        )
    else:
        exported = export(files, stats_mode=stats_mode, skip_first=request.options.skip_first)
    notes = (
        run_notes(recordings, exported.open_ranges)
        + notes
        + window_notes(exported.outside_windows)
        + damage_notes(exported.damage)
    )
    if exported.ranges == 0 and exported.marks == 0:
        notes.append("no NVTX ranges or marks were recorded")
    every = stats_from_rows(exported.rows, exported.spans, recordings, unshaped(request.options)) if stats_mode else []
    stats = arrange(every, request.options.view, row_order(request.options.sort))
    empty = filtered_out(every, stats, request.options)
    return Results(recordings, stats, notes + ([empty] if empty else []), empty)


def window_notes(outside: Mapping[int, int]) -> list[str]:
    """Events left out by capture windows (regions' `capture`): nothing is lost silently."""
    return [
        f"process {pid}: {count_text(count, 'event', 'events')} outside its capture windows (capture@autonvtx) left out"
        for pid, count in sorted(outside.items())
    ]


def damage_notes(damage: Mapping[int, FileDamage]) -> list[str]:
    """What a damaged recording lost: every event before the damage is in the outputs."""
    notes = []
    for pid, lost in sorted(damage.items()):
        if lost.cut_kept_events or lost.cut_lost_bytes:
            notes.append(
                f"process {pid}: its last write was cut short when it ended: the "
                f"{count_text(lost.cut_kept_events, 'event', 'events')} written before the cut are kept, "
                f"{count_text(lost.cut_lost_bytes, 'byte', 'bytes')} of events after it are lost"
            )
        parts = []
        records, skipped, entries, times = lost[:4]
        if records:
            parts.append(
                f"{count_text(records, 'corrupt record', 'corrupt records')} (the rest of "
                f"{'its section' if records == 1 else 'their sections'} skipped)"
            )
        if entries:
            parts.append(f"{count_text(entries, 'registry entry', 'registry entries')} with an impossible id")
        if times:
            parts.append(
                f"{count_text(times, 'record', 'records')} with an impossible time (before its thread's previous "
                "one, or after the file's last write) left out"
            )
        if skipped and not records:
            parts.append("a last section cut short")
        if parts:
            notes.append(
                f"process {pid}: its recording is damaged: {', '.join(parts)}; "
                f"{count_text(skipped, 'byte', 'bytes')} left out, every event readable around them kept"
            )
    return notes


def run_notes(recordings: Sequence[ProcessRecording], open_ranges: int) -> list[str]:
    """What the numbers may miss: lost events, processes that died, open ranges, stray pops."""
    notes: list[str] = []
    dropped = sum(r.dropped_events for r in recordings)
    if dropped:
        notes.append(dropped_note(dropped))
    discarded = sum(r.discarded_events for r in recordings)
    if discarded:
        notes.append(
            f"{count_text(discarded, 'older event was', 'older events were')} let go by "
            "--keep last: the trace holds the most recent ones"
        )
    for rec in recordings:
        if rec.status == "still running":
            notes.append(
                f"process {rec.pid} ({rec.display_name}) was still running when the recording was "
                "written: its events up to its last write are in"
            )
        elif rec.status == "ended abnormally":
            notes.append(
                f"process {rec.pid} ({rec.display_name}) ended abnormally (a crash, os._exit or a "
                "kill): its events up to its last write (at most ~100 ms before) are kept, and the "
                "ranges it left open end there"
            )
    if open_ranges:
        notes.append(
            f"{count_text(open_ranges, 'range was', 'ranges were')} still open at exit "
            "(timed up to the moment the recording was written)"
        )
    unmatched = sum(r.unmatched_pops for r in recordings)
    if unmatched:
        notes.append(
            f"{count_text(unmatched, 'pop or range end', 'pops or range ends')} had no open range to close (ignored)"
        )
    return notes


def _stats_mode(options: ViewOptions) -> int:
    from autonvtx.recorder.native import STATS_BY_THREAD, STATS_CLASS, STATS_FLAT, STATS_NUMBERS, STATS_TREE

    mode = STATS_TREE if options.tree else STATS_FLAT
    mode |= STATS_BY_THREAD if options.by == "thread" else 0
    mode |= 0 if options.each else STATS_NUMBERS
    return mode | (STATS_CLASS if options.group == "class" else 0)


def _group_key(by: str | None, recording: ProcessRecording) -> int:
    """The statistics group of a process's rows: its pid, or its rank (by --by)."""
    if by == "process":
        return recording.pid
    if by == "rank":
        title = group_title("rank", recording)
        return int(title.split()[1]) if title.startswith("rank ") else (1 << 40) + recording.pid
    return 0


def _titles(by: str | None, recordings: Sequence[ProcessRecording]) -> dict[int, str]:
    titles: dict[int, str] = {}
    for rec in recordings:
        if by == "thread":
            for tid in set(rec.thread_names) | {rec.pid}:
                titles[(rec.pid << 32) | tid] = group_title("thread", rec, tid)
        else:
            titles.setdefault(_group_key(by, rec), group_title(by, rec))
    return titles


def stats_from_rows(
    rows: Sequence[Any],
    spans: Mapping[int, tuple[int, int]],
    recordings: Sequence[ProcessRecording] = (),
    options: ViewOptions = ViewOptions(),
) -> list[RangeStats]:
    """The statistics model from the exporter's rows, arranged as `options` say."""
    return from_exporter_rows(rows, spans, _titles(options.by, recordings), options)


def print_notes(notes: Sequence[str]) -> None:
    for note in notes:
        print(f"autonvtx: {note}", file=sys.stderr)


def recover(directory: str, trace: str) -> None:
    """`autonvtx recover`: every recording in `directory` into `trace`; notes on stderr."""
    from autonvtx.errors import UsageError

    if not Path(directory).is_dir():
        raise UsageError(f"recover: no such directory '{directory}'")
    if not recording_files(directory):
        raise UsageError(
            f"recover: '{directory}' holds no recordings (*.anr); expected the directory autonvtx run named"
        )
    notes = read_process_notes(directory)
    labels = {pid: str(note.get("label") or "") for pid, note in notes.items()}
    print_notes(write_results(directory, Request(trace=trace, labels=labels)).notes)
