"""autonvtx report on small exports written here: schema variants, nesting, missing tables, inputs."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx, take_view

from autonvtx.report.output import ReportRequest, produce

TID = (1 << 48) | (100 << 24) | 101  # VM 1, pid 100, tid 101: how nsys packs a globalTid
PID = (1 << 48) | (100 << 24)
OTHER_TID = (1 << 48) | (100 << 24) | 102


def write_export(
    path: Path,
    *,
    nvtx: Sequence[tuple[Any, ...]] = (),
    runtime: Sequence[tuple[Any, ...]] = (),
    kernels: Sequence[tuple[Any, ...]] = (),
    strings: dict[int, str] | None = None,
    suffix: str = "",
    with_cuda: bool = True,
    with_nvtx: bool = True,
    inline_kernel_names: bool = False,
) -> Path:
    """An export with the tables (and only the columns) the report reads, as nsys names them.

    nvtx rows: (start, end, eventType, text, textId, domainId, globalTid);
    runtime rows: (start, end, globalTid, correlationId); kernels: (start, end, deviceId, correlationId, name).
    """
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", sorted((strings or {}).items()))
    if with_nvtx:
        db.execute(
            f"CREATE TABLE NVTX_EVENTS{suffix} (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, "
            "textId INTEGER, domainId INTEGER, globalTid INTEGER)"
        )
        db.executemany(f"INSERT INTO NVTX_EVENTS{suffix} VALUES (?, ?, ?, ?, ?, ?, ?)", nvtx)
    if with_cuda:
        db.execute(
            f"CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME{suffix} (start INTEGER, end INTEGER, eventClass INTEGER, "
            "globalTid INTEGER, correlationId INTEGER, nameId INTEGER)"
        )
        db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME{suffix} VALUES (?, ?, 0, ?, ?, 1)", runtime)
        name_type = "TEXT" if inline_kernel_names else "INTEGER"
        db.execute(
            f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL{suffix} (start INTEGER, end INTEGER, deviceId INTEGER, "
            f"correlationId INTEGER, globalPid INTEGER, shortName {name_type})"
        )
        db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL{suffix} VALUES (?, ?, ?, ?, {PID}, ?)", kernels)
    db.commit()
    db.close()
    return path


def as_json(path: Path, **options: Any) -> dict[str, Any]:
    text = produce(ReportRequest(str(path), take_view(options), fmt="json", **options))
    assert text is not None
    return json.loads(text)


def rows(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in document["ranges"]}


def test_recursion_counts_a_kernel_once_per_name_and_at_every_tree_level(tmp_path: Path) -> None:
    # f encloses f encloses g; one kernel launched inside the innermost g, one in the outer f only.
    path = write_export(
        tmp_path / "r.sqlite",
        nvtx=[
            (0, 100, 59, "f", None, 0, TID),
            (10, 60, 59, "f", None, 0, TID),
            (20, 30, 59, "g", None, 0, TID),
        ],
        runtime=[(25, 26, TID, 1), (80, 81, TID, 2)],
        kernels=[(40, 50, 0, 1, 7), (90, 95, 0, 2, 7)],
        strings={1: "cudaLaunchKernel", 7: "k7"},
    )
    found = rows(as_json(path))
    assert (found["f"]["instances"], found["f"]["kernels"], found["f"]["kernel_ns"]) == (2, 2, 15)
    assert found["f"]["cpu_ns"] == 100  # time inside f, the nested f not counted again
    assert found["f"]["gpu_span_ns"] == 95 - 40
    assert (found["g"]["kernels"], found["g"]["top_kernels"]) == (1, [{"name": "k7", "count": 1, "ns": 10}])
    outer = as_json(path, tree=True)["tree"][0]["children"][0]
    inner = outer["children"][0]
    assert (outer["name"], outer["kernels"], inner["name"], inner["kernels"], inner["children"][0]["kernels"]) == (
        "f",
        2,
        "f",
        1,
        1,
    )


def test_start_end_ranges_marks_domains_and_registered_strings(tmp_path: Path) -> None:
    path = write_export(
        tmp_path / "s.sqlite",
        nvtx=[
            (0, None, 75, "mydomain", None, 5, TID),  # domain create: names domain 5
            (1, 200, 60, "epoch", None, 0, TID),  # start/end range, need not nest
            (5, None, 34, "a mark", None, 0, TID),  # a mark: never a range
            (10, 50, 59, None, 9, 5, TID),  # registered string in domain 5
            (40, 300, 60, None, 9, 5, TID),  # overlaps the push/pop range and outlives epoch
        ],
        runtime=[(45, 46, TID, 1), (250, 251, TID, 2)],
        kernels=[(60, 70, 0, 1, 7), (260, 280, 0, 2, 7)],
        strings={1: "cudaLaunchKernel", 7: "kern", 9: "step"},
    )
    document = as_json(path)
    found = {(r["domain"], r["name"]): r for r in document["ranges"]}
    assert set(found) == {("", "epoch"), ("mydomain", "step")}
    assert found[("", "epoch")]["kernels"] == 1
    # The kernel at 45 is inside the push/pop step and the start/end step: counted once for "step".
    assert (found[("mydomain", "step")]["instances"], found[("mydomain", "step")]["kernels"]) == (2, 2)


def test_versioned_table_names_and_inline_kernel_names(tmp_path: Path) -> None:
    path = write_export(
        tmp_path / "v.sqlite",
        suffix="_V3",
        inline_kernel_names=True,
        nvtx=[(0, 100, 59, "step", None, 0, TID)],
        runtime=[(5, 6, TID, 1)],
        kernels=[(10, 30, 2, 1, "gemm_inline")],
    )
    found = rows(as_json(path))
    assert found["step"]["top_kernels"] == [{"name": "gemm_inline", "count": 1, "ns": 20}]
    assert rows(as_json(path, by="gpu"))["step"]["group"] == "GPU 2"


def test_work_goes_to_the_thread_that_launched_it(tmp_path: Path) -> None:
    path = write_export(
        tmp_path / "t.sqlite",
        nvtx=[(0, 100, 59, "step", None, 0, TID)],
        runtime=[(5, 6, OTHER_TID, 1)],
        kernels=[(10, 30, 0, 1, 7)],
        strings={7: "k"},
    )
    document = as_json(path)
    assert rows(document)["step"]["kernels"] == 0
    assert document["totals"]["outside_ranges"]["kernels"] == 1


def test_capture_without_cuda_reports_cpu_time_and_says_so(tmp_path: Path) -> None:
    path = write_export(tmp_path / "c.sqlite", with_cuda=False, nvtx=[(0, 100, 59, "step", None, 0, TID)])
    text = produce(ReportRequest(str(path)))
    assert text is not None
    assert "CPU time per NVTX range" in text and "step" in text
    assert "Note: no CUDA GPU activity in this capture" in text


def test_capture_without_nvtx_reports_gpu_totals_and_says_so(tmp_path: Path) -> None:
    path = write_export(
        tmp_path / "n.sqlite", with_nvtx=False, runtime=[(5, 6, TID, 1)], kernels=[(10, 30, 0, 1, 7)], strings={7: "k"}
    )
    text = produce(ReportRequest(str(path)))
    assert text is not None
    assert "GPU work: 1 kernels" in text and "(no NVTX ranges)" in text
    assert "Note: no NVTX events in this capture" in text


def test_nsys_rep_is_exported_once_and_cached_beside_it(tmp_path: Path) -> None:
    source = write_export(tmp_path / "src.sqlite", nvtx=[(0, 100, 59, "step", None, 0, TID)])
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"a report")
    calls = tmp_path / "calls.txt"
    bin_dir = tmp_path / "bin"
    # A stand-in for nsys that records its arguments and writes the export where --output says.
    fake = make_file(
        bin_dir / "nsys",
        f"""
        #!{sys.executable}
        import shutil, sys
        args = sys.argv[1:]
        open({str(calls)!r}, "a").write(" ".join(args) + "\\n")
        shutil.copyfile({str(source)!r}, args[args.index("--output") + 1])
    """,
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = autonvtx_env(PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "autonvtx", "report", str(rep)], capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stderr
        assert "step" in done.stdout
    assert (tmp_path / "run.sqlite").exists()
    recorded = calls.read_text().splitlines()
    assert len(recorded) == 1 and recorded[0].startswith("export --type sqlite")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".autonvtx-export-")]


def test_autonvtx_recording_gives_the_cpu_side_and_says_it_has_no_gpu_data(workdir: Path) -> None:
    make_file(
        workdir / "prog.py",
        """
        import nvtx
        for _ in range(3):
            with nvtx.annotate("outer", domain="app"):
                with nvtx.annotate("inner", domain="app"):
                    pass
    """,
    )
    recorded = run_autonvtx("prog.py", cwd=workdir)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.trace_path is not None
    document = as_json(recorded.trace_path, tree=True)
    assert document["has_gpu_data"] is False and document["kind"] == "autonvtx"
    found = rows(document)
    assert (found["outer"]["instances"], found["inner"]["instances"], found["outer"]["domain"]) == (3, 3, "app")
    assert found["outer"]["cpu_ns"] >= found["inner"]["cpu_ns"] > 0
    assert document["tree"][0]["children"][0]["children"][0]["name"] == "inner"
    text = produce(ReportRequest(str(recorded.trace_path)))
    assert text is not None and "CPU time per NVTX range" in text and "GPU %" not in text
    assert "holds NVTX ranges only" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["--html", "."], "is a directory"),
        (["-o", "no/such/dir/out.txt"], "no such directory"),
        # Root passes access() there: found by making a file (it was a traceback after the read).
        (["--html", "/proc/page.html"], "cannot write in '/proc'"),
        (["-o", "/proc/out.txt"], "cannot write in '/proc'"),
    ],
)
def test_unwritable_outputs_fail_before_reading(tmp_path: Path, args: list[str], message: str) -> None:
    path = write_export(tmp_path / "x.sqlite", nvtx=[(0, 100, 59, "step", None, 0, TID)])
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", str(path), *args],
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        cwd=tmp_path,
    )
    assert done.returncode == 2 and message in done.stderr and done.stderr.startswith("autonvtx: report: ")


def test_older_schema_without_interning_domains_or_process_ids(tmp_path: Path) -> None:
    # No textId/domainId in NVTX_EVENTS, no eventClass in the runtime table, no globalPid on
    # kernels (work is then joined by correlationId alone), kernel names inline.
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    db.execute("CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, globalTid INTEGER)")
    db.executemany(
        "INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?)",
        [(0, 100, 59, "step", TID), (10, 20, 59, "fwd", TID), (30, None, 34, "mark", TID)],
    )
    db.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, globalTid INTEGER, correlationId INTEGER)"
    )
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?)", [(12, 13, TID, 1), (50, 51, TID, 2)])
    db.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, correlationId INTEGER, demangledName TEXT)"
    )
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?)", [(20, 25, 1, "a"), (60, 70, 2, "b")])
    db.commit()
    db.close()
    found = rows(as_json(path))
    assert (found["step"]["kernels"], found["step"]["kernel_ns"], found["fwd"]["kernels"]) == (2, 15, 1)
    assert [k["name"] for k in found["step"]["top_kernels"]] == ["b", "a"]
    assert set(found) == {"step", "fwd"}
