"""The report's benchmark scripts run (figures are not asserted: this machine's timings mean nothing)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_scale_benchmark_builds_a_larger_export_and_reports_on_it() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "report_scale.py"), "--size-mb", "6"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("fixture: 2.7 MB, 31,883 rows: ")
    assert lines[1].startswith("synthetic export: ") and "rows" in lines[1]
    assert lines[2].startswith("report: ") and "rows/s" in lines[2]
    assert lines[3].startswith("extrapolated to 2 GB")


@pytest.mark.skipif(Path("/proc/driver/nvidia/gpus").is_dir(), reason="this machine has an NVIDIA driver")
def test_gpu_check_skips_cleanly_without_a_gpu(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))  # no nvidia-smi to find
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py")], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("gpu_check: skipped: no CUDA GPU on this machine "
                           "(no nvidia-smi on PATH and no NVIDIA driver (/proc/driver/nvidia))\n")
