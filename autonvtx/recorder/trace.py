"""Chrome trace-event JSON (Perfetto, chrome://tracing) written from recordings (read back by `chrome`)."""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, Union

from autonvtx.recorder.chrome import DEFAULT_DOMAIN_CATEGORY, read_chrome_trace  # noqa: F401 (re-exported)
from autonvtx.recorder.model import Payload, ProcessRecording, valid_text

StrPath = Union[str, "os.PathLike[str]"]

MAIN_THREAD_NAME = "MainThread"
CLOCK_DOMAIN = "LINUX_CLOCK_MONOTONIC"  # Chrome's own name for this clock in trace metadata
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
            "label": valid_text(r.label),
            "cmdline": [valid_text(arg) for arg in r.cmdline],
            "flush_ns": r.flush_ns,
            "realtime_offset_ns": r.realtime_offset_ns,
            "dropped_events": r.dropped_events,
            "unmatched_pops": r.unmatched_pops,
            "ended_normally": r.ended_normally,
            "status": r.status,  # the label never holds it: the track's name adds it (`track_name`)
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


def _args(
    strings: _Strings, domain: str, category: str | None, color: int | None, payload: Payload, is_open: bool
) -> str:
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
    yield f'{{"ph":"M","pid":{pid},"tid":0,"name":"process_name","args":{{"name":{json.dumps(rec.track_name)}}}}}'
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
