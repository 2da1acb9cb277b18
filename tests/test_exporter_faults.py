"""The native exporter on hostile recordings and hostile text: bytes that are not UTF-8, ids
that point nowhere, records cut short, and programs whose events pair up badly. Every case runs
the real recorder in a subprocess and `autonvtx recover`/`run` as a user would."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autonvtx import environment
from autonvtx.recorder import native
from conftest import REPO, make_file

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def record(tmp_path: Path, source: str, *args: str | bytes) -> Path:
    """Runs `source` under the recorder; returns the directory holding its recording."""
    program = make_file(tmp_path / "prog.py", source)
    out = tmp_path / "rec"
    out.mkdir()
    env = dict(ENV)
    env.pop(environment.RECORDER_MODE, None)
    env[environment.NVTX_INJECTION64_PATH] = str(native.library_path())
    env[environment.RECORD_DIR] = str(out)
    proc = subprocess.run([sys.executable, str(program), *args], env=env, cwd=tmp_path, capture_output=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def autonvtx(tmp_path: Path, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autonvtx", *args], cwd=tmp_path, capture_output=True,
                          text=True, errors="replace", timeout=300, env=ENV)


def strict_json(path: Path) -> dict:
    """The trace as a strict reader takes it: valid UTF-8 with no lone surrogate escaped in."""
    text = path.read_bytes().decode("utf-8")
    data = json.loads(text)
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate
    return data


NON_UTF8_NAME = b"caf\xe9.txt"


def test_a_command_line_that_is_not_utf8_reaches_every_trace_as_replacement_characters(tmp_path: Path) -> None:
    program = make_file(tmp_path / "prog.py", """
        import nvtx
        with nvtx.annotate("work"):
            pass
    """)
    for trace in ("t.pftrace", "t.json"):
        run = autonvtx(tmp_path, "run", "--trace", trace, str(program), NON_UTF8_NAME)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    from autonvtx.recorder.perfetto import read_trace

    (back,) = read_trace(tmp_path / "t.pftrace")
    assert "caf\ufffd.txt" in back.label and [r.name for r in back.ranges] == ["work"]
    data = strict_json(tmp_path / "t.json")
    names = [e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "process_name"]
    assert len(names) == 1 and "caf\ufffd.txt" in names[0]
    assert any("caf\ufffd.txt" in arg for arg in data["otherData"]["processes"][0]["cmdline"])


def test_recover_writes_a_pftrace_of_a_program_given_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    directory = record(tmp_path, """
        import nvtx
        with nvtx.annotate("work"):
            pass
    """, NON_UTF8_NAME)
    for trace in ("back.pftrace", "back.json"):
        recover = autonvtx(tmp_path, "recover", str(directory), "-o", trace)
        assert recover.returncode == 0 and "Traceback" not in recover.stderr, recover.stderr
    from autonvtx.recorder.perfetto import read_trace

    (back,) = read_trace(tmp_path / "back.pftrace")
    assert back.label.endswith("caf\ufffd.txt") and [r.name for r in back.ranges] == ["work"]
    strict_json(tmp_path / "back.json")
