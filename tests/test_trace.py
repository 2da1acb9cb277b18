"""Chrome trace writing and reading, on recordings built by hand."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_env

from autonvtx.errors import TraceFormatError
from autonvtx.recorder.model import Mark, ProcessRecording, Range
from autonvtx.recorder.trace import read_chrome_trace, write_chrome_trace

# Past 2**53 ns (about 104 days of uptime): a float of microseconds cannot hold these exactly.
T0 = 9_876_543_210_123_457
PID = 4242
WORKER = 4250


def make_file(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def recording() -> ProcessRecording:
    """A main thread with nested ranges (given in pop order, children first), a worker thread,
    start/end ranges (one ending on another thread, one overlapping), marks and an open range."""
    ranges = [
        Range(PID, PID, "autonvtx", "Encoder.forward", T0 + 100, T0 + 400, color=0xFF00FF00),
        Range(PID, PID, "", "inner", T0 + 100, T0 + 400, payload=7),  # same span as its parent
        Range(PID, PID, "autonvtx", "Trainer.step", T0 + 0, T0 + 1_000, category="model", color=0xFF123456),
        Range(PID, PID, "autonvtx", "Trainer.step", T0 + 1_000, T0 + 2_001, payload=2.5),
        Range(PID, PID, "autonvtx", "train", T0 + 0, T0 + 5_000, is_open=True),
        Range(PID, WORKER, "torch", "aten::mm", T0 + 50, T0 + 60),
        Range(PID, PID, "data", "epoch", T0 + 10, T0 + 3_000, kind="startend"),
        Range(PID, PID, "data", "prefetch", T0 + 20, T0 + 4_000, kind="startend", end_tid=WORKER),
        Range(PID, WORKER, "data", "prefetch", T0 + 30, T0 + 5_000, kind="startend", is_open=True),
    ]
    marks = [
        Mark(PID, PID, "autonvtx", "checkpoint", T0 + 1_500, category="io", color=0xFFFF0000, payload=-3),
        Mark(PID, WORKER, "", "", T0 + 55),
    ]
    return ProcessRecording(
        pid=PID,
        ppid=1,
        cmdline=["python", "train.py", "--epochs", "3"],
        thread_names={WORKER: "loader-0"},
        ranges=ranges,
        marks=marks,
        dropped_events=3,
        unmatched_pops=2,
        flush_ns=T0 + 5_000,
        realtime_offset_ns=1_700_000_000_000_000_000,
    )


def other_process() -> ProcessRecording:
    return ProcessRecording(
        pid=77,
        label="rank 1",
        thread_names={77: "MainThread"},
        ranges=[Range(77, 77, "autonvtx", "step", 5, 9)],
        flush_ns=10,
    )


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as stream:
        document: dict[str, Any] = json.load(stream)
    return document


def events(document: dict[str, Any], phase: str) -> list[dict[str, Any]]:
    return [e for e in document["traceEvents"] if e["ph"] == phase]


def range_key(r: Range) -> tuple[Any, ...]:
    return (r.pid, r.tid, r.start_ns, -r.end_ns, r.kind, r.domain, r.name)


@pytest.fixture
def written(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "run.json"
    write_chrome_trace([recording(), other_process()], path, metadata={"command": "autonvtx run train.py"})
    return load(path)


def test_document_is_a_trace_object(written: dict[str, Any]) -> None:
    assert set(written) == {"traceEvents", "displayTimeUnit", "otherData"}
    assert written["displayTimeUnit"] == "ns"
    assert {e["ph"] for e in written["traceEvents"]} == {"M", "X", "b", "e", "i"}
    for event in written["traceEvents"]:
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)


def test_complete_events_nest_per_thread(written: dict[str, Any]) -> None:
    by_thread: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for event in events(written, "X"):
        by_thread.setdefault((event["pid"], event["tid"]), []).append(event)
    assert set(by_thread) == {(PID, PID), (PID, WORKER), (77, 77)}
    for thread_events in by_thread.values():
        stack: list[tuple[float, float]] = []
        for event in thread_events:
            start, end = event["ts"], event["ts"] + event["dur"]
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack:
                assert stack[-1][0] <= start and end <= stack[-1][1], f"{event['name']} is not inside its parent"
            stack.append((start, end))
    main = [e["name"] for e in by_thread[(PID, PID)]]
    # Parents first; on equal spans the order the recording gave is kept.
    assert main == ["train", "Trainer.step", "Encoder.forward", "inner", "Trainer.step"]


def test_complete_event_fields(written: dict[str, Any]) -> None:
    step = next(e for e in events(written, "X") if e["name"] == "Trainer.step")
    assert step["cat"] == "autonvtx"
    assert step["args"] == {"domain": "autonvtx", "category": "model", "color": "#123456"}
    forward = next(e for e in events(written, "X") if e["name"] == "Encoder.forward")
    assert forward["args"] == {"domain": "autonvtx", "color": "#00ff00"}
    inner = next(e for e in events(written, "X") if e["name"] == "inner")
    assert inner["cat"] == "(default)"
    assert inner["args"] == {"domain": "", "payload": 7}


def test_open_ranges_are_flagged(written: dict[str, Any]) -> None:
    flagged = sorted(e["name"] for e in written["traceEvents"] if e.get("args", {}).get("open") is True)
    assert flagged == ["prefetch", "train"]
    train = next(e for e in events(written, "X") if e["name"] == "train")
    assert train["dur"] == 5.0


def test_timestamps_keep_nanoseconds_in_the_text(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    write_chrome_trace([recording()], path)
    text = path.read_text()
    assert '"ts":9876543210123.557,"dur":0.300,"name":"Encoder.forward"' in text
    assert '"ts":9876543210124.457,"dur":1.001,' in text
    # Exactly three decimals everywhere: no float noise such as 0.30000000000000004.
    for number in re.findall(r'"(?:ts|dur)":(-?[0-9.eE+]+)', text):
        assert re.fullmatch(r"-?\d+\.\d{3}", number), number


@pytest.mark.parametrize("name", ["run.json", "run.json.gz"])
def test_round_trip_gives_identical_recordings(tmp_path: Path, name: str) -> None:
    original = [recording(), other_process()]
    path = tmp_path / name
    write_chrome_trace(original, path)

    back = read_chrome_trace(path)

    assert [r.pid for r in back] == [PID, 77]
    for before, after in zip(original, back):
        assert sorted(after.ranges, key=range_key) == sorted(before.ranges, key=range_key)
        assert sorted(after.marks, key=lambda m: m.ts_ns) == sorted(before.marks, key=lambda m: m.ts_ns)
        assert after.thread_names == before.thread_names  # the inferred MainThread is not added
        assert (after.ppid, after.cmdline, after.label, after.display_name) == (
            before.ppid,
            before.cmdline,
            before.label,
            before.display_name,
        )
        assert (after.dropped_events, after.unmatched_pops, after.flush_ns, after.realtime_offset_ns) == (
            before.dropped_events,
            before.unmatched_pops,
            before.flush_ns,
            before.realtime_offset_ns,
        )


def test_gzip_form(tmp_path: Path) -> None:
    path = tmp_path / "run.json.gz"
    write_chrome_trace([recording()], path)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert len(events(load(path), "X")) == 6


def test_start_end_ranges_are_async_pairs(written: dict[str, Any]) -> None:
    begins, ends = events(written, "b"), events(written, "e")
    assert sorted(e["name"] for e in begins) == ["epoch", "prefetch", "prefetch"]
    assert len({e["id"] for e in begins}) == 3
    for begin in begins:
        (end,) = [e for e in ends if e["id"] == begin["id"]]
        assert (end["cat"], end["name"], end["pid"]) == (begin["cat"], begin["name"], begin["pid"])
        assert end["ts"] >= begin["ts"]
    crossing = next(e for e in begins if e["name"] == "prefetch" and e["tid"] == PID)
    assert next(e for e in ends if e["id"] == crossing["id"])["tid"] == WORKER
    assert crossing["args"] == {"domain": "data"}


def test_marks_are_thread_instants(written: dict[str, Any]) -> None:
    instants = events(written, "i")
    assert [(e["name"], e["s"], e["tid"]) for e in instants] == [("", "t", WORKER), ("checkpoint", "t", PID)]
    assert instants[1]["args"] == {"domain": "autonvtx", "category": "io", "color": "#ff0000", "payload": -3}


def test_metadata_events(written: dict[str, Any]) -> None:
    meta = {(e["pid"], e["tid"], e["name"]): e["args"] for e in events(written, "M")}
    assert meta[(PID, 0, "process_name")] == {"name": "python train.py --epochs 3"}
    assert meta[(77, 0, "process_name")] == {"name": "rank 1"}
    assert meta[(PID, 0, "process_sort_index")] == {"sort_index": 0}
    assert meta[(77, 0, "process_sort_index")] == {"sort_index": 1}
    assert meta[(PID, WORKER, "thread_name")] == {"name": "loader-0"}
    assert meta[(PID, PID, "thread_name")]["name"] == "MainThread"  # inferred: tid == pid
    assert meta[(77, 77, "thread_name")] == {"name": "MainThread"}  # recorded, so not flagged


def test_other_data(written: dict[str, Any]) -> None:
    other = written["otherData"]
    assert other["command"] == "autonvtx run train.py"
    assert other["clock_domain"] == "LINUX_CLOCK_MONOTONIC"
    assert (other["dropped_events"], other["unmatched_pops"]) == (3, 2)
    first = other["processes"][0]
    assert first["flush_ns"] == T0 + 5_000
    assert first["realtime_offset_ns"] == 1_700_000_000_000_000_000
    assert [p["pid"] for p in other["processes"]] == [PID, 77]


@pytest.mark.parametrize("payload", [0, -(2**63), 2**64 - 1, 0.1, -1.5e-300, math.inf, -math.inf])
def test_payloads_round_trip(tmp_path: Path, payload: int | float) -> None:
    path = tmp_path / "p.json"
    rec = ProcessRecording(pid=1, ranges=[Range(1, 1, "d", "r", 0, 1, payload=payload)])
    write_chrome_trace([rec], path)
    json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    (back,) = read_chrome_trace(path)[0].ranges
    assert back.payload == payload and type(back.payload) is type(payload)


def test_nan_payload_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    write_chrome_trace([ProcessRecording(pid=1, marks=[Mark(1, 1, "d", "m", 0, payload=math.nan)])], path)
    (back,) = read_chrome_trace(path)[0].marks
    assert isinstance(back.payload, float) and math.isnan(back.payload)


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = make_file(tmp_path / "run.json", "old")
    broken = ProcessRecording(pid=1, ranges=[Range(1, 1, "d", object(), 0, 1)])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        write_chrome_trace([broken], path)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["run.json"]


def test_written_file_is_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    old = os.umask(0o022)
    try:
        write_chrome_trace([recording()], path)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_reads_a_foreign_trace(tmp_path: Path) -> None:
    path = make_file(
        tmp_path / "foreign.json",
        """\
        [
          {"ph": "M", "pid": 1, "tid": "stream 7", "name": "thread_name", "args": {"name": "gpu"}},
          {"ph": "B", "pid": 1, "tid": 2, "ts": 10, "name": "outer", "cat": "app"},
          {"ph": "X", "pid": 1, "tid": 2, "ts": 11.5, "dur": 2, "name": "leaf"},
          {"ph": "E", "pid": 1, "tid": 2, "ts": 20},
          {"ph": "E", "pid": 1, "tid": 2, "ts": 21},
          {"ph": "B", "pid": 1, "tid": 2, "ts": 30, "name": "never ends"},
          {"ph": "X", "pid": 1, "tid": "stream 7", "ts": 40, "dur": 1.25, "name": "kernel"},
          {"ph": "C", "pid": 1, "ts": 41, "name": "counter", "args": {"v": 1}},
          {"ph": "I", "pid": 1, "tid": 2, "ts": 42, "name": "tick"}
        ]
        """,
    )
    (rec,) = read_chrome_trace(path)
    got = sorted((r.tid, r.name, r.domain, r.start_ns, r.end_ns, r.is_open) for r in rec.ranges)
    stream = next(tid for tid, name in rec.thread_names.items() if name == "gpu")
    assert got == sorted(
        [
            (2, "outer", "app", 10_000, 20_000, False),
            (2, "leaf", "", 11_500, 13_500, False),
            (2, "never ends", "", 30_000, 42_000, True),  # closed at the last timestamp seen
            (stream, "kernel", "", 40_000, 41_250, False),
        ]
    )
    assert rec.unmatched_pops == 1
    assert [(m.name, m.ts_ns) for m in rec.marks] == [("tick", 42_000)]


GZIP_OF_JSON = gzip.compress(b'{"traceEvents": []}', mtime=0)  # the same test id in every xdist worker


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", r"not a JSON file \(Expecting value at line 1, column 1\)"),
        ("{not json", r"not a JSON file \(.* at line 1"),
        ('{"traceEvents": 3}', r'not a Chrome trace; expected a JSON object with a "traceEvents" list'),
        ('{"events": []}', r"not a Chrome trace"),
        ("42", r"not a Chrome trace"),
        (b"\x1f\x8b\x08\x00garbage", r"gzip data is corrupt"),
        (GZIP_OF_JSON[:-6], r"gzip data is corrupt"),
        (b"\xff\xfe{}", r"not a JSON file \(invalid UTF-8 at byte 0\)"),
        ('{"traceEvents": [1]}', r"trace event #0 is not a JSON object"),
        (
            '{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": "soon"}]}',
            r"trace event #0 \(ph 'X'\): expected a number of microseconds, got 'soon'",
        ),
        ('[{"ph": "M"}, {"ph": "i", "pid": 1, "tid": 1}]', r"trace event #1 \(ph 'i'\): expected a number"),
    ],
)
def test_bad_trace_files(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = make_file(tmp_path / "bad.json", content)
    with pytest.raises(TraceFormatError, match=re.escape(str(path)) + ": " + message):
        read_chrome_trace(path)


def test_missing_trace_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(TraceFormatError, match=re.escape(str(path)) + ": cannot read trace: No such file"):
        read_chrome_trace(path)


def test_empty_gzip_trace_reads_as_nothing(tmp_path: Path) -> None:
    path = make_file(tmp_path / "empty.json.gz", GZIP_OF_JSON)
    assert read_chrome_trace(path) == []


@pytest.mark.parametrize("color", [0x000000FF, 0x800000FF, 0xFF0000FF])
def test_colors_are_written_opaque_whatever_their_alpha(tmp_path: Path, color: int) -> None:
    # nvtx.annotate(color="blue") records 0x000000ff: alpha 00 would read as transparent in CSS.
    rec = ProcessRecording(pid=1, ranges=[Range(1, 1, "", "r", 1_000, 2_000, color=color)])
    write_chrome_trace([rec], tmp_path / "t.json")
    (event,) = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e["ph"] == "X"]
    assert event["args"]["color"] == "#0000ff"


def test_writing_at_exit_leaves_the_process_umask_alone(tmp_path: Path) -> None:
    # Issue 21, item 10: reading the umask (os.umask(0) then back) flips it for every thread
    # of the program while the trace is written; the file gets the umask's mode all the same.
    make_file(
        tmp_path / "prog.py",
        """\
        import os, sys
        real = os.umask
        def spy(mask):
            sys.stderr.write(f"umask({mask:o}) called\\n")
            return real(mask)
        os.umask = spy
        """,
    )
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "--trace", "t.json", "prog.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=autonvtx_env(),
        preexec_fn=lambda: os.umask(0o027),
    )
    assert done.returncode == 0, done.stderr
    assert "umask(" not in done.stderr
    assert (tmp_path / "t.json").stat().st_mode & 0o777 == 0o640
