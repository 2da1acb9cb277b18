"""The native recorder, observed through real NVTX clients in subprocesses and read back."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_file, run_under_recorder

import autonvtx
from autonvtx import environment
from autonvtx.errors import TraceFormatError
from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.recording import read_directory, read_recording

LIBRARY = native.library_path()
pytestmark = pytest.mark.skipif(LIBRARY is None, reason="the native recorder is not built")


def run_python(tmp_path: Path, code: str, **env_extra: str) -> tuple[list[ProcessRecording], dict]:
    """Runs `code` under the recorder; returns the recordings and the JSON the program printed last."""
    script = make_file(tmp_path / "program.py", code)
    record_dir = tmp_path / "recordings"
    record_dir.mkdir(exist_ok=True)
    env = dict(os.environ)
    for name in (environment.RECORD_LIMIT_MB, environment.RECORDER_MODE):
        env.pop(name, None)
    env[environment.NVTX_INJECTION64_PATH] = str(LIBRARY)
    env[environment.RECORD_DIR] = str(record_dir)
    # The program imports the same autonvtx as this test, installed or not.
    package_root = str(Path(autonvtx.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.update(env_extra)
    proc = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    return read_directory(record_dir), (json.loads(lines[-1]) if lines else {})


def only(recordings: list[ProcessRecording]) -> ProcessRecording:
    assert len(recordings) == 1, [r.pid for r in recordings]
    return recordings[0]


def by_name(recording: ProcessRecording) -> dict:
    return {r.name: r for r in recording.ranges}


def test_nested_annotate_ranges_nest_in_time(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import json, os, nvtx
        with nvtx.annotate("outer"):
            with nvtx.annotate("inner"):
                pass
            with nvtx.annotate("inner2"):
                pass
        print(json.dumps({"pid": os.getpid()}))
    """,
    )
    recording = only(recordings)
    assert recording.pid == out["pid"]
    assert recording.ppid == os.getpid()
    assert recording.cmdline[-1].endswith("program.py")
    assert [r.name for r in recording.ranges] == ["outer", "inner", "inner2"]
    outer, inner, inner2 = recording.ranges
    assert outer.start_ns <= inner.start_ns <= inner.end_ns <= inner2.start_ns <= inner2.end_ns <= outer.end_ns
    assert all(r.kind == "push" and r.domain == "" and not r.is_open for r in recording.ranges)
    assert all(r.tid == out["pid"] and r.pid == out["pid"] for r in recording.ranges)
    assert recording.unmatched_pops == 0 and recording.dropped_events == 0
    assert outer.end_ns <= recording.flush_ns


def test_threads_get_their_own_tid_and_os_name(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import ctypes, json, threading, nvtx
        libc = ctypes.CDLL(None)
        tids = {}
        def work(i):
            libc.prctl(15, f"worker-{i}".encode())  # PR_SET_NAME, before the first NVTX event
            tids[i] = threading.get_native_id()
            with nvtx.annotate(f"work-{i}"):
                pass
        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(json.dumps(tids))
    """,
    )
    recording = only(recordings)
    ranges = by_name(recording)
    assert len(set(out.values())) == 3
    for i, tid in out.items():
        assert ranges[f"work-{i}"].tid == tid
        assert recording.thread_names[tid] == f"worker-{i}"


def test_domains_have_their_own_stacks(tmp_path: Path) -> None:
    recordings, _ = run_python(
        tmp_path,
        """
        import nvtx
        nvtx.push_range("core-range")
        nvtx.push_range("x-range", domain="x")
        nvtx.pop_range()              # closes core-range, not the later x-range
        nvtx.pop_range(domain="x")
        with nvtx.annotate("in-y", domain="y"):
            nvtx.mark("y-mark", domain="y")
    """,
    )
    recording = only(recordings)
    ranges = by_name(recording)
    assert ranges["core-range"].domain == ""
    assert ranges["x-range"].domain == "x"
    assert ranges["in-y"].domain == "y"
    assert ranges["core-range"].end_ns < ranges["x-range"].end_ns
    assert recording.marks[0].domain == "y"


def test_categories_colors_and_payloads(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import json, nvtx
        from nvtx.colors import color_to_hex
        with nvtx.annotate("named-cat", category="io", color="red", payload=42):
            pass
        with nvtx.annotate("number-cat", category=7, color=0xFF00FF00, payload=2.5):
            pass
        with nvtx.annotate("plain"):
            pass
        print(json.dumps({"red": color_to_hex("red"), "default": color_to_hex(None)}))
    """,
    )
    ranges = by_name(only(recordings))
    assert ranges["named-cat"].category == "io"
    assert ranges["named-cat"].color == out["red"] == 0xFF0000
    assert ranges["named-cat"].payload == 42 and isinstance(ranges["named-cat"].payload, int)
    assert ranges["number-cat"].category == "7"
    assert ranges["number-cat"].color == 0xFF00FF00
    assert ranges["number-cat"].payload == 2.5 and isinstance(ranges["number-cat"].payload, float)
    assert ranges["plain"].category is None
    assert ranges["plain"].payload is None
    assert ranges["plain"].color == out["default"]


def test_start_end_ranges_across_threads(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import json, threading, nvtx
        here = nvtx.start_range("same-thread", payload=1)
        nvtx.end_range(here)
        job = nvtx.start_range("handed-over", domain="jobs")
        ender = {}
        def finish():
            ender["tid"] = threading.get_native_id()
            nvtx.end_range(job)
        t = threading.Thread(target=finish); t.start(); t.join()
        print(json.dumps({"main": threading.get_native_id(), "ender": ender["tid"]}))
    """,
    )
    recording = only(recordings)
    ranges = by_name(recording)
    same, handed = ranges["same-thread"], ranges["handed-over"]
    assert same.kind == handed.kind == "startend"
    assert same.end_tid is None and same.payload == 1
    assert handed.tid == out["main"] and handed.end_tid == out["ender"] != out["main"]
    assert handed.domain == "jobs" and not handed.is_open
    assert handed.start_ns <= handed.end_ns
    assert recording.unmatched_pops == 0


def test_marks(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import json, threading, nvtx
        nvtx.mark("checkpoint", category="phase", payload=3)
        print(json.dumps({"tid": threading.get_native_id()}))
    """,
    )
    (mark,) = only(recordings).marks
    assert (mark.name, mark.category, mark.payload, mark.tid) == ("checkpoint", "phase", 3, out["tid"])
    assert 0 < mark.ts_ns <= only(recordings).flush_ns


def test_ranges_open_at_exit_end_at_flush_time(tmp_path: Path) -> None:
    recordings, _ = run_python(
        tmp_path,
        """
        import nvtx
        with nvtx.annotate("closed"):
            pass
        nvtx.push_range("left-open")
        nvtx.start_range("never-ended")
    """,
    )
    recording = only(recordings)
    ranges = by_name(recording)
    assert not ranges["closed"].is_open
    for name in ("left-open", "never-ended"):
        assert ranges[name].is_open
        assert ranges[name].end_ns == recording.flush_ns


def test_exception_inside_annotate_still_pops(tmp_path: Path) -> None:
    recordings, _ = run_python(
        tmp_path,
        """
        import nvtx
        @nvtx.annotate("decorated")
        def boom():
            raise ValueError
        try:
            with nvtx.annotate("context"):
                boom()
        except ValueError:
            pass
        with nvtx.annotate("after"):
            pass
    """,
    )
    recording = only(recordings)
    assert [r.name for r in recording.ranges] == ["context", "decorated", "after"]
    assert not any(r.is_open for r in recording.ranges)
    assert recording.unmatched_pops == 0


def test_memory_bound_drops_and_counts(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import json, os, time, nvtx
        from autonvtx.recorder import native
        n = 50_000
        attributes = nvtx.get_domain().get_event_attributes(message="tick")
        domain = nvtx.get_domain()
        started = time.monotonic()
        for _ in range(n):
            domain.push_range(attributes)
            domain.pop_range()
        elapsed = time.monotonic() - started
        result = native.control().flush(os.path.join(os.environ["AUTONVTX_RECORD_DIR"], f"{os.getpid()}.anr"))
        print(json.dumps({"emitted": 2 * n, "events": result.events, "dropped": result.dropped, "elapsed": elapsed}))
    """,
        AUTONVTX_RECORD_LIMIT_MB="0.5",
    )
    recording = only(recordings)
    assert out["dropped"] > 0
    assert out["events"] + out["dropped"] == out["emitted"]
    assert recording.dropped_events == out["dropped"]
    closed = sum(1 for r in recording.ranges if not r.is_open)
    still_open = sum(1 for r in recording.ranges if r.is_open)
    assert 2 * closed + still_open + recording.unmatched_pops == out["events"]
    # The bound held: what memory kept at once fits 0.5 MiB. The spiller writes the events to disk
    # every 100 ms, freeing their memory, so a loop slowed past that (a loaded machine) keeps
    # up to one more bound's worth per period.
    periods = 1 + int(out["elapsed"] / 0.1) if out["elapsed"] >= 0.09 else 0
    assert out["events"] * 16 < 0.5 * 2**20 * (1 + periods)


@pytest.mark.parametrize("child_exit", ["flush-then-os-exit", "normal-exit"])
def test_fork_child_records_only_its_own_events(tmp_path: Path, child_exit: str) -> None:
    recordings, out = run_python(
        tmp_path,
        f"""
        import json, os, sys, nvtx
        from autonvtx.recorder import native
        with nvtx.annotate("parent-before"):
            pass
        nvtx.push_range("parent-open-across-fork")
        pid = os.fork()
        if pid == 0:
            with nvtx.annotate("child-work"):
                pass
            if {child_exit!r} == "flush-then-os-exit":
                native.control().flush(None)
                os._exit(0)
            sys.exit(0)
        os.waitpid(pid, 0)
        nvtx.pop_range()
        with nvtx.annotate("parent-after"):
            pass
        print(json.dumps({{"parent": os.getpid(), "child": pid}}))
    """,
    )
    parent, child = sorted(recordings, key=lambda r: r.pid != out["parent"])
    assert (parent.pid, child.pid) == (out["parent"], out["child"])
    assert child.ppid == out["parent"]
    assert [r.name for r in child.ranges] == ["child-work"]
    assert child.ranges[0].tid == out["child"]
    assert child.thread_names.keys() == {out["child"]}
    assert [r.name for r in parent.ranges] == ["parent-before", "parent-open-across-fork", "parent-after"]
    assert not any(r.is_open for r in parent.ranges)


@pytest.mark.parametrize("clock", ["default", "monotonic"])
def test_timestamps_are_clock_monotonic_ns_in_parent_and_forked_child(tmp_path: Path, clock: str) -> None:
    """Where the recorder stamps events with the TSC (constant_tsc and nonstop_tsc), the flush
    converts them to CLOCK_MONOTONIC ns: each recorded time lies between time.monotonic_ns()
    read just before and just after the event, in the parent and in a forked child, through the
    fast paths (registered message, autonvtx's own client), the general ones (inline messages,
    start/end, marks) and across chunks; AUTONVTX_RECORDER_CLOCK=monotonic uses clock_gettime."""
    recordings, out = run_python(
        tmp_path,
        """
        import json, os, time, nvtx
        from autonvtx import ranges
        times = {}
        domain = nvtx.get_domain("align")
        attributes = domain.get_event_attributes(message="registered", color="blue")
        def around(name, call):
            before = time.monotonic_ns()
            call()
            times[name] = (before, time.monotonic_ns())
        def events(prefix):
            around(prefix + "push-inline", lambda: nvtx.push_range(prefix + "inline"))
            time.sleep(0.002)
            around(prefix + "pop-inline", nvtx.pop_range)
            around(prefix + "push-registered", lambda: domain.push_range(attributes))
            around(prefix + "pop-registered", domain.pop_range)
            if ranges._client is not None:  # autonvtx's own NVTX client
                range_ = ranges._client.Range("align", prefix + "client", 0xFF0000FF, 0)
                around(prefix + "push-client", range_.push)
                around(prefix + "pop-client", range_.pop)
            holder = {}
            around(prefix + "start", lambda: holder.setdefault("id", nvtx.start_range(prefix + "startend")))
            around(prefix + "end", lambda: nvtx.end_range(holder["id"]))
            around(prefix + "mark", lambda: nvtx.mark(prefix + "mark"))
        events("a-")
        for _ in range(30_000):  # past the first chunk into the next ones
            domain.push_range(attributes)
            domain.pop_range()
        events("b-")
        pid = os.fork()
        if pid == 0:
            time.sleep(0.01)
            times.clear()  # the parent's, inherited
            events("child-")
            with open("child.json", "w") as f:
                json.dump(times, f)
            from autonvtx.recorder import native
            native.control().flush(None)
            os._exit(0)
        os.waitpid(pid, 0)
        events("c-")
        with open("child.json") as f:
            child = json.load(f)
        import ctypes
        from autonvtx.recorder import native
        tsc = ctypes.CDLL(native.library_path()).autonvtx_recorder_uses_tsc()
        print(json.dumps({"parent": os.getpid(), "child": pid, "times": times, "child_times": child,
                          "tsc": tsc}))
    """,
        **({} if clock == "default" else {"AUTONVTX_RECORDER_CLOCK": "monotonic"}),
    )
    with open("/proc/cpuinfo") as f:
        flags = next((line.split() for line in f if line.startswith("flags")), [])
    stable_tsc = "constant_tsc" in flags and "nonstop_tsc" in flags
    assert out["tsc"] == (clock == "default" and stable_tsc)
    tolerance = 20_000  # ns
    by_pid = {r.pid: r for r in recordings}
    assert set(by_pid) == {out["parent"], out["child"]}
    for pid, times in ((out["parent"], out["times"]), (out["child"], out["child_times"])):
        recording = by_pid[pid]
        named = {
            r.name: r
            for r in recording.ranges
            if r.domain == "align" or r.name.endswith("inline") or r.name.endswith("startend")
        }
        marks = {m.name: m for m in recording.marks}
        checked = 0
        for prefix in {name.split("-")[0] + "-" for name in times}:

            def within(event: str, ns: int) -> None:
                before, after = times[prefix + event]
                assert before - tolerance <= ns <= after + tolerance, (prefix + event, before, ns, after)

            for kind in ("inline", "client"):
                if prefix + "push-" + kind not in times:
                    continue
                r = named[prefix + kind]
                within("push-" + kind, r.start_ns)
                within("pop-" + kind, r.end_ns)
            r = named[prefix + "startend"]
            within("start", r.start_ns)
            within("end", r.end_ns)
            within("mark", marks[prefix + "mark"].ts_ns)
            checked += 1
        registered = [r for r in recording.ranges if r.name == "registered"]
        assert registered and all(r.start_ns <= r.end_ns for r in registered)
        assert checked == (1 if pid == out["child"] else 3)
        assert not any(r.is_open for r in recording.ranges)


def test_exit_writes_recording_and_an_explicit_flush_writes_a_copy(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import json, os, nvtx
        from autonvtx.recorder import native
        with nvtx.annotate("x"):
            pass
        print(json.dumps({"pid": os.getpid(), "attached": native.control().is_attached()}))
    """,
    )
    assert out["attached"] is True
    assert only(recordings).pid == out["pid"]
    assert (tmp_path / "recordings" / f"{out['pid']}.anr").is_file()

    explicit = tmp_path / "explicit.anr"
    recordings, out = run_python(
        tmp_path / "second",
        f"""
        import nvtx
        from autonvtx.recorder import native
        with nvtx.annotate("x"):
            pass
        native.control().flush({str(explicit)!r})
        with nvtx.annotate("y"):
            pass
    """,
    )
    # The live file in the record directory holds everything; the copy what came before it.
    assert [r.name for r in only(recordings).ranges] == ["x", "y"]
    assert only(recordings).ended_normally
    assert [r.name for r in read_recording(explicit).ranges] == ["x"]
    assert not list(explicit.parent.glob("*.tmp"))


def test_set_mode_noop_stops_recording(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import json, nvtx
        from autonvtx.recorder import native
        control = native.control()
        with nvtx.annotate("recorded-1"):
            pass
        control.set_mode("noop")
        with nvtx.annotate("not-recorded"):
            nvtx.mark("not-recorded-mark")
        during = control.events_recorded()
        control.set_mode("record")
        with nvtx.annotate("recorded-2"):
            pass
        print(json.dumps({"during": during, "after": control.events_recorded()}))
    """,
    )
    recording = only(recordings)
    assert [r.name for r in recording.ranges] == ["recorded-1", "recorded-2"]
    assert recording.marks == []
    assert (out["during"], out["after"]) == (2, 4)


def test_noop_mode_from_environment(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import json, nvtx
        from autonvtx.recorder import native
        with nvtx.annotate("ignored", domain="d"):
            pass
        c = native.control()
        print(json.dumps({"attached": c.is_attached(), "mode": c.mode(), "events": c.events_recorded()}))
    """,
        AUTONVTX_RECORDER_MODE="noop",
    )
    assert out == {"attached": True, "mode": "noop", "events": 0}
    assert only(recordings).ranges == []


def test_flush_while_threads_record_reads_a_consistent_prefix(tmp_path: Path) -> None:
    recordings, out = run_python(
        tmp_path,
        """
        import json, os, threading, nvtx
        from autonvtx.recorder import native
        from autonvtx.recorder.recording import read_recording
        def spin(i):
            for _ in range(20_000):
                with nvtx.annotate(f"spin-{i}", payload=i):
                    nvtx.mark("m")
        threads = [threading.Thread(target=spin, args=(i,)) for i in range(4)]
        for t in threads: t.start()
        seen = []
        path = "snapshot.anr"  # in the working directory, not among the recordings
        while any(t.is_alive() for t in threads) and len(seen) < 20:
            native.control().flush(path)
            seen.append(len(read_recording(path).ranges))
        for t in threads: t.join()
        native.control().flush(None)  # $AUTONVTX_RECORD_DIR/<pid>.anr
        print(json.dumps({"seen": seen}))
    """,
    )
    assert out["seen"] == sorted(out["seen"])  # each snapshot extends the previous one
    final = only(recordings)
    assert len(final.ranges) == 80_000 and len(final.marks) == 80_000
    assert not any(r.is_open for r in final.ranges) and final.unmatched_pops == 0


def client_library(tmp_path: Path) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    headers = [
        h
        for entry in sys.path
        for h in glob.glob(os.path.join(entry or ".", "nvidia", "*", "include"))
        if os.path.isfile(os.path.join(h, "nvtx3", "nvToolsExt.h"))
    ]
    if not headers:
        pytest.skip("NVTX headers (nvidia-nvtx) are not installed")
    source = Path(__file__).parent / "native" / "client.c"
    out = tmp_path / "libclient.so"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-I", headers[0], str(source), "-o", str(out), "-ldl"],
        check=True,
        capture_output=True,
    )
    return out


def test_c_client_through_ascii_wide_registered_and_names(tmp_path: Path) -> None:
    library = client_library(tmp_path)
    recordings, out = run_python(
        tmp_path,
        f"""
        import ctypes, json, threading, nvtx
        with nvtx.annotate("python-side"):
            same_handles = ctypes.CDLL({str(library)!r}).client_run()
        print(json.dumps({{"same": same_handles, "tid": threading.get_native_id()}}))
    """,
    )
    recording = only(recordings)
    ranges = by_name(recording)
    assert out["same"] == 1
    assert set(ranges) == {"python-side", "c-push-a", "c-push-w \u00e9\u2713", "c-registered", "c-float"}
    assert ranges["python-side"].start_ns <= ranges["c-push-a"].start_ns
    assert ranges["c-push-a"].end_ns <= ranges["python-side"].end_ns  # two clients, one stack
    wide = ranges["c-push-w \u00e9\u2713"]
    assert ranges["c-push-a"].start_ns <= wide.start_ns <= wide.end_ns <= ranges["c-push-a"].end_ns
    registered = ranges["c-registered"]
    assert (registered.domain, registered.category, registered.color, registered.payload) == (
        "c-domain",
        "c-domain-cat",
        0xFF112233,
        7,
    )
    assert ranges["c-float"].category == "c-cat" and ranges["c-float"].payload == 1.5
    assert ranges["c-float"].color is None
    assert [(m.name, m.payload) for m in recording.marks] == [("c-mark", None), ("c-wide-ex", -4)]
    assert recording.thread_names[out["tid"]] == "c-main"


def test_set_mode_switches_every_client(tmp_path: Path) -> None:
    library = client_library(tmp_path)
    recordings, _ = run_python(
        tmp_path,
        f"""
        import ctypes, nvtx
        from autonvtx.recorder import native
        client = ctypes.CDLL({str(library)!r})
        with nvtx.annotate("attach-python"):
            pass
        client.client_run()
        native.control().set_mode("noop")
        client.client_run()
        with nvtx.annotate("quiet"):
            pass
    """,
    )
    names = [r.name for r in only(recordings).ranges]
    assert names.count("c-push-a") == 1
    assert "quiet" not in names


def test_corrupt_recordings_raise_trace_format_error(tmp_path: Path) -> None:
    run_python(
        tmp_path,
        """
        import nvtx
        with nvtx.annotate("a"):
            nvtx.mark("b")
    """,
    )
    (good,) = (tmp_path / "recordings").glob("*.anr")
    data = good.read_bytes()
    cases = {
        "magic": (b"NOTMAGIC" + data[8:], "not an autonvtx recording"),
        "version": (data[:8] + (99).to_bytes(4, "little") + data[12:], "unsupported recording version 99"),
        "short": (data[:10], "too short"),
    }
    # A file cut short (its process killed mid-write) reads up to its last whole section.
    cut = tmp_path / "cut.anr"
    cut.write_bytes(data[: len(data) - 24])
    assert not read_recording(cut).ended_normally
    assert read_recording(good).ended_normally
    for name, (content, message) in cases.items():
        bad = tmp_path / f"{name}.anr"
        bad.write_bytes(content)
        with pytest.raises(TraceFormatError, match=message) as info:
            read_recording(bad)
        assert str(bad) in str(info.value)
    with pytest.raises(TraceFormatError, match="cannot read"):
        read_recording(tmp_path / "missing.anr")


def test_read_directory_sorts_by_pid_and_skips_partial_files(tmp_path: Path) -> None:
    recordings, _ = run_python(
        tmp_path,
        """
        import subprocess, sys, nvtx
        with nvtx.annotate("parent"):
            subprocess.run([sys.executable, "-c", "import nvtx; nvtx.mark('child')"], check=True)
    """,
    )
    (tmp_path / "recordings" / "1.anr.tmp").write_bytes(b"partial")
    recordings = read_directory(tmp_path / "recordings")
    assert len(recordings) == 2
    assert [r.pid for r in recordings] == sorted(r.pid for r in recordings)
    child = next(r for r in recordings if r.marks)
    parent = next(r for r in recordings if r.ranges)
    assert child.ppid == parent.pid


def test_scanning_a_recording_is_the_full_reader_without_events(tmp_path: Path) -> None:
    # One .anr reader: scan_recording (what the native exporter is handed) reads the same
    # processes, names and writes as read_recording, only not the events.
    from autonvtx.recorder.recording import scan_recording

    run_under_recorder(
        tmp_path,
        """
        import threading, nvtx
        nvtx.push_range("main")
        worker = threading.Thread(target=lambda: nvtx.mark("m"), name="worker-7")
        worker.start(); worker.join()
        nvtx.pop_range()
    """,
    )
    (path,) = (tmp_path / "rec").glob("*.anr")
    full, scanned = read_recording(path), scan_recording(path)
    assert scanned.ranges == [] and scanned.marks == [] and full.ranges and full.marks
    for field in (
        "pid",
        "ppid",
        "cmdline",
        "thread_names",
        "dropped_events",
        "discarded_events",
        "realtime_offset_ns",
        "ended_normally",
    ):
        assert getattr(scanned, field) == getattr(full, field), field
    assert len(scanned.thread_names) == 2


def test_python_reader_constants_are_the_format_header() -> None:
    # The .anr format is defined once, in _native/anr_format.h; the Python reader (and the
    # writer merge uses) must say the same: every #define and enum value, every fixed size.
    import re

    from autonvtx.recorder import recording

    header = (Path(autonvtx.__file__).parent / "recorder" / "_native" / "anr_format.h").read_text()
    values = {name: int(value) for name, value in re.findall(r"#define (ANR_\w+) (\d+)u?\b", header)}
    for body in re.findall(r"enum\s*\{([^}]*)\}", header):
        values.update({name: int(value) for name, value in re.findall(r"(ANR_\w+)\s*=\s*(\d+)", body)})
    assert re.search(r'#define ANR_MAGIC "(\w+)"', header).group(1).encode() == recording.MAGIC
    expected = {
        "ANR_MAGIC_BYTES": len(recording.MAGIC),
        "ANR_VERSION": recording.VERSION,
        "ANR_HEADER_SIZE": recording.HEADER.size,
        "ANR_SECTION_HEAD_BYTES": recording.SECTION.size,
        "ANR_THREAD_HEAD_BYTES": recording.THREAD.size,
        "ANR_SPILL_BYTES": recording.SPILL.size,
        "ANR_PAYLOAD_MAX": max(recording.PAYLOAD_FORMATS),
        "ANR_THREAD_WRAPPED": recording.THREAD_WRAPPED,
        **{
            f"ANR_{name}": getattr(recording, name)
            for name in (
                "T_END",
                "T_CMDLINE",
                "T_DOMAINS",
                "T_STRINGS",
                "T_CATEGORIES",
                "T_THREAD",
                "T_THREAD_NAMES",
                "T_SPILL",
                "K_PUSH",
                "K_POP",
                "K_START",
                "K_END",
                "K_MARK",
                "F_COLOR",
                "F_CATEGORY",
                "M_NONE",
                "M_INLINE",
                "M_REGISTERED",
            )
        },
    }
    assert values == expected
