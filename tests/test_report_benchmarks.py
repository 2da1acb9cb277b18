"""The report's benchmark scripts run (figures are not asserted: this machine's timings mean nothing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_scale_benchmark_builds_a_larger_export_and_reports_on_it() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "report_scale.py"), "--size-mb", "6"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("fixture: 2.7 MB, 31,883 rows: ")
    assert lines[1].startswith("synthetic export: ") and "rows" in lines[1]
    assert lines[2].startswith("report: ") and "rows/s" in lines[2]
    assert lines[3].startswith("extrapolated to 2 GB")


@pytest.mark.skipif(Path("/proc/driver/nvidia/gpus").is_dir(), reason="this machine has an NVIDIA driver")
def test_gpu_check_skips_cleanly_without_a_gpu(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))  # no nvidia-smi to find
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "gpu_check: skipped: no CUDA GPU on this machine "
        "(no nvidia-smi on PATH and no NVIDIA driver (/proc/driver/nvidia))\n"
    )


FAKE_CUPTI = '''
import threading
import time


class ActivityKind:
    RUNTIME = 1
    DRIVER = 2
    CONCURRENT_KERNEL = 3


class _Record:
    def __init__(self, **fields):
        self.__dict__.update(fields)


_OFFSET = 123_456_789  # this CUPTI's clock runs behind CLOCK_MONOTONIC by this much
_callbacks = []
_pending = []
_correlation = [0]


def activity_register_callbacks(requested, completed):
    _callbacks[:] = [requested, completed]


def activity_enable(kind):
    pass


def activity_disable(kind):
    pass


def get_timestamp():
    return time.monotonic_ns() - _OFFSET


def launch(name):
    """What a kernel launch leaves in CUPTI's buffers: the API call, then the kernel."""
    _correlation[0] += 1
    start = get_timestamp()
    _pending.append(_Record(kind=ActivityKind.RUNTIME, start=start, end=start + 1000,
                            correlation_id=_correlation[0], thread_id=threading.get_native_id()))
    _pending.append(_Record(kind=ActivityKind.CONCURRENT_KERNEL, start=start + 5000, end=start + 9000,
                            correlation_id=_correlation[0], name=name))


def activity_flush_all(flag):
    _callbacks[0]()
    _callbacks[1](list(_pending))
    _pending.clear()
'''


def test_gpu_check_cupti_path_maps_clocks_and_finds_kernels_in_ranges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A stand-in CUPTI (same calls as cupti-python's) whose "kernels" are launched from a
    # program autonvtx ranges: 3 inside step() (inside run()), 1 at import, outside every range.
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    gpu_check.workloads(tmp_path)
    (tmp_path / "cupti").mkdir()
    (tmp_path / "cupti" / "__init__.py").write_text("")
    (tmp_path / "cupti" / "cupti.py").write_text(FAKE_CUPTI)
    (tmp_path / "gpucheck_work_fake.py").write_text(
        "from cupti import cupti\ncupti.launch('at_import')\n\n"
        "def step():\n    cupti.launch('fake_kernel')\n\n"
        "def run():\n    for _ in range(3):\n        step()\n"
    )
    work = {"name": "fake", "rules": ["-t", "gpucheck_work_fake"], "target": ["gpucheck_work_fake"], "expect": "step"}
    assert gpu_check.check_recorder(work, tmp_path)
    assert gpu_check.check_cupti(work, tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "gpu_check: ok fake: autonvtx run --trace recorded 2 range names (expected 'step' among them)"
    assert lines[1].startswith("gpu_check: ok fake: CUPTI saw 4 kernels, 3 launched inside autonvtx ranges")
    assert "most kernels under: " in lines[1] and "step 3" in lines[1] and "run 3" in lines[1]


def test_each_benchmark_prints_its_ratios_against_the_hand_query() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "report_each.py"), "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("hand SQL query: ") and "9,494 rows" in lines[0]
    assert lines[1].startswith("report (grouped): ") and "x the hand query" in lines[1]
    assert lines[2].startswith("report --each: ") and "18,501 table lines" in lines[2]


@pytest.mark.parametrize("side", ["imports", "hand", "each"])
def test_each_benchmark_runs_one_side_silently_for_counting_instructions(side: str) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "report_each.py"), "--only", side],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_deep_benchmark_prints_growth_against_depth() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "report_deep.py"), "--depths", "100", "200"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.startswith("depth 100: ") and second.startswith("depth 200: ")
    assert "size x2.0" in second  # the document is linear in depth
