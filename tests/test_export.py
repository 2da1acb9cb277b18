"""The native exporter: JSON, Perfetto and statistics streamed from the recorder's files, checked
against the Python reader of the same files and against Perfetto's own compiled protos."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, make_file

from autonvtx import environment
from autonvtx.recorder import native
from autonvtx.recorder.recording import read_directory
from autonvtx.recorder.results import Request, write_results
from autonvtx.recorder.trace import read_chrome_trace
from autonvtx.stats.python_twin import summarize

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

PROGRAM = """
    import threading, nvtx
    domain = nvtx.get_domain("lib")
    def work(n, tag):
        for i in range(n):
            with nvtx.annotate("step", color="blue", domain="train"):
                with nvtx.annotate(f"inner {tag}", payload=i, category="io"):
                    pass
                domain.push_range(domain.get_event_attributes(message="lib.call", payload=1.5))
                domain.pop_range()
        nvtx.mark("done", color=0xFF00FF00)
        nvtx.mark("tab\\tquote\\"back\\\\slash \\x01 é 𝄞")
    threads = [threading.Thread(target=work, args=(200, t)) for t in range(3)]
    for t in threads:
        t.start()
    work(100, "main")
    for t in threads:
        t.join()
    r = nvtx.start_range("async", color="red")
    nvtx.end_range(r)
    nvtx.push_range("left open")
"""


def record(tmp_path: Path, source: str = PROGRAM) -> Path:
    program = make_file(tmp_path / "prog.py", source)
    out = tmp_path / "rec"
    out.mkdir()
    env = dict(os.environ)
    env.pop(environment.RECORDER_MODE, None)
    env[environment.NVTX_INJECTION64_PATH] = str(native.library_path())
    env[environment.RECORD_DIR] = str(out)
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, str(program)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return out


def rgb(color: int | None) -> int | None:
    return None if color is None else color & 0xFFFFFF  # traces write colors opaque


def range_key(r: Any) -> tuple[object, ...]:
    return (
        r.pid,
        r.tid,
        r.domain,
        r.name,
        r.start_ns,
        r.end_ns,
        r.kind,
        r.category,
        rgb(r.color),
        r.payload,
        r.is_open,
    )


def test_json_trace_holds_exactly_what_the_python_reader_reads(tmp_path: Path) -> None:
    directory = record(tmp_path)
    expected = read_directory(directory)
    trace = tmp_path / "t.json"
    write_results(str(directory), Request(trace=str(trace)))
    back = read_chrome_trace(trace)
    assert [r.pid for r in back] == [r.pid for r in expected]
    for before, after in zip(expected, back):
        assert sorted(map(range_key, after.ranges)) == sorted(map(range_key, before.ranges))
        assert sorted((m.tid, m.name, m.ts_ns, rgb(m.color)) for m in after.marks) == sorted(
            (m.tid, m.name, m.ts_ns, rgb(m.color)) for m in before.marks
        )
    names = Counter(r.name for r in back[0].ranges)
    assert names["step"] == 700 and names["lib.call"] == 700 and names["inner main"] == 100
    assert [r.name for r in back[0].ranges if r.is_open] == ["left open"]
    # nvtx.annotate(color="blue") records 0x000000ff (alpha 0): written opaque, never "#0000ff00".
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["args"]["color"] for e in events if e.get("name") == "step"} == {"#0000ff"}


def test_native_statistics_equal_the_python_summary(tmp_path: Path) -> None:
    directory = record(tmp_path)
    expected = {(s.domain, s.name): s for s in summarize(read_directory(directory))}
    results = write_results(str(directory), Request(summary="-"))
    got = {(s.domain, s.name): s for s in results.stats}
    assert got.keys() == expected.keys()
    for key, s in expected.items():
        g = got[key]
        assert (g.count, g.total_ns, g.self_ns, g.min_ns, g.max_ns, g.open_count) == (
            s.count,
            s.total_ns,
            s.self_ns,
            s.min_ns,
            s.max_ns,
            s.open_count,
        ), key
        assert g.median_ns == s.median_ns and g.mean_ns == pytest.approx(s.mean_ns)
        assert g.stddev_ns == pytest.approx(s.stddev_ns, rel=1e-6, abs=1e-3)
        assert g.percent == pytest.approx(s.percent)


def perfetto_slices(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], dict[int, str]]:
    """Every slice (pid, tid, name, start, end, depth) and instant of a .pftrace, parsed with
    Perfetto's own compiled Trace proto; and the thread names."""
    pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    trace = pb2.Trace()
    trace.ParseFromString(path.read_bytes())
    tracks: dict[int, tuple[int, int]] = {}
    thread_names: dict[int, str] = {}
    names: dict[tuple[int, int], str] = {}
    defaults: dict[int, int] = {}
    stacks: dict[int, list[tuple[str, int]]] = {}
    slices, instants = [], []
    for packet in trace.packet:
        seq = packet.trusted_packet_sequence_id
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if d.HasField("thread"):
                tracks[d.uuid] = (d.thread.pid, d.thread.tid)
                thread_names[d.thread.tid] = d.thread.thread_name
            elif d.HasField("process"):
                tracks[d.uuid] = (d.process.pid, 0)
            else:
                tracks[d.uuid] = (tracks[d.parent_uuid][0], -1)
        if packet.HasField("trace_packet_defaults"):
            assert packet.trace_packet_defaults.timestamp_clock_id == pb2.BUILTIN_CLOCK_MONOTONIC
            defaults[seq] = packet.trace_packet_defaults.track_event_defaults.track_uuid
        for entry in packet.interned_data.event_names:
            names[(seq, entry.iid)] = entry.name
        if not packet.HasField("track_event"):
            continue
        event = packet.track_event
        track = event.track_uuid if event.HasField("track_uuid") else defaults[seq]
        stack = stacks.setdefault(track, [])
        if event.type == pb2.TrackEvent.TYPE_SLICE_BEGIN:
            stack.append((names[(seq, event.name_iid)], packet.timestamp))
        elif event.type == pb2.TrackEvent.TYPE_SLICE_END:
            name, start = stack.pop()
            slices.append((*tracks[track], name, start, packet.timestamp, len(stack)))
        else:
            instants.append((*tracks[track], names[(seq, event.name_iid)], packet.timestamp))
    assert not any(stacks.values())
    return slices, instants, thread_names


def json_slices(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], dict[int, str]]:
    """The same from a JSON trace; depth from the intervals of each thread's complete events."""
    events = json.loads(path.read_text())["traceEvents"]
    ns = lambda us: round(float(us) * 1000)  # noqa: E731
    slices = []
    by_thread: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
    for e in events:
        if e["ph"] == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]))
        elif e["ph"] == "b":
            end = next(x for x in events if x["ph"] == "e" and x["id"] == e["id"])
            slices.append((e["pid"], -1, e["name"], ns(e["ts"]), ns(end["ts"]), 0))
    for (pid, tid), ranges in by_thread.items():
        stack: list[int] = []
        for start, end, name in sorted(ranges, key=lambda r: (r[0], -r[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            slices.append((pid, tid, name, start, end, len(stack)))
            stack.append(end)
    instants = [(e["pid"], e["tid"], e["name"], ns(e["ts"])) for e in events if e["ph"] == "i"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    return slices, instants, names


def test_perfetto_trace_has_every_range_name_nesting_and_thread_of_the_json(tmp_path: Path) -> None:
    directory = record(tmp_path)
    write_results(str(directory), Request(trace=str(tmp_path / "t.json")))
    write_results(str(directory), Request(trace=str(tmp_path / "t.pftrace")))
    p_slices, p_instants, p_names = perfetto_slices(tmp_path / "t.pftrace")
    j_slices, j_instants, j_names = json_slices(tmp_path / "t.json")
    assert len(p_slices) == 2 * 700 + 700 + 2 and sorted(p_slices) == sorted(j_slices)
    assert sorted(p_instants) == sorted(j_instants)
    assert p_names == j_names
    assert (tmp_path / "t.pftrace").stat().st_size < 0.5 * (tmp_path / "t.json").stat().st_size


def test_summary_and_merge_read_perfetto_traces(tmp_path: Path) -> None:
    directory = record(tmp_path)
    write_results(str(directory), Request(trace=str(tmp_path / "t.json")))
    write_results(str(directory), Request(trace=str(tmp_path / "t.pftrace")))
    from autonvtx.recorder.perfetto import read_trace

    from_json, from_perfetto = read_trace(tmp_path / "t.json"), read_trace(tmp_path / "t.pftrace")
    key = lambda r: (r.tid, r.domain, r.name, r.start_ns, r.end_ns, r.category, rgb(r.color), r.payload)  # noqa: E731
    assert sorted(map(key, from_perfetto[0].ranges)) == sorted(map(key, from_json[0].ranges))
    merged = subprocess.run(
        [
            sys.executable,
            "-m",
            "autonvtx",
            "merge",
            str(tmp_path / "t.pftrace"),
            str(tmp_path / "t.json"),
            "-o",
            str(tmp_path / "m.json"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert merged.returncode == 0, merged.stderr
    assert len(read_chrome_trace(tmp_path / "m.json")) == 2


def test_sigkilled_child_keeps_its_spilled_events_in_the_parents_trace(tmp_path: Path) -> None:
    child = make_file(
        tmp_path / "child.py",
        """
        import os, signal, nvtx
        for i in range(1000):
            with nvtx.annotate("child.step"):
                pass
        nvtx.push_range("killed while open")
        # Wait until the recorder's spiller has handed the events to the file, then die hard.
        path = os.path.join(os.environ["AUTONVTX_RECORD_DIR"], f"{os.getpid()}.anr")
        while not os.path.exists(path) or os.path.getsize(path) < 1000 * 40:
            os.sched_yield()
        os.kill(os.getpid(), signal.SIGKILL)
    """,
    )
    parent = make_file(
        tmp_path / "parent.py",
        f"""
        import subprocess, sys
        code = subprocess.call([sys.executable, {str(child)!r}])
        print("child status", code)
    """,
    )
    run = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "--trace", "t.json", str(parent)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 0, run.stderr
    assert f"child status {-signal.SIGKILL}" in run.stdout
    recordings = read_chrome_trace(tmp_path / "t.json")
    (killed,) = [r for r in recordings if any(x.name == "child.step" for x in r.ranges)]
    assert sum(x.name == "child.step" for x in killed.ranges) == 1000
    assert not killed.ended_normally and killed.status == "ended abnormally"
    assert killed.track_name == f"{killed.label} (ended abnormally)" and "abnormally" not in killed.label
    (open_range,) = [x for x in killed.ranges if x.name == "killed while open"]
    assert open_range.is_open
    assert "ended abnormally" in run.stderr
    assert not (tmp_path / "t.json.recording").exists()


def test_recover_writes_the_trace_of_a_killed_run(tmp_path: Path) -> None:
    program = make_file(
        tmp_path / "prog.py",
        """
        import os, nvtx
        for i in range(500):
            with nvtx.annotate("step"):
                pass
        path = os.path.join(os.environ["AUTONVTX_RECORD_DIR"], f"{os.getpid()}.anr")
        while not os.path.exists(path) or os.path.getsize(path) < 500 * 40:
            os.sched_yield()
        os._exit(3)
    """,
    )
    # Recorded as `autonvtx run --trace t.json` records, without the watcher that would write
    # the trace itself (tests/test_recorder_watcher.py).
    spill = tmp_path / "t.json.recording"
    spill.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        environment.NVTX_INJECTION64_PATH: str(native.library_path()),
        environment.RECORD_DIR: str(spill),
    }
    run = subprocess.run(
        [sys.executable, str(program)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 3
    recover = subprocess.run(
        [sys.executable, "-m", "autonvtx", "recover", str(spill), "-o", "back.pftrace"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert recover.returncode == 0, recover.stderr
    assert "ended abnormally" in recover.stderr
    assert "(ended abnormally)) ended abnormally" not in recover.stderr  # said once (issue 23)
    from autonvtx.recorder.perfetto import read_trace

    (rec,) = read_trace(tmp_path / "back.pftrace")
    assert sum(r.name == "step" for r in rec.ranges) == 500
    bad = subprocess.run(
        [sys.executable, "-m", "autonvtx", "recover", str(tmp_path), "-o", "x.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert bad.returncode == 2 and "holds no recordings" in bad.stderr and "Traceback" not in bad.stderr


def test_keep_last_holds_the_most_recent_events_within_the_bound(tmp_path: Path) -> None:
    program = make_file(
        tmp_path / "prog.py",
        """
        import nvtx
        for i in range(300_000):
            with nvtx.annotate("step", payload=i):
                pass
    """,
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "autonvtx",
            "run",
            "--trace",
            "t.json",
            "--buffer-mb",
            "2",
            "--keep",
            "last",
            str(program),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 0, run.stderr
    (rec,) = read_chrome_trace(tmp_path / "t.json")
    payloads = sorted(r.payload for r in rec.ranges if r.name == "step")
    assert payloads[-1] == 299_999 and 10_000 < len(payloads) < 300_000
    assert payloads == list(range(payloads[0], 300_000))  # the most recent ones, none missing
    assert rec.discarded_events > 0 and rec.unmatched_pops == 0
    assert "let go by --keep last" in run.stderr


LAYERS = """
    import threading, nvtx
    def layer(i, scale):
        with nvtx.annotate(f"encoder.layers.{i}.attn (MultiheadAttention)", color="red"):
            with nvtx.annotate("matmul"):
                sum(range(scale))
    def train(steps):
        for step in range(steps):
            with nvtx.annotate("step"):
                for i in range(3):
                    layer(i, 2000 if step == 0 else 10)
    thread = threading.Thread(target=train, args=(4,))
    thread.start()
    train(6)
    thread.join()
"""


# Recursion (nested instances of one row), a class row nesting in itself, overlapping start/end
# ranges of one name, and warm-up inside recursion: the Total of each row counts its nested
# instances once, the same in the exporter and its Python twin.
NESTING = """
    import nvtx
    def f(n):
        with nvtx.annotate(f"f {n}"):
            with nvtx.annotate("work"):
                sum(range(2000))
            if n:
                f(n - 1)
    for _ in range(3):
        f(3)
    with nvtx.annotate("model (Sequential)"):
        with nvtx.annotate("model.0 (Sequential)"):
            with nvtx.annotate("model.0.0 (Linear)"):
                pass
    a = nvtx.start_range("fetch")
    b = nvtx.start_range("fetch")
    nvtx.end_range(a)
    nvtx.end_range(b)
"""


@pytest.mark.parametrize(
    "options",
    [dict(), dict(each=True), dict(skip_first=1), dict(skip_first=2), dict(group="class"), dict(tree=True)],
)
def test_nested_instances_of_a_row_count_once_in_the_exporter_as_in_the_python_twin(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    from autonvtx.stats.model import ViewOptions

    directory = record(tmp_path, NESTING)
    chosen = ViewOptions(**options)
    expected = summarize(read_directory(directory), chosen)
    got = write_results(str(directory), Request(summary="-", options=chosen)).stats
    shape = lambda s: (s.path, s.domain, s.name, s.count, s.total_ns, s.self_ns, s.min_ns, s.max_ns)  # noqa: E731
    assert [shape(s) for s in got] == [shape(s) for s in expected]
    assert [s.mean_ns for s in got] == pytest.approx([s.mean_ns for s in expected])
    assert [s.stddev_ns for s in got] == pytest.approx([s.stddev_ns for s in expected], rel=1e-6, abs=1e-3)
    rows = {s.name: s for s in got}
    if not options:  # f {n}: 12 calls, each outermost call holding three nested ones
        assert rows["f {n}"].count == 12 and rows["f {n}"].total_ns < rows["f {n}"].count * rows["f {n}"].mean_ns
        assert rows["f {n}"].wall_percent <= 100.0
        assert rows["fetch"].total_ns == rows["fetch"].count * rows["fetch"].mean_ns  # start/end: each counts


@pytest.mark.parametrize(
    "options",
    [
        dict(tree=True),
        dict(group="class"),
        dict(tree=True, group="class", sort="self"),
        dict(skip_first=2),
        dict(by="thread"),
        dict(by="process", top=2),
        dict(filter="*attn*"),
        dict(by="thread", tree=True, skip_first=1),
        dict(each=True),
        dict(each=True, tree=True, skip_first=1),
        dict(each=True, group="class", skip_first=1),
    ],
)
def test_native_statistics_take_the_summary_options_as_the_python_summary(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    from autonvtx.stats.model import ViewOptions

    directory = record(tmp_path, LAYERS)
    chosen = ViewOptions(**options)
    expected = summarize(read_directory(directory), chosen)
    got = write_results(str(directory), Request(summary="-", options=chosen)).stats
    shape = lambda s: (
        s.group,
        s.depth,
        s.path,
        s.domain,
        s.name,
        s.count,
        s.total_ns,
        s.self_ns,
        s.min_ns,  # noqa: E731
        s.max_ns,
        s.median_ns,
        s.open_count,
    )
    assert [shape(s) for s in got] == [shape(s) for s in expected]
    assert [s.wall_percent for s in got] == pytest.approx([s.wall_percent for s in expected], rel=0.05)


# Names the grouping rule must treat alike byte by byte (stats.name_template, export_stats.c's
# numbered_name): numbers, words, hex literals, spans, non-ASCII neighbours, ends of the name.
NUMBERED = [
    "step 0",
    "step 17",
    "epoch 3 step 4",
    "conv2d",
    "layer1",
    "fp16",
    "0x1f",
    "0x1fz",
    "0x",
    "0xg",
    "at 0XaB9",
    "lines 12-40",
    "12-",
    "-12",
    "x-1",
    "1-x",
    "2024-01-05",
    "шаг3",
    "шаг 3",
    "3é",
    "é3",
    "a_1",
    "1",
    "12",
    "{n}",
    "step {n}",
    "0x1f-2",
    "9-0x1f",
    "lr 0.001",
    "(7)",
    "#8#",
    "x9 9x 9",
]


def random_names(count: int) -> list[str]:
    import random

    pick = random.Random(23)
    return ["".join(pick.choice("ax09 -_.é(") for _ in range(pick.randint(1, 8))) for _ in range(count)]


@pytest.mark.parametrize("each", [False, True], ids=["grouped", "each"])
def test_native_statistics_group_numbered_names_as_the_python_twin(tmp_path: Path, each: bool) -> None:
    from autonvtx.stats.model import ViewOptions

    names = NUMBERED + random_names(400)
    directory = record(
        tmp_path,
        f"""
        import nvtx
        for name in {names!r}:
            for i in range(2):
                with nvtx.annotate(name, domain="d"):
                    with nvtx.annotate(f"inner {{i}}", domain="d"):
                        pass
    """,
    )
    for options in (ViewOptions(each=each), ViewOptions(each=each, tree=True, skip_first=1)):
        expected = summarize(read_directory(directory), options)
        got = write_results(str(directory), Request(summary="-", options=options)).stats
        shape = lambda s: (
            s.depth,
            s.path,
            s.domain,
            s.name,
            s.count,
            s.total_ns,
            s.self_ns,
            s.min_ns,  # noqa: E731
            s.max_ns,
            s.median_ns,
        )
        assert sorted(map(shape, got)) == sorted(map(shape, expected))
    grouped = {s.name for s in expected}
    assert ("step {n}" in grouped and "inner {n}" in grouped) is not each
    assert ("step 17" in grouped) is each


class _Terminal:
    def __init__(self, tty: bool) -> None:
        self.text, self.tty = "", tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [True, False])
def test_progress_line_after_a_second_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch, tty: bool) -> None:
    from autonvtx.recorder import writer as export

    terminal = _Terminal(tty)
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(export.Progress, "DELAY_S", 0.0)
    progress = export.Progress("t.json")
    if progress.timer is not None:
        progress.timer.join()  # the write outlasted the delay
    progress.update(2, 3)
    progress.end()
    if tty:
        assert terminal.text.startswith("autonvtx: writing t.json ...") and "2/3 processes" in terminal.text
        assert terminal.text.endswith(" s\n")
    else:
        assert terminal.text == ""
    monkeypatch.setattr(export.Progress, "DELAY_S", 60.0)
    quick = export.Progress("t.json")  # a write done before the delay prints nothing
    quick.end()
    assert terminal.text.count("done in") == (1 if tty else 0)


def test_fork_sees_no_thread_of_the_recorder(tmp_path: Path) -> None:
    # CPython 3.12+ warns at os.fork() in a process with other threads (it counts them after the
    # fork): the spiller is stopped before each fork, and started again by the next buffer a
    # thread takes.
    program = make_file(
        tmp_path / "prog.py",
        """
        import glob, json, os, nvtx
        def threads():
            return sorted(open(p).read().strip() for p in glob.glob(f"/proc/{os.getpid()}/task/*/comm"))
        for i in range(100_000):
            with nvtx.annotate("before"):
                pass
        before = threads()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        at_fork = threads()
        os.waitpid(pid, 0)
        for i in range(100_000):
            with nvtx.annotate("after"):
                pass
        print(json.dumps([before, at_fork, threads()]))
    """,
    )
    out = tmp_path / "rec"
    out.mkdir()
    env = {
        **os.environ,
        environment.NVTX_INJECTION64_PATH: str(native.library_path()),
        environment.RECORD_DIR: str(out),
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    before, at_fork, after = json.loads(proc.stdout)
    assert "autonvtx-spill" in before and "autonvtx-spill" not in at_fork and "autonvtx-spill" in after
    names = Counter(r.name for rec in read_directory(out) for r in rec.ranges)
    assert names == {"before": 100_000, "after": 100_000}


def test_run_names_the_record_directory_when_it_cannot_write_the_trace(tmp_path: Path) -> None:
    program = make_file(
        tmp_path / "prog.py",
        """
        import os, nvtx
        with nvtx.annotate("work"):
            pass
        os.mkdir("t.json")  # the trace cannot be written over a directory
    """,
    )
    run = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "--trace", "t.json", str(program)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 3  # the program's 0, but its trace is missing (README's exit statuses)
    spill = tmp_path / "t.json.recording"
    assert f"autonvtx recover {spill}" in run.stderr or "autonvtx recover t.json.recording" in run.stderr
    recover = subprocess.run(
        [sys.executable, "-m", "autonvtx", "recover", str(spill), "-o", "back.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert recover.returncode == 0, recover.stderr
    assert [r.name for r in read_chrome_trace(tmp_path / "back.json")[0].ranges] == ["work"]


def test_merge_writes_perfetto_too(tmp_path: Path) -> None:
    # Issue 20: merge goes through the one trace writer, so it writes .pftrace as --trace does.
    from autonvtx.recorder.perfetto import read_trace

    (tmp_path / "a.json").write_text('{"traceEvents": []}')
    merged = subprocess.run(
        [sys.executable, "-m", "autonvtx", "merge", "a.json", "-o", "m.pftrace"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert merged.returncode == 0, merged.stderr
    assert (tmp_path / "m.pftrace").read_bytes()[:1] == b"\x0a" and read_trace(tmp_path / "m.pftrace") == []


def test_outputs_are_named_from_where_autonvtx_started(tmp_path: Path) -> None:
    program = make_file(
        tmp_path / "prog.py",
        """
        import os, subprocess, sys, nvtx
        os.mkdir("elsewhere")
        os.chdir("elsewhere")
        subprocess.run([sys.executable, "-c", "import nvtx\\nwith nvtx.annotate('child'): pass"], check=True)
        with nvtx.annotate("parent"):
            pass
    """,
    )
    run = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "--trace", "t.json", "--summary", "s.csv", str(program)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 0, run.stderr
    assert "trace written to t.json " in run.stderr and (tmp_path / "s.csv").is_file()
    names = {r.name for rec in read_chrome_trace(tmp_path / "t.json") for r in rec.ranges}
    assert names == {"parent", "child"}
