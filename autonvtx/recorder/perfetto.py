"""Perfetto's protobuf trace format (TracePackets of TrackEvents), hand-encoded and read back.

The native exporter writes the event packets; this module writes the packets that name things
(a clock snapshot, one track per process and per thread) and reads whole traces back into
recordings for `autonvtx summary` and `merge`. Field numbers are those of Perfetto's
`protos/perfetto/trace` (TracePacket, TrackEvent, TrackDescriptor, InternedData); tests check
the output against the `perfetto` package's compiled protos.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence

from autonvtx.errors import TraceFormatError
from autonvtx.recorder.model import Mark, Payload, ProcessRecording, Range

_CLOCK_MONOTONIC, _CLOCK_BOOTTIME = 3, 6
_SLICE_BEGIN, _SLICE_END, _INSTANT = 1, 2, 3


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def thread_uuid(pid: int, tid: int) -> int:
    """The track of thread `tid` of process `pid` (the exporter computes the same)."""
    return (pid << 32) | (tid & 0xFFFFFFFF)


def head_packets(recordings: Sequence[ProcessRecording]) -> bytes:
    """A clock snapshot (CLOCK_MONOTONIC as the trace's clock) and every process and thread track."""
    clocks = (_field(1, _field(1, _CLOCK_MONOTONIC) + _field(2, time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
              + _field(1, _field(1, _CLOCK_BOOTTIME) + _field(2, time.clock_gettime_ns(time.CLOCK_BOOTTIME)))
              + _field(2, _CLOCK_MONOTONIC))
    packets = [_field(6, clocks)]
    for rec in recordings:
        process = _field(1, rec.pid) + _field(6, rec.display_name)
        packets.append(_field(60, _field(1, thread_uuid(rec.pid, 0)) + _field(3, process)))
        names = dict(rec.thread_names)
        names.setdefault(rec.pid, "MainThread")
        for tid, name in sorted(names.items()):
            thread = _field(1, rec.pid) + _field(2, tid) + _field(5, name)
            packets.append(_field(60, _field(1, thread_uuid(rec.pid, tid)) + _field(5, thread_uuid(rec.pid, 0))
                                  + _field(4, thread)))
    return b"".join(_field(1, packet) for packet in packets)


# Reading

def _fields(data: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message; bytes for length-delimited fields."""
    pos, end = start, len(data) if end is None else end
    while pos < end:
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            yield number, wire, data[pos:pos + length]
            pos += length
        elif wire == 1:
            yield number, wire, data[pos:pos + 8]
            pos += 8
        elif wire == 5:
            yield number, wire, data[pos:pos + 4]
            pos += 4
        else:
            raise ValueError(f"wire type {wire}")


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


class _Sequence:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.categories: dict[int, str] = {}
        self.track = 0


class _PerfettoReader:
    """TracePackets into recordings: descriptors name processes and threads, slices become ranges."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.processes: dict[int, ProcessRecording] = {}
        self.tracks: dict[int, tuple[int, int]] = {}  # uuid -> (pid, tid); async tracks: tid -1
        self.parents: dict[int, int] = {}
        self.sequences: dict[int, _Sequence] = {}
        self.open: dict[int, list[tuple[int, str, str, dict[str, object]]]] = {}

    def process(self, pid: int) -> ProcessRecording:
        if pid not in self.processes:
            self.processes[pid] = ProcessRecording(pid=pid)
        return self.processes[pid]

    def packet(self, data: bytes) -> None:
        ts = seq = 0
        event = descriptor = interned = defaults = None
        for number, _, value in _fields(data):
            if number == 8:
                ts = value  # type: ignore[assignment]
            elif number == 10:
                seq = value  # type: ignore[assignment]
            elif number == 11:
                event = value
            elif number == 12:
                interned = value
            elif number == 59:
                defaults = value
            elif number == 60:
                descriptor = value
        state = self.sequences.setdefault(seq, _Sequence())
        if defaults is not None:
            for number, _, value in _fields(defaults):  # type: ignore[arg-type]
                if number == 11:
                    state.track = dict((n, v) for n, _, v in _fields(value)).get(11, 0)  # type: ignore[arg-type]
        if interned is not None:
            self.intern(state, interned)  # type: ignore[arg-type]
        if descriptor is not None:
            self.descriptor(descriptor)  # type: ignore[arg-type]
        if event is not None:
            self.event(state, ts, event)  # type: ignore[arg-type]

    def intern(self, state: _Sequence, data: bytes) -> None:
        for number, _, value in _fields(data):
            entry = {n: v for n, _, v in _fields(value)}  # type: ignore[arg-type]
            text = entry.get(2, b"").decode("utf-8", "replace")  # type: ignore[union-attr]
            if number == 2:
                state.names[entry.get(1, 0)] = text  # type: ignore[index]
            elif number == 1:
                state.categories[entry.get(1, 0)] = text  # type: ignore[index]

    def descriptor(self, data: bytes) -> None:
        fields = {n: v for n, _, v in _fields(data)}
        uuid = fields.get(1, 0)
        if 3 in fields:
            process = {n: v for n, _, v in _fields(fields[3])}  # type: ignore[arg-type]
            rec = self.process(process.get(1, 0))  # type: ignore[arg-type]
            rec.label = process.get(6, b"").decode("utf-8", "replace")  # type: ignore[union-attr]
            self.tracks[uuid] = (rec.pid, 0)  # type: ignore[index]
        elif 4 in fields:
            thread = {n: v for n, _, v in _fields(fields[4])}  # type: ignore[arg-type]
            pid, tid = thread.get(1, 0), thread.get(2, 0)
            self.process(pid).thread_names[tid] = thread.get(5, b"").decode("utf-8", "replace")  # type: ignore
            self.tracks[uuid] = (pid, tid)  # type: ignore[index]
        elif 5 in fields:
            self.tracks[uuid] = (self.tracks.get(fields[5], (0, 0))[0], -1)  # type: ignore[index, arg-type]

    def event(self, state: _Sequence, ts: int, data: bytes) -> None:
        kind, track, name_iid, category = 0, state.track, 0, ""
        args: dict[str, object] = {}
        for number, wire, value in _fields(data):
            if number == 9:
                kind = value  # type: ignore[assignment]
            elif number == 11:
                track = value  # type: ignore[assignment]
            elif number == 10:
                name_iid = value  # type: ignore[assignment]
            elif number == 23:
                state.names[-1] = value.decode("utf-8", "replace")  # type: ignore[union-attr]
                name_iid = -1
            elif number == 3:
                category = state.categories.get(value, "")  # type: ignore[arg-type]
            elif number == 4:
                key, arg = _annotation(value)  # type: ignore[arg-type]
                args[key] = arg
        name = state.names.get(name_iid, "")
        domain = "" if category == "(default)" else category
        if kind == _SLICE_BEGIN:
            self.open.setdefault(track, []).append((ts, name, domain, args))
        elif kind == _SLICE_END:
            self.end(track, ts, args)
        elif kind == _INSTANT:
            pid, tid = self.tracks.get(track, (0, 0))
            self.process(pid).marks.append(Mark(pid, tid, domain, name, ts, *_attributes(args)))

    def end(self, track: int, ts: int, end_args: dict[str, object]) -> None:
        stack = self.open.get(track)
        pid, tid = self.tracks.get(track, (0, 0))
        if not stack:
            self.process(pid).unmatched_pops += 1
            return
        start, name, domain, args = stack.pop()
        category, color, payload = _attributes(args)
        kind = "push" if tid != -1 else "startend"
        if tid == -1:
            tid = pid
        self.process(pid).ranges.append(Range(pid, tid, domain, name, start, ts, kind, category, color,
                                              payload, end_args.get("open") is True, None))


def _annotation(data: bytes) -> tuple[str, object]:
    key, value = "", None
    for number, wire, raw in _fields(data):
        if number == 10:
            key = raw.decode("utf-8", "replace")  # type: ignore[union-attr]
        elif number == 2:
            value = bool(raw)
        elif number == 3:
            value = raw
        elif number == 4:
            value = raw - (1 << 64) if raw >= 1 << 63 else raw  # type: ignore[operator]
        elif number == 5:
            import struct

            value = struct.unpack("<d", raw)[0]  # type: ignore[arg-type]
        elif number == 6:
            value = raw.decode("utf-8", "replace")  # type: ignore[union-attr]
    return key, value


def _attributes(args: dict[str, object]) -> tuple[str | None, int | None, Payload]:
    category = args.get("category")
    color = args.get("color")
    payload = args.get("payload")
    color_value = 0xFF000000 | int(color[1:7], 16) if isinstance(color, str) and len(color) == 7 else None
    return (category if isinstance(category, str) else None, color_value,
            payload if isinstance(payload, (int, float)) and not isinstance(payload, bool) else None)


def is_perfetto_trace(path: str) -> bool:
    """Whether `path` starts like a protobuf Trace (a packet field), not JSON or gzip."""
    with open(path, "rb") as f:
        return f.read(1) == b"\x0a"


def read_perfetto_trace(path: str | os.PathLike[str]) -> list[ProcessRecording]:
    """A Perfetto protobuf trace (autonvtx's, or any with TrackEvent slices) back into recordings."""
    where = os.fspath(path)
    try:
        with open(where, "rb") as f:
            data = f.read()
    except OSError as error:
        raise TraceFormatError(f"{where}: cannot read trace: {error.strerror}") from None
    reader = _PerfettoReader(where)
    try:
        for number, _, packet in _fields(data):
            if number == 1:
                reader.packet(packet)  # type: ignore[arg-type]
    except (ValueError, IndexError) as error:
        raise TraceFormatError(f"{where}: not a Perfetto protobuf trace ({error}); expected a .pftrace") from None
    for track, stack in reader.open.items():
        pid, tid = reader.tracks.get(track, (0, 0))
        rec = reader.process(pid)
        end = max([r.end_ns for r in rec.ranges] + [0])
        for start, name, domain, args in stack:
            rec.ranges.append(Range(pid, pid if tid == -1 else tid, domain, name, start, max(end, start),
                                    "push" if tid != -1 else "startend", *_attributes(args), True, None))
    for rec in reader.processes.values():
        rec.ranges.sort(key=lambda r: (r.start_ns, -r.end_ns))
        rec.marks.sort(key=lambda m: m.ts_ns)
    return [reader.processes[pid] for pid in sorted(reader.processes)]


def read_trace(path: str | os.PathLike[str]) -> list[ProcessRecording]:
    """A saved trace in either format, told apart by its first bytes."""
    from autonvtx.recorder.chrome import read_chrome_trace

    try:
        perfetto = is_perfetto_trace(os.fspath(path))
    except OSError as error:
        raise TraceFormatError(f"{os.fspath(path)}: cannot read trace: {error.strerror}") from None
    return read_perfetto_trace(path) if perfetto else read_chrome_trace(path)
