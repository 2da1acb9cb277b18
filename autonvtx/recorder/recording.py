"""Reads the native recorder's per-process files back into the recording model, ranges matched.

File format, version 1 (written by ``_native/recorder.c``, whose header comment is the
reference); little-endian, every item 8-byte aligned, strings are raw UTF-8 padded to 8::

    header (64 bytes)  magic "ANVTXREC", u32 version, u32 header_size, u32 pid, u32 ppid,
                       u64 flush_ns, i64 realtime_offset_ns, u64 dropped, u64 events, u64 0
    sections           u32 tag, u32 0, u64 length, then `length` bytes; tag 0 ends the file
      1 CMDLINE        /proc/self/cmdline (NUL-separated)
      2 DOMAINS        {u32 id, u32 len, name}; id 0 is the core domain, named ""
      3 STRINGS        {u32 id, u32 domain, u32 len, u32 0, text}     registered strings
      4 CATEGORIES     {u32 domain, u32 category, u32 len, u32 0, name}  last one wins
      5 THREAD         u32 tid, u32 index, u64 dropped, u64 events, u32 name_len, u32 0,
                       name, then the thread's event records
      6 THREAD_NAMES   {u32 tid, u32 len, name}  nvtxNameOsThread, last one wins
    event record       u8 kind (1 push, 2 pop, 3 start, 4 end, 5 mark), u8 flags (1 color,
                       2 category), u8 payload type (0, or nvtxPayloadType_t 1..6), u8 message
                       kind (0 none, 1 inline, 2 registered), u32 domain, u64 ts; then
                       [u64 range id] [u64 payload] [u32 color] [u32 category]
                       [u32 string id | u32 len + bytes], padded to 8

Push/pop pairs are matched per (thread, domain) with a stack; start/end pairs by range id
across threads. Ranges still open at the flush end at ``flush_ns`` with ``is_open=True``.
"""
from __future__ import annotations

import dataclasses
import gc
import operator
import os
import struct
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, Union

from autonvtx.errors import TraceFormatError
from autonvtx.recorder.model import Mark, Payload, ProcessRecording, Range

MAGIC = b"ANVTXREC"
VERSION = 1
SUFFIX = ".anr"

_HEADER = struct.Struct("<8sIIIIQqQQQ")
_SECTION = struct.Struct("<IIQ")
_U32X2 = struct.Struct("<II")
_U32X4 = struct.Struct("<IIII")
_THREAD = struct.Struct("<IIQQII")
_HEAD = struct.Struct("<IIQ")  # kind/flags/payload type/message kind as one word, domain, ts
_U64 = struct.Struct("<Q")

_T_END, _T_CMDLINE, _T_DOMAINS, _T_STRINGS, _T_CATEGORIES, _T_THREAD, _T_THREAD_NAMES = range(7)
_PUSH, _POP, _START, _END, _MARK = 1, 2, 3, 4, 5
_F_COLOR, _F_CATEGORY = 1, 2
_M_NONE, _M_INLINE, _M_REGISTERED = 0, 1, 2

# nvtxPayloadType_t -> struct code for the 8-byte payload slot (4-byte values come first).
_PAYLOAD_FORMATS = {1: "Q", 2: "q", 3: "d", 4: "I4x", 5: "i4x", 6: "f4x"}

# What follows a record's 16-byte head: (struct, kind, has_id, has_payload, has_color,
# has_category, message kind), compiled once per distinct first 32-bit word of a record.
_Layout = Tuple[struct.Struct, int, bool, bool, bool, bool, int]
_Open = Tuple[int, str, Optional[str], Optional[int], Payload]  # start ts, name, cat, color, payload
PathLike = Union[str, "os.PathLike[str]"]


def _pad8(n: int) -> int:
    return (n + 7) & ~7


class _DomainNames(Dict[int, str]):
    """Domain id -> name; an id the file never named reads as its number."""

    def __missing__(self, key: int) -> str:
        return str(key)


# Range and Mark are frozen dataclasses: their generated __init__ sets each field through
# object.__setattr__, several microseconds per Range, too slow for millions of events. These
# build the same objects by filling their __dict__ directly; _FAST_MODEL guards against a model change.
_new = object.__new__
_RANGE_FIELDS = ("pid", "tid", "domain", "name", "start_ns", "end_ns", "kind", "category", "color",
                 "payload", "is_open", "end_tid")
_MARK_FIELDS = ("pid", "tid", "domain", "name", "ts_ns", "category", "color", "payload")
_FAST_MODEL = (tuple(f.name for f in dataclasses.fields(Range)) == _RANGE_FIELDS
               and tuple(f.name for f in dataclasses.fields(Mark)) == _MARK_FIELDS)


def _fast_range(pid: int, tid: int, domain: str, name: str, start_ns: int, end_ns: int, kind: str,
                category: Optional[str], color: Optional[int], payload: Payload, is_open: bool,
                end_tid: Optional[int]) -> Range:
    obj: Range = _new(Range)
    d = obj.__dict__
    d["pid"] = pid
    d["tid"] = tid
    d["domain"] = domain
    d["name"] = name
    d["start_ns"] = start_ns
    d["end_ns"] = end_ns
    d["kind"] = kind
    d["category"] = category
    d["color"] = color
    d["payload"] = payload
    d["is_open"] = is_open
    d["end_tid"] = end_tid
    return obj


def _fast_mark(pid: int, tid: int, domain: str, name: str, ts_ns: int, category: Optional[str],
               color: Optional[int], payload: Payload) -> Mark:
    obj: Mark = _new(Mark)
    d = obj.__dict__
    d["pid"] = pid
    d["tid"] = tid
    d["domain"] = domain
    d["name"] = name
    d["ts_ns"] = ts_ns
    d["category"] = category
    d["color"] = color
    d["payload"] = payload
    return obj


_make_range: Callable[..., Range] = _fast_range if _FAST_MODEL else Range
_make_mark: Callable[..., Mark] = _fast_mark if _FAST_MODEL else Mark


class _Reader:
    """Parses one file; every failure becomes a TraceFormatError naming the file."""

    def __init__(self, path: PathLike, data: bytes) -> None:
        self.path = os.fspath(path)
        self.data = data
        self.layouts: Dict[int, _Layout] = {}

    def fail(self, what: str) -> TraceFormatError:
        return TraceFormatError(f"{self.path}: {what}; expected a recording written by autonvtx's native recorder")

    def layout(self, word: int) -> _Layout:
        """The struct for what follows a record's 16-byte head, compiled once per head word."""
        kind, flags, payload_type, message_kind = (
            word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF, word >> 24)
        if kind not in (_PUSH, _START, _MARK) or flags & ~3 or message_kind > 2:
            raise self.fail(f"unknown event record {word:#010x}")
        if payload_type and payload_type not in _PAYLOAD_FORMATS:
            raise self.fail(f"unknown payload type {payload_type}")
        has_id = kind == _START
        fmt = "<" + ("Q" if has_id else "")
        fmt += _PAYLOAD_FORMATS.get(payload_type, "")
        fmt += ("I" if flags & _F_COLOR else "") + ("I" if flags & _F_CATEGORY else "")
        fmt += "I" if message_kind else ""
        layout = (struct.Struct(fmt), kind, has_id, bool(payload_type), bool(flags & _F_COLOR),
                  bool(flags & _F_CATEGORY), message_kind)
        self.layouts[word] = layout
        return layout

    def read(self) -> ProcessRecording:
        data = self.data
        if len(data) < _HEADER.size:
            raise self.fail(f"file too short for a header ({len(data)} bytes)")
        (magic, version, header_size, pid, ppid, flush_ns, offset, dropped, _events,
         _reserved) = _HEADER.unpack_from(data, 0)
        if magic != MAGIC:
            raise self.fail(f"not an autonvtx recording (magic {magic!r})")
        if version != VERSION:
            raise self.fail(f"unsupported recording version {version} (this autonvtx reads {VERSION})")
        if header_size < _HEADER.size:
            raise self.fail(f"header size {header_size} is smaller than {_HEADER.size}")
        recording = ProcessRecording(pid=pid, ppid=ppid, flush_ns=flush_ns,
                                     realtime_offset_ns=offset, dropped_events=dropped)
        domains: Dict[int, str] = {0: ""}
        strings: Dict[int, str] = {}
        categories: Dict[Tuple[int, int], str] = {}
        threads: List[Tuple[int, int, int]] = []  # (tid, start, end) of each event stream
        renames: List[Tuple[int, str]] = []
        pos = header_size
        while True:
            if pos + _SECTION.size > len(data):
                raise self.fail(f"truncated at byte {pos} (no end-of-file section)")
            tag, _, length = _SECTION.unpack_from(data, pos)
            pos += _SECTION.size
            end = pos + length
            if end > len(data):
                raise self.fail(f"section {tag} at byte {pos - _SECTION.size} runs past the end of the file")
            if tag == _T_END:
                break
            try:
                if tag == _T_CMDLINE:
                    raw = data[pos:end].rstrip(b"\0")
                    recording.cmdline = [os.fsdecode(a) for a in raw.split(b"\0")] if raw else []
                elif tag == _T_DOMAINS:
                    self.named(pos, end, _U32X2, domains.__setitem__)
                elif tag == _T_STRINGS:
                    self.named(pos, end, _U32X4, lambda key, text: strings.__setitem__(key[0], text))
                elif tag == _T_CATEGORIES:
                    self.named(pos, end, _U32X4, categories.__setitem__)
                elif tag == _T_THREAD_NAMES:
                    self.named(pos, end, _U32X2, lambda tid, name: renames.append((tid, name)))
                elif tag == _T_THREAD:
                    tid, _index, _dropped, _count, name_len, _ = _THREAD.unpack_from(data, pos)
                    start = pos + _THREAD.size
                    recording.thread_names[tid] = data[start:start + name_len].decode("utf-8", "replace")
                    threads.append((tid, start + _pad8(name_len), end))
            except struct.error as error:
                raise self.fail(f"section {tag} at byte {pos - _SECTION.size} is truncated ({error})") from None
            pos = end
        for tid, name in renames:
            recording.thread_names[tid] = name
        self.events(recording, threads, domains, strings, categories)
        return recording

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
            text = data[start:start + length].decode("utf-8", "replace")
            if two:
                store(fields[0], text)
            else:
                store((fields[0], fields[1]), text)
            pos = start + _pad8(length)

    def events(self, recording: ProcessRecording, threads: List[Tuple[int, int, int]],
               domains: Dict[int, str], strings: Dict[int, str],
               categories: Dict[Tuple[int, int], str]) -> None:
        data = self.data
        pid = recording.pid
        layouts = self.layouts
        layout_of = self.layout
        head = _HEAD.unpack_from
        u64 = _U64.unpack_from
        make_range = _make_range
        make_mark = _make_mark
        domain_names = _DomainNames(domains)
        category_names = dict(categories)
        ranges: List[Range] = []
        marks: List[Mark] = []
        starts: Dict[int, Tuple[int, int, int, str, Optional[str], Optional[int], Payload]] = {}
        ends: List[Tuple[int, int, int]] = []  # (range id, tid, ts)
        unmatched = 0
        stacks: Dict[Tuple[int, int], List[_Open]] = {}

        # Stacks are per thread section, not per tid: the OS reuses the tids of finished threads.
        for section, (tid, pos, end) in enumerate(threads):
            try:
                while pos < end:
                    word, domain, ts = head(data, pos)
                    pos += 16
                    if word == _POP:
                        stack = stacks.get((section, domain))
                        if stack:
                            start_ts, name, category, color, payload = stack.pop()
                            ranges.append(make_range(pid, tid, domain_names[domain], name, start_ts,
                                                     ts, "push", category, color, payload, False, None))
                        else:
                            unmatched += 1
                        continue
                    if word == _END:
                        ends.append((u64(data, pos)[0], tid, ts))
                        pos += 8
                        continue
                    spec = layouts.get(word) or layout_of(word)
                    fields = spec[0].unpack_from(data, pos)
                    pos += spec[0].size
                    i = 0
                    range_id = 0
                    if spec[2]:
                        range_id = fields[0]
                        i = 1
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
                        length = fields[i]
                        name = data[pos:pos + length].decode("utf-8", "replace")
                        pos += length
                    else:
                        name = ""
                    pos = (pos + 7) & ~7
                    kind = spec[1]
                    if kind == _PUSH:
                        stack = stacks.get((section, domain))
                        if stack is None:
                            stack = stacks[(section, domain)] = []
                        stack.append((ts, name, category, color, payload))
                    elif kind == _START:
                        starts[range_id] = (tid, domain, ts, name, category, color, payload)
                    else:
                        marks.append(make_mark(pid, tid, domain_names[domain], name, ts,
                                               category, color, payload))
            except (struct.error, KeyError) as error:
                raise self.fail(f"event stream of thread {tid} is corrupt at byte {pos} ({error!r})") from None
            if pos != end:
                raise self.fail(f"event record of thread {tid} runs past its section at byte {pos}")

        flush_ns = recording.flush_ns
        for range_id, end_tid, ts in ends:
            started = starts.pop(range_id, None)
            if started is None:
                unmatched += 1
                continue
            tid, domain, start_ts, name, category, color, payload = started
            ranges.append(make_range(pid, tid, domain_names[domain], name, start_ts, ts, "startend",
                                     category, color, payload, False,
                                     end_tid if end_tid != tid else None))
        for tid, domain, start_ts, name, category, color, payload in starts.values():
            ranges.append(make_range(pid, tid, domain_names[domain], name, start_ts, flush_ns,
                                     "startend", category, color, payload, True, None))
        for (section, domain), stack in stacks.items():
            tid = threads[section][0]
            for start_ts, name, category, color, payload in stack:
                ranges.append(make_range(pid, tid, domain_names[domain], name, start_ts, flush_ns,
                                         "push", category, color, payload, True, None))
        ranges.sort(key=_range_order)
        marks.sort(key=_mark_order)
        recording.ranges = ranges
        recording.marks = marks
        recording.unmatched_pops = unmatched


def _range_order(r: Range) -> Tuple[int, int]:
    return (r.start_ns, -r.end_ns)


_mark_order = operator.attrgetter("ts_ns")


def read_recording(path: PathLike) -> ProcessRecording:
    """One process's recording; TraceFormatError if the file is unreadable or corrupt."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise TraceFormatError(f"{os.fspath(path)}: cannot read the recording: {error.strerror}") from None
    # Millions of small tuples and objects would trigger full collections over and over; nothing
    # built here forms a cycle.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _Reader(path, data).read()
    finally:
        if was_enabled:
            gc.enable()


def read_directory(directory: PathLike) -> list[ProcessRecording]:
    """Every ``*.anr`` recording in `directory`, sorted by pid (half-written ``.tmp`` files skipped)."""
    paths = sorted(Path(directory).glob("*" + SUFFIX))
    recordings = [read_recording(p) for p in paths if p.is_file()]
    recordings.sort(key=lambda r: r.pid)
    return recordings
