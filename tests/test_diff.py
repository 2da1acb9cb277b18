"""autonvtx diff: real exports against themselves, generated runs with a known slowdown, the CLI."""

from __future__ import annotations

import csv
import io
import json
import random
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, make_file
from synthetic_runs import FUNCTIONS, Program, write_runs

from autonvtx.cli.diff import expand_against
from autonvtx.report.compare.diff import DiffOptions, compare
from autonvtx.report.compare.diffrun import DiffRequest, produce_diff
from autonvtx.report.compare.gather import Job, Progress, gather, summarize
from autonvtx.report.profile import ReportOptions
from autonvtx.stats.model import ViewOptions

FIXTURES = Path(__file__).parent / "fixtures" / "nsys"
TORCH = str(FIXTURES / "torch-2gpu-nsys2026.2.sqlite")
SAXPY = str(FIXTURES / "saxpy-mpi-cuda-nsys2022.2.sqlite")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args], capture_output=True, text=True, env=autonvtx_env(), timeout=300
    )


# Real exports against themselves


@pytest.mark.parametrize("fixture", [TORCH, SAXPY])
@pytest.mark.parametrize("runs", [1, 2])
def test_export_against_itself_changes_nothing(fixture: str, runs: int) -> None:
    result = produce_diff(DiffRequest((fixture,) * runs, (fixture,) * runs, strip_ids=True, fmt="json"))
    assert result.text is not None
    document = json.loads(result.text)
    assert document["schema"] == "autonvtx-diff/2"
    assert document["has_gpu_data"] is True
    assert len(document["ranges"]) > 3
    for row in document["ranges"]:
        assert row["verdict"] == "same", row
        assert row["change_ns"] == 0
        assert row["base"]["instances"] == row["new"]["instances"] > 0
        assert row["ratio"] in (None, 1.0)
        assert row["p_value"] is None  # a copy is not a second run: one run a side, no test
    assert result.failing == []
    if runs > 1:
        assert any("counted once" in note for note in document["notes"])


def test_export_against_itself_per_path_and_per_process() -> None:
    result = produce_diff(
        DiffRequest(
            (TORCH, TORCH), (TORCH, TORCH), strip_ids=True, fmt="json", view=ViewOptions(tree=True, by="process")
        )
    )
    document = json.loads(result.text or "")
    paths = [row["path"] for row in document["ranges"]]
    assert any(len(path) > 2 for path in paths)
    assert {row["group"] for row in document["ranges"]} == {"python3 (pid 144)", "python3 (pid 145)"}
    assert all(row["verdict"] == "same" and row["change_ns"] == 0 for row in document["ranges"])


def test_gpu_time_is_compared_where_both_sides_have_it() -> None:
    base = summarize(Job(SAXPY))
    diff = compare([base], [base])
    metrics = {row.name: row.metric for row in diff.rows}
    assert metrics["saxpy"] == "gpu"  # launched kernels
    assert metrics["MPI:MPI_Send"] == "cpu"  # launched nothing


# Generated runs with a known change


def test_twenty_percent_slower_is_flagged_every_time_unchanged_at_most_once(tmp_path: Path) -> None:
    rng = random.Random(2026)
    flagged = {name: 0 for name in FUNCTIONS}
    for comparison in range(10):
        where = tmp_path / str(comparison)
        base = write_runs(where, "base", 5, Program(), rng)
        new = write_runs(where, "new", 5, Program(slower={"forward": 1.2}), rng)
        summaries = gather([Job(path) for path in base + new], workers=1)
        diff = compare(summaries[:5], summaries[5:])
        verdicts = {row.name: row for row in diff.rows}
        assert verdicts["forward"].verdict == "slower", verdicts["forward"]
        assert verdicts["forward"].p_value is not None and verdicts["forward"].p_value < 0.01
        low, high = verdicts["forward"].interval or (0.0, 0.0)
        assert 1.0 < low < 1.2 < high
        for name in FUNCTIONS:
            if name != "forward" and verdicts[name].verdict in ("slower", "faster"):
                flagged[name] += 1
    assert all(count <= 1 for count in flagged.values()), flagged


def test_new_and_gone_ranges(tmp_path: Path) -> None:
    from autonvtx.recorder.model import ProcessRecording, Range
    from autonvtx.recorder.trace import write_chrome_trace

    def run(path: Path, names: list[str]) -> str:
        ranges = [Range(1, 1, "", name, 1000 * i, 1000 * i + 500) for i, name in enumerate(names)]
        write_chrome_trace([ProcessRecording(1, ranges=ranges, flush_ns=10**6)], path)
        return str(path)

    base = run(tmp_path / "a.json", ["kept", "old_name"])
    new = run(tmp_path / "b.json", ["kept", "new_name"])
    document = json.loads(produce_diff(DiffRequest((base,), (new,), fmt="json")).text or "")
    verdicts = {row["name"]: row["verdict"] for row in document["ranges"]}
    assert verdicts == {"kept": "same", "old_name": "gone", "new_name": "new"}
    assert document["counts"] == {"slower": 0, "faster": 0, "unclear": 0, "same": 1, "new": 1, "gone": 1}


def test_numbered_names_are_compared_as_one_row_unless_each(tmp_path: Path) -> None:
    from autonvtx.recorder.model import ProcessRecording, Range
    from autonvtx.recorder.trace import write_chrome_trace

    def run(path: Path, steps: int, ns: int) -> str:
        ranges = [Range(1, 1, "", f"step {i}", 1000 * i, 1000 * i + ns) for i in range(steps)]
        write_chrome_trace([ProcessRecording(1, ranges=ranges, flush_ns=10**6)], path)
        return str(path)

    base, new = run(tmp_path / "a.json", 4, 500), run(tmp_path / "b.json", 6, 500)
    grouped = list(csv.DictReader(io.StringIO(produce_diff(DiffRequest((base,), (new,), fmt="csv")).text or "")))
    assert [
        (r["name"], *map(float, (r["base_instances"], r["new_instances"], r["base_cpu_ns"], r["new_cpu_ns"])))
        for r in grouped
    ] == [("step {n}", 4, 6, 2000, 3000)]
    each = produce_diff(DiffRequest((base,), (new,), fmt="csv", view=ViewOptions(each=True))).text or ""
    verdicts = {r["name"]: r["verdict"] for r in csv.DictReader(io.StringIO(each))}
    assert verdicts == {**{f"step {i}": "same" for i in range(4)}, "step 4": "new", "step 5": "new"}
    shown = cli("diff", base, "--against", new, "--each", "--filter", "step 5")
    assert shown.returncode == 0 and "step 5" in shown.stdout and "step {n}" not in shown.stdout, shown.stderr


def test_single_runs_use_the_noise_threshold(tmp_path: Path) -> None:
    rng = random.Random(7)
    base = write_runs(tmp_path, "b", 1, Program(noise=_quiet()), rng)
    new = write_runs(tmp_path, "n", 1, Program(slower={"forward": 1.2}, noise=_quiet()), rng)
    diff = produce_diff(DiffRequest(tuple(base), tuple(new))).diff
    verdicts = {row.name: row.verdict for row in diff.rows}
    assert verdicts["forward"] == "slower"
    assert verdicts["backward"] == "same"
    assert "no test" in diff.test
    strict = produce_diff(DiffRequest(tuple(base), tuple(new), options=DiffOptions(noise_pct=25))).diff
    assert {row.name: row.verdict for row in strict.rows}["forward"] == "same"


def _quiet():  # type: ignore[no-untyped-def]
    from synthetic_runs import Noise

    return Noise(run=0.0, function=0.0, call=0.001)


def _slow_runs(tmp_path: Path, factor: float = 1.2) -> tuple[list[str], list[str]]:
    rng = random.Random(11)
    return (  # 5 a side: the fewest for which the rank test can reach p < 0.01
        write_runs(tmp_path, "base", 5, Program(), rng),
        write_runs(tmp_path, "new", 5, Program(slower={"forward": factor}), rng),
    )


# The command line


def test_cli_fail_over_exits_one_when_a_range_slowed_more(tmp_path: Path) -> None:
    base, new = _slow_runs(tmp_path)
    failed = cli("diff", *base, "--against", *new, "--fail-over", "10", "--no-progress")
    assert failed.returncode == 1, failed.stderr
    assert "slower" in failed.stdout
    assert "autonvtx: diff: 1 range(s) slowed by more than 10%: forward: +" in failed.stderr
    passed = cli("diff", *base, "--against", *new, "--fail-over", "50")
    assert passed.returncode == 0, passed.stderr


def test_cli_text_csv_and_tree(tmp_path: Path) -> None:
    base, new = _slow_runs(tmp_path)
    text = cli("diff", *base, "--against", *new)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[2].startswith("test: exact Mann-Whitney rank test over per-run totals")
    first = next(line for line in lines if line.startswith(("slower", "faster", "same")))
    assert first.startswith("slower") and first.endswith("forward")
    table = cli("diff", *base, "--against", *new, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert {row["name"]: row["verdict"] for row in rows}["forward"] == "slower"
    tree = cli("diff", *base, "--against", *new, "--tree", "--format", "json")
    paths = {tuple(row["path"]): row["verdict"] for row in json.loads(tree.stdout)["ranges"]}
    assert paths[("train", "forward")] == "slower"
    assert paths[("train",)] in ("slower", "unclear", "same")
    indented = cli("diff", *base, "--against", *new, "--tree").stdout
    assert "\n" in indented and any(line.endswith("  forward") for line in indented.splitlines())


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    done = cli("diff", str(tmp_path / "missing.sqlite"), "--against", TORCH)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"autonvtx: {tmp_path / 'missing.sqlite'}: no such file; expected an Nsight Systems export (.sqlite or .nsys-rep) "
        "or an autonvtx trace (.json)"
    ]
    missing = cli("diff", TORCH)
    assert missing.returncode == 2 and "--against" in missing.stderr and "Traceback" not in missing.stderr


def test_files_after_against_belong_to_new() -> None:
    assert expand_against(["a", "b", "--against", "c", "d", "--top", "3", "e"]) == [
        "a",
        "b",
        "--against",
        "c",
        "--against",
        "d",
        "--top",
        "3",
        "e",
    ]
    assert expand_against(["a", "--against", "c", "--", "-x"]) == ["a", "--against", "c", "--", "-x"]
    # Spelled with "=", the files after it are NEW too (they were taken for BASE, without a word).
    assert expand_against(["a", "b", "--against=c", "d"]) == ["a", "b", "--against", "c", "--against", "d"]


def test_parallel_reading_matches_one_process(tmp_path: Path) -> None:
    base, new = _slow_runs(tmp_path)
    jobs = [Job(path, ReportOptions(strip_ids=True, with_tree=True)) for path in [TORCH, *base, *new]]
    alone = gather(jobs, workers=1)
    together = gather(jobs, workers=2)
    assert [s.path for s in together] == [s.path for s in alone]
    assert [(s.ranges, s.paths) for s in together] == [(s.ranges, s.paths) for s in alone]


def test_progress_bar_only_when_asked() -> None:
    stream = io.StringIO()
    progress = Progress(3, "reading", True, stream)
    for _ in range(3):
        progress.step()
    assert stream.getvalue().count("\r") == 3 and "3/3 files" in stream.getvalue()
    assert stream.getvalue().endswith("\n")
    quiet = io.StringIO()
    silent = Progress(3, "reading", False, quiet)
    silent.step()
    assert quiet.getvalue() == ""


def test_cli_progress_option_draws_on_stderr(tmp_path: Path) -> None:
    base, new = _slow_runs(tmp_path)
    shown = cli("diff", *base, "--against", *new, "--progress")
    assert "10/10 files" in shown.stderr
    hidden = cli("diff", *base, "--against", *new)  # stderr is a pipe here: no bar
    assert "files" not in hidden.stderr


def test_dask_local_cluster_reads_the_same(tmp_path: Path) -> None:
    distributed = pytest.importorskip(
        "distributed", reason="dask.distributed not installed (pip install 'autonvtx[dask]')"
    )
    base, new = _slow_runs(tmp_path)
    # processes=False keeps the cluster inside this process: light, no ports beyond loopback.
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        on_dask = produce_diff(DiffRequest(tuple(base), tuple(new), fmt="json", scheduler=cluster.scheduler_address))
    local = produce_diff(DiffRequest(tuple(base), tuple(new), fmt="json", jobs=1))
    assert json.loads(on_dask.text or "") == json.loads(local.text or "")


def test_unreachable_scheduler_is_a_usage_error() -> None:
    pytest.importorskip("distributed", reason="dask.distributed not installed (pip install 'autonvtx[dask]')")
    done = cli("diff", SAXPY, "--against", SAXPY, "--scheduler", "tcp://127.0.0.1:9")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("autonvtx: --scheduler 'tcp://127.0.0.1:9': cannot reach a Dask scheduler")


# Runs of a real program under the recorder

PROGRAM = """
    import sys, time

    # Sleeps long beside a loaded machine's wake-up delays (tens of ms at worst).
    def work():
        time.sleep(0.05 * float(sys.argv[1]))

    def steady():
        time.sleep(0.05)

    for _ in range(3):
        work()
        steady()
"""


def test_recorded_runs_of_a_program_made_slower(tmp_path: Path) -> None:
    program = make_file(tmp_path / "busy.py", PROGRAM)
    # Sleeps, not busy-waits: on a loaded machine a call is only lengthened by its wake-up latency.
    traces: dict[str, list[str]] = {"1.0": [], "2.0": []}
    for factor, found in traces.items():
        for run in range(5):  # 5 a side: the fewest for which the rank test can reach p < 0.01
            trace = tmp_path / f"run_{factor}_{run}.json"
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "autonvtx",
                    "run",
                    "--trace",
                    str(trace),
                    "-t",
                    "__main__",
                    str(program),
                    factor,
                ],
                capture_output=True,
                text=True,
                env=autonvtx_env(),
                cwd=REPO,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            found.append(str(trace))
    document = json.loads(cli("diff", *traces["1.0"], "--against", *traces["2.0"], "--format", "json").stdout)
    rows = {row["name"]: row for row in document["ranges"]}  # names in autonvtx's NVTX domain
    work, steady = rows["autonvtx:work"], rows["autonvtx:steady"]
    assert work["verdict"] == "slower", work
    assert work["base"]["instances"] == work["new"]["instances"] == 3
    assert work["p_value"] == pytest.approx(2 / 252)  # every doubled run slower than every other
    assert 50 < work["change_pct"] < 150, work
    assert abs(steady["change_pct"]) < 40, steady
    assert document["ranges"][0]["name"] == "autonvtx:work" or document["ranges"][0]["verdict"] == "slower"


# The page


class PageParts(HTMLParser):
    """The tree's boxes and the table's rows, from the DOM as Chromium left it after the script ran."""

    def __init__(self) -> None:
        super().__init__()
        self.boxes: list[dict[str, str]] = []
        self.bars: list[str] = []
        self.table_rows: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        classes = found.get("class", "").split()
        if tag == "div" and classes[:1] == ["box"]:
            self.boxes.append(found)
        if tag == "span" and classes == ["bar"]:
            self.bars.append(found.get("style", ""))
        if tag == "tr" and "data-name" in found:
            self.table_rows.append(found)


def test_diff_page_in_a_browser(tmp_path: Path) -> None:
    from test_report_html import browse

    base, new = _slow_runs(tmp_path)
    page = tmp_path / "diff.html"
    result = produce_diff(DiffRequest(tuple(base), tuple(new), html=str(page)))
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=|@import|url\(|https?://""", text)  # self-contained
    parts = PageParts()
    parts.feed(browse(page, tmp_path, "--dump-dom").stdout)
    boxes = {box["data-path"]: box for box in parts.boxes}
    assert set(boxes) == {
        "train",
        "train > forward",
        "train > backward",
        "train > load_batch",
        "train > optimizer_step",
    }
    assert boxes["train > forward"]["data-verdict"] == "slower"
    assert "slower" in boxes["train > forward"]["class"].split()
    assert float(boxes["train > forward"]["data-change"]) > 0
    # Coloured by change: the slowed function's bar is red, unchanged ones grey (same) or amber (unclear).
    assert any("rgb(230," in bar for bar in parts.bars)
    colours = {"same": "rgb(160, 160, 160)", "unclear": "rgb(215, 190, 110)"}
    for path, box in boxes.items():
        if box["data-verdict"] in colours:
            assert any(colours[box["data-verdict"]] in bar for bar in parts.bars), path
    assert sum(box["data-verdict"] in colours for box in boxes.values()) >= 3
    table = {row["data-name"]: row["data-verdict"] for row in parts.table_rows}
    assert table == {row.name: row.verdict for row in result.diff.rows}
    assert parts.table_rows[0]["data-name"] == "forward"  # real changes first


def test_top_and_filter_apply_per_group() -> None:
    result = produce_diff(
        DiffRequest((TORCH,), (TORCH,), strip_ids=True, fmt="json", view=ViewOptions(by="process", top=2))
    )
    groups = [row["group"] for row in json.loads(result.text or "")["ranges"]]
    assert groups == ["python3 (pid 144)"] * 2 + ["python3 (pid 145)"] * 2
    only = produce_diff(DiffRequest((TORCH,), (TORCH,), strip_ids=True, fmt="json", view=ViewOptions(filter="aten::*")))
    names = [row["name"] for row in json.loads(only.text or "")["ranges"]]
    assert names and all(name.startswith("aten::") for name in names)


def test_scale_benchmark_runs_quickly() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_scale.py"), "--files", "2", "--comparisons", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "report --across ranks, 2 files:" in done.stdout and "goal: under 60 s" in done.stdout
    assert "20% slower function flagged slower: 2 of 2" in done.stdout


def test_output_file_form_from_its_extension(tmp_path: Path) -> None:
    written = tmp_path / "diff.csv"
    assert produce_diff(DiffRequest((SAXPY,), (SAXPY,), output=str(written))).text is None
    assert written.read_text().startswith("name,group,path,verdict,metric")
    refused = cli("diff", SAXPY, "--against", SAXPY, "-o", str(tmp_path / "diff.xlsx"))
    assert refused.returncode == 2 and "must end in .txt, .csv or .json" in refused.stderr


def test_deep_recursion_compares_per_path(tmp_path: Path) -> None:
    """A recursion 1,500 ranges deep: one path per level, compared without running out of stack."""
    events = [
        {"ph": "X", "pid": 1, "tid": 1, "ts": i, "dur": 2 * (1500 - i), "name": "f", "cat": "d"} for i in range(1500)
    ]
    trace = tmp_path / "deep.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    result = produce_diff(
        DiffRequest((str(trace),), (str(trace),), fmt="csv", html=str(tmp_path / "d.html"), view=ViewOptions(tree=True))
    )
    records = list(csv.DictReader(io.StringIO(result.text or "")))
    assert len(records) == 1500
    assert [len(r["path"].split(" > ")) for r in records] == list(range(1, 1501))
    assert {r["verdict"] for r in records} == {"same"}
    filtered = produce_diff(
        DiffRequest((str(trace),), (str(trace),), fmt="csv", view=ViewOptions(tree=True, filter="f"))
    )
    assert len(list(csv.DictReader(io.StringIO(filtered.text or "")))) == 1500


@pytest.mark.parametrize(
    "shown, pattern, expected",
    [
        ("autonvtx:forward", "forward", True),
        ("autonvtx:forward", "autonvtx:*", True),
        ("forward", "forward", True),
        ("aten::mm", "aten::*", True),
        ("aten::mm", "mm", False),
        ("aten::mm", ":mm", False),
        ("autonvtx:forward", "back*", False),
    ],
)
def test_filter_matches_a_name_with_or_without_its_domain(shown: str, pattern: str, expected: bool) -> None:
    from autonvtx.report.compare.gather import name_matches

    assert name_matches(shown, pattern) is expected


@pytest.mark.parametrize("sort", ["self", "mean", "lost", "imbalance"])
def test_a_sort_key_a_diff_has_no_figures_for_is_refused_before_reading(sort: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "diff", "missing-a.json", "--against", "missing-b.json", "--sort", sort],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=autonvtx_env(),
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"--sort: a diff of runs has no figures for '{sort}'" in done.stderr


@pytest.mark.parametrize(
    "data, args, message",
    [
        ("recording", ["--by", "gpu"], "--by gpu: {path} is an autonvtx recording, which holds no GPU data"),
        ("export", ["--group", "class"], "--group: applies to autonvtx recordings; {path} is an Nsight Systems export"),
        ("export", ["--skip-first", "1"], "--skip-first: applies to autonvtx recordings; {path} is an Nsight Systems"),
    ],
)
def test_view_options_the_files_cannot_answer_are_refused_as_report_refuses_them(
    tmp_path: Path, data: str, args: list[str], message: str
) -> None:
    # diff printed an empty table for a recording --by gpu, and ignored --group and --skip-first
    # on exports, where report refuses them: the same check, the same line, in both.
    if data == "recording":
        path = str(tmp_path / "t.json")
        Path(path).write_text(
            json.dumps({"traceEvents": [{"ph": "X", "name": "f", "ts": 0, "dur": 5, "pid": 1, "tid": 1}]})
        )
    else:
        path = SAXPY
    done = cli("diff", path, "--against", path, *args)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith("autonvtx: ") and message.format(path=path) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    report = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", path, *args], capture_output=True, text=True, env=autonvtx_env()
    )
    assert report.returncode == 2 and message.format(path=path) in report.stderr, report.stderr


def test_each_command_lists_the_sort_keys_it_has() -> None:
    helps = {
        command: subprocess.run(
            [sys.executable, "-m", "autonvtx", command, "--help"], capture_output=True, text=True, env=autonvtx_env()
        ).stdout
        for command in ("summary", "report", "diff")
    }
    assert "--sort [total|self|count|mean|max|cpu|instances|name]\n" in helps["summary"]
    assert "--sort [change|name|gpu|cpu|total|kernels|instances|count]" in helps["diff"]
    assert "|imbalance|" in helps["report"] and "change" not in helps["report"].split("--sort", 1)[1].split("\n")[0]


def test_an_unknown_sort_key_is_refused_naming_the_commands_own_keys() -> None:
    """A key no table has: one line, exit 2, listing this command's keys (not every table's)."""
    refused = {
        command: subprocess.run(
            [sys.executable, "-m", "autonvtx", command, *args, "--sort", "bogus"],
            capture_output=True,
            text=True,
            env=autonvtx_env(),
        )
        for command, args in (("summary", ["x.json"]), ("report", [SAXPY]), ("diff", [SAXPY, "--against", SAXPY]))
    }
    for command, done in refused.items():
        assert done.returncode == 2 and "'bogus' is not a sort key; expected one of" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert (
        refused["summary"]
        .stderr.rstrip()
        .endswith("expected one of total, self, count, mean, max, cpu, instances, name")
    )
    assert "change" not in refused["report"].stderr and "self" not in refused["diff"].stderr
