"""Traces (.json, .json.gz, .pftrace) and statistics written straight from `.anr` files by the native exporter.

Python writes the small parts (the JSON head and tail, Perfetto's descriptors) and the native
exporter (`_native/export.c`, in the recorder library) streams every event between them, in
memory that does not grow with the trace. A `.json.gz` is compressed from the plain file in
blocks.
"""

from __future__ import annotations

import ctypes
import errno
import gzip
import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from autonvtx.recorder import native, perfetto
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.trace import metadata_events, other_data

PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")


@dataclass
class RawRow:
    """One statistics row as the exporter counted it (times in ns)."""

    group: int
    parent: int  # index of the enclosing row (tree mode), -1 for none
    depth: int
    domain: str
    name: str
    count: int
    total_ns: int
    self_ns: int
    min_ns: int
    max_ns: int
    open_count: int
    mean_ns: float
    median_ns: float
    variance: float


class FileDamage(NamedTuple):
    """What one recording lost: to damage (records where a section stopped being readable,
    bytes skipped, registry entries with an impossible id, records with an impossible time),
    and to a last write cut short by the process's end (its whole events kept, the bytes of it
    the write did not reach lost)."""

    corrupt_records: int
    skipped_bytes: int
    bad_entries: int
    impossible_times: int
    cut_kept_events: int = 0
    cut_lost_bytes: int = 0


@dataclass
class Exported:
    """What streaming the files found."""

    rows: list[RawRow] = field(default_factory=list)
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)  # group -> (first, last ns)
    ranges: int = 0
    marks: int = 0
    open_ranges: int = 0
    # pid -> events left out because they began outside the process's capture windows
    outside_windows: dict[int, int] = field(default_factory=dict)
    # pid -> what its recording lost to damage, or to a last write its end cut short
    damage: dict[int, FileDamage] = field(default_factory=dict)


_OUTPUT_ERRORS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}  # a full disk, a file size limit, a quota

ExportFile = tuple[str, int, ProcessRecording]  # recording file, statistics group, its process


def export(
    files: Sequence[ExportFile],
    *,
    json_path: str | None = None,
    pftrace_path: str | None = None,
    stats_mode: int = 0,
    skip_first: int = 0,
    progress: Progress | None = None,
) -> Exported:
    """Stream each recording file into the outputs; OSError on failure. Each file's process
    gets its unmatched pops, last write time and whether it ended normally."""
    lib = native.exporter()
    handle = lib.autonvtx_export_new(
        os.fsencode(json_path) if json_path else None,
        os.fsencode(pftrace_path) if pftrace_path else None,
        stats_mode,
        skip_first,
    )
    if not handle:
        raise OSError(f"cannot open {json_path or pftrace_path} to write the trace")
    result = Exported()
    try:
        info, damage = native.FileInfo(), native.Damage()
        for done, (path, group, recording) in enumerate(files):
            rc = lib.autonvtx_export_file(handle, os.fsencode(path), group, ctypes.byref(info))
            if rc != 0:
                if -rc in _OUTPUT_ERRORS:  # the trace being written, not the recording read
                    raise OSError(-rc, f"cannot write the trace: {os.strerror(-rc)}")
                raise OSError(-rc, f"{path}: {os.strerror(-rc)}")
            recording.unmatched_pops = info.unmatched_pops
            recording.flush_ns = info.flush_ns
            recording.ended_normally = bool(info.ended_normally)
            result.ranges += info.ranges
            result.marks += info.marks
            result.open_ranges += info.open_ranges
            outside = lib.autonvtx_export_outside(handle)
            if outside:
                result.outside_windows[recording.pid] = outside
            if lib.autonvtx_export_damage(handle, ctypes.byref(damage)):
                result.damage[recording.pid] = FileDamage(
                    damage.corrupt_records,
                    damage.skipped_bytes,
                    damage.bad_entries,
                    damage.impossible_times,
                    damage.cut_kept_events,
                    damage.cut_lost_bytes,
                )
            if progress is not None:
                progress.update(done + 1, len(files))
        rc = lib.autonvtx_export_close(handle)
        if rc != 0:
            raise OSError(-rc, f"cannot write the trace: {os.strerror(-rc)}")
        if stats_mode:
            result.rows = _rows(lib, handle)
            result.spans = _spans(lib, handle)
    finally:
        lib.autonvtx_export_free(handle)
    return result


def _rows(lib: ctypes.CDLL, handle: int) -> list[RawRow]:
    counts, figures = native.RowCounts(), native.RowFigures()
    rows = []
    texts: dict[tuple[int, int], str] = {}

    def text(ident: int, which: int) -> str:
        key = (ident, which)
        if key not in texts:
            texts[key] = lib.autonvtx_export_text(handle, ident, which).decode("utf-8", "replace")
        return texts[key]

    for i in range(lib.autonvtx_export_rows(handle)):
        lib.autonvtx_export_row(handle, i, ctypes.byref(counts), ctypes.byref(figures))
        rows.append(
            RawRow(
                group=counts.group,
                parent=int(counts.parent_plus_one) - 1,
                depth=counts.depth,
                domain=text(counts.domain_id, native.TEXT_DOMAIN),
                name=text(counts.name_id, native.TEXT_NAME),
                count=counts.count,
                total_ns=counts.total_ns,
                self_ns=counts.self_ns,
                min_ns=counts.min_ns,
                max_ns=counts.max_ns,
                open_count=counts.open_count,
                mean_ns=figures.mean_ns,
                median_ns=figures.median_ns,
                variance=figures.variance,
            )
        )
    return rows


def _spans(lib: ctypes.CDLL, handle: int) -> dict[int, tuple[int, int]]:
    span = native.GroupSpan()
    spans = {}
    count = lib.autonvtx_export_group_spans(handle, 0, ctypes.byref(span))
    for i in range(count):
        lib.autonvtx_export_group_spans(handle, i, ctypes.byref(span))
        spans[span.group] = (span.first_ns, span.last_ns)
    return spans


class Progress:
    """One line on stderr when writing has taken more than a second (on a terminal only: a log
    file would gain a line per run): what is being written, and then how long it took."""

    DELAY_S = 1.0

    def __init__(self, what: str) -> None:
        self.what = what
        self.started = time.monotonic()
        self.shown = False
        self.timer: threading.Timer | None = None
        if sys.stderr.isatty():
            # The native exporter releases the GIL (ctypes does), so the timer thread runs.
            self.timer = threading.Timer(self.DELAY_S, self.show)
            self.timer.daemon = True
            self.timer.start()

    def show(self) -> None:
        self.shown = True
        sys.stderr.write(f"autonvtx: writing {self.what} ...")
        sys.stderr.flush()

    def update(self, done: int, total: int) -> None:
        if self.shown and total > 1:
            sys.stderr.write(f"\rautonvtx: writing {self.what} ... {done}/{total} processes")
            sys.stderr.flush()

    def end(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()
        if self.shown:
            sys.stderr.write(f" done in {time.monotonic() - self.started:.1f} s\n")
            sys.stderr.flush()


def _temp_beside(path: str) -> str:
    directory, base = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def write_trace(
    recordings: Sequence[ProcessRecording],
    files: Sequence[ExportFile],
    path: str,
    *,
    metadata: Mapping[str, object],
    stats_mode: int = 0,
    skip_first: int = 0,
) -> Exported:
    """The trace at `path` (.json, .json.gz, .pftrace), statistics on the way; atomically."""
    temp = _temp_beside(path)
    progress = Progress(path)
    try:
        if path.endswith(PERFETTO_SUFFIXES):
            with open(temp, "wb") as stream:
                stream.write(perfetto.head_packets(recordings))
            result = export(files, pftrace_path=temp, stats_mode=stats_mode, skip_first=skip_first, progress=progress)
        else:
            with open(temp, "w", encoding="utf-8", newline="\n") as stream:
                stream.write('{"displayTimeUnit":"ns","traceEvents":[\n')
                stream.write(",\n".join(metadata_events(recordings)))
            result = export(files, json_path=temp, stats_mode=stats_mode, skip_first=skip_first, progress=progress)
            with open(temp, "a", encoding="utf-8", newline="\n") as stream:
                stream.write('\n],\n"otherData":' + json.dumps(other_data(recordings, metadata), default=str) + "}\n")
            if path.endswith(".gz"):
                temp = _compressed(temp, path)
        # open() made the file with the mode the umask leaves, as for any file the user writes;
        # reading the umask would flip it for every thread of the program (os.umask is the
        # only way to read it before Python 3.15's os.getumask()).
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    finally:
        progress.end()
    return result


def _compressed(plain: str, path: str) -> str:
    target = _temp_beside(path)
    try:
        with open(plain, "rb") as source, open(target, "wb") as raw:
            # mtime=0 keeps the bytes reproducible; level 6 as before, in 1 MiB blocks.
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                while block := source.read(1 << 20):
                    gz.write(block)
    finally:
        os.unlink(plain)
    return target
