"""`--pair backward` (a module's forward and backward side by side) in every table command:
`run --summary`, `summary` and `report`, on a recording and on the real Nsight Systems' export,
arranged by the shared view (--filter, --top) and written in each form."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_cli, make_file, run_autonvtx, skip_without

skip_without("torch")

CONFIG = """
    [autonvtx]
    presets = ["torch"]
    [autonvtx.plugin.torch]
    backward_modules = true
"""

PROGRAM = """
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    for _ in range(3):
        loss = model(torch.randn(4, 8)).sum()
        loss.backward()
    print(f"{loss.item():.6f}")
"""

# Per module name as --each shows it: forward and backward instances over three steps.
COUNTS = {"Sequential": (3, 3), "0 (Linear)": (3, 3), "1 (ReLU)": (3, 3), "2 (Linear)": (3, 3)}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The program run once under `autonvtx run --trace trace.json --summary run.json --pair backward --each`."""
    workdir = tmp_path_factory.mktemp("pairing")
    make_file(workdir / "autonvtx.toml", CONFIG)
    make_file(workdir / "prog.py", PROGRAM)
    done = run_autonvtx("--summary", "run.json", "--pair", "backward", "--each", "prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    return workdir


def counts(document: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {p["name"]: (p["forward"]["count"], p["backward"]["count"]) for p in document["pairs"]}


def test_run_summary_summary_and_report_pair_alike(workdir: Path) -> None:
    run = json.loads((workdir / "run.json").read_text())
    assert counts(run) == COUNTS
    summary = autonvtx_cli(
        "summary", "--pair", "backward", "--each", "-o", "summary.json", "trace.json", cwd=workdir, timeout=300
    )
    assert summary.returncode == 0, summary.stderr
    report = autonvtx_cli(
        "report", "--pair", "backward", "--each", "--format", "json", "trace.json", cwd=workdir, timeout=300
    )
    assert report.returncode == 0, report.stderr
    from_summary = json.loads((workdir / "summary.json").read_text())
    from_report = json.loads(report.stdout)
    # One set of numbers: the same pairs, times included, from the run's native statistics and
    # from the trace read back.
    assert from_summary["pairs"] == from_report["pairs"] == run["pairs"]
    assert run["schema"] == "autonvtx-pairs/1"
    for pair in run["pairs"]:
        assert pair["ratio"] == pair["backward"]["cpu_ns"] / pair["forward"]["cpu_ns"]


def test_the_view_options_arrange_pairs(workdir: Path) -> None:
    done = autonvtx_cli(
        "report", "--pair", "backward", "--filter", "*Linear*", "--top", "1", "trace.json", cwd=workdir, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["Forward", "Count", "Backward", "Count", "Bwd/Fwd", "Module"]
    # Without --each the two Linear layers share a row, {n} (Linear): six calls each way.
    cells = re.split(r" {2,}", lines[2].strip())
    assert cells[1] == "6" and cells[3] == "6" and cells[5] == "torch:{n} (Linear)", cells
    assert [line for line in lines[3:] if not line.startswith("note: ")] == []  # --top 1
    csv_rows = autonvtx_cli(
        "summary", "--pair", "backward", "--each", "-o", "pairs.csv", "trace.json", cwd=workdir, timeout=300
    )
    assert csv_rows.returncode == 0, csv_rows.stderr
    table = (workdir / "pairs.csv").read_text().splitlines()
    assert table[0].startswith("group,domain,name,forward_count,forward_cpu_ns")
    assert sorted(line.split(",")[2] for line in table[1:]) == sorted(COUNTS)


def test_pairs_refuse_what_they_cannot_show(workdir: Path) -> None:
    for args, says in (
        (["summary", "--tree"], "--pair: a flat table, one row per name; --tree does not apply"),
        (
            ["report", "--html", "page.html"],
            "report: --html: the page draws the report's tree; --pair and --memory are tables",
        ),
        (
            ["report", "--across", "ranks"],
            "report: --pair: one profile at a time; expected one PROFILE without --across",
        ),
    ):
        done = autonvtx_cli(args[0], "--pair", "backward", *args[1:], "trace.json", cwd=workdir, timeout=300)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [f"autonvtx: {says}"], done.stderr
    # run --summary refuses before the program starts, not when its table is written.
    run = autonvtx_cli("run", "--summary", "--pair", "backward", "--sort", "count", "prog.py", cwd=workdir, timeout=300)
    assert run.returncode == 2 and run.stdout == "", run.stdout
    assert run.stderr.strip().splitlines() == [
        "autonvtx: --sort count: --pair sorts its pairs by forward plus backward time, largest first; expected no --sort"
    ]


def test_pairs_from_the_nsys_export_match_the_recording(workdir: Path) -> None:
    from nsys_support import nsys_or_skip, run_profile

    nsys_or_skip()
    profiled = run_profile("-o", "cap", "prog.py", cwd=workdir)
    assert profiled.returncode == 0, profiled.stderr
    done = autonvtx_cli(
        "report", "--pair", "backward", "--each", "--format", "json", "cap.sqlite", cwd=workdir, timeout=300
    )
    assert done.returncode == 0, done.stderr
    exported = json.loads(done.stdout)
    assert counts(exported) == COUNTS
    # No GPU work in a CPU capture: each side carries CPU time only, and the text table says CPU.
    assert all("gpu_ns" not in p["forward"] for p in exported["pairs"])
    text = autonvtx_cli("report", "--pair", "backward", "cap.sqlite", cwd=workdir, timeout=300)
    assert text.stdout.splitlines()[0].split()[0] == "Forward"
