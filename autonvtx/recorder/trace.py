"""Chrome trace-event JSON (Perfetto, chrome://tracing) written from recordings and read back."""
from __future__ import annotations

import gzip
import io
import json
import math
import os
import secrets
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any, Union

from autonvtx.errors import TraceFormatError
from autonvtx.recorder.model import Mark, Payload, ProcessRecording, Range

StrPath = Union[str, "os.PathLike[str]"]

# What `cat` shows for the core domain (domain ""), whose real name stays in args.domain.
DEFAULT_DOMAIN_CATEGORY = "(default)"
MAIN_THREAD_NAME = "MainThread"
CLOCK_DOMAIN = "LINUX_CLOCK_MONOTONIC"  # Chrome's own name for this clock in trace metadata
_GZIP_MAGIC = b"\x1f\x8b"
_EVENT_PHASES = frozenset(("X", "B", "E", "b", "e", "i", "I", "n"))
_CHUNK = 4096  # events joined per write


def write_chrome_trace(
    recordings: Sequence[ProcessRecording],
    path: StrPath,
    *,
    metadata: Mapping[str, object] | None = None,
) -> None:
    """Write ``recordings`` as one Chrome trace; ``.gz`` paths are gzip-compressed.

    Timestamps stay absolute CLOCK_MONOTONIC microseconds with three decimals (exact
    nanoseconds), so traces of processes on one host line up and can be merged.
    """
    other = other_data(recordings, metadata)
    head = '{"displayTimeUnit":"ns","otherData":' + json.dumps(other, default=str) + ',"traceEvents":[\n'

    def write(stream: IO[str]) -> None:
        stream.write(head)
        first = True
        for chunk in _chunks(_trace_events(recordings)):
            if not first:
                stream.write(",\n")
            stream.write(",\n".join(chunk))
            first = False
        stream.write("\n]}\n")

    write_atomically(path, write, compress=_is_gzip_path(path))


def write_atomically(path: StrPath, write: Callable[[IO[str]], None], *, compress: bool = False) -> None:
    """Call ``write(text_stream)`` on a temporary file beside ``path``, then rename it over ``path``.

    Readers never see a half-written file; the file gets the mode an ``open()`` would
    give it (a 0600 ``mkstemp`` file would lock colleagues out of a shared trace).
    """
    target = os.fspath(path)
    directory, base = os.path.split(target)
    temp = os.path.join(directory, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "wb") as raw:
            if compress:
                # mtime=0 keeps the bytes reproducible; the name inside is irrelevant.
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                    with _text(gz) as stream:
                        write(stream)
            else:
                with _text(raw) as stream:
                    write(stream)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def _text(raw: IO[bytes] | gzip.GzipFile) -> io.TextIOWrapper:
    return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")


def _is_gzip_path(path: StrPath) -> bool:
    return os.fspath(path).endswith(".gz")


def _chunks(items: Iterable[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def other_data(recordings: Sequence[ProcessRecording], metadata: Mapping[str, object] | None) -> dict[str, object]:
    other: dict[str, object] = dict(metadata or {})
    other["generator"] = "autonvtx"
    other["clock_domain"] = CLOCK_DOMAIN
    other["dropped_events"] = sum(r.dropped_events for r in recordings)
    other["unmatched_pops"] = sum(r.unmatched_pops for r in recordings)
    other["processes"] = [
        {
            "pid": r.pid,
            "ppid": r.ppid,
            "label": r.label,
            "cmdline": list(r.cmdline),
            "flush_ns": r.flush_ns,
            "realtime_offset_ns": r.realtime_offset_ns,
            "dropped_events": r.dropped_events,
            "unmatched_pops": r.unmatched_pops,
            "ended_normally": r.ended_normally,
            "discarded_events": r.discarded_events,
        }
        for r in recordings
    ]
    return other


def _us(ns: int) -> str:
    """Nanoseconds as a JSON number of microseconds, exact: 123456 -> ``123.456``."""
    if ns < 0:
        return "-" + _us(-ns)
    whole, frac = divmod(ns, 1000)
    return f"{whole}.{frac:03d}"


def _color_text(color: int) -> str:
    # NVTX colors are ARGB, but clients commonly leave alpha 0 (nvtx's Python package does) and
    # every NVTX tool shows them opaque: "#rrggbb" (an alpha of 00 reads as transparent in CSS).
    return f"#{color & 0xFFFFFF:06x}"


def _payload_text(payload: Payload) -> str:
    if isinstance(payload, float) and not math.isfinite(payload):
        # NaN/Infinity are not JSON; trace viewers reject them.
        return json.dumps(repr(payload))
    return json.dumps(payload)


class _Strings:
    """JSON text of the few distinct names, domains and args prefixes, escaped once each."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.cats: dict[str, str] = {}
        self.args: dict[tuple[str, str | None, int | None], str] = {}

    def name(self, text: str) -> str:
        cached = self.names.get(text)
        if cached is None:
            cached = self.names[text] = json.dumps(text)
        return cached

    def cat(self, domain: str) -> str:
        cached = self.cats.get(domain)
        if cached is None:
            cached = self.cats[domain] = json.dumps(domain or DEFAULT_DOMAIN_CATEGORY)
        return cached

    def args_prefix(self, domain: str, category: str | None, color: int | None) -> str:
        key = (domain, category, color)
        cached = self.args.get(key)
        if cached is None:
            text = '{"domain":' + json.dumps(domain)
            if category is not None:
                text += ',"category":' + json.dumps(category)
            if color is not None:
                text += ',"color":"' + _color_text(color) + '"'
            cached = self.args[key] = text
        return cached


def _args(strings: _Strings, domain: str, category: str | None, color: int | None, payload: Payload, is_open: bool) -> str:
    text = strings.args_prefix(domain, category, color)
    if payload is not None:
        text += ',"payload":' + _payload_text(payload)
    if is_open:
        text += ',"open":true'
    return text + "}"


def _trace_events(recordings: Sequence[ProcessRecording]) -> Iterator[str]:
    strings = _Strings()
    async_id = 0
    for index, rec in enumerate(recordings):
        pid = rec.pid
        yield from _metadata_events(rec, index, strings)
        pushes = [r for r in rec.ranges if r.kind == "push"]
        # Start order, the longer first on ties: parents precede their children, which
        # viewers need to nest complete events on one thread correctly.
        pushes.sort(key=lambda r: (r.start_ns, -r.end_ns))
        name, cat, args = strings.name, strings.cat, _args
        for r in pushes:
            yield (
                f'{{"ph":"X","pid":{pid},"tid":{r.tid},"ts":{_us(r.start_ns)},"dur":{_us(r.end_ns - r.start_ns)},'
                f'"name":{name(r.name)},"cat":{cat(r.domain)},'
                f'"args":{args(strings, r.domain, r.category, r.color, r.payload, r.is_open)}}}'
            )
        for r in sorted((r for r in rec.ranges if r.kind != "push"), key=lambda r: (r.start_ns, -r.end_ns)):
            async_id += 1
            common = f'"pid":{pid},"id":"0x{async_id:x}","name":{name(r.name)},"cat":{cat(r.domain)}'
            yield (
                f'{{"ph":"b",{common},"tid":{r.tid},"ts":{_us(r.start_ns)},'
                f'"args":{args(strings, r.domain, r.category, r.color, r.payload, r.is_open)}}}'
            )
            end_tid = r.tid if r.end_tid is None else r.end_tid
            yield f'{{"ph":"e",{common},"tid":{end_tid},"ts":{_us(r.end_ns)}}}'
        for m in sorted(rec.marks, key=lambda m: m.ts_ns):
            yield (
                f'{{"ph":"i","s":"t","pid":{pid},"tid":{m.tid},"ts":{_us(m.ts_ns)},'
                f'"name":{name(m.name)},"cat":{cat(m.domain)},'
                f'"args":{args(strings, m.domain, m.category, m.color, m.payload, False)}}}'
            )


def metadata_events(recordings: Sequence[ProcessRecording]) -> Iterator[str]:
    """The process and thread naming events of `recordings` (the exporter writes the rest)."""
    strings = _Strings()
    for index, rec in enumerate(recordings):
        yield from _metadata_events(rec, index, strings)


def _metadata_events(rec: ProcessRecording, index: int, strings: _Strings) -> Iterator[str]:
    pid = rec.pid
    yield f'{{"ph":"M","pid":{pid},"tid":0,"name":"process_name","args":{{"name":{json.dumps(rec.display_name)}}}}}'
    yield f'{{"ph":"M","pid":{pid},"tid":0,"name":"process_sort_index","args":{{"sort_index":{index}}}}}'
    for tid, thread_name in sorted(rec.thread_names.items()):
        yield f'{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_name","args":{{"name":{strings.name(thread_name)}}}}}'
    if pid not in rec.thread_names:
        # On Linux the main thread's tid is the pid; naming it makes the timeline readable.
        # Flagged so that reading back does not invent a name the recording did not have.
        yield (
            f'{{"ph":"M","pid":{pid},"tid":{pid},"name":"thread_name",'
            f'"args":{{"name":"{MAIN_THREAD_NAME}","autonvtx_inferred":true}}}}'
        )


# Reading


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
        raise TraceFormatError(f'{where}: not a Chrome trace; expected a JSON object with a "traceEvents" list, or a list of events')
    return _TraceReader(where, other).read(events)


def _load_json(where: str) -> Any:
    try:
        data = Path(where).read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{where}: cannot read trace: {exc.strerror or exc}") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(f"{where}: gzip data is corrupt ({exc}); expected a gzip-compressed Chrome trace") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{where}: not a JSON file (invalid UTF-8 at byte {exc.start}); expected a Chrome trace") from None
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
                raise TraceFormatError(f'{self.where}: trace event #{index} is not a JSON object; expected {{"ph": ...}}')
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
                rec = processes.get(pid) or self._process(pid)
                if phase == "X":
                    end = ts + _ns(event.get("dur", 0))
                    rec.ranges.append(make_range(event, pid, tid, ts, end, "push", None))
                elif phase == "B":
                    stacks.setdefault((pid, tid), []).append((ts, event))
                elif phase == "E":
                    stack = stacks.get((pid, tid))
                    if not stack:
                        rec.unmatched_pops += 0 if self.has_info else 1
                        continue
                    start, begin = stack.pop()
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
                        end_tid = None if tid == start_tid else tid
                        rec.ranges.append(make_range(begin, pid, start_tid, start, ts, "startend", end_tid))
                else:
                    rec.marks.append(self._mark(event, pid, tid, ts))
            except (ValueError, TypeError, InvalidOperation) as exc:
                raise TraceFormatError(f"{self.where}: trace event #{index} (ph {event.get('ph')!r}): {exc}") from None
        self._close_unfinished(stacks, pending)
        order = sorted(processes, key=lambda pid: (self.sort_index.get(pid, len(processes)), pid))
        return [processes[pid] for pid in order]

    def _close_unfinished(
        self,
        stacks: Mapping[tuple[int, int], list[tuple[int, dict[str, Any]]]],
        pending: Mapping[tuple[int, object, object, object], list[tuple[int, int, dict[str, Any]]]],
    ) -> None:
        # A begin without its end was still open when the trace stopped: like the recorder,
        # end it at the flush time (else the last timestamp seen) and flag it.
        unfinished = [(pid, tid, start, begin, "push") for (pid, tid), stack in stacks.items() for start, begin in stack]
        unfinished += [(key[0], tid, start, begin, "startend") for key, opened in pending.items() for start, tid, begin in opened]
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
                rec.label = str(info.get("label") or "")
                cmdline = info.get("cmdline")
                if isinstance(cmdline, list):
                    rec.cmdline = [str(arg) for arg in cmdline]
                rec.flush_ns = _int(info.get("flush_ns"))
                rec.realtime_offset_ns = _int(info.get("realtime_offset_ns"))
                rec.dropped_events = _int(info.get("dropped_events"))
                rec.unmatched_pops = _int(info.get("unmatched_pops"))
                rec.ended_normally = info.get("ended_normally") is not False
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
                rec.label = args["name"]
        elif kind == "process_sort_index":
            if isinstance(args.get("sort_index"), int):
                self.sort_index[pid] = args["sort_index"]
            self._process(pid)
        elif kind == "thread_name":
            rec = self._process(pid)
            if isinstance(args.get("name"), str) and not args.get("autonvtx_inferred"):
                rec.thread_names[self._id(event.get("tid", 0))] = args["name"]

    def _fields(self, event: Mapping[str, Any]) -> tuple[tuple[str, str, str | None, int | None, bool], Payload]:
        args = event.get("args")
        if type(args) is not dict:
            args = {}
        payload = args.get("payload")
        if payload is not None:
            payload = _parse_payload(payload)
        raw = (event.get("name", ""), event.get("cat", ""), args.get("domain"), args.get("category"), args.get("color"), args.get("open"))
        try:
            # Few distinct (name, domain, ...) combinations recur a million times.
            fields = self.fields.get(raw)
        except TypeError:  # an unhashable value in a foreign trace
            return _decode_fields(*raw), payload
        if fields is None:
            fields = self.fields[raw] = _decode_fields(*raw)
        return fields, payload

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
