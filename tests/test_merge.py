"""`autonvtx merge`: traces on one clock line up as they are; another host's are moved through
CLOCK_REALTIME; colliding pids get new numbers; the command refuses bad input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import autonvtx_env

from autonvtx.errors import TraceFormatError
from autonvtx.recorder.merge import merge_traces, read_trace_metadata
from autonvtx.recorder.model import Mark, ProcessRecording, Range
from autonvtx.recorder.trace import read_chrome_trace, write_chrome_trace

BOOT_A = "aaaaaaaa-0000-0000-0000-000000000000"
BOOT_B = "bbbbbbbb-0000-0000-0000-000000000000"
OFFSET_A = 1_700_000_000_000_000_000
OFFSET_B = OFFSET_A + 5_000_000  # host B's monotonic clock reads 5 ms less for the same instant


def process(
    pid: int, label: str, start: int, *, offset: int, ppid: int = 1, names: tuple[str, ...] = ("step",)
) -> ProcessRecording:
    ranges = [Range(pid, pid, "train", name, start + i * 100, start + i * 100 + 50) for i, name in enumerate(names)]
    return ProcessRecording(
        pid=pid,
        ppid=ppid,
        label=label,
        ranges=ranges,
        marks=[Mark(pid, pid, "train", "tick", start + 10)],
        flush_ns=start + 1000,
        realtime_offset_ns=offset,
        thread_names={pid: "MainThread"},
    )


def trace(path: Path, recordings: list[ProcessRecording], **metadata: object) -> str:
    write_chrome_trace(recordings, path, metadata=metadata)
    return str(path)


def test_traces_on_one_clock_line_up_unchanged(tmp_path: Path) -> None:
    rank0 = trace(
        tmp_path / "t.0.json",
        [
            process(100, "rank 0: python train.py", 5_000, offset=OFFSET_A),
            process(101, "rank 0: Process-1", 6_000, offset=OFFSET_A, ppid=100),
        ],
        host="a",
        boot_id=BOOT_A,
        rank=0,
        world_size=2,
    )
    rank1 = trace(
        tmp_path / "t.1.json",
        [process(200, "rank 1: python train.py", 5_500, offset=OFFSET_A + 7)],
        host="a",
        boot_id=BOOT_A,
        rank=1,
        world_size=2,
    )
    notes = merge_traces([rank0, rank1], str(tmp_path / "all.json"))
    assert notes == []
    merged = read_chrome_trace(tmp_path / "all.json")
    assert [(r.pid, r.label) for r in merged] == [
        (100, "rank 0: python train.py"),
        (101, "rank 0: Process-1"),
        (200, "rank 1: python train.py"),
    ]
    assert [r.start_ns for r in merged[2].ranges] == [5_500]
    assert merged[2].marks[0].ts_ns == 5_510
    other = read_trace_metadata(str(tmp_path / "all.json"))
    assert other["boot_id"] == BOOT_A
    assert [(m["path"], m["rank"], m["shift_ns"]) for m in other["merged_from"]] == [(rank0, 0, 0), (rank1, 1, 0)]


def test_another_hosts_trace_is_moved_onto_the_first_clock_and_colliding_pids_renumbered(tmp_path: Path) -> None:
    first = trace(
        tmp_path / "a.json",
        [process(100, "rank 0: python train.py", 5_000, offset=OFFSET_A)],
        host="a",
        boot_id=BOOT_A,
        rank=0,
    )
    second = trace(
        tmp_path / "b.json.gz",
        [
            process(100, "rank 1: python train.py", 9_000, offset=OFFSET_B),
            process(101, "rank 1: Process-1", 9_200, offset=OFFSET_B + 2, ppid=100),
        ],
        host="b",
        boot_id=BOOT_B,
        rank=1,
    )
    notes = merge_traces([first, second], str(tmp_path / "all.json.gz"))
    merged = read_chrome_trace(tmp_path / "all.json.gz")
    shift = OFFSET_B - OFFSET_A  # host b's offset (the low median of its processes'), minus host a's
    assert [r.pid for r in merged] == [100, 102, 101]
    moved, worker = merged[1], merged[2]
    assert moved.label == "rank 1: python train.py [pid 100]"
    assert moved.thread_names[100] == "MainThread"  # the main thread keeps its tid and its name
    assert worker.ppid == 102  # its parent's new number
    assert [r.start_ns for r in moved.ranges] == [9_000 + shift]
    assert moved.marks[0].ts_ns == 9_010 + shift
    assert moved.flush_ns == 10_000 + shift
    assert moved.realtime_offset_ns + moved.ranges[0].start_ns == OFFSET_B + 9_000  # the same instant
    assert any("pid 100 is taken by an earlier trace: shown as pid 102" in note for note in notes)
    assert any("aligned through CLOCK_REALTIME" in note for note in notes)


def test_traces_without_clock_metadata_merge_unshifted(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.json"
    foreign.write_text(
        json.dumps(
            [
                {"ph": "X", "pid": 7, "tid": 7, "ts": 1.5, "dur": 1, "name": "kernel", "cat": "gpu"},
            ]
        )
    )
    ours = trace(
        tmp_path / "ours.json", [process(100, "python train.py", 5_000, offset=OFFSET_A)], host="a", boot_id=BOOT_A
    )
    assert read_trace_metadata(str(foreign)) == {}
    merge_traces([ours, str(foreign)], str(tmp_path / "all.json"))
    merged = read_chrome_trace(tmp_path / "all.json")
    assert [(r.pid, [x.start_ns for x in r.ranges]) for r in merged] == [(100, [5_000]), (7, [1_500])]


def test_missing_processes_are_carried_into_the_merged_trace(tmp_path: Path) -> None:
    missing = [{"pid": 101, "ppid": 100, "label": "crasher", "reason": "ended without writing"}]
    first = trace(
        tmp_path / "a.json",
        [process(100, "python a.py", 5_000, offset=OFFSET_A)],
        boot_id=BOOT_A,
        missing_processes=missing,
    )
    merge_traces([first], str(tmp_path / "all.json"))
    assert read_trace_metadata(str(tmp_path / "all.json"))["missing_processes"] == missing


def test_metadata_of_a_gzip_trace_is_read_from_its_first_line(tmp_path: Path) -> None:
    path = trace(tmp_path / "t.json.gz", [process(100, "python a.py", 5_000, offset=OFFSET_A)], boot_id=BOOT_A, rank=3)
    other = read_trace_metadata(path)
    assert (other["boot_id"], other["rank"], other["processes"][0]["pid"]) == (BOOT_A, 3, 100)
    with gzip.open(path, "rt") as stream:
        assert stream.readline().rstrip().endswith('"traceEvents":[')


def test_unreadable_trace_is_a_trace_format_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceFormatError, match="bad.json"):
        read_trace_metadata(str(bad))


def merge_command(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", "merge", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=60,
    )


def test_merge_command(tmp_path: Path) -> None:
    trace(tmp_path / "t.0.json", [process(100, "rank 0: python train.py", 5_000, offset=OFFSET_A)], boot_id=BOOT_A)
    trace(tmp_path / "t.1.json", [process(200, "rank 1: python train.py", 5_000, offset=OFFSET_A)], boot_id=BOOT_A)
    done = merge_command("t.0.json", "t.1.json", "-o", "all.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "autonvtx: merged 2 traces into all.json\n"
    assert [r.pid for r in read_chrome_trace(tmp_path / "all.json")] == [100, 200]


def test_merge_command_counts_in_words(tmp_path: Path) -> None:
    trace(tmp_path / "t.0.json", [process(100, "python a.py", 5_000, offset=OFFSET_A)], boot_id=BOOT_A)
    done = merge_command("t.0.json", "-o", "all.json", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "autonvtx: merged 1 trace into all.json\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["t.0.json", "t.0.json", "-o", "all.json"],
            "autonvtx: merge: 't.0.json': the same file as 't.0.json'; expected each trace once\n",
        ),
        (
            ["t.0.json", "./t.0.json", "-o", "all.json"],
            "autonvtx: merge: './t.0.json': the same file as 't.0.json'; expected each trace once\n",
        ),
        (["t.0.json", "nope.json", "-o", "all.json"], "autonvtx: merge: no such file 'nope.json'\n"),
        (
            ["t.0.json", "-o", "all.txt"],
            "autonvtx: merge: -o: 'all.txt' must end in .json, .json.gz, .pftrace or .perfetto-trace",
        ),
        (["t.0.json"], "Missing option '-o'"),
    ],
)
def test_merge_command_refuses_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    trace(tmp_path / "t.0.json", [process(100, "python a.py", 5_000, offset=OFFSET_A)], boot_id=BOOT_A)
    done = merge_command(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "all.json").exists()


def test_merge_writes_perfetto_with_the_same_events_as_json(tmp_path: Path) -> None:
    # One trace writer (the native exporter) for both formats: the merged .pftrace reads back
    # as the merged .json does, open ranges, start/end pairs, payloads and colors included.
    from autonvtx.recorder.perfetto import read_trace

    first = process(100, "rank 0: python train.py", 5_000, offset=OFFSET_A, names=("step", "eval"))
    first.ranges += [
        Range(100, 101, "train", "load", 5_020, 5_900, "startend", "io", 0xFF00FF00, 7, end_tid=100),
        Range(100, 100, "", "open", 5_950, 6_000, is_open=True, payload=2.5),
    ]
    first.thread_names[101] = "loader"
    rank0 = trace(tmp_path / "t.0.json", [first], host="a", boot_id=BOOT_A)
    rank1 = trace(
        tmp_path / "t.1.json",
        [process(200, "rank 1: python train.py", 5_500, offset=OFFSET_A)],
        host="a",
        boot_id=BOOT_A,
    )
    merge_traces([rank0, rank1], str(tmp_path / "all.json"))
    merge_traces([rank0, rank1], str(tmp_path / "all.pftrace"))
    as_json, as_perfetto = read_trace(tmp_path / "all.json"), read_trace(tmp_path / "all.pftrace")

    def events(recordings: list[ProcessRecording]) -> list[object]:
        # Perfetto puts a start/end range on a track of its process, not of a thread.
        return [
            (
                r.pid,
                sorted(
                    (x.tid if x.kind == "push" else -1, x.domain, x.name, x.start_ns, x.end_ns, x.kind, x.is_open)
                    for x in r.ranges
                ),
                sorted((m.tid, m.name, m.ts_ns) for m in r.marks),
            )
            for r in recordings
        ]

    assert events(as_perfetto) == events(as_json)
    assert len(as_json[0].ranges) == 4 and any(r.is_open for r in as_json[0].ranges)
    load = next(r for r in as_json[0].ranges if r.name == "load")
    assert (load.category, load.color, load.payload, load.end_tid) == ("io", 0xFF00FF00, 7, 100)
