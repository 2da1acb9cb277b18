"""autonvtx report on real Nsight Systems exports: numbers checked against an independent SQL join."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx, take_view

from autonvtx.report.output import ReportRequest, produce
from autonvtx.stats.model import ViewOptions

FIXTURES = Path(__file__).parent / "fixtures" / "nsys"
SAXPY = FIXTURES / "saxpy-mpi-cuda-nsys2022.2.sqlite"
TORCH = FIXTURES / "torch-2gpu-nsys2026.2.sqlite"

# The definition written out as one SQL query, independent of the report's sweep: a piece of
# GPU work belongs to every range, on the thread whose runtime call (same correlationId, same
# process; CUDA-backtrace rows excluded, they repeat the call) launched it, that contains the
# call's start; DISTINCT makes it count once per range name however many instances enclose it.
# Names go through row_name(): as recorded (--each), or with standalone digit runs as {n}.
INDEPENDENT = """
WITH rt AS (SELECT globalTid, start, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass NOT IN (67, 68, 69)),
work AS (
  SELECT 'k' AS kind, k.rowid AS id, k."end" - k.start AS ns, k.globalPid AS gpid, k.correlationId AS cid FROM CUPTI_ACTIVITY_KIND_KERNEL k
  UNION ALL SELECT 'c', m.rowid, m."end" - m.start, m.globalPid, m.correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY m
  UNION ALL SELECT 's', m.rowid, m."end" - m.start, m.globalPid, m.correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET m),
launched AS (SELECT w.kind, w.id, w.ns, rt.globalTid AS tid, rt.start AS t
             FROM work w JOIN rt ON rt.correlationId = w.cid AND rt.globalTid >> 24 = w.gpid >> 24),
r AS (SELECT n.globalTid AS tid, n.start, n."end", n.domainId AS domain, row_name(COALESCE(n.text, s.value)) AS name
      FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60)),
pairs AS (SELECT DISTINCT r.domain, r.name, l.kind, l.id, l.ns
          FROM launched l JOIN r ON r.tid = l.tid AND r.start <= l.t AND l.t <= r."end")
SELECT domain, name, SUM(kind = 'k'), SUM(CASE WHEN kind = 'k' THEN ns ELSE 0 END), SUM(ns) FROM pairs GROUP BY domain, name
"""


def domain_names(db: sqlite3.Connection) -> dict[int, str]:
    names = {0: ""}
    for domain, text in db.execute("SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75"):
        names[domain] = text
    return names


def grouped(name: str | None) -> str | None:
    """The rows' names by default, written independently of the report's rule (these exports' names
    hold neither hex literals nor "A-B" spans): a digit run no letter or digit touches is {n}."""
    return None if name is None else re.sub(r"(?<![A-Za-z0-9])[0-9]+(?![A-Za-z0-9])", "{n}", name)


def connect(path: Path, each: bool = True) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.create_function("row_name", 1, (lambda name: name) if each else grouped, deterministic=True)
    return db


def independent(path: Path, each: bool = True) -> dict[tuple[str, str], tuple[int, int, int]]:
    db = connect(path, each)
    try:
        domains = domain_names(db)
        return {
            (domains.get(d, f"domain {d}"), name): (kernels, kernel_ns, gpu_ns)
            for d, name, kernels, kernel_ns, gpu_ns in db.execute(INDEPENDENT)
        }
    finally:
        db.close()


def report_json(path: Path, **options: Any) -> dict[str, Any]:
    """The JSON report; `options` are ReportRequest's and the view options (ViewOptions') by name."""
    text = produce(ReportRequest(str(path), take_view(options), fmt="json", **options))
    assert text is not None
    return json.loads(text)


@pytest.fixture(scope="module")
def torch_json() -> dict[str, Any]:
    return report_json(TORCH, each=True)


@pytest.fixture(scope="module")
def torch_grouped() -> dict[str, Any]:
    return report_json(TORCH)


@pytest.mark.parametrize("each", [True, False], ids=["each", "grouped"])
@pytest.mark.parametrize("path", [SAXPY, TORCH], ids=["saxpy-2022.2", "torch-2026.2"])
def test_per_name_kernels_and_gpu_time_match_an_independent_join(
    path: Path, each: bool, request: pytest.FixtureRequest
) -> None:
    expected = independent(path, each)
    if path == TORCH:  # the module's fixtures already hold this report (seconds each)
        document = request.getfixturevalue("torch_json" if each else "torch_grouped")
    else:
        document = report_json(path, each=each)
    got = {
        (r["domain"], r["name"]): (r["kernels"], r["kernel_ns"], r["gpu_ns"])
        for r in document["ranges"]
        if r["kernels"] or r["gpu_ns"]
    }
    assert got == expected
    assert sum(kernels for kernels, _, _ in expected.values()) > 0


@pytest.mark.parametrize("each", [True, False], ids=["each", "grouped"])
def test_instances_and_cpu_time_are_the_ranges_recorded(
    torch_json: dict[str, Any], torch_grouped: dict[str, Any], each: bool
) -> None:
    db = connect(TORCH, each)
    counts = dict(
        db.execute(
            "SELECT row_name(COALESCE(n.text, s.value)), COUNT(*) FROM NVTX_EVENTS n LEFT JOIN StringIds s "
            "ON s.id = n.textId WHERE eventType IN (59, 60) GROUP BY 1"
        )
    )
    db.close()
    document = torch_json if each else torch_grouped
    assert {r["name"]: r["instances"] for r in document["ranges"]} == counts
    if each:
        row = next(r for r in document["ranges"] if r["name"] == "aten::empty, op_id = 990346")
        assert row["cpu_ns"] == 60111435104 - 60111430336


def test_numbered_names_of_an_export_share_a_row_unless_each(
    torch_json: dict[str, Any], torch_grouped: dict[str, Any]
) -> None:
    # 18,499 names as recorded, nearly each with its own op_id: 71 rows, each op's instances together.
    assert (len(torch_json["ranges"]), len(torch_grouped["ranges"])) == (18_499, 71)
    rows = {r["name"]: r for r in torch_grouped["ranges"]}
    copies = [r for r in torch_json["ranges"] if re.fullmatch(r"aten::copy_, op_id = \d+", r["name"])]
    row = rows["aten::copy_, op_id = {n}"]
    assert row["instances"] == sum(r["instances"] for r in copies) == 1_889
    # Nested instances of one row count once: no copy_ encloses another, so the CPU time is the sum.
    assert row["cpu_ns"] == sum(r["cpu_ns"] for r in copies)
    assert "FSDP::pre_forward (blocks.{n}._checkpoint_wrapped_module), op_id = {n}" in rows
    assert "ncclSend" in rows and not any(re.search(r"(?<![A-Za-z0-9])\d", name) for name in rows)
    assert torch_grouped["schema"] == torch_json["schema"] == "autonvtx-report/1"


def test_totals_split_the_capture_into_inside_outside_and_not_captured(torch_json: dict[str, Any]) -> None:
    db = sqlite3.connect(f"file:{TORCH}?mode=ro", uri=True)
    kernels, kernel_ns = db.execute('SELECT COUNT(*), SUM("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()
    db.close()
    totals = torch_json["totals"]
    assert (totals["capture"]["kernels"], totals["capture"]["kernel_ns"]) == (kernels, kernel_ns)
    # The window was cut from a longer capture: 31 operations were launched before it began.
    assert (
        totals["launch_not_captured"]["kernels"]
        + totals["launch_not_captured"]["memcpy"]
        + totals["launch_not_captured"]["memset"]
        == 31
    )
    tree = report_json(TORCH, tree=True)["tree"]
    inside = sum(child["kernels"] for root in tree for child in root["children"])
    assert inside + totals["outside_ranges"]["kernels"] + totals["launch_not_captured"]["kernels"] == kernels


def test_names_are_exactly_as_recorded_unless_strip_ids(torch_json: dict[str, Any]) -> None:
    names = {r["name"] for r in torch_json["ranges"]}
    assert "aten::detach_, seq = 45328, op_id = 990724" in names
    stripped = report_json(TORCH, strip_ids=True, each=True)
    rows = {r["name"]: r for r in stripped["ranges"]}
    assert "aten::detach_" in rows and not any("op_id" in name or "seq =" in name for name in rows)
    # Folding keeps every instance and every kernel: per name the sums of the unfolded rows.
    mm = [r for r in torch_json["ranges"] if r["name"].startswith("aten::addmm,")]
    assert rows["aten::addmm"]["instances"] == sum(r["instances"] for r in mm)
    assert rows["aten::addmm"]["kernels"] == sum(r["kernels"] for r in mm)
    assert rows["aten::addmm"]["top_kernels"][0]["name"].startswith("nvjet_")


def test_domains_registered_strings_and_ranks_of_the_2022_export() -> None:
    document = report_json(SAXPY, by="rank")
    rows = {(r["domain"], r["name"]): r for r in document["ranges"]}
    # MPI ranges live in the "MPI" domain with registered strings (textId); marks are not ranges.
    assert set(rows) == {
        ("", "saxpy"),
        ("MPI", "MPI_Init"),
        ("MPI", "MPI_Send"),
        ("MPI", "MPI_Recv"),
        ("MPI", "MPI_Finalize"),
    }
    assert {r["group"] for r in document["ranges"]} == {"rank 0"}  # from the NVTX thread name "MPI Rank 0"
    assert not any(note.startswith("--by rank:") for note in document["notes"])

    saxpy = rows[("", "saxpy")]
    assert (saxpy["instances"], saxpy["kernels"]) == (5, 5)
    assert saxpy["top_kernels"] == [{"name": "saxpy", "count": 5, "ns": saxpy["kernel_ns"]}]


def test_by_rank_on_an_export_without_ranks_says_each_process_is_its_pid() -> None:
    document = report_json(TORCH, by="rank")
    assert {r["group"] for r in document["ranges"]} == {"pid 144", "pid 145"}
    assert any(note.startswith("--by rank: no process of this export names its rank") for note in document["notes"])


@pytest.mark.parametrize("by", ["process", "rank", "thread"])
def test_groups_partition_the_work(torch_grouped: dict[str, Any], by: str) -> None:
    grouped = report_json(TORCH, by=by)
    assert len({r["group"] for r in grouped["ranges"]}) == 2  # two processes, one thread each with ranges
    whole: dict[str, int] = {}
    for r in grouped["ranges"]:
        whole[r["name"]] = whole.get(r["name"], 0) + r["kernels"]
    assert whole == {r["name"]: r["kernels"] for r in torch_grouped["ranges"]}


def test_by_gpu_splits_work_by_device() -> None:
    document = report_json(TORCH, by="gpu", strip_ids=True)
    db = sqlite3.connect(f"file:{TORCH}?mode=ro", uri=True)
    per_device = dict(
        db.execute(
            "SELECT k.deviceId, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
            "ON r.correlationId = k.correlationId AND r.globalTid >> 24 = k.globalPid >> 24 "
            'JOIN NVTX_EVENTS n ON n.globalTid = r.globalTid AND n.start <= r.start AND r.start <= n."end" '
            "AND n.text LIKE 'ProfilerStep%' GROUP BY 1"
        )
    )
    db.close()
    steps = {r["group"]: r["kernels"] for r in document["ranges"] if r["name"].startswith("ProfilerStep")}
    if per_device:
        assert steps == {f"GPU {d}": n for d, n in per_device.items()}
    assert {r["group"] for r in document["ranges"]} == {"GPU 0", "GPU 1"}
    assert all(r["kernels"] + r["memcpy"] + r["memset"] > 0 for r in document["ranges"])


def test_tree_counts_a_kernel_at_every_level_of_its_nesting() -> None:
    tree = report_json(TORCH, tree=True, strip_ids=True)["tree"]
    flat = {r["name"]: r for r in report_json(TORCH, strip_ids=True)["ranges"]}

    def nodes(node: dict[str, Any]) -> Any:
        yield node
        for child in node["children"]:
            yield from nodes(child)

    for root in tree:
        for node in nodes(root):
            assert node["kernels"] >= sum(child["kernels"] for child in node["children"])
    linear = [n for root in tree for n in nodes(root) if n["name"] == "aten::linear"]
    addmm = [c for n in linear for c in n["children"] if c["name"] == "aten::addmm"]
    assert sum(n["kernels"] for n in linear) == flat["aten::linear"]["kernels"]
    assert sum(n["kernels"] for n in addmm) == flat["aten::addmm"]["kernels"] > 0


def test_text_table_fits_the_terminal_and_shapes() -> None:
    text = produce(ReportRequest(str(TORCH), strip_ids=True, width=100, view=ViewOptions(top=5)))
    assert text is not None
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    header = next(i for i, line in enumerate(lines) if "GPU %" in line)
    body = [line for line in lines[header + 2 :] if line and not line.startswith(("      ", "Note:"))]
    assert len(body) == 5 and body[0].endswith("FlashAttnFunc")
    filtered = produce(ReportRequest(str(TORCH), strip_ids=True, view=ViewOptions(filter="nccl*", sort="name")))
    assert filtered is not None
    names = [
        line.split("  ")[-1].removeprefix("domain 1:")
        for line in filtered.splitlines()
        if " ns " in line or " ms " in line
    ]
    assert (
        names
        == sorted(names)
        == ["nccl:all_to_all", "ncclCommCount", "ncclGroupEnd", "ncclGroupStart", "ncclRecv", "ncclSend"]
    )


def test_filter_matches_an_exports_domain_and_name_as_a_recordings() -> None:
    # A recording's rows match `domain:name` as well as the name; an export's do the same.
    def names(pattern: str) -> list[str]:
        text = produce(ReportRequest(str(TORCH), strip_ids=True, view=ViewOptions(filter=pattern, sort="name")))
        assert text is not None
        return [line.split("  ")[-1] for line in text.splitlines() if " ns " in line or " ms " in line]

    in_domain = [
        "domain 1:ncclCommCount",
        "domain 1:ncclGroupEnd",
        "domain 1:ncclGroupStart",
        "domain 1:ncclRecv",
        "domain 1:ncclSend",
    ]
    assert names("domain 1:nccl*") == in_domain
    assert names("nccl*") == ["nccl:all_to_all", *in_domain]
    assert names("domain 1:*Group*") == in_domain[1:3]


def test_csv_has_one_row_per_range_name() -> None:
    text = produce(ReportRequest(str(SAXPY), fmt="csv"))
    assert text is not None
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["name"] for r in rows][0] == "saxpy" and len(rows) == 5
    assert {"name", "domain", "instances", "cpu_ns", "kernels", "gpu_ns", "gpu_span_ns", "memcpy_bytes"} <= set(rows[0])


def test_output_file_takes_its_format_from_the_extension(tmp_path: Path) -> None:
    target = tmp_path / "saxpy.json"
    assert produce(ReportRequest(str(SAXPY), output=str(target))) is None
    assert json.loads(target.read_text())["ranges"][0]["name"] == "saxpy"


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", *args],
        capture_output=True,
        text=True,
        env=env or autonvtx_env(),
        cwd=cwd,
        timeout=120,
    )


def test_cli_prints_the_table() -> None:
    done = cli(str(SAXPY))
    assert done.returncode == 0, done.stderr
    assert "saxpy" in done.stdout and "MPI:MPI_Init" in done.stdout and done.stderr == ""


@pytest.mark.parametrize("args", [[], ["--tree", "--by", "rank"]])
def test_an_empty_filter_result_names_the_pattern(args: list[str]) -> None:
    shown = cli(str(SAXPY), "--filter", "zz*", *args)
    assert shown.returncode == 0 and "(no range matches --filter 'zz*')" in shown.stdout, shown.stderr
    assert "no NVTX ranges" not in shown.stdout and "Note: no range" not in shown.stdout and shown.stderr == ""
    data = cli(str(SAXPY), "--filter", "zz*", "--format", "json", *args)
    assert data.stderr == "autonvtx: no range matches --filter 'zz*'\n"
    document = json.loads(data.stdout)
    assert document["ranges"] == [] and document["notes"][-1] == "no range matches --filter 'zz*'"


def _random_bytes(tmp: Path) -> Path:
    path = tmp / "random.sqlite"
    path.write_bytes(bytes(range(256)) * 64)
    return path


def _other_sqlite(tmp: Path) -> Path:
    path = tmp / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    db.commit()
    db.close()
    return path


def _corrupt_sqlite(tmp: Path) -> Path:
    path = tmp / "corrupt.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    return path


@pytest.mark.parametrize(
    "make, what",
    [
        (_random_bytes, "neither an SQLite file nor a JSON trace"),
        (_other_sqlite, "without Nsight Systems tables"),
        (_corrupt_sqlite, "not an SQLite database"),
        (lambda tmp: tmp / "missing.sqlite", "no such file"),
    ],
)
def test_not_an_export_is_one_line_and_status_2(tmp_path: Path, make: Any, what: str) -> None:
    path = make(tmp_path)
    done = cli(str(path))
    assert done.returncode == 2
    assert done.stderr.startswith(f"autonvtx: {path}: ") and what in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_nsys_rep_without_nsys_says_how(tmp_path: Path) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"not read")
    env = autonvtx_env(PATH=str(tmp_path / "empty-bin"))
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", str(rep)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"autonvtx: {rep}: reading a .nsys-rep needs Nsight Systems' `nsys` on PATH, which is not there; "
        f"expected `nsys export --type sqlite --output {tmp_path / 'run.sqlite'} {rep}` run where nsys is installed, "
        f"then `autonvtx report {tmp_path / 'run.sqlite'}`\n"
    )


@pytest.mark.parametrize("by", [None, "gpu"])
def test_threads_swept_in_several_processes_give_the_same_report(
    monkeypatch: pytest.MonkeyPatch, by: str | None
) -> None:
    from autonvtx.report.nsys import workers

    serial = report_json(TORCH, by=by, tree=True)
    monkeypatch.setattr(workers, "PARALLEL_FROM", 0)
    monkeypatch.setattr(workers, "available_cpus", lambda: 2)
    export = workers.NsysExport(str(TORCH))
    try:
        assert len(workers.split_threads(export, 2)) == 2  # two threads with NVTX ranges: two processes
    finally:
        export.close()
    parallel = report_json(TORCH, by=by, tree=True)
    key = lambda r: (r.get("group", ""), r["domain"], r["name"])  # noqa: E731
    assert sorted(parallel["ranges"], key=key) == sorted(serial["ranges"], key=key)
    assert parallel["totals"] == serial["totals"]


# Hostile input (issue 21): deep nesting, terminal escape sequences


def deep_trace(path: Path, depth: int, name: str = "f") -> Path:
    events = [
        {"ph": "X", "pid": 1, "tid": 1, "ts": i, "dur": 2 * (depth - i), "name": name, "cat": "d"} for i in range(depth)
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize(
    "args", [["--tree"], ["--tree", "--format", "json"], ["--tree", "--format", "csv"], ["--html", "page.html"]]
)
def test_a_deep_recursion_is_reported(tmp_path: Path, args: list[str]) -> None:
    deep_trace(tmp_path / "deep.json", 1500)
    done = cli("deep.json", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    if "--html" in args:
        assert (tmp_path / "page.html").stat().st_size > 1500 * 10
    elif "json" in args:
        # Decoding recurses too (1,500 levels are 3,000 nested values), past the C decoder's
        # fixed limit on 3.12+: the pure-Python scanner obeys sys.setrecursionlimit.
        import json.scanner

        decoder = json.JSONDecoder()
        decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(50_000)
        try:
            node, depth = decoder.decode(done.stdout)["tree"][0], 0
        finally:
            sys.setrecursionlimit(limit)
        while node["children"]:
            node, depth = node["children"][0], depth + 1
        assert depth == 1500
        # Linear in the nodes: a node indented by its depth made 6,000 levels a 2 GB document.
        assert len(done.stdout) < 1500 * 1000
    elif "csv" in args:
        records = list(csv.DictReader(io.StringIO(done.stdout)))
        assert [int(r["depth"]) for r in records] == list(range(1500))
    else:
        assert done.stdout.count("d:f") == 1500


def test_terminal_escape_sequences_in_names_are_shown_escaped(tmp_path: Path) -> None:
    deep_trace(tmp_path / "evil.json", 1, name="\x1b]0;pwned\x07\x1b[2J")
    done = cli("evil.json", "--each", cwd=tmp_path)  # the name exactly (its "0" stays)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in done.stdout


# One statistics model: `summary` and `report` on one trace (issue 20)


def nested_events() -> list[dict[str, Any]]:
    """step > (load, fwd > fwd (recursion) > mm), twice, on two threads of one process."""
    events: list[dict[str, Any]] = []
    for tid, base in ((1, 0), (2, 1000)):
        for i in range(2):
            t = base + 400 * i
            events += [
                {"ph": "X", "pid": 7, "tid": tid, "ts": t, "dur": 300, "name": "step", "cat": "app"},
                {"ph": "X", "pid": 7, "tid": tid, "ts": t + 10, "dur": 40 + i, "name": "load", "cat": "app"},
                {"ph": "X", "pid": 7, "tid": tid, "ts": t + 60, "dur": 200, "name": "fwd", "cat": "app"},
                {"ph": "X", "pid": 7, "tid": tid, "ts": t + 70, "dur": 150 - tid, "name": "fwd", "cat": "app"},
                {"ph": "X", "pid": 7, "tid": tid, "ts": t + 80, "dur": 20 * tid, "name": "mm", "cat": "app"},
            ]
    return events


def summary_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", "summary", *args],
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.parametrize(
    "view",
    [
        [],
        ["--tree"],
        ["--sort", "self"],
        ["--by", "thread"],
        ["--skip-first", "1"],
        ["--tree", "--filter", "mm"],
        ["--tree", "--top", "1"],
        ["--filter", "f*"],
    ],
)
def test_summary_and_report_print_the_same_table_for_one_trace(tmp_path: Path, view: list[str]) -> None:
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": nested_events()}))
    summary = summary_cli("t.json", *view, cwd=tmp_path)
    report = cli("t.json", *view, cwd=tmp_path)
    assert summary.returncode == 0 and report.returncode == 0, summary.stderr + report.stderr
    table = summary.stdout.strip("\n")
    assert "Time %" in table and table in report.stdout
    report.stdout.index("CPU time per NVTX range: t.json")


def test_report_json_of_a_trace_carries_the_summary_figures(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": nested_events()}))
    assert summary_cli("t.json", "-o", "s.json", cwd=tmp_path).returncode == 0
    assert cli("t.json", "-o", "r.json", cwd=tmp_path).returncode == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    report = json.loads((tmp_path / "r.json").read_text())
    assert (summary["schema"], report["schema"]) == ("autonvtx-summary/1", "autonvtx-report/1")
    fields = ("total_ns", "self_ns", "median_ns", "min_ns", "max_ns", "stddev_ns", "percent", "wall_percent")
    expected = {(r["domain"], r["name"]): tuple(r[f] for f in fields) + (r["count"],) for r in summary["ranges"]}
    found = {(r["domain"], r["name"]): tuple(r[f] for f in fields) + (r["instances"],) for r in report["ranges"]}
    assert found == expected and len(found) == 4
    assert all(r["cpu_ns"] == r["total_ns"] for r in report["ranges"])


def test_tree_filter_keeps_what_encloses_a_match_in_both_commands(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": nested_events()}))
    summary = summary_cli("t.json", "--tree", "--filter", "mm", cwd=tmp_path)
    names = [line.rsplit("  ", 1)[-1].strip() for line in summary.stdout.splitlines()[2:] if line.strip()]
    assert names == ["app:step", "app:fwd", "app:fwd", "app:mm"]
    document = json.loads(cli("t.json", "--tree", "--filter", "mm", "--format", "json", cwd=tmp_path).stdout)
    node, path = document["tree"][0], []
    while node["children"]:
        assert len(node["children"]) == 1
        node = node["children"][0]
        path.append(node["name"])
    assert path == ["step", "fwd", "fwd", "mm"]


def test_report_reads_a_perfetto_trace_as_summary_does(workdir: Path) -> None:
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
    recorded = run_autonvtx("--trace", str(workdir / "t.pftrace"), "prog.py", cwd=workdir, trace=False)
    assert recorded.returncode == 0, recorded.stderr
    report = cli("t.pftrace", cwd=workdir)
    summary = summary_cli("t.pftrace", cwd=workdir)
    assert report.returncode == 0, report.stderr
    assert "app:outer" in report.stdout and summary.stdout.strip("\n") in report.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["-o", "out.xlsx"], "report: -o: 'out.xlsx' must end in .txt, .csv or .json"),
        (["--sort", "gpu"], "--sort: an autonvtx recording (no GPU data) has no figures for 'gpu'"),
        (
            ["--by", "gpu"],
            "--by gpu: t.json is an autonvtx recording, which holds no GPU data; expected process, rank or thread",
        ),
    ],
)
def test_report_refuses_what_it_cannot_write_or_sort(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": nested_events()}))
    done = cli("t.json", *args, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("autonvtx: ") and message in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out.xlsx").exists()


def test_summary_refuses_gpu_only_view_options(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": nested_events()}))
    done = summary_cli("t.json", "--sort", "kernels", cwd=tmp_path)
    assert (
        done.returncode == 2
        and "--sort: an autonvtx recording (no GPU data) has no figures for 'kernels'" in done.stderr
    )


def test_a_terminal_gets_the_first_rows_and_first_a_line_saying_how_to_see_more(tmp_path: Path) -> None:
    # Issue 23: the torch export printed 26,829 lines, the hint on the last. A terminal (a
    # pseudo-terminal here) gets the first rows; a pipe or a file still gets them all.
    import pty

    export = TORCH
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "autonvtx", "report", str(export), "--each"],
        stdout=follower,
        stderr=subprocess.PIPE,
        env=autonvtx_env(),
    ) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=120)
    os.close(leader)
    lines = b"".join(chunks).decode().splitlines()
    assert proc.returncode == 0, proc.stderr
    assert lines[0].startswith("showing the first 30 of 18,499 ranges by gpu: --top N for more"), lines[0]
    assert len(lines) < 120
    piped = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", str(export), "--each"],
        capture_output=True,
        text=True,
        timeout=120,
        env=autonvtx_env(),
    )
    assert not piped.stdout.startswith("showing") and piped.stdout.count("\n") > 18_499
