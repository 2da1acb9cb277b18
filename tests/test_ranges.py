"""autonvtx's own NVTX client (ranges.py and its native extension), observed through the recorder."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autonvtx import environment, ranges
from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.recording import read_directory

REPO = Path(__file__).resolve().parents[1]


def make_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def record(tmp_path: Path, body: str) -> tuple[ProcessRecording, str]:
    """Run `body` under the recorder; the one process's recording and its stdout."""
    library = native.library_path()
    if library is None:
        pytest.skip("the native recorder is not built in this checkout")
    program = make_file(tmp_path / "prog.py", body)
    out = tmp_path / "rec"
    out.mkdir()
    env = dict(os.environ)
    env.pop(environment.RECORDER_MODE, None)
    env[environment.NVTX_INJECTION64_PATH] = library
    env[environment.RECORD_DIR] = str(out)
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, str(program)], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (recording,) = read_directory(out)
    return recording, proc.stdout


needs_native = pytest.mark.skipif(
    ranges._native is None, reason="autonvtx._nvtxclient is not built in this checkout"
)


@needs_native
def test_name_thread_names_os_threads_for_the_tool(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        import threading
        from autonvtx import ranges

        def work():
            ranges.name_thread(threading.get_native_id(), "worker \\u00e9")
            print(threading.get_native_id())

        t = threading.Thread(target=work)
        t.start(); t.join()
        ranges.name_thread(threading.get_native_id(), "main")
        ranges.name_thread(threading.get_native_id(), "main, renamed")
        print(threading.get_native_id())
        """,
    )
    worker, main = (int(line) for line in out.split())
    assert rec.thread_names[worker] == "worker \u00e9"
    assert rec.thread_names[main] == "main, renamed"  # the last name wins


def test_name_thread_without_the_extension_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranges, "_native", None)
    assert ranges.name_thread(1, "x") is None


@needs_native
@pytest.mark.parametrize(
    ("args", "error"),
    [((1,), TypeError), ((1, b"x"), TypeError), ((-1, "x"), OverflowError), ((2**32, "x"), OverflowError)],
)
def test_name_os_thread_rejects_bad_arguments(args: tuple[object, ...], error: type) -> None:
    with pytest.raises(error):
        ranges._native.name_os_thread(*args)
