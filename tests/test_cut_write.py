"""A process killed while it writes its recording (SIGKILL during the write SIGTERM began, as
`timeout -k`, Slurm and torchrun escalate) keeps every whole event written before the cut, and
the outputs say what the cut lost. A section cut short once lost all of its events: a child's
13.6 MB of them."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_file, run_autonvtx, run_under_recorder

from autonvtx.recorder import native
from autonvtx.recorder.chrome import read_chrome_trace
from autonvtx.recorder.recording import SECTION, read_recording

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

RULES = """
[[rules]]
modules = ["__main__"]
"""

# About 600,000 ranges a second: a periodic write carries megabytes, so the kill below
# lands inside one more often than not.
CHILD = """
import sys, time

def step(i):
    return i + 1

def main():
    n = 0
    print("ready", flush=True)
    while True:
        tick = time.monotonic() + 0.001
        for _ in range(600):
            n = step(n)
        while time.monotonic() < tick:
            pass

main()
"""

# SIGTERM, then SIGKILL as soon as the child's recording grows (a write is under way), or
# after 20 ms: a copy of what the file held at the kill is kept for the test.
PARENT = """
import os, shutil, signal, subprocess, sys, time

child = subprocess.Popen([sys.executable, "child.py"], stdout=subprocess.PIPE, text=True)
child.stdout.readline()
time.sleep(0.4)
path = os.path.join(os.environ["AUTONVTX_RECORD_DIR"], f"{child.pid}.anr")
size = os.path.getsize(path)
term = time.monotonic_ns()
child.send_signal(signal.SIGTERM)
while time.monotonic_ns() - term < 20_000_000 and os.path.getsize(path) == size:
    time.sleep(0.0002)
kill = time.monotonic_ns()
child.kill()
status = child.wait()
shutil.copy(path, "at-kill.anr")
print(child.pid, status, term, kill, flush=True)
"""


def last_section_cut(path: Path) -> bool:
    """Whether the file's last section runs past its end (its write was cut)."""
    data = path.read_bytes()
    pos = struct.unpack_from("<I", data, 12)[0]
    while pos + SECTION.size <= len(data):
        _, _, length = SECTION.unpack_from(data, pos)
        if pos + SECTION.size + length > len(data):
            return True
        pos += SECTION.size + length
    return pos < len(data)


def whole_sections(path: Path, into: Path) -> Path:
    """A copy of the recording at `path` without its cut last section: what was read before."""
    data = path.read_bytes()
    pos = struct.unpack_from("<I", data, 12)[0]
    while pos + SECTION.size <= len(data):
        _, _, length = SECTION.unpack_from(data, pos)
        if pos + SECTION.size + length > len(data):
            break
        pos += SECTION.size + length
    into.write_bytes(data[:pos])
    return into


def test_sigkill_20ms_after_sigterm_keeps_the_events_written_before_the_cut(tmp_path: Path) -> None:
    make_file(tmp_path / "autonvtx.toml", RULES)
    make_file(tmp_path / "child.py", CHILD)
    make_file(tmp_path / "parent.py", PARENT)
    for _attempt in range(10):  # until the kill lands inside a write (7 runs in 10 here)
        run = run_autonvtx("parent.py", cwd=tmp_path, timeout=300)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
        pid, status, term, kill = map(int, run.stdout.split())
        if status == -9 and last_section_cut(tmp_path / "at-kill.anr"):
            break
    else:
        pytest.fail("no kill landed inside a write in 10 runs")
    assert f"process {pid}: its last write was cut short when it ended: the " in run.stderr, run.stderr
    assert "events written before the cut are kept" in run.stderr
    events = json.loads(run.trace_path.read_text())["traceEvents"]  # type: ignore[union-attr]
    steps = [e for e in events if e.get("pid") == pid and e.get("name") == "step" and not e["args"].get("open")]
    # Every range the file held whole at the kill is in the trace: the cut write's too.
    full = read_recording(tmp_path / "at-kill.anr")
    before = read_recording(whole_sections(tmp_path / "at-kill.anr", tmp_path / "before-cut.anr"))
    closed = [r for r in full.ranges if r.name == "step" and not r.is_open]
    assert len(steps) == len(closed) > len([r for r in before.ranges if r.name == "step" and not r.is_open])
    # The events lost are the last ~100 ms before the kill at most (the documented figure).
    last = max(e["ts"] + e["dur"] for e in steps) * 1000
    assert kill - last < 100_000_000, (kill - last) / 1e6
    assert term - last < 100_000_000


THREADS = """
import threading, nvtx

def work(name):
    for i in range(20000):
        with nvtx.annotate(f"{name} {i % 7}", color="blue"):
            nvtx.mark("m")

threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


@pytest.mark.parametrize("where", ["mid-record", "record-boundary", "thread-head"])
def test_a_recording_cut_inside_a_thread_section_keeps_its_whole_records(tmp_path: Path, where: str) -> None:
    """What SIGKILL leaves mid-write is a prefix of the file: the native exporter (`recover`)
    and the Python reader keep the same whole records before the cut, and say what was lost."""
    run_under_recorder(tmp_path, THREADS)
    (recording,) = (tmp_path / "rec").glob("*.anr")
    data = recording.read_bytes()
    pos, threads = struct.unpack_from("<I", data, 12)[0], []
    while pos + SECTION.size <= len(data):
        tag, _, length = SECTION.unpack_from(data, pos)
        if tag == 5:
            threads.append((pos + SECTION.size, length))
        pos += SECTION.size + length
    body, length = max(threads, key=lambda t: t[1])
    cut = {"mid-record": body + length // 2 + 4, "record-boundary": body + length // 2, "thread-head": body + 20}[where]
    cut_dir = tmp_path / "cut"
    cut_dir.mkdir()
    (cut_dir / recording.name).write_bytes(data[:cut])
    full = read_recording(recording)
    kept = read_recording(cut_dir / recording.name)
    run = subprocess.run(
        [sys.executable, "-m", "autonvtx", "recover", str(cut_dir), "-o", "back.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    (native_kept,) = read_chrome_trace(tmp_path / "back.json")

    def closed(ranges: list) -> set:
        return {(r.tid, r.name, r.start_ns, r.end_ns) for r in ranges if not r.is_open}

    # The native exporter and the Python reader keep the same ranges: every one the full
    # recording has that ended by the last whole record before the cut.
    assert closed(native_kept.ranges) == closed(kept.ranges)
    last: dict[int, int] = {}  # each thread's last kept time: its records are in time order
    for tid, ts in [(r.tid, r.end_ns) for r in kept.ranges if not r.is_open] + [(m.tid, m.ts_ns) for m in kept.marks]:
        last[tid] = max(last.get(tid, 0), ts)
    assert closed(kept.ranges) == {k for k in closed(full.ranges) if k[3] <= last.get(k[0], -1)}
    assert len(closed(kept.ranges)) < len(closed(full.ranges))
    if where != "thread-head":
        assert "its last write was cut short when it ended: the " in run.stderr, run.stderr
    else:  # a THREAD head cut short holds no event: the section is left out, and said
        assert "a last section cut short" in run.stderr, run.stderr
