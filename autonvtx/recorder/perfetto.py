"""Perfetto's protobuf trace format (TracePackets of TrackEvents), hand-encoded and read back.

The native exporter writes the event packets; this module writes the packets that name things
(a clock snapshot, one track per process and per thread) and reads whole traces back into
recordings for `autonvtx summary` and `merge`. Field numbers are those of Perfetto's
`protos/perfetto/trace` (TracePacket, TrackEvent, TrackDescriptor, InternedData); tests check
the output against the `perfetto` package's compiled protos.
"""

from __future__ import annotations

import os
import struct
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
    clocks = (
        _field(1, _field(1, _CLOCK_MONOTONIC) + _field(2, time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
        + _field(1, _field(1, _CLOCK_BOOTTIME) + _field(2, time.clock_gettime_ns(time.CLOCK_BOOTTIME)))
        + _field(2, _CLOCK_MONOTONIC)
    )
    packets = [_field(6, clocks)]
    for rec in recordings:
        # Perfetto has no field for the status: the track's name shows it, and reads back as the name.
        process = _field(1, rec.pid) + _field(6, rec.track_name)
        packets.append(_field(60, _field(1, thread_uuid(rec.pid, 0)) + _field(3, process)))
        names = dict(rec.thread_names)
        names.setdefault(rec.pid, "MainThread")
        for tid, name in sorted(names.items()):
            thread = _field(1, rec.pid) + _field(2, tid) + _field(5, name)
            packets.append(
                _field(
                    60, _field(1, thread_uuid(rec.pid, tid)) + _field(5, thread_uuid(rec.pid, 0)) + _field(4, thread)
                )
            )
    return b"".join(_field(1, packet) for packet in packets)


# Reading


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message; bytes for length-delimited fields."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            yield number, wire, data[pos : pos + length]
            pos += length
        elif wire == 1:
            yield number, wire, data[pos : pos + 8]
            pos += 8
        elif wire == 5:
            yield number, wire, data[pos : pos + 4]
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


_Value = int | bytes


def _message(data: bytes) -> dict[int, _Value]:
    """A message's fields, the last value of each (enough for the singular fields read here)."""
    return {number: value for number, _, value in _fields(data)}


def _int(fields: dict[int, _Value], number: int) -> int:
    value = fields.get(number, 0)
    return value if isinstance(value, int) else 0


def _bytes(fields: dict[int, _Value], number: int) -> bytes:
    value = fields.get(number, b"")
    return value if isinstance(value, bytes) else b""


def _text(fields: dict[int, _Value], number: int) -> str:
    return _bytes(fields, number).decode("utf-8", "replace")


class _Sequence:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.categories: dict[int, str] = {}
        self.track = 0


_Open = tuple[int, str, str, dict[str, object]]  # start, name, domain, arguments


class _PerfettoReader:
    """TracePackets into recordings: descriptors name processes and threads, slices become ranges."""

    def __init__(self) -> None:
        self.processes: dict[int, ProcessRecording] = {}
        self.tracks: dict[int, tuple[int, int]] = {}  # uuid -> (pid, tid); async tracks: tid -1
        self.sequences: dict[int, _Sequence] = {}
        self.open: dict[int, list[_Open]] = {}

    def process(self, pid: int) -> ProcessRecording:
        if pid not in self.processes:
            self.processes[pid] = ProcessRecording(pid=pid)
        return self.processes[pid]

    def packet(self, data: bytes) -> None:
        fields = _message(data)
        state = self.sequences.setdefault(_int(fields, 10), _Sequence())
        if 59 in fields:  # trace_packet_defaults.track_event_defaults.track_uuid
            state.track = _int(_message(_bytes(_message(_bytes(fields, 59)), 11)), 11) or state.track
        if 12 in fields:
            for number, _, value in _fields(_bytes(fields, 12)):
                if number in (1, 2) and isinstance(value, bytes):
                    entry = _message(value)
                    table = state.names if number == 2 else state.categories
                    table[_int(entry, 1)] = _text(entry, 2)
        if 60 in fields:
            self.descriptor(_message(_bytes(fields, 60)))
        if 11 in fields:
            self.event(state, _int(fields, 8), _bytes(fields, 11))

    def descriptor(self, fields: dict[int, _Value]) -> None:
        uuid = _int(fields, 1)
        if 3 in fields:
            process = _message(_bytes(fields, 3))
            rec = self.process(_int(process, 1))
            rec.label = _text(process, 6)
            self.tracks[uuid] = (rec.pid, 0)
        elif 4 in fields:
            thread = _message(_bytes(fields, 4))
            pid, tid = _int(thread, 1), _int(thread, 2)
            self.process(pid).thread_names[tid] = _text(thread, 5)
            self.tracks[uuid] = (pid, tid)
        elif 5 in fields:
            self.tracks[uuid] = (self.tracks.get(_int(fields, 5), (0, 0))[0], -1)

    def event(self, state: _Sequence, ts: int, data: bytes) -> None:
        kind, track, name, category = 0, state.track, "", ""
        args: dict[str, object] = {}
        for number, _, value in _fields(data):
            if number == 9 and isinstance(value, int):
                kind = value
            elif number == 11 and isinstance(value, int):
                track = value
            elif number == 10 and isinstance(value, int):
                name = state.names.get(value, "")
            elif number == 23 and isinstance(value, bytes):
                name = value.decode("utf-8", "replace")
            elif number == 3 and isinstance(value, int):
                category = state.categories.get(value, "")
            elif number == 4 and isinstance(value, bytes):
                key, arg = _annotation(value)
                args[key] = arg
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
        self.process(pid).ranges.append(_range(pid, tid, domain, name, start, ts, args, end_args.get("open") is True))


def _range(
    pid: int, tid: int, domain: str, name: str, start: int, end: int, args: dict[str, object], is_open: bool
) -> Range:
    category, color, payload = _attributes(args)
    if tid == -1:  # a start/end range: its own track under the process
        return Range(pid, pid, domain, name, start, end, "startend", category, color, payload, is_open, None)
    return Range(pid, tid, domain, name, start, end, "push", category, color, payload, is_open, None)


def _annotation(data: bytes) -> tuple[str, object]:
    key: str = ""
    value: object = None
    for number, _wire, raw in _fields(data):
        if number == 10 and isinstance(raw, bytes):
            key = raw.decode("utf-8", "replace")
        elif number == 2 and isinstance(raw, int):
            value = bool(raw)
        elif number == 3 and isinstance(raw, int):
            value = raw
        elif number == 4 and isinstance(raw, int):
            value = raw - (1 << 64) if raw >= 1 << 63 else raw
        elif number == 5 and isinstance(raw, bytes):
            value = struct.unpack("<d", raw)[0]
        elif number == 6 and isinstance(raw, bytes):
            value = raw.decode("utf-8", "replace")
    return key, value


def _attributes(args: dict[str, object]) -> tuple[str | None, int | None, Payload]:
    category = args.get("category")
    color = args.get("color")
    payload = args.get("payload")
    color_value = 0xFF000000 | int(color[1:7], 16) if isinstance(color, str) and len(color) == 7 else None
    return (
        category if isinstance(category, str) else None,
        color_value,
        payload if isinstance(payload, (int, float)) and not isinstance(payload, bool) else None,
    )


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
    reader = _PerfettoReader()
    try:
        for number, _, packet in _fields(data):
            if number == 1 and isinstance(packet, bytes):
                reader.packet(packet)
    except (ValueError, IndexError) as error:
        raise TraceFormatError(f"{where}: not a Perfetto protobuf trace ({error}); expected a .pftrace") from None
    for track, stack in reader.open.items():
        pid, tid = reader.tracks.get(track, (0, 0))
        rec = reader.process(pid)
        end = max([r.end_ns for r in rec.ranges] + [0])
        for start, name, domain, args in stack:
            rec.ranges.append(_range(pid, tid, domain, name, start, max(end, start), args, True))
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
