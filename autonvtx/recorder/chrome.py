"""Chrome trace-event JSON (autonvtx's, or any with X/B/E/b/e/i/M events) read back into recordings."""

from __future__ import annotations

import gzip
import json
import os
import sys
import zlib
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Union

from autonvtx.errors import TraceFormatError
from autonvtx.recorder.model import PROCESS_STATUSES, Mark, Payload, ProcessRecording, Range, valid_text

StrPath = Union[str, "os.PathLike[str]"]

# What `cat` shows for the core domain (domain ""), whose real name stays in args.domain.
DEFAULT_DOMAIN_CATEGORY = "(default)"
_GZIP_MAGIC = b"\x1f\x8b"
_EVENT_PHASES = frozenset(("X", "B", "E", "b", "e", "i", "I", "n"))
# The latest time a recording can hold: nanoseconds in a signed 64-bit integer (292 years of
# CLOCK_MONOTONIC). An event outside 0..this, or one that ends before it starts, is impossible.
MAX_NS = (1 << 63) - 1


class ReadNotes:
    """What reading a trace had to drop or repair, said once per file rather than silently."""

    def __init__(self) -> None:
        self.impossible_times = 0  # events dropped: negative duration, time outside 0..MAX_NS
        self.repaired_names: set[str] = set()  # texts with a lone surrogate, shown with U+FFFD

    def text(self, value: str) -> str:
        repaired = valid_text(value)
        if repaired is not value and repaired != value:
            self.repaired_names.add(repaired)
        return repaired

    def lines(self, where: str) -> list[str]:
        said = []
        if self.impossible_times:
            said.append(
                f"{where}: {self.impossible_times} event(s) dropped: a negative duration, or a time before 0 or "
                f"after {MAX_NS} ns"
            )
        if self.repaired_names:
            example = sorted(self.repaired_names)[0]
            said.append(
                f"{where}: {len(self.repaired_names)} name(s) held a lone surrogate (not valid Unicode), shown with "
                f"U+FFFD, e.g. {example!r}"
            )
        return said


def read_chrome_trace(path: StrPath) -> list[ProcessRecording]:
    """Read a Chrome trace (ours, or any with X/B/E/b/e/i/M events) back into recordings."""
    where = os.fspath(path)
    document = _load_json(where)
    if isinstance(document, list):
        events: Any = document
        other: Any = {}
    elif isinstance(document, dict) and isinstance(document.get("traceEvents"), list):
        events = document["traceEvents"]
        other = document.get("otherData")
        if not isinstance(other, dict):
            other = {}
    else:
        raise TraceFormatError(
            f'{where}: not a Chrome trace; expected a JSON object with a "traceEvents" list, or a list of events'
        )
    reader = _TraceReader(where, other)
    recordings = reader.read(events)
    for line in reader.notes.lines(where):
        print(f"autonvtx: {line}", file=sys.stderr)
    return recordings


def _load_json(where: str) -> Any:
    try:
        data = Path(where).read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{where}: cannot read trace: {exc.strerror or exc}") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(
                f"{where}: gzip data is corrupt ({exc}); expected a gzip-compressed Chrome trace"
            ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(
            f"{where}: not a JSON file (invalid UTF-8 at byte {exc.start}); expected a Chrome trace"
        ) from None
    try:
        # Decimal keeps "123.456" microseconds exact: a float would lose nanoseconds
        # once CLOCK_MONOTONIC passes about 104 days of uptime (2**53 ns).
        return json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(
            f"{where}: not a JSON file ({exc.msg} at line {exc.lineno}, column {exc.colno}); expected a Chrome trace"
        ) from None
    except RecursionError:
        raise TraceFormatError(f"{where}: JSON nested too deeply; expected a Chrome trace") from None


def _ns(value: Any) -> int:
    """Microseconds as JSON gave them (int or Decimal) -> integer nanoseconds."""
    kind = type(value)
    if kind is Decimal:  # always finite: JSON's NaN/Infinity arrive as floats
        return int((value * 1000).to_integral_value())
    if kind is int:
        return int(value * 1000)
    raise ValueError(f"expected a number of microseconds, got {value!r}")


def _last_ns(rec: ProcessRecording) -> int:
    return max([r.end_ns for r in rec.ranges] + [m.ts_ns for m in rec.marks], default=0)


def _parse_color(value: Any) -> int | None:
    if not isinstance(value, str) or not value.startswith("#"):
        return None
    digits = value[1:]
    try:
        number = int(digits, 16)
    except ValueError:
        return None
    if len(digits) == 6:
        return 0xFF000000 | number
    if len(digits) == 8:
        return ((number & 0xFF) << 24) | (number >> 8)
    return None


def _parse_payload(value: Any) -> Payload:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # "nan", "inf", "-inf" as we write them
        except ValueError:
            return None
    return None


class _TraceReader:
    """Turns trace events into recordings, one process at a time."""

    def __init__(self, where: str, other: Mapping[str, Any]) -> None:
        self.where = where
        self.processes: dict[int, ProcessRecording] = {}
        self.ids: dict[object, int] = {}  # non-integer pid/tid values -> synthetic numbers
        self.process_info: dict[int, Mapping[str, Any]] = {}
        self.has_info = False
        self.sort_index: dict[int, int] = {}
        self.fields: dict[tuple[object, ...], tuple[str, str, str | None, int | None, bool]] = {}
        self.notes = ReadNotes()
        infos = other.get("processes")
        if isinstance(infos, list):
            for info in infos:
                if isinstance(info, dict) and isinstance(info.get("pid"), int):
                    self.process_info[info["pid"]] = info
            self.has_info = True

    def read(self, events: Sequence[Any]) -> list[ProcessRecording]:
        # B/E stacks per thread; b/e stacks per async key.
        stacks: dict[tuple[int, int], list[tuple[int, dict[str, Any]]]] = {}
        pending: dict[tuple[int, object, object, object], list[tuple[int, int, dict[str, Any]]]] = {}
        processes = self.processes
        ident, make_range = self._id, self._range
        for index, event in enumerate(events):
            if type(event) is not dict:
                raise TraceFormatError(
                    f'{self.where}: trace event #{index} is not a JSON object; expected {{"ph": ...}}'
                )
            try:
                phase = event.get("ph")
                if phase == "M":
                    self._metadata(event)
                    continue
                if phase not in _EVENT_PHASES:
                    continue  # counters, flows, samples: nothing in the model holds them
                pid = event.get("pid", 0)
                if type(pid) is not int:
                    pid = ident(pid)
                tid = event.get("tid", 0)
                if type(tid) is not int:
                    tid = ident(tid)
                ts = _ns(event.get("ts"))
                if not 0 <= ts <= MAX_NS:
                    self.notes.impossible_times += 1
                    continue
                rec = processes.get(pid) or self._process(pid)
                if phase == "X":
                    end = ts + _ns(event.get("dur", 0))
                    if not ts <= end <= MAX_NS:
                        self.notes.impossible_times += 1
                        continue
                    rec.ranges.append(make_range(event, pid, tid, ts, end, "push", None))
                elif phase == "B":
                    stacks.setdefault((pid, tid), []).append((ts, event))
                elif phase == "E":
                    stack = stacks.get((pid, tid))
                    if not stack:
                        rec.unmatched_pops += 0 if self.has_info else 1
                        continue
                    start, begin = stack.pop()
                    if ts < start:
                        self.notes.impossible_times += 1
                        continue
                    rec.ranges.append(make_range(begin, pid, tid, start, ts, "push", None))
                elif phase == "b" or phase == "e":
                    key = (pid, event.get("cat"), _hashable(event.get("id", event.get("id2"))), event.get("scope"))
                    if phase == "b":
                        pending.setdefault(key, []).append((ts, tid, event))
                    else:
                        opened = pending.get(key)
                        if not opened:
                            rec.unmatched_pops += 0 if self.has_info else 1
                            continue
                        start, start_tid, begin = opened.pop()
                        if ts < start:
                            self.notes.impossible_times += 1
                            continue
                        end_tid = None if tid == start_tid else tid
                        rec.ranges.append(make_range(begin, pid, start_tid, start, ts, "startend", end_tid))
                else:
                    rec.marks.append(self._mark(event, pid, tid, ts))
            except (ValueError, TypeError, InvalidOperation) as exc:
                raise TraceFormatError(f"{self.where}: trace event #{index} (ph {event.get('ph')!r}): {exc}") from None
        self._close_unfinished(stacks, pending)
        for recording in processes.values():
            # Complete events are written as ranges end; a recording lists them as they began
            # (an enclosing range before what it encloses), as the process saw them.
            recording.ranges.sort(key=lambda r: (r.start_ns, -r.end_ns))
        order = sorted(processes, key=lambda pid: (self.sort_index.get(pid, len(processes)), pid))
        return [processes[pid] for pid in order]

    def _close_unfinished(
        self,
        stacks: Mapping[tuple[int, int], list[tuple[int, dict[str, Any]]]],
        pending: Mapping[tuple[int, object, object, object], list[tuple[int, int, dict[str, Any]]]],
    ) -> None:
        # A begin without its end was still open when the trace stopped: like the recorder,
        # end it at the flush time (else the last timestamp seen) and flag it.
        unfinished = [
            (pid, tid, start, begin, "push") for (pid, tid), stack in stacks.items() for start, begin in stack
        ]
        unfinished += [
            (key[0], tid, start, begin, "startend") for key, opened in pending.items() for start, tid, begin in opened
        ]
        for pid, tid, start, begin, kind in unfinished:
            rec = self.processes[pid]
            end = rec.flush_ns or _last_ns(rec)
            rec.ranges.append(self._range(begin, pid, tid, start, max(end, start), kind, None, force_open=True))

    def _id(self, value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        key = _hashable(value)
        number = self.ids.get(key)
        if number is None:
            # Some tools name threads by text ("stream 7"); give them distinct negative ids.
            number = self.ids[key] = -1 - len(self.ids)
        return number

    def _process(self, pid: int) -> ProcessRecording:
        rec = self.processes.get(pid)
        if rec is None:
            rec = self.processes[pid] = ProcessRecording(pid=pid)
            info = self.process_info.get(pid)
            if info is not None:
                rec.ppid = _int(info.get("ppid"))
                rec.label = self.notes.text(str(info.get("label") or ""))
                cmdline = info.get("cmdline")
                if isinstance(cmdline, list):
                    rec.cmdline = [self.notes.text(str(arg)) for arg in cmdline]
                rec.flush_ns = _int(info.get("flush_ns"))
                rec.realtime_offset_ns = _int(info.get("realtime_offset_ns"))
                rec.dropped_events = _int(info.get("dropped_events"))
                rec.unmatched_pops = _int(info.get("unmatched_pops"))
                rec.ended_normally = info.get("ended_normally") is not False
                # A trace written before the status had its own field kept it in the label: as
                # "ended" the label shows it once, as that trace's track did.
                status = info.get("status")
                rec.status = next((known for known in PROCESS_STATUSES if known == status), "ended")
                rec.discarded_events = _int(info.get("discarded_events"))
        return rec

    def _metadata(self, event: Mapping[str, Any]) -> None:
        args = event.get("args")
        if not isinstance(args, dict):
            return
        pid = self._id(event.get("pid", 0))
        kind = event.get("name")
        if kind == "process_name":
            rec = self._process(pid)
            if pid not in self.process_info and isinstance(args.get("name"), str):
                rec.label = self.notes.text(args["name"])
        elif kind == "process_sort_index":
            if isinstance(args.get("sort_index"), int):
                self.sort_index[pid] = args["sort_index"]
            self._process(pid)
        elif kind == "thread_name":
            rec = self._process(pid)
            if isinstance(args.get("name"), str) and not args.get("autonvtx_inferred"):
                rec.thread_names[self._id(event.get("tid", 0))] = self.notes.text(args["name"])

    def _fields(self, event: Mapping[str, Any]) -> tuple[tuple[str, str, str | None, int | None, bool], Payload]:
        args = event.get("args")
        if type(args) is not dict:
            args = {}
        payload = args.get("payload")
        if payload is not None:
            payload = _parse_payload(payload)
        raw = (
            event.get("name", ""),
            event.get("cat", ""),
            args.get("domain"),
            args.get("category"),
            args.get("color"),
            args.get("open"),
        )
        try:
            # Few distinct (name, domain, ...) combinations recur a million times.
            fields = self.fields.get(raw)
        except TypeError:  # an unhashable value in a foreign trace
            return self._decode(raw), payload
        if fields is None:
            fields = self.fields[raw] = self._decode(raw)
        return fields, payload

    def _decode(self, raw: tuple[object, ...]) -> tuple[str, str, str | None, int | None, bool]:
        name, domain, category, color, is_open = _decode_fields(*raw)
        text = self.notes.text
        return text(name), text(domain), None if category is None else text(category), color, is_open

    def _range(
        self,
        event: Mapping[str, Any],
        pid: int,
        tid: int,
        start: int,
        end: int,
        kind: str,
        end_tid: int | None,
        *,
        force_open: bool = False,
    ) -> Range:
        (name, domain, category, color, is_open), payload = self._fields(event)
        return Range(
            pid,
            tid,
            domain,
            name,
            start,
            end,
            "push" if kind == "push" else "startend",
            category,
            color,
            payload,
            is_open or force_open,
            end_tid,
        )

    def _mark(self, event: Mapping[str, Any], pid: int, tid: int, ts: int) -> Mark:
        (name, domain, category, color, _), payload = self._fields(event)
        return Mark(pid, tid, domain, name, ts, category, color, payload)


def _decode_fields(
    name: object, cat: object, domain: object, category: object, color: object, is_open: object
) -> tuple[str, str, str | None, int | None, bool]:
    if not isinstance(domain, str):
        # A foreign trace: its category is the closest thing to a domain.
        domain = "" if cat in (DEFAULT_DOMAIN_CATEGORY, None) else str(cat)
    return (
        name if isinstance(name, str) else str(name),
        domain,
        None if category is None else str(category),
        _parse_color(color),
        is_open is True,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _hashable(value: Any) -> object:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return value
