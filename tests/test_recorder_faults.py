"""The recorder under faults: memory running out, a program that closes every descriptor, the
recording directory removed, the disk full, and the user interrupting the exit-time write.

Every case runs a real program in a subprocess, under the real recorder, and reads back what it
left: what is kept must be exactly true (never half a range), and what is lost must be said.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import autonvtx
from autonvtx import environment
from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.recorder.recording import read_directory
from conftest import make_file, run_autonvtx

LIBRARY = native.library_path()
pytestmark = pytest.mark.skipif(LIBRARY is None, reason="the native recorder is not built")


def recorder_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in (environment.RECORD_LIMIT_MB, environment.RECORDER_MODE, environment.RECORD_KEEP):
        env.pop(name, None)
    env[environment.NVTX_INJECTION64_PATH] = str(LIBRARY)
    package_root = str(Path(autonvtx.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def parents(recording: ProcessRecording) -> dict[Range, Range | None]:
    """Each push range's enclosing push range on its thread and domain, from the times alone."""
    result: dict[Range, Range | None] = {}
    pushes = sorted((r for r in recording.ranges if r.kind == "push"),
                    key=lambda r: (r.tid, r.domain, r.start_ns, -r.end_ns))
    stack: list[Range] = []
    for r in pushes:
        while stack and (stack[-1].tid, stack[-1].domain) != (r.tid, r.domain):
            stack.clear()
        while stack and stack[-1].end_ns <= r.start_ns:
            stack.pop()
        if stack:
            assert r.end_ns <= stack[-1].end_ns, f"{r} overlaps {stack[-1]} without nesting in it"
        result[r] = stack[-1] if stack else None
        stack.append(r)
    return result


# A hot program: 10 outer ranges, each of 3,000 middle ranges of 20 leaves, and a start/end
# range per middle one. 1,290,020 events; a 1 MiB budget holds a few per cent at a time.
HOT_PROGRAM = """
    import os, sys, nvtx
    from autonvtx.recorder import native
    domain = nvtx.get_domain("hot")
    outer, middle, leaf, span = (domain.get_event_attributes(message=m) for m in ("outer", "middle", "leaf", "span"))
    emitted = 0
    for i in range(10):
        domain.push_range(outer)
        for j in range(3000):
            domain.push_range(middle)
            started = domain.start_range(span)
            for k in range(20):
                domain.push_range(leaf)
                domain.pop_range()
            domain.end_range(started)
            domain.pop_range()
        domain.pop_range()
    emitted = 10 * (2 + 3000 * (4 + 40))
    if not os.environ.get("AUTONVTX_RECORD_DIR"):  # in memory only: written here, at the end
        native.control().flush(os.path.join(sys.argv[1], f"{os.getpid()}.anr"))
    print(emitted)
"""


@pytest.mark.parametrize("mode", ["spilled", "in-memory"])
def test_a_full_buffer_drops_whole_ranges_only(tmp_path: Path, mode: str) -> None:
    script = make_file(tmp_path / "hot.py", HOT_PROGRAM)
    record_dir = tmp_path / "recording"
    record_dir.mkdir()
    env = recorder_env(AUTONVTX_RECORD_LIMIT_MB="1",
                       AUTONVTX_RECORD_DIR=str(record_dir) if mode == "spilled" else "")
    proc = subprocess.run([sys.executable, str(script), str(record_dir)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    emitted = int(proc.stdout.split()[-1])
    (recording,) = read_directory(record_dir)
    assert recording.dropped_events > 0, "the budget should have been too small"
    # Nothing half kept: every range closed by its own pop or end, no pop without its push.
    assert recording.unmatched_pops == 0
    assert not [r for r in recording.ranges if r.is_open]
    assert 2 * len(recording.ranges) + recording.dropped_events == emitted
    names = Counter(r.name for r in recording.ranges)
    assert names["outer"] <= 10 and names["middle"] <= 30_000 and names["leaf"] <= 600_000
    assert names["span"] <= names["middle"] + 30_000
    # Nothing re-nested: a leaf is always in a middle range, a middle one in an outer one.
    expected_parent = {"outer": None, "middle": "outer", "leaf": "middle"}
    wrong = Counter((r.name, p.name if p else None) for r, p in parents(recording).items()
                    if (p.name if p else None) != expected_parent[r.name])
    assert not wrong, wrong
    leaves = [r for r in recording.ranges if r.name == "leaf"]
    assert max(r.duration_ns for r in leaves) < max(r.duration_ns for r in recording.ranges if r.name == "middle")


def test_a_program_that_closes_every_descriptor_keeps_its_own_files(workdir: Path) -> None:
    # A daemon closes every descriptor it did not open, then opens its own files: they get the
    # lowest free numbers, which the recorder's file may have had. Nothing of ours may land there.
    make_file(workdir / "daemon.py", """
        import os, time

        def tick():
            return 1

        def ticking(seconds, each=lambda: None):
            calls, deadline = 0, time.monotonic() + seconds
            while time.monotonic() < deadline:
                tick()
                each()
                calls += 1
                time.sleep(0.001)
            return calls

        calls = ticking(0.3)  # the recorder has written its file: it has had a descriptor
        os.closerange(3, 1024)
        with open("mine.txt", "w") as mine:  # the lowest free number: perhaps the recorder's
            lines = ticking(0.5, lambda: (mine.write("line\\n"), mine.flush()))  # several writes of ours
        print(calls + lines, lines)
    """)
    done = run_autonvtx("-t", "__main__", "daemon.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    calls, lines = map(int, done.stdout.split())
    assert (workdir / "mine.txt").read_bytes() == b"line\n" * lines
    assert [r["name"] for r in done.ranges()].count("tick") == calls
