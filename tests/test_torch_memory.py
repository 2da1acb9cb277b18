"""Memory per module call (the torch plugin's `memory` option): the CPU path says once that it
does not apply; the figures' path (allocator counters -> NVTX marks with payloads -> the real
recorder and the real Nsight Systems -> `--memory` tables) runs end to end with the CUDA
allocator's counters stood in for by a program-made allocator (no GPU on these machines;
`benchmarks/gpu_check.py` checks the real allocator where one is lent)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, autonvtx_env, make_file, run_autonvtx, run_under_recorder, skip_without

from autonvtx.plugins.torch import memory as plugin_memory
from autonvtx.report import memory as report_memory

skip_without("torch")

CONFIG = """
    [autonvtx]
    presets = ["torch"]
    [autonvtx.plugin.torch]
    memory = true
"""

# The CUDA allocator's counters, stood in for before autonvtx is installed: modules allocate
# and free by hand, so every figure is known. Outer raises the allocation by 5,000 bytes itself
# before its children run; `large` raises it by 50,000 (Outer's peak), then `small`, whose start
# resets the counter, raises it by 1,000 and keeps 100.
FAKE_CUDA = """
    import torch
    from torch import nn


    class FakeAllocator:
        def __init__(self):
            self.current = 10_000
            self.peak = self.current

        def alloc(self, n):
            self.current += n
            self.peak = max(self.peak, self.current)

        def free(self, n):
            self.current -= n

        def stats(self, device):
            return {"allocated_bytes": {"all": {"current": self.current, "peak": self.peak}}}

        def reset(self, device):
            self.peak = self.current


    fake = FakeAllocator()
    torch.cuda.is_available = lambda: True
    torch.cuda.is_initialized = lambda: True
    torch._C._cuda_getDevice = lambda: 0
    torch._C._cuda_memoryStats = fake.stats
    torch._C._cuda_resetPeakMemoryStats = fake.reset


    class Scratch(nn.Module):
        def __init__(self, temporary, kept):
            super().__init__()
            self.temporary, self.kept = temporary, kept

        def forward(self, x):
            fake.alloc(self.temporary)
            fake.free(self.temporary)
            fake.alloc(self.kept)
            return x


    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.small = Scratch(1_000, 100)
            self.large = Scratch(50_000, 0)

        def forward(self, x):
            fake.alloc(5_000)
            fake.free(5_000)
            return self.small(self.large(x))


    import autonvtx

    autonvtx.install("memory.toml")
    model = Outer()
    for _ in range(2):
        model(torch.ones(2))
    print("allocated", fake.current)
"""

# Per call, (allocated at start, peak, allocated at end); the second call starts 100 higher
# (what `small` kept in the first).
EXPECTED = {
    "Outer": [(10_000, 60_000, 10_100), (10_100, 60_100, 10_200)],
    "large (Scratch)": [(10_000, 60_000, 10_000), (10_100, 60_100, 10_100)],
    "small (Scratch)": [(10_000, 11_000, 10_100), (10_100, 11_100, 10_200)],
}


def expected_rows() -> dict[str, dict[str, Any]]:
    rows = {}
    for name, calls in EXPECTED.items():
        rises = [peak - start for start, peak, _ in calls]
        kept = [end - start for start, _, end in calls]
        rows[name] = {
            "calls": len(calls),
            "rise_max_bytes": max(rises),
            "rise_mean_bytes": sum(rises) / len(rises),
            "kept_mean_bytes": sum(kept) / len(kept),
            "peak_bytes": max(peak for _, peak, _ in calls),
        }
    return rows


def memory_json(*args: str, cwd: Path) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", *args, "--memory", "--format", "json"]
        if args[0] == "report"
        else [sys.executable, "-m", "autonvtx", *args, "--memory", "-o", str(cwd / "memory.json")],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout if args[0] == "report" else (cwd / "memory.json").read_text()
    rows = json.loads(text)["memory"]
    return {row["name"]: figures(row) for row in rows}


def figures(row: dict[str, Any]) -> dict[str, Any]:
    """A JSON row's memory figures (its time is measured, so left out; it is checked positive)."""
    assert row["total_ns"] > 0
    return {k: v for k, v in row.items() if k not in ("group", "domain", "name", "total_ns")}


def test_the_plugin_and_the_report_agree_on_the_marks() -> None:
    assert plugin_memory.MEMORY_DOMAIN == report_memory.MEMORY_DOMAIN
    assert plugin_memory.MESSAGES == (report_memory.AT_START, report_memory.PEAK, report_memory.AT_END)


def test_on_cpu_tensors_it_says_once_that_it_does_not_apply(tmp_path: Path) -> None:
    make_file(tmp_path / "autonvtx.toml", CONFIG)
    make_file(
        tmp_path / "prog.py",
        """
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        for _ in range(3):
            model(torch.ones(2, 4))
        print("done")
        """,
    )
    done = run_autonvtx("prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    said = [line for line in done.stderr.splitlines() if "memory" in line]
    assert len(said) == 1 and "does not apply to CPU tensors" in said[0], done.stderr
    assert "Sequential" in done.range_names()
    assert not [e for e in done.trace["traceEvents"] if e.get("ph") == "i"], "no marks on CPU"
    # No table of zeros: the --memory view says why it has nothing.
    table = subprocess.run(
        [sys.executable, "-m", "autonvtx", "summary", "--memory", str(done.trace_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("note: no memory figures in this profile"), table.stdout
    assert "Calls" not in table.stdout


@pytest.fixture(scope="module")
def fake_cuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The program run once under `autonvtx run --trace --summary run.json --memory`: the run
    records, the program's install() activates the plugin after its stand-in allocator is in."""
    workdir = tmp_path_factory.mktemp("memory")
    make_file(workdir / "memory.toml", CONFIG)
    make_file(workdir / "prog.py", FAKE_CUDA)
    done = run_autonvtx("--summary", "run.json", "--memory", "prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "allocated 10200\n"
    return workdir


def test_marks_reach_the_recorder_inside_each_module_range(fake_cuda: Path, tmp_path: Path) -> None:
    make_file(tmp_path / "memory.toml", CONFIG)
    (recording,), out = run_under_recorder(tmp_path, (fake_cuda / "prog.py").read_text())
    assert out == "allocated 10200\n"
    marks = [m for m in recording.marks if m.domain == plugin_memory.MEMORY_DOMAIN]
    assert len(marks) == 3 * 6  # three per module call, six calls
    ranges = {r.name: [] for r in recording.ranges}  # type: dict[str, list[Any]]
    for r in recording.ranges:
        ranges[r.name].append(r)
    for name, calls in EXPECTED.items():
        for r, (start, peak, end) in zip(sorted(ranges[name], key=lambda r: r.start_ns), calls):
            # Its own marks: the innermost range around them is this one.
            inner = [
                m
                for m in marks
                if r.start_ns <= m.ts_ns <= r.end_ns
                and not any(
                    o is not r
                    and r.start_ns <= o.start_ns
                    and o.end_ns <= r.end_ns
                    and o.start_ns <= m.ts_ns <= o.end_ns
                    for o in recording.ranges
                )
            ]
            assert [(m.name, m.payload) for m in inner] == [
                ("allocated at start", start),
                ("peak allocated", peak),
                ("allocated at end", end),
            ], name
    found, unjoined = report_memory.from_recordings([recording], None, False)
    assert unjoined == 0
    rows = {row.name: row for row in found}
    assert {name: (row.calls, row.rise_max, row.peak_max) for name, row in rows.items()} == {
        name: (v["calls"], v["rise_max_bytes"], v["peak_bytes"]) for name, v in expected_rows().items()
    }


def test_summary_report_and_run_summary_show_the_figures(fake_cuda: Path) -> None:
    expected = expected_rows()
    run_document = json.loads((fake_cuda / "run.json").read_text())
    assert run_document["schema"] == "autonvtx-memory/1"
    run_rows = run_document["memory"]
    assert {row["name"]: figures(row) for row in run_rows} == expected
    assert memory_json("summary", "trace.json", cwd=fake_cuda) == expected
    assert memory_json("report", "trace.json", cwd=fake_cuda) == expected
    text = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", "--memory", "--top", "1", "trace.json"],
        cwd=fake_cuda,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert re.split(r" {2,}", lines[0].strip()) == [
        "Calls",
        "Time",
        "Max rise",
        "Mean rise",
        "Mean kept",
        "Peak",
        "Range",
    ]
    cells = re.split(r" {2,}", lines[2].strip())
    assert cells[-1] == "torch:Outer" and len(lines) == 3  # the largest rise, --top 1
    assert cells[0] == "2" and cells[2:6] == ["48.8 KiB", "48.8 KiB", "100 B", "58.7 KiB"], cells


def test_nsys_keeps_the_figures(fake_cuda: Path, tmp_path: Path) -> None:
    from nsys_support import CAPTURE_TIMEOUT_S, nsys_or_skip, one_capture

    nsys = nsys_or_skip()
    make_file(tmp_path / "memory.toml", CONFIG)
    make_file(tmp_path / "prog.py", FAKE_CUDA)
    env = autonvtx_env(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    capture = [nsys, "profile", "-t", "nvtx", "-s", "none", "--cpuctxsw", "none", "--force-overwrite", "true"]
    with one_capture():
        done = subprocess.run(
            [*capture, "-o", "cap", sys.executable, "prog.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=CAPTURE_TIMEOUT_S,
        )
    assert done.returncode == 0, done.stderr
    assert "allocated 10200" in done.stdout
    # report reads the .nsys-rep through its own export, as a user would give it.
    assert memory_json("report", "cap.nsys-rep", cwd=tmp_path) == expected_rows()


def test_memory_refuses_what_it_cannot_show(fake_cuda: Path) -> None:
    for command, extra, says in (
        ("summary", ["--tree"], "--memory: a flat table, one row per name; --tree does not apply"),
        ("report", ["--pair", "backward"], "--pair and --memory: each is a table of its own; expected one of them"),
        ("report", ["--group", "class"], "--memory: rows are range names; --group class does not apply"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "autonvtx", command, "--memory", *extra, "trace.json"],
            cwd=fake_cuda,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [f"autonvtx: {says}"], done.stderr


def test_failing_counters_are_said_once_and_leave_the_program_alone(tmp_path: Path) -> None:
    make_file(tmp_path / "memory.toml", CONFIG)
    stderr: list[str] = []
    (recording,), out = run_under_recorder(
        tmp_path,
        """
        import torch

        def broken(device):
            raise RuntimeError("no counters today")

        torch.cuda.is_available = lambda: True
        torch.cuda.is_initialized = lambda: True
        torch._C._cuda_getDevice = lambda: 0
        torch._C._cuda_memoryStats = broken
        torch._C._cuda_resetPeakMemoryStats = broken

        import autonvtx

        autonvtx.install("memory.toml")
        model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
        for _ in range(3):
            model(torch.ones(1, 2))
        print("done")
        """,
        stderr=stderr,
    )
    assert out == "done\n"
    said = [line for line in stderr[0].splitlines() if "memory" in line]
    assert said == [
        "autonvtx: warning: plugin 'torch': memory: the CUDA allocator's counters failed "
        "(RuntimeError: no counters today); calls lack figures"
    ]
    assert [r.name for r in recording.ranges].count("Sequential") == 3
    assert not recording.marks
