"""Recordings held in memory written back as `.anr` files, for the one trace writer to export.

`autonvtx merge` reads traces into recordings and moves them onto one clock; writing them as the
recorder would have (the format `recording` reads, version 2) lets the native exporter write
the merged trace, JSON or Perfetto alike: there is one Chrome/Perfetto writer, not a second
one in Python. Messages are written inline, categories registered by name per domain; what the
model says about a process (its last write, whether it ended normally, its lost events and
stray pops) is written so that reading the file back gives the same.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence

from autonvtx.recorder.model import Payload, ProcessRecording, Range
from autonvtx.recorder.recording import (
    F_CATEGORY as _F_CATEGORY,
    F_COLOR as _F_COLOR,
    HEADER as _HEADER,
    K_END as _END,
    K_MARK as _MARK,
    K_POP as _POP,
    K_PUSH as _PUSH,
    K_START as _START,
    M_INLINE as _M_INLINE,
    MAGIC,
    SECTION as _SECTION,
    SPILL as _SPILL,
    SUFFIX,
    T_CATEGORIES as _T_CATEGORIES,
    T_CMDLINE as _T_CMDLINE,
    T_DOMAINS as _T_DOMAINS,
    T_SPILL as _T_SPILL,
    T_THREAD as _T_THREAD,
    T_THREAD_NAMES as _T_THREAD_NAMES,
    THREAD as _THREAD,
    VERSION,
)

_U64_MAX = (1 << 64) - 1


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) & 7)


def _section(tag: int, body: bytes) -> bytes:
    return _SECTION.pack(tag, 0, len(body)) + body


def _payload(value: Payload) -> tuple[int, bytes]:
    """(nvtxPayloadType_t, the 8-byte slot) of a payload; (0, b"") for none."""
    if value is None:
        return 0, b""
    if isinstance(value, float):
        return 3, struct.pack("<d", value)
    if value > (1 << 63) - 1:
        return 1, struct.pack("<Q", value & _U64_MAX)
    return 2, struct.pack("<q", max(value, -(1 << 63)))


class _Registry:
    """Domain and category ids of one file."""

    def __init__(self) -> None:
        self.domains: dict[str, int] = {"": 0}
        self.categories: dict[tuple[int, str], int] = {}

    def domain(self, name: str) -> int:
        return self.domains.setdefault(name, len(self.domains))

    def category(self, domain: int, name: str) -> int:
        return self.categories.setdefault((domain, name), len(self.categories) + 1)

    def sections(self) -> bytes:
        domains = b"".join(
            struct.pack("<II", ident, len(raw)) + _pad(raw)
            for ident, raw in (
                (ident, name.encode("utf-8", "surrogateescape")) for name, ident in self.domains.items() if ident
            )
        )
        categories = b"".join(
            struct.pack("<IIII", domain, ident, len(raw), 0) + _pad(raw)
            for domain, ident, raw in (
                (d, i, n.encode("utf-8", "surrogateescape")) for (d, n), i in self.categories.items()
            )
        )
        return _section(_T_DOMAINS, domains) + _section(_T_CATEGORIES, categories)


def _record(
    kind: int,
    domain: int,
    ts: int,
    registry: _Registry,
    *,
    range_id: int | None = None,
    name: str = "",
    category: str | None = None,
    color: int | None = None,
    payload: Payload = None,
) -> bytes:
    payload_type, slot = _payload(payload)
    flags = (_F_COLOR if color is not None else 0) | (_F_CATEGORY if category is not None else 0)
    head = struct.pack("<BBBBIQ", kind, flags, payload_type, _M_INLINE, domain, ts)
    body = struct.pack("<Q", range_id) if range_id is not None else b""
    body += slot
    body += struct.pack("<I", color & 0xFFFFFFFF) if color is not None else b""
    body += struct.pack("<I", registry.category(domain, category)) if category is not None else b""
    text = name.encode("utf-8", "surrogateescape")
    return _pad(head + body + struct.pack("<I", len(text)) + text)


def _thread_events(
    recording: ProcessRecording, registry: _Registry
) -> tuple[dict[int, list[tuple[int, bytes]]], dict[int, list[tuple[int, bytes]]]]:
    """tid -> (ts, record) in the order a thread would have written them; and the ends of start/end
    ranges, per thread, written after every start (a range may end on a thread written earlier)."""
    events: dict[int, list[tuple[int, bytes]]] = {}
    ends: dict[int, list[tuple[int, bytes]]] = {}
    for (tid, _), ranges in _push_stacks(recording.ranges).items():
        events.setdefault(tid, []).extend(_push_pop(ranges, registry))
    range_id = 0
    for r in recording.ranges:
        if r.kind == "push":
            continue
        range_id += 1
        domain = registry.domain(r.domain)
        events.setdefault(r.tid, []).append(
            (
                r.start_ns,
                _record(
                    _START,
                    domain,
                    r.start_ns,
                    registry,
                    range_id=range_id,
                    name=r.name,
                    category=r.category,
                    color=r.color,
                    payload=r.payload,
                ),
            )
        )
        if not r.is_open:
            end_tid = r.tid if r.end_tid is None else r.end_tid
            ends.setdefault(end_tid, []).append(
                (r.end_ns, struct.pack("<BBBBIQQ", _END, 0, 0, 0, domain, r.end_ns, range_id))
            )
    for m in recording.marks:
        events.setdefault(m.tid, []).append(
            (
                m.ts_ns,
                _record(
                    _MARK,
                    registry.domain(m.domain),
                    m.ts_ns,
                    registry,
                    name=m.name,
                    category=m.category,
                    color=m.color,
                    payload=m.payload,
                ),
            )
        )
    for items in [*events.values(), *ends.values()]:
        items.sort(key=lambda item: item[0])  # stable: a stack's pop stays before a push at the same time
    return events, ends


def _push_stacks(ranges: Sequence[Range]) -> dict[tuple[int, str], list[Range]]:
    stacks: dict[tuple[int, str], list[Range]] = {}
    for r in ranges:
        if r.kind == "push":
            stacks.setdefault((r.tid, r.domain), []).append(r)
    return stacks


def _push_pop(ranges: list[Range], registry: _Registry) -> Iterator[tuple[int, bytes]]:
    """The push and pop records of one thread's ranges in one domain, properly nested."""
    ranges.sort(key=lambda r: (r.start_ns, -r.end_ns))
    open_ranges: list[Range] = []
    for r in ranges:
        while open_ranges and open_ranges[-1].end_ns <= r.start_ns and not open_ranges[-1].is_open:
            yield _pop(open_ranges.pop(), registry)
        domain = registry.domain(r.domain)
        yield (
            r.start_ns,
            _record(
                _PUSH, domain, r.start_ns, registry, name=r.name, category=r.category, color=r.color, payload=r.payload
            ),
        )
        open_ranges.append(r)
    while open_ranges:
        r = open_ranges.pop()
        if not r.is_open:
            yield _pop(r, registry)


def _pop(r: Range, registry: _Registry) -> tuple[int, bytes]:
    return r.end_ns, struct.pack("<BBBBIQ", _POP, 0, 0, 0, registry.domain(r.domain), r.end_ns)


def recording_bytes(recording: ProcessRecording) -> bytes:
    """The `.anr` file of `recording`: reading it back gives the same processes, threads and events."""
    registry = _Registry()
    events, ends = _thread_events(recording, registry)
    main = recording.pid if recording.pid in events or not events else min(events)
    # Stray pops (ends with nothing to close) are kept as such, before anything opens.
    strays = [(0, struct.pack("<BBBBIQ", _POP, 0, 0, 0, 0, 0))] * recording.unmatched_pops
    events.setdefault(main, [])[:0] = strays
    for tid in ends:
        events.setdefault(tid, [])
    index_of = {tid: index for index, tid in enumerate(sorted(events))}
    threads = b""
    # A thread's ends continue its section in a second one (same index), as a later write would.
    for part in (events, ends):
        for tid, items in sorted(part.items()):
            name = recording.thread_names.get(tid, "").encode("utf-8", "surrogateescape")
            body = _THREAD.pack(tid & 0xFFFFFFFF, index_of[tid], 0, len(items), len(name), 0) + _pad(name)
            threads += _section(_T_THREAD, body + b"".join(record for _, record in items))
    names = b"".join(
        struct.pack("<II", tid & 0xFFFFFFFF, len(raw)) + _pad(raw)
        for tid, raw in (
            (tid, name.encode("utf-8", "surrogateescape")) for tid, name in sorted(recording.thread_names.items())
        )
    )
    cmdline = b"".join(os.fsencode(arg) + b"\0" for arg in recording.cmdline)
    spill = _SPILL.pack(
        recording.flush_ns,
        recording.realtime_offset_ns,
        sum(len(i) for i in events.values()) + sum(len(i) for i in ends.values()),
        recording.dropped_events,
        recording.discarded_events,
        int(recording.ended_normally),
        0,
    )
    header = _HEADER.pack(
        MAGIC,
        VERSION,
        _HEADER.size,
        recording.pid & 0xFFFFFFFF,
        recording.ppid & 0xFFFFFFFF,
        recording.flush_ns,
        recording.realtime_offset_ns,
        0,
        0,
        0,
    )
    return (
        header
        + _section(_T_CMDLINE, _pad(cmdline))
        + registry.sections()
        + threads
        + _section(_T_THREAD_NAMES, names)
        + _section(_T_SPILL, spill)
    )


def write_recordings(recordings: Sequence[ProcessRecording], directory: str) -> list[str]:
    """Each recording as `<directory>/<n>.anr`, in order; the paths written."""
    paths = []
    for number, recording in enumerate(recordings):
        path = os.path.join(directory, f"{number}{SUFFIX}")
        with open(path, "wb") as f:
            f.write(recording_bytes(recording))
        paths.append(path)
    return paths
