"""Reads the native recorder's per-process files back into the recording model, ranges matched.

File format, version 2 (written by ``_native/recorder.c``, whose header comment is the
reference); little-endian, every item 8-byte aligned, strings are raw UTF-8 padded to 8. A
file is appended to as the process runs (every ~100 ms and at exit), so it is read to its end;
a last section cut short by a kill is left out::

    header (64 bytes)  magic "ANVTXREC", u32 version, u32 header_size, u32 pid, u32 ppid,
                       u64 created_ns, i64 realtime_offset_ns, u64 0, u64 0, u64 0
    sections           u32 tag, u32 0, u64 length, then `length` bytes
      1 CMDLINE        /proc/self/cmdline (NUL-separated)
      2 DOMAINS        {u32 id, u32 len, name}; id 0 is the core domain, named ""
      3 STRINGS        {u32 id, u32 domain, u32 len, u32 0, text}     registered strings
      4 CATEGORIES     {u32 domain, u32 category, u32 len, u32 0, name}  last one wins
      5 THREAD         u32 tid, u32 index, u64 dropped, u64 events, u32 name_len, u32 flags
                       (1: older events were discarded), name, then event records that
                       continue the thread's earlier THREAD sections (same index)
      6 THREAD_NAMES   {u32 tid, u32 len, name}  nvtxNameOsThread, last one wins
      7 SPILL          u64 ns, i64 realtime_offset_ns, u64 events, u64 dropped,
                       u64 discarded, u32 final, u32 0: the end of one write
    event record       u8 kind (1 push, 2 pop, 3 start, 4 end, 5 mark), u8 flags (1 color,
                       2 category), u8 payload type (0, or nvtxPayloadType_t 1..6), u8 message
                       kind (0 none, 1 inline, 2 registered), u32 domain, u64 ts; then
                       [u64 range id] [u64 payload] [u32 color] [u32 category]
                       [u32 string id | u32 len + bytes], padded to 8

Push/pop pairs are matched per (thread, domain) with a stack; start/end pairs by range id
across threads. Ranges still open at the last write end then with ``is_open=True``; a file
whose last write was not the final one comes from a process that ended abnormally.
"""

from __future__ import annotations

import gc
import mmap
import operator
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Union

from autonvtx.errors import TraceFormatError
from autonvtx.recorder.model import Mark, Payload, ProcessRecording, Range

MAGIC = b"ANVTXREC"
VERSION = 2
SUFFIX = ".anr"

# The layout of `_native/anr_format.h`, in Python (tests/test_recorder.py checks every constant
# against the header); `recording_writer` writes with the same structures.
HEADER = struct.Struct("<8sIIIIQqQQQ")
SECTION = struct.Struct("<IIQ")
THREAD = struct.Struct("<IIQQII")
SPILL = struct.Struct("<QqQQQII")
T_END, T_CMDLINE, T_DOMAINS, T_STRINGS, T_CATEGORIES, T_THREAD, T_THREAD_NAMES, T_SPILL = range(8)
K_PUSH, K_POP, K_START, K_END, K_MARK = 1, 2, 3, 4, 5
F_COLOR, F_CATEGORY = 1, 2
M_NONE, M_INLINE, M_REGISTERED = 0, 1, 2
THREAD_WRAPPED = 1

_HEADER, _SPILL, _SECTION, _THREAD = HEADER, SPILL, SECTION, THREAD
_U32X2 = struct.Struct("<II")
_U32X4 = struct.Struct("<IIII")
_HEAD = struct.Struct("<IIQ")  # kind/flags/payload type/message kind as one word, domain, ts
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")

_T_END, _T_CMDLINE, _T_DOMAINS, _T_STRINGS, _T_CATEGORIES, _T_THREAD, _T_THREAD_NAMES, _T_SPILL = range(8)
_PUSH, _POP, _START, _END, _MARK = K_PUSH, K_POP, K_START, K_END, K_MARK
_F_COLOR, _F_CATEGORY = F_COLOR, F_CATEGORY
_M_NONE, _M_INLINE, _M_REGISTERED = M_NONE, M_INLINE, M_REGISTERED

# nvtxPayloadType_t -> struct code for the 8-byte payload slot (4-byte values come first).
PAYLOAD_FORMATS = {1: "Q", 2: "q", 3: "d", 4: "I4x", 5: "i4x", 6: "f4x"}
_PAYLOAD_FORMATS = PAYLOAD_FORMATS

# What follows a record's 16-byte head: (struct, kind, has_id, has_payload, has_color,
# has_category, message kind), compiled once per distinct first 32-bit word of a record.
_Layout = tuple[struct.Struct, int, bool, bool, bool, bool, int]
_Open = tuple[int, str, str | None, int | None, Payload]  # start ts, name, cat, color, payload
PathLike = Union[str, "os.PathLike[str]"]


# Registries only the events refer to: a scan without events leaves them to the exporter.
_EVENT_REGISTRIES = (_T_DOMAINS, _T_STRINGS, _T_CATEGORIES)


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def record_size(data: bytes | mmap.mmap, pos: int, end: int) -> int:
    """Bytes of the event record at `pos` (anr_format.h's anr_record_size), 0 if it runs past
    `end`: a record the process's end cut through."""
    if end - pos < 16:
        return 0
    word = _U32X2.unpack_from(data, pos)[0]
    kind, flags, payload_type, message_kind = word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF, word >> 24
    n = 16 + (8 if kind in (_START, _END) else 0) + (8 if payload_type else 0)
    n += (4 if flags & _F_COLOR else 0) + (4 if flags & _F_CATEGORY else 0)
    if message_kind == _M_REGISTERED:
        n += 4
    elif message_kind == _M_INLINE:
        if pos + n + 4 > end:
            return 0
        n += 4 + _U32.unpack_from(data, pos + n)[0]
    n = _pad8(n)
    return n if pos + n <= end else 0


class _DomainNames(dict[int, str]):
    """Domain id -> name; an id the file never named reads as its number."""

    def __missing__(self, key: int) -> str:
        return str(key)


# The exporter reads files natively at the end of a run; this reader serves tests, tools and
# small recordings, so it builds the model's own objects.
_make_range: Callable[..., Range] = Range
_make_mark: Callable[..., Mark] = Mark


class _Reader:
    """Parses one file; every failure becomes a TraceFormatError naming the file."""

    def __init__(self, path: PathLike, data: bytes | mmap.mmap) -> None:
        self.path = os.fspath(path)
        self.data = data
        self.layouts: dict[int, _Layout] = {}

    def fail(self, what: str) -> TraceFormatError:
        return TraceFormatError(f"{self.path}: {what}; expected a recording written by autonvtx's native recorder")

    def layout(self, word: int) -> _Layout:
        """The struct for what follows a record's 16-byte head, compiled once per head word."""
        kind, flags, payload_type, message_kind = (word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF, word >> 24)
        if kind not in (_PUSH, _START, _MARK) or flags & ~3 or message_kind > 2:
            raise self.fail(f"unknown event record {word:#010x}")
        if payload_type and payload_type not in _PAYLOAD_FORMATS:
            raise self.fail(f"unknown payload type {payload_type}")
        has_id = kind == _START
        fmt = "<" + ("Q" if has_id else "")
        fmt += _PAYLOAD_FORMATS.get(payload_type, "")
        fmt += ("I" if flags & _F_COLOR else "") + ("I" if flags & _F_CATEGORY else "")
        fmt += "I" if message_kind else ""
        layout = (
            struct.Struct(fmt),
            kind,
            has_id,
            bool(payload_type),
            bool(flags & _F_COLOR),
            bool(flags & _F_CATEGORY),
            message_kind,
        )
        self.layouts[word] = layout
        return layout

    def read(self, events: bool = True) -> ProcessRecording:
        """The recording; without `events`, its processes, threads and names only (what the
        native exporter needs beside the events it streams itself)."""
        data = self.data
        if len(data) < _HEADER.size:
            raise self.fail(f"file too short for a header ({len(data)} bytes)")
        (magic, version, header_size, pid, ppid, created_ns, offset, _, _, _) = _HEADER.unpack_from(data, 0)
        if magic != MAGIC:
            raise self.fail(f"not an autonvtx recording (magic {magic!r})")
        if version != VERSION:
            raise self.fail(f"unsupported recording version {version} (this autonvtx reads {VERSION})")
        if header_size < _HEADER.size:
            raise self.fail(f"header size {header_size} is smaller than {_HEADER.size}")
        recording = ProcessRecording(
            pid=pid, ppid=ppid, flush_ns=created_ns, realtime_offset_ns=offset, ended_normally=False
        )
        tables = _Tables()
        threads: list[tuple[int, int, int, int, int]] = []  # (index, tid, start, end, flags)
        pos = header_size
        while pos + _SECTION.size <= len(data):
            tag, _, length = _SECTION.unpack_from(data, pos)
            start, end = pos + _SECTION.size, pos + _SECTION.size + length
            if tag == _T_END:
                break
            last = end > len(data)
            if last:  # a write cut short by the process's end: its whole entries are kept
                end = self.whole_entries(tag, start, len(data))
                if end <= start:
                    break
            if not events and tag in _EVENT_REGISTRIES:
                pos = end  # read by the native exporter (a million strings cost seconds here)
            else:
                try:
                    self.section(recording, tables, threads, tag, start, end)
                except struct.error as error:
                    raise self.fail(f"section {tag} at byte {pos} is truncated ({error})") from None
                pos = end
            if last:
                break
        for tid, name in tables.renames:
            recording.thread_names[tid] = name
        if events:
            self.events(recording, threads, tables)
        return recording

    def section(
        self,
        recording: ProcessRecording,
        tables: _Tables,
        threads: list[tuple[int, int, int, int, int]],
        tag: int,
        pos: int,
        end: int,
    ) -> None:
        data = self.data
        if tag == _T_CMDLINE:
            raw = data[pos:end].rstrip(b"\0")
            recording.cmdline = [os.fsdecode(a) for a in raw.split(b"\0")] if raw else []
        elif tag == _T_DOMAINS:
            self.named(pos, end, _U32X2, tables.domains.__setitem__)
        elif tag == _T_STRINGS:
            self.named(pos, end, _U32X4, lambda key, text: tables.strings.__setitem__(key[0], text))
        elif tag == _T_CATEGORIES:
            self.named(pos, end, _U32X4, tables.categories.__setitem__)
        elif tag == _T_THREAD_NAMES:
            self.named(pos, end, _U32X2, lambda tid, name: tables.renames.append((tid, name)))
        elif tag == _T_THREAD:
            tid, index, _dropped, _count, name_len, flags = _THREAD.unpack_from(data, pos)
            start = pos + _THREAD.size
            recording.thread_names.setdefault(tid, data[start : start + name_len].decode("utf-8", "replace"))
            threads.append((index, tid, start + _pad8(name_len), end, flags))
        elif tag == _T_SPILL:
            ns, offset, _events, dropped, discarded, final, _ = _SPILL.unpack_from(data, pos)
            recording.flush_ns = max(recording.flush_ns, ns)
            recording.realtime_offset_ns = offset
            recording.dropped_events = dropped
            recording.discarded_events = discarded
            recording.ended_normally = recording.ended_normally or bool(final)

    def whole_entries(self, tag: int, start: int, end: int) -> int:
        """Where the whole entries of a section cut at `end` stop (`start`: none; a section
        holding no entries of its own, such as SPILL, keeps none)."""
        data = self.data
        if tag == _T_THREAD:
            if end - start < _THREAD.size:
                return start
            name_len = _THREAD.unpack_from(data, start)[4]
            pos = start + _THREAD.size + _pad8(name_len)
            if pos > end:
                return start
            while pos < end:
                size = record_size(data, pos, end)
                if size == 0:
                    break
                pos += size
            return pos
        if tag not in (_T_DOMAINS, _T_STRINGS, _T_CATEGORIES, _T_THREAD_NAMES):
            return start
        head = 8 if tag in (_T_DOMAINS, _T_THREAD_NAMES) else 16
        pos = start
        while pos + head <= end:
            length = _U32X2.unpack_from(data, pos + (0 if head == 8 else 8))[1 if head == 8 else 0]
            if pos + head + length > end:
                break
            pos += head + _pad8(length)
        return min(pos, end)

    def named(self, pos: int, end: int, head: struct.Struct, store: Callable[..., object]) -> None:
        """Reads entries of `head` ending in (len[, 0]) followed by a padded UTF-8 string."""
        data = self.data
        two = head.size == 8
        while pos < end:
            fields = head.unpack_from(data, pos)
            length = fields[1] if two else fields[2]
            start = pos + head.size
            if start + length > end:
                raise self.fail(f"name at byte {pos} runs past its section")
            text = data[start : start + length].decode("utf-8", "replace")
            if two:
                store(fields[0], text)
            else:
                store((fields[0], fields[1]), text)
            pos = start + _pad8(length)

    def events(
        self, recording: ProcessRecording, threads: list[tuple[int, int, int, int, int]], tables: _Tables
    ) -> None:
        state = _Pairing(recording.pid, tables)
        wrapped = set()
        # Stacks are per thread index, not per tid: the OS reuses the tids of finished threads.
        for index, tid, pos, end, flags in threads:
            if flags & THREAD_WRAPPED:
                wrapped.add(index)
            try:
                pos = self.decode(state, index, tid, pos, end)
            except (struct.error, KeyError) as error:
                raise self.fail(f"event stream of thread {tid} is corrupt at byte {pos} ({error!r})") from None
            if pos != end:
                raise self.fail(f"event record of thread {tid} runs past its section at byte {pos}")
        recording.flush_ns = max(recording.flush_ns, state.last_ts)
        recording.ranges, recording.marks = state.finish(recording.flush_ns)
        recording.unmatched_pops = sum(n for index, n in state.unmatched.items() if index not in wrapped)

    def decode(self, state: _Pairing, index: int, tid: int, pos: int, end: int) -> int:
        """Reads one THREAD section's records into `state`; returns where it stopped."""
        data = self.data
        layouts = self.layouts
        layout_of = self.layout
        head = _HEAD.unpack_from
        u64 = _U64.unpack_from
        stacks = state.stacks
        category_names = state.category_names
        strings = state.strings
        last_ts = state.last_ts
        while pos < end:
            word, domain, ts = head(data, pos)
            pos += 16
            if ts > last_ts:
                last_ts = ts
            if word == _POP:
                state.pop(index, tid, domain, ts)
                continue
            if word == _END:
                state.ends.append((u64(data, pos)[0], tid, ts))
                pos += 8
                continue
            spec = layouts.get(word) or layout_of(word)
            fields = spec[0].unpack_from(data, pos)
            pos += spec[0].size
            i = 1 if spec[2] else 0
            payload = None
            if spec[3]:
                payload = fields[i]
                i += 1
            color = None
            if spec[4]:
                color = fields[i]
                i += 1
            category = None
            if spec[5]:
                key = (domain, fields[i])
                category = category_names.get(key)
                if category is None:
                    category = category_names[key] = str(fields[i])
                i += 1
            message_kind = spec[6]
            if message_kind == _M_REGISTERED:
                name = strings.get(fields[i], "")
            elif message_kind == _M_INLINE:
                name = data[pos : pos + fields[i]].decode("utf-8", "replace")
                pos += fields[i]
            else:
                name = ""
            pos = (pos + 7) & ~7
            kind = spec[1]
            if kind == _PUSH:
                stack = stacks.get((index, domain))
                if stack is None:
                    stack = stacks[(index, domain)] = []
                stack.append((ts, name, category, color, payload, tid))
            elif kind == _START:
                state.starts[fields[0]] = (tid, domain, ts, name, category, color, payload)
            else:
                state.marks.append(
                    _make_mark(state.pid, tid, state.domain_names[domain], name, ts, category, color, payload)
                )
        state.last_ts = last_ts
        return pos


class _Tables:
    """The registries a file names: domains, strings, categories, thread renames."""

    def __init__(self) -> None:
        self.domains: dict[int, str] = {0: ""}
        self.strings: dict[int, str] = {}
        self.categories: dict[tuple[int, int], str] = {}
        self.renames: list[tuple[int, str]] = []


_Pushed = tuple[int, str, str | None, int | None, Payload, int]  # ts, name, cat, color, payload, tid


class _Pairing:
    """Open ranges while a file's events are read; ranges and marks once they end."""

    def __init__(self, pid: int, tables: _Tables) -> None:
        self.pid = pid
        self.strings = tables.strings
        self.domain_names = _DomainNames(tables.domains)
        self.category_names = dict(tables.categories)
        self.stacks: dict[tuple[int, int], list[_Pushed]] = {}
        self.starts: dict[int, tuple[int, int, int, str, str | None, int | None, Payload]] = {}
        self.ends: list[tuple[int, int, int]] = []  # (range id, tid, ts)
        self.ranges: list[Range] = []
        self.marks: list[Mark] = []
        self.unmatched: dict[int, int] = {}  # thread index -> pops with nothing to close
        self.last_ts = 0

    def pop(self, index: int, tid: int, domain: int, ts: int) -> None:
        stack = self.stacks.get((index, domain))
        if stack:
            start_ts, name, category, color, payload, _ = stack.pop()
            self.ranges.append(
                _make_range(
                    self.pid,
                    tid,
                    self.domain_names[domain],
                    name,
                    start_ts,
                    ts,
                    "push",
                    category,
                    color,
                    payload,
                    False,
                    None,
                )
            )
        else:
            self.unmatched[index] = self.unmatched.get(index, 0) + 1

    def finish(self, flush_ns: int) -> tuple[list[Range], list[Mark]]:
        pid, names, ranges = self.pid, self.domain_names, self.ranges
        for range_id, end_tid, ts in self.ends:
            started = self.starts.pop(range_id, None)
            if started is None:
                self.unmatched[0] = self.unmatched.get(0, 0) + 1
                continue
            tid, domain, start_ts, name, category, color, payload = started
            ranges.append(
                _make_range(
                    pid,
                    tid,
                    names[domain],
                    name,
                    start_ts,
                    ts,
                    "startend",
                    category,
                    color,
                    payload,
                    False,
                    end_tid if end_tid != tid else None,
                )
            )
        for tid, domain, start_ts, name, category, color, payload in self.starts.values():
            ranges.append(
                _make_range(
                    pid, tid, names[domain], name, start_ts, flush_ns, "startend", category, color, payload, True, None
                )
            )
        for (_, domain), stack in self.stacks.items():
            for start_ts, name, category, color, payload, tid in stack:
                ranges.append(
                    _make_range(
                        pid, tid, names[domain], name, start_ts, flush_ns, "push", category, color, payload, True, None
                    )
                )
        ranges.sort(key=_range_order)
        self.marks.sort(key=_mark_order)
        return ranges, self.marks


def _range_order(r: Range) -> tuple[int, int]:
    return (r.start_ns, -r.end_ns)


_mark_order = operator.attrgetter("ts_ns")


def read_recording(path: PathLike) -> ProcessRecording:
    """One process's recording; TraceFormatError if the file is unreadable or corrupt."""
    # Millions of small tuples and objects would trigger full collections over and over; nothing
    # built here forms a cycle.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _read(path, events=True)
    finally:
        if was_enabled:
            gc.enable()


def read_directory(directory: PathLike) -> list[ProcessRecording]:
    """Every ``*.anr`` recording in `directory`, sorted by pid (half-written ``.tmp`` files skipped)."""
    paths = sorted(Path(directory).glob("*" + SUFFIX))
    recordings = [read_recording(p) for p in paths if p.is_file()]
    recordings.sort(key=lambda r: r.pid)
    return recordings


def scan_recording(path: PathLike) -> ProcessRecording:
    """One process's recording without its events: pid, command line, thread names, last write.

    The same reader as `read_recording`, over a mapping of the file: it touches the section
    heads and the small sections only, so it costs the same for any number of events; the
    native exporter streams the events themselves.
    """
    return _read(path, events=False)


def _read(path: PathLike, events: bool) -> ProcessRecording:
    where = os.fspath(path)
    try:
        with open(where, "rb") as f:
            if events or os.fstat(f.fileno()).st_size == 0:
                return _Reader(where, f.read()).read(events)
            # Without events, only the pages of section heads and small sections are touched.
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _Reader(where, data).read(events)
    except OSError as error:
        raise TraceFormatError(f"{where}: cannot read the recording: {error.strerror}") from None
