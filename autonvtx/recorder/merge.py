"""`autonvtx merge`: traces of several ranks (or runs) combined into one timeline on one clock.

Timestamps in autonvtx traces are CLOCK_MONOTONIC, which every process of one host shares
from boot to shutdown: traces whose `otherData.boot_id` is the same line up as they are. A
trace from another host (or boot) is moved onto the first trace's clock through CLOCK_REALTIME:
each process wrote `realtime_offset_ns` (REALTIME - MONOTONIC) when it flushed, so a time `t`
of clock B is `t + offset_B - offset_A` on clock A. That is as exact as the hosts' clocks are
synchronised (NTP: around a millisecond; PTP: microseconds).

Processes stay separate tracks. A pid already taken by a process of an earlier trace (another
host, or an earlier run) is given a new number; its label keeps the real one.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autonvtx.errors import TraceFormatError
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.perfetto import is_perfetto_trace, read_trace
from autonvtx.recorder.trace import write_chrome_trace

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class TraceSource:
    """One input trace: its processes and its `otherData`."""

    path: str
    recordings: list[ProcessRecording]
    metadata: Mapping[str, Any]

    @property
    def clock(self) -> str | None:
        """Which CLOCK_MONOTONIC its timestamps are on; None when the trace does not say."""
        boot = self.metadata.get("boot_id")
        if isinstance(boot, str) and boot:
            return f"boot {boot}"
        host = self.metadata.get("host")
        return f"host {host}" if isinstance(host, str) and host else None


def merge_traces(paths: Sequence[str], output: str) -> list[str]:
    """Read `paths`, write their merged trace to `output`; return notes for the user."""
    sources = [TraceSource(path, read_trace(path), read_trace_metadata(path)) for path in paths]
    recordings, metadata, notes = merge_sources(sources)
    write_merged(recordings, output, metadata)
    return notes


def write_merged(recordings: list[ProcessRecording], output: str, metadata: Mapping[str, Any]) -> None:
    """The merged trace, by the one trace writer (the native exporter, fed `.anr` files written
    from the merged recordings): .json, .json.gz or .pftrace. Without the native library, the
    Python twin writes JSON."""
    import tempfile

    from autonvtx.recorder import native
    from autonvtx.recorder.recording_writer import write_recordings
    from autonvtx.recorder.writer import PERFETTO_SUFFIXES, write_trace

    if native.library_path() is None:
        if output.endswith(PERFETTO_SUFFIXES):
            raise TraceFormatError(
                f"merge: -o {output}: writing Perfetto needs the native recorder library, "
                "which this installation lacks; expected a .json or .json.gz output"
            )
        write_chrome_trace(recordings, output, metadata=metadata)
        return
    with tempfile.TemporaryDirectory(prefix="autonvtx-merge-") as directory:
        files = [(path, 0, recording) for path, recording in zip(write_recordings(recordings, directory), recordings)]
        write_trace(recordings, files, output, metadata=metadata)


def read_trace_metadata(path: str) -> dict[str, Any]:
    """A trace's `otherData` ({} when it has none).

    autonvtx writes `otherData` on the last line (earlier versions: the first), so it is read
    without parsing the events again; any other trace is parsed whole. A Perfetto trace has none.
    """
    try:
        if is_perfetto_trace(path):
            return {}
        with open(path, "rb") as raw:
            compressed = raw.read(2) == _GZIP_MAGIC
        stream = gzip.open(path, "rt", encoding="utf-8") if compressed else open(path, encoding="utf-8")
        with stream:
            first = stream.readline()
            head = first.rstrip()
            if head.endswith('"traceEvents":['):
                other = json.loads(head + "]}").get("otherData")
                if not isinstance(other, dict):
                    last = ""
                    for line in stream:
                        last = line
                    other = json.loads("{" + last).get("otherData") if last.startswith('"otherData":') else {}
                return dict(other) if isinstance(other, dict) else {}
            document = json.loads(first + stream.read())
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as error:
        raise TraceFormatError(f"{path}: cannot read the trace's metadata ({error})") from None
    other = document.get("otherData") if isinstance(document, dict) else None
    return dict(other) if isinstance(other, dict) else {}


def merge_sources(sources: Sequence[TraceSource]) -> tuple[list[ProcessRecording], dict[str, Any], list[str]]:
    """The merged processes (in input order), the merged trace's `otherData`, and notes."""
    notes: list[str] = []
    reference = next((s for s in sources if s.clock is not None), None)
    offsets = _clock_offsets(sources)
    used: set[int] = set()
    next_pid = max((r.pid for s in sources for r in s.recordings), default=0) + 1
    merged: list[ProcessRecording] = []
    merged_from: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    for source in sources:
        shift = 0
        if reference is not None and source.clock not in (None, reference.clock):
            offset, reference_offset = offsets.get(source.clock), offsets.get(reference.clock)
            if offset is None or reference_offset is None:
                notes.append(
                    f"{source.path}: recorded on another clock ({source.clock}) without "
                    "realtime offsets: left unaligned"
                )
            else:
                shift = offset - reference_offset
                notes.append(
                    f"{source.path}: recorded on another clock ({source.clock}): aligned "
                    f"through CLOCK_REALTIME (as exact as the hosts' clock synchronisation)"
                )
        renamed: dict[int, int] = {}
        for recording in source.recordings:
            pid = recording.pid
            if pid in used:
                pid = next_pid
                next_pid += 1
                renamed[recording.pid] = pid
                notes.append(f"{source.path}: pid {recording.pid} is taken by an earlier trace: shown as pid {pid}")
            used.add(pid)
            merged.append(_moved(recording, pid, shift))
        for recording in merged[len(merged) - len(source.recordings) :]:
            recording.ppid = renamed.get(recording.ppid, recording.ppid)
        merged_from.append(
            {
                "path": source.path,
                **{
                    key: source.metadata[key]
                    for key in ("host", "boot_id", "rank", "world_size")
                    if key in source.metadata
                },
                "shift_ns": shift,
                "pids": {str(r.pid): renamed.get(r.pid, r.pid) for r in source.recordings},
            }
        )
        for process in source.metadata.get("missing_processes") or []:
            if isinstance(process, dict):
                missing.append({**process, "pid": renamed.get(process.get("pid", 0), process.get("pid", 0))})
    metadata: dict[str, Any] = {}
    if reference is not None:
        metadata.update({key: reference.metadata[key] for key in ("host", "boot_id") if key in reference.metadata})
    metadata["merged_from"] = merged_from
    if missing:
        metadata["missing_processes"] = missing
    return merged, metadata, notes


def _clock_offsets(sources: Sequence[TraceSource]) -> dict[str | None, int]:
    """One REALTIME - MONOTONIC offset per clock: the (low) median over its processes (each
    measured its own when it flushed; they differ by the clock's slew meanwhile). An integer:
    a float would lose nanoseconds of a 2**60-sized offset."""
    by_clock: dict[str | None, list[int]] = {}
    for source in sources:
        for recording in source.recordings:
            if recording.realtime_offset_ns:
                by_clock.setdefault(source.clock, []).append(recording.realtime_offset_ns)
    return {clock: statistics.median_low(values) for clock, values in by_clock.items()}


def _moved(recording: ProcessRecording, pid: int, shift: int) -> ProcessRecording:
    """`recording` as process `pid`, its times moved by `shift` nanoseconds."""
    if pid == recording.pid and shift == 0:
        return recording
    thread_names = dict(recording.thread_names)
    label = recording.label
    if pid != recording.pid:
        # The main thread's tid is the real pid: name it, as the writer would have.
        thread_names.setdefault(recording.pid, "MainThread")
        label = f"{recording.display_name} [pid {recording.pid}]"
    replace = dataclasses.replace
    return ProcessRecording(
        pid=pid,
        ppid=recording.ppid,
        cmdline=list(recording.cmdline),
        thread_names=thread_names,
        ranges=[replace(r, pid=pid, start_ns=r.start_ns + shift, end_ns=r.end_ns + shift) for r in recording.ranges],
        marks=[replace(m, pid=pid, ts_ns=m.ts_ns + shift) for m in recording.marks],
        dropped_events=recording.dropped_events,
        unmatched_pops=recording.unmatched_pops,
        flush_ns=recording.flush_ns + shift if recording.flush_ns else 0,
        realtime_offset_ns=recording.realtime_offset_ns - shift if recording.realtime_offset_ns else 0,
        label=label,
        ended_normally=recording.ended_normally,
        status=recording.status,
        discarded_events=recording.discarded_events,
    )


def check_inputs(paths: Sequence[str], output: str | None = None) -> None:
    """Refuse before reading anything when an input is missing, or the output is not JSON."""
    from autonvtx.errors import UsageError

    for path in paths:
        if not os.path.isfile(path):
            raise UsageError(f"merge: no such file '{path}'")
    if output is not None and not output.endswith((".json", ".json.gz", ".pftrace", ".perfetto-trace")):
        raise UsageError(f"merge: -o: {output!r} must end in .json, .json.gz, .pftrace or .perfetto-trace")
