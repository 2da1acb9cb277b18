"""The numba preset and plugin: kernel launches named by kernel, observed through the recorder
(on the CUDA simulator, and on the real launch path with a stand-in for the compiled kernel)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx, skip_without

from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.recorder.trace import read_chrome_trace

skip_without("numba")
pytestmark = pytest.mark.skipif(
    native.library_path() is None, reason="the native recorder is not built in this checkout"
)

SIMULATED = """
    import numpy as np
    from numba import cuda

    @cuda.jit(device=True)
    def twice(v):
        return 2 * v

    @cuda.jit
    def scale(out, x):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = twice(x[i])

    x = np.arange(8, dtype=np.float32)
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale[2, 4](d_out, d_x)
    scale[(2, 1), (4, 1)](d_out, d_x)
    cuda.synchronize()
    print(d_out.copy_to_host().tolist())
    out = np.zeros_like(x)
    scale[1, 8](out, x)          # NumPy arguments: copied in and back inside the launch
    print(out.tolist())
"""


def record(cwd: Path, *args: str, **env: str) -> tuple[ProcessRecording, str, str]:
    done = run_autonvtx(*args, cwd=cwd, env=autonvtx_env(**env))
    assert done.returncode == 0, done.stderr
    assert done.trace_path is not None
    (recording,) = read_chrome_trace(done.trace_path)
    return recording, done.stdout, done.stderr


def inside(r: Range, outer: Range) -> bool:
    return r.tid == outer.tid and outer.start_ns <= r.start_ns and r.end_ns <= outer.end_ns


def test_simulated_launches_are_named_by_kernel_with_transfers(workdir: Path) -> None:
    make_file(workdir / "prog.py", SIMULATED)
    rec, out, _ = record(workdir, "--preset", "numba", "prog.py", NUMBA_ENABLE_CUDASIM="1")
    expected = [2.0 * i for i in range(8)]
    assert out == f"{expected}\n{expected}\n"
    ranges = [r for r in rec.ranges if r.domain == "numba"]
    assert rec.unmatched_pops == 0
    counts = Counter(r.name for r in ranges)
    assert counts["scale"] == 3
    assert counts["twice"] == 0  # a device function is not a launch
    assert counts["cuda.to_device"] == 1 and counts["cuda.synchronize"] == 1
    assert {r.category for r in ranges if r.name == "scale"} == {"kernel launch"}
    last_launch = max((r for r in ranges if r.name == "scale"), key=lambda r: r.start_ns)
    copies = [r for r in ranges if r.name == "copy_to_host"]
    # One explicit copy at top level; the NumPy-argument launch copies back inside itself.
    assert any(inside(c, last_launch) for c in copies)
    assert sum(not any(inside(c, l) for l in ranges if l.name == "scale") for c in copies) == 1


def test_launch_config_option_names_each_configuration(workdir: Path) -> None:
    make_file(workdir / "more.toml", "[autonvtx.plugin.numba]\nlaunch_config = true\n")
    make_file(workdir / "prog.py", SIMULATED)
    rec, _, _ = record(workdir, "--preset", "numba", "--config", "more.toml", "prog.py", NUMBA_ENABLE_CUDASIM="1")
    launches = Counter(r.name for r in rec.ranges if r.category == "kernel launch")
    # (2, 1), (4, 1) is the launch [2, 4] spelled out: one name.
    assert launches == {"scale[2, 4]": 2, "scale[1, 8]": 1}


def test_real_launch_path_is_ranged_without_a_gpu(workdir: Path) -> None:
    # The real dispatcher's call() with a stand-in for the compiled kernel (a "specialized"
    # dispatcher launches its one overload): the patched path, no GPU or CUDA toolkit needed.
    make_file(
        workdir / "prog.py",
        """
        from numba import cuda
        from numba.cuda.dispatcher import CUDADispatcher

        @cuda.jit
        def axpy(out, a, x, y):
            pass

        class CompiledStandIn:
            def launch(self, args, griddim, blockdim, stream, sharedmem):
                print("launch", args, griddim, blockdim)

        axpy._specialized = True
        axpy.overloads["sig"] = CompiledStandIn()
        axpy[4, 256](1, 2, 3, 4)
        axpy.configure(2, 32)(5, 6, 7, 8)
        print(CUDADispatcher.call.__wrapped__.__name__)
        """,
    )
    make_file(workdir / "more.toml", "[autonvtx.plugin.numba]\nlaunch_config = true\n")
    rec, out, _ = record(
        workdir,
        "--preset",
        "numba",
        "--config",
        "more.toml",
        "prog.py",
        NUMBA_ENABLE_CUDASIM="0",
        NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS="0",
    )
    assert out.splitlines() == [
        "launch (1, 2, 3, 4) (4, 1, 1) (256, 1, 1)",
        "launch (5, 6, 7, 8) (2, 1, 1) (32, 1, 1)",
        "call",
    ]
    assert [r.name for r in rec.ranges if r.domain == "numba"] == ["axpy[4, 256]", "axpy[2, 32]"]


def test_list_shows_what_the_plugin_ranges(workdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "list", "--preset", "numba", "numba.cuda"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        env=autonvtx_env(NUMBA_ENABLE_CUDASIM="0"),
    )
    assert done.returncode == 0, done.stderr
    assert "numba.cuda.dispatcher:CUDADispatcher.call" in done.stdout
    assert "each kernel launch, named 'kernel'" in done.stdout
    assert "numba.cuda:to_device" in done.stdout
