"""The statistics model (stats.model, its Python twin stats.python_twin) and its text, CSV and JSON forms, on recordings built by hand; `autonvtx summary`."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_file

from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.recorder.trace import read_chrome_trace, write_chrome_trace
from autonvtx.report.render.data import stats_csv, stats_json
from autonvtx.report.render.render import write_summary
from autonvtx.report.render.text import format_duration, stats_text
from autonvtx.stats.model import RangeStats, ViewOptions, filtered_out, name_template, row_order, summary_notes
from autonvtx.stats.python_twin import summarize
from autonvtx.stats.view import arrange


def push(name: str, start: int, end: int, *, tid: int = 1, domain: str = "d", **kw: object) -> Range:
    return Range(1, tid, domain, name, start, end, **kw)  # type: ignore[arg-type]


def stats_of(*ranges: Range, **kw: object) -> dict[str, RangeStats]:
    rec = ProcessRecording(pid=1, ranges=list(ranges), **kw)  # type: ignore[arg-type]
    return {s.name: s for s in summarize([rec])}


def instances(durations: list[int]) -> list[Range]:
    # Back to back on one thread, so none is nested in another.
    ranges, t = [], 1_000
    for d in durations:
        ranges.append(push("f", t, t + d))
        t += d
    return ranges


@pytest.mark.parametrize(
    ("durations", "total", "mean", "median", "minimum", "maximum", "stddev"),
    [
        ([10], 10, 10.0, 10.0, 10, 10, 0.0),
        ([20, 10], 30, 15.0, 15.0, 10, 20, math.sqrt(50)),
        ([1, 2, 3, 4, 100], 110, 22.0, 3.0, 1, 100, math.sqrt(7610 / 4)),
        ([5, 5, 5, 5], 20, 5.0, 5.0, 5, 5, 0.0),
        ([0, 7, 3, 1000, 12, 6], 1028, 1028 / 6, 6.5, 0, 1000, 405.98210141),
        ([10**15, 10**15 + 2], 2 * 10**15 + 2, 10**15 + 1, 10**15 + 1, 10**15, 10**15 + 2, math.sqrt(2)),
    ],
)
def test_statistics(
    durations: list[int], total: int, mean: float, median: float, minimum: int, maximum: int, stddev: float
) -> None:
    (s,) = stats_of(*instances(durations)).values()
    assert (s.count, s.total_ns, s.self_ns, s.min_ns, s.max_ns) == (len(durations), total, total, minimum, maximum)
    assert s.mean_ns == pytest.approx(mean)
    assert s.median_ns == median
    assert s.stddev_ns == pytest.approx(stddev, rel=1e-9)
    assert (s.percent, s.open_count) == (100.0, 0)


# Each case: ranges, then the expected self time per name (summed over instances).
SELF_TIME_CASES = {
    "leaf": ([push("a", 0, 10)], {"a": 10}),
    "one child": ([push("a", 0, 10), push("b", 2, 5)], {"a": 7, "b": 3}),
    "children in pop order": ([push("c", 6, 8), push("b", 2, 5), push("a", 0, 10)], {"a": 5, "b": 3, "c": 2}),
    "only direct children count": (
        [push("a", 0, 100), push("b", 10, 60), push("c", 20, 30), push("c", 40, 45)],
        {"a": 50, "b": 35, "c": 15},
    ),
    "child with the parent's span": ([push("a", 0, 10), push("b", 0, 10)], {"a": 0, "b": 10}),
    "siblings touching": ([push("a", 0, 10), push("b", 10, 20), push("c", 10, 15)], {"a": 10, "b": 5, "c": 5}),
    "zero-length child": ([push("a", 0, 10), push("b", 4, 4)], {"a": 10, "b": 0}),
    "other thread is not a child": ([push("a", 0, 10), push("b", 2, 5, tid=2)], {"a": 10, "b": 3}),
    "other domain is a child": ([push("a", 0, 10), push("b", 2, 5, domain="torch")], {"a": 7, "b": 3}),
    "start/end neither parent nor child": (
        [push("a", 0, 10), push("s", 1, 3, kind="startend"), push("t", 0, 20, kind="startend"), push("b", 4, 6)],
        {"a": 8, "s": 2, "t": 20, "b": 2},
    ),
    "recursion sums instances": ([push("f", 0, 10), push("f", 2, 8), push("f", 3, 4)], {"f": 10 - 6 + 6 - 1 + 1}),
}


@pytest.mark.parametrize(("ranges", "expected"), SELF_TIME_CASES.values(), ids=SELF_TIME_CASES.keys())
def test_self_time(ranges: list[Range], expected: dict[str, int]) -> None:
    assert {name: s.self_ns for name, s in stats_of(*ranges).items()} == expected


def test_groups_by_domain_and_name_across_processes_and_sorts_by_total() -> None:
    first = ProcessRecording(pid=1, ranges=[Range(1, 1, "x", "f", 0, 30), Range(1, 1, "y", "f", 40, 50)])
    second = ProcessRecording(pid=2, ranges=[Range(2, 2, "x", "f", 0, 5), Range(2, 2, "x", "g", 10, 20)])
    stats = summarize([first, second])
    assert [(s.domain, s.name, s.count, s.total_ns) for s in stats] == [
        ("x", "f", 2, 35),
        ("x", "g", 1, 10),  # ties on total: by domain, then name
        ("y", "f", 1, 10),
    ]
    assert sum(s.percent for s in stats) == pytest.approx(100.0)
    assert stats[0].percent == pytest.approx(100 * 35 / 55)


def test_open_instances_are_counted() -> None:
    s = stats_of(push("a", 0, 10), push("a", 20, 50, is_open=True))["a"]
    assert (s.count, s.open_count, s.total_ns) == (2, 1, 40)


def test_nothing_recorded() -> None:
    assert summarize([ProcessRecording(pid=1)]) == []
    assert "(no ranges recorded)" in stats_text([])


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 ns"),
        (812, "812 ns"),
        (999.5, "1000 ns"),
        (1_000, "1.000 us"),
        (3_250, "3.250 us"),
        (1_500_000, "1.500 ms"),
        (999_999_999, "1000.000 ms"),
        (1_204_000_000, "1.204 s"),
        (3_723_000_000_000, "3,723.000 s"),
    ],
)
def test_format_duration(ns: float, text: str) -> None:
    assert format_duration(ns) == text


def sample_stats() -> list[RangeStats]:
    rec = ProcessRecording(
        pid=1,
        ranges=[
            Range(1, 1, "autonvtx", "Trainer.step", 0, 2_500_000_000),
            Range(1, 1, "autonvtx", "Encoder.forward", 100, 1_200_000_100),
            Range(1, 1, "", "load_batch", 1_300_000_000, 1_300_000_812),
            Range(1, 1, "", "load_batch", 1_400_000_000, 1_400_003_250, is_open=True),
        ],
    )
    return summarize([rec])


def test_format_text_table() -> None:
    text = stats_text(sample_stats(), notes=["3 events were dropped"])
    lines = text.splitlines()
    assert lines[0].split() == [
        "Time",
        "%",
        "%",
        "Wall",
        "Total",
        "Self",
        "Instances",
        "Mean",
        "Median",
        "Min",
        "Max",
        "StdDev",
        "Range",
    ]
    assert set(lines[1].replace(" ", "")) == {"-"}
    # % Wall: the share of the recorded time (first start to last end), nesting left as it is.
    assert lines[2].split() == [
        "67.6",
        "100.0",
        "2.500",
        "s",
        "1.300",
        "s",
        "1",
        *["2.500", "s"] * 4,
        "0",
        "ns",
        "autonvtx:Trainer.step",
    ]
    assert lines[3].endswith("autonvtx:Encoder.forward")
    assert lines[4].split()[:5] == ["0.0", "0.0", "4.062", "us", "4.062"]
    assert "2 (1 open)" in lines[4] and lines[4].endswith("  load_batch")  # default domain: the bare name
    # Aligned: every number column ends where its header ends.
    for header in ("Total", "Instances", "StdDev"):
        column_end = lines[0].index(header) + len(header)
        for line in lines[2:5]:
            assert line[column_end - 1] != " " and line[column_end] == " ", (header, line)
    assert lines[-2:] == ["", "Note: 3 events were dropped"]


def test_format_text_without_notes_ends_with_the_table() -> None:
    assert not stats_text(sample_stats()).rstrip("\n").splitlines()[-1].startswith("Note")


def test_csv_parses_back() -> None:
    stats = sample_stats()
    rows = list(csv.DictReader(io.StringIO(stats_csv(stats))))
    assert list(rows[0]) == [
        "domain",
        "name",
        "count",
        "total_ns",
        "self_ns",
        "mean_ns",
        "median_ns",
        "min_ns",
        "max_ns",
        "stddev_ns",
        "percent",
        "open_count",
        "wall_percent",
        "group",
        "depth",
        "path",
    ]
    for row, s in zip(rows, stats):
        assert (row["domain"], row["name"]) == (s.domain, s.name)
        assert (int(row["count"]), int(row["total_ns"]), int(row["self_ns"]), int(row["open_count"])) == (
            s.count,
            s.total_ns,
            s.self_ns,
            s.open_count,
        )
        assert float(row["median_ns"]) == s.median_ns and float(row["stddev_ns"]) == s.stddev_ns
    assert len(rows) == len(stats) == 3


def test_json_parses_back() -> None:
    stats = sample_stats()
    document = json.loads(stats_json(stats, notes=["a note"]))
    assert document["notes"] == ["a note"]
    assert [RangeStats(**entry) for entry in document["ranges"]] == stats


@pytest.mark.parametrize(
    ("rec", "expected"),
    [
        (ProcessRecording(pid=1), []),
        (ProcessRecording(pid=1, dropped_events=1), ["1 event was dropped when"]),
        (ProcessRecording(pid=1, dropped_events=12_345), ["12,345 events were dropped when"]),
        (ProcessRecording(pid=1, ranges=[push("a", 0, 1, is_open=True)]), ["1 range was still open at exit"]),
        (ProcessRecording(pid=1, unmatched_pops=2), ["2 pops or range ends had no open range"]),
        (
            ProcessRecording(pid=1, dropped_events=2, unmatched_pops=1, ranges=[push("a", 0, 1, is_open=True)] * 2),
            ["2 events were dropped", "2 ranges were still open", "1 pop or range end had"],
        ),
    ],
)
def test_summary_notes(rec: ProcessRecording, expected: list[str]) -> None:
    notes = summary_notes([rec])
    assert len(notes) == len(expected)
    for note, start in zip(notes, expected):
        assert note.startswith(start)


def test_write_summary_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    write_summary(sample_stats(), "-", notes=["n"])
    out, err = capsys.readouterr()
    assert out == ""
    assert err == stats_text(sample_stats(), notes=["n"])


@pytest.mark.parametrize(
    ("name", "render"),
    [
        ("sum.csv", lambda s, n: stats_csv(s)),
        ("sum.CSV", lambda s, n: stats_csv(s)),
        ("sum.json", lambda s, n: stats_json(s, notes=n)),
        ("sum.txt", lambda s, n: stats_text(s, notes=n)),
        ("summary", lambda s, n: stats_text(s, notes=n)),
    ],
)
def test_write_summary_picks_the_form_by_extension(tmp_path: Path, name: str, render: object) -> None:
    stats, notes = sample_stats(), ["n"]
    path = tmp_path / name
    path.write_text("old")
    write_summary(stats, path, notes=notes)
    assert path.read_text() == render(stats, notes)  # type: ignore[operator]
    assert os.listdir(tmp_path) == [name]


def test_summary_of_a_trace_matches_the_run(tmp_path: Path) -> None:
    t0 = 9_876_543_210_123_457
    rec = ProcessRecording(
        pid=5,
        ranges=[
            Range(5, 5, "autonvtx", "step", t0, t0 + 1_001),
            Range(5, 5, "", "inner", t0 + 1, t0 + 3),
            Range(5, 6, "autonvtx", "step", t0 + 3, t0 + 7, is_open=True),
            Range(5, 5, "io", "read", t0, t0 + 9, kind="startend", end_tid=6),
        ],
        unmatched_pops=1,
    )
    path = tmp_path / "run.json.gz"
    write_chrome_trace([rec], path)
    back = read_chrome_trace(path)
    assert summarize(back) == summarize([rec])
    assert summary_notes(back) == summary_notes([rec])


# Options that shape the table


def training_run() -> list[ProcessRecording]:
    """Two steps, each one forward through two layers of one class; the first step slower (warm-up)."""
    ranges = []
    for step, (start, scale) in enumerate([(0, 10), (1_000_000, 1)]):
        ranges.append(push("step", start, start + 100_000 * scale))
        for layer in range(2):
            at = start + 10_000 * scale + layer * 40_000 * scale
            ranges.append(push(f"enc.layers.{layer}.attn (Attention)", at, at + 30_000 * scale))
            ranges.append(push("matmul", at + 1_000 * scale, at + 11_000 * scale))
    return [
        ProcessRecording(pid=1, ranges=ranges, label="rank 0"),
        ProcessRecording(pid=2, ranges=[push("step", 0, 500_000, tid=2)], label="rank 1"),
    ]


def rows(options: ViewOptions, recordings: list[ProcessRecording] | None = None) -> list[RangeStats]:
    return summarize(recordings or training_run(), options)


def test_wall_percent_is_a_share_of_the_recorded_time_not_of_all_ranges() -> None:
    (step,) = [s for s in rows(ViewOptions(by="process")) if s.name == "step" and "process 1" in s.group]
    assert step.wall_percent == pytest.approx(100 * 1_100_000 / 1_100_000)
    assert step.percent < step.wall_percent  # Time % divides by all totals, nested ones included


def test_group_class_folds_instances_of_a_class_into_one_row() -> None:
    folded = {s.name: s for s in rows(ViewOptions(group="class"))}
    assert set(folded) == {"step", "Attention", "matmul"}
    assert folded["Attention"].count == 4
    assert folded["Attention"].total_ns == 2 * (300_000 + 30_000)


def test_tree_rows_follow_their_parent_with_self_time() -> None:
    tree = rows(ViewOptions(tree=True, group="class"))
    assert [("  " * s.depth) + s.name for s in tree] == ["step", "  Attention", "    matmul"]
    attention = tree[1]
    assert attention.path == "d:step > d:Attention"
    assert attention.self_ns == attention.total_ns - 2 * (100_000 + 10_000)


def test_skip_first_leaves_out_warm_up_instances() -> None:
    (step,) = [s for s in rows(ViewOptions(skip_first=1, by="process")) if s.name == "step" and "process 1" in s.group]
    assert step.count == 1 and step.max_ns == 100_000
    assert not [s for s in rows(ViewOptions(skip_first=1, by="process")) if "process 2" in s.group]


def test_by_rank_gives_a_table_per_rank() -> None:
    table = rows(ViewOptions(by="rank"))
    assert {s.group for s in table} == {"rank 0", "rank 1"}
    text = stats_text(table)
    assert "== rank 0 ==" in text and "== rank 1 ==" in text


# Ties (Attention and step: 440 us of self time each; Attention and matmul: 4 instances each)
# are broken by name.
@pytest.mark.parametrize(
    "sort, first", [("total", "step"), ("count", "Attention"), ("max", "step"), ("self", "Attention"), ("mean", "step")]
)
def test_sort_and_top(sort: str, first: str) -> None:
    table = rows(ViewOptions(sort=sort, top=1, group="class", by="process"))
    assert [s.name for s in table if "process 1" in s.group] == [first]


def test_filter_keeps_matching_names() -> None:
    assert [s.name for s in rows(ViewOptions(filter="enc.*", each=True))] == [
        "enc.layers.0.attn (Attention)",
        "enc.layers.1.attn (Attention)",
    ]
    assert [s.name for s in rows(ViewOptions(filter="enc.*"))] == ["enc.layers.{n}.attn (Attention)"]


def test_filter_reads_an_unnamed_range_as_every_table_does() -> None:
    """`--filter '*'` keeps every row, an unnamed range's too: the statistics rows, an export's
    rows and its tree nodes match by the one glob (`stats.view.glob_matches`)."""
    from autonvtx.report.figures import Row, TreeNode
    from autonvtx.report.views import PlacedNode

    unnamed = ProcessRecording(pid=1, ranges=[Range(1, 1, "", "", 0, 10), Range(1, 1, "", "work", 20, 30)])
    assert sorted(s.name for s in summarize([unnamed], ViewOptions(filter="*"))) == ["", "work"]
    assert Row("", "", "").view_matches("*") and PlacedNode(TreeNode("", "", ""), 0, None).view_matches("*")
    both = [("lib", "step"), ("", "lib:step")]  # a domain's range, and a name holding the colon
    assert all(Row("", d, n).view_matches("lib:step") for d, n in both)
    assert [Row("", d, n).view_matches("step") for d, n in both] == [True, False]


# Names that differ only in their numbers share a row unless --each (issue 23)


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("step 0", "step {n}"),
        ("epoch 3 step 17", "epoch {n} step {n}"),
        ("train 12", "train {n}"),
        ("encoder.layers.3.attn (MultiheadAttention)", "encoder.layers.{n}.attn (MultiheadAttention)"),
        ("ProfilerStep#12", "ProfilerStep#{n}"),
        ("aten::mm, seq = 45440, op_id = 990760", "aten::mm, seq = {n}, op_id = {n}"),
        ("<lambda> at 0x7f3a2B90", "<lambda> at {n}"),
        ("batch_7", "batch_{n}"),
        ("lr 0.001", "lr {n}.{n}"),
        ("x -1", "x -{n}"),
        ("шаг 3", "шаг {n}"),
        ("12", "{n}"),
        # Digits that touch a letter or a non-ASCII character belong to a word; so does a hex literal a letter ends.
        ("conv2d", "conv2d"),
        ("layer1", "layer1"),
        ("fp16 matmul", "fp16 matmul"),
        ("шаг3", "шаг3"),
        ("0x1fz", "0x1fz"),
        ("0x", "0x"),
        # A span names a place, not an instance: a line-span region's default name, a date.
        ("train lines 12-40", "train lines 12-40"),
        ("2024-01-05", "2024-01-05"),
        ("step {n}", "step {n}"),
        ("", ""),
    ],
)
def test_name_template(name: str, row: str) -> None:
    assert name_template(name) == row


def numbered_steps() -> list[ProcessRecording]:
    """Three steps named from a template ("step {i}"), a load inside the first two."""
    return [
        ProcessRecording(
            pid=1,
            ranges=[
                push("step 0", 0, 100),
                push("load 0", 10, 30),
                push("step 1", 100, 160),
                push("load 1", 110, 115),
                push("step 2", 200, 290),
            ],
        )
    ]


def test_a_grouped_row_holds_exact_statistics_over_every_instance() -> None:
    table = {s.name: s for s in summarize(numbered_steps())}
    assert set(table) == {"step {n}", "load {n}"}
    step, load = table["step {n}"], table["load {n}"]
    # By hand: steps of 100, 60 and 90 ns; loads of 20 and 5 inside the first two.
    assert (step.count, step.total_ns, step.self_ns, step.min_ns, step.max_ns) == (3, 250, 225, 60, 100)
    assert step.mean_ns == pytest.approx(250 / 3)
    assert step.median_ns == 90  # of all three: no per-name row (each one step) could give it
    assert step.stddev_ns == pytest.approx(
        math.sqrt(((100 - 250 / 3) ** 2 + (60 - 250 / 3) ** 2 + (90 - 250 / 3) ** 2) / 2)
    )
    assert (load.count, load.total_ns, load.self_ns, load.median_ns) == (2, 25, 25, 12.5)
    assert load.stddev_ns == pytest.approx(math.sqrt(2 * 7.5**2))
    assert step.percent == pytest.approx(100 * 250 / 275)
    each = {s.name: (s.count, s.total_ns, s.self_ns) for s in summarize(numbered_steps(), ViewOptions(each=True))}
    assert each == {
        "step 0": (1, 100, 80),
        "step 1": (1, 60, 55),
        "step 2": (1, 90, 90),
        "load 0": (1, 20, 20),
        "load 1": (1, 5, 5),
    }


def test_tree_groups_numbered_names_at_each_level() -> None:
    recording = ProcessRecording(
        pid=1,
        ranges=[
            push("epoch 0", 0, 1000),
            push("step 0", 0, 100),
            push("step 1", 200, 400),
            push("epoch 1", 1000, 2000),
            push("step 0", 1000, 1300),
            push("eval", 1500, 1600),
        ],
    )
    tree = summarize([recording], ViewOptions(tree=True))
    assert [("  " * s.depth + s.name, s.count, s.total_ns, s.self_ns) for s in tree] == [
        ("epoch {n}", 2, 2000, 1300),
        ("  step {n}", 3, 600, 600),
        ("  eval", 1, 100, 100),
    ]
    assert tree[1].path == "d:epoch {n} > d:step {n}" and tree[1].median_ns == 200


def test_skip_first_leaves_out_the_first_instances_of_the_grouped_name() -> None:
    # A numbered step's warm-up is the first step: with --each, each step is a range of its own
    # whose one instance is its warm-up.
    table = {s.name: s for s in summarize(numbered_steps(), ViewOptions(skip_first=1))}
    assert (table["step {n}"].count, table["step {n}"].total_ns) == (2, 150)
    assert (table["load {n}"].count, table["load {n}"].total_ns) == (1, 5)
    assert summarize(numbered_steps(), ViewOptions(skip_first=1, each=True)) == []
    # Under --group class each recorded name keeps its own warm-up (each layer compiles once).
    by_class = {
        s.name: s.count for s in rows(ViewOptions(skip_first=1, group="class", by="process")) if "process 1" in s.group
    }
    grouped = {s.name: s.count for s in rows(ViewOptions(skip_first=1, by="process")) if "process 1" in s.group}
    assert (by_class["Attention"], grouped["enc.layers.{n}.attn (Attention)"]) == (2, 3)


def shown(every: list[RangeStats], options: ViewOptions) -> tuple[list[RangeStats], str | None]:
    """The table `options` show of `every` row, and why it is empty where --filter emptied it."""
    table = arrange(every, options.view, row_order(options.sort))
    return table, filtered_out(every, table, options)


def test_an_empty_filter_result_names_the_pattern() -> None:
    every = rows(ViewOptions())
    table, why = shown(every, ViewOptions(filter="nothing*"))
    assert table == [] and why == "no range matches --filter 'nothing*'"
    text = stats_text(table, notes=[why], empty=why)
    assert "(no range matches --filter 'nothing*')" in text and "Note:" not in text and "recorded" not in text
    assert shown([], ViewOptions(filter="x")) == ([], None)  # nothing recorded: the table says that
    assert "(no ranges recorded)" in stats_text([])
    _, why = shown(every, ViewOptions(filter="enc.layers.0*"))
    assert why is not None and "'step {n}'; --each for a row per name" in why
    each = ViewOptions(filter="enc.layers.0*", each=True)
    assert [s.name for s in shown(rows(each), each)[0]] == ["enc.layers.0.attn (Attention)"]


def test_summary_says_which_filter_matched_nothing(tmp_path: Path) -> None:
    nested_trace(tmp_path / "t.json", 3, name="step 1")
    shown = autonvtx(tmp_path, "summary", "t.json", "--filter", "nothing*")
    assert shown.returncode == 0 and "(no range matches --filter 'nothing*')" in shown.stdout, shown.stderr
    assert "no ranges recorded" not in shown.stdout
    written = autonvtx(tmp_path, "summary", "t.json", "--filter", "step 1", "-o", "s.json")
    assert written.returncode == 0 and written.stderr.startswith("autonvtx: no range matches --filter 'step 1' ("), (
        written.stderr
    )
    assert json.loads((tmp_path / "s.json").read_text())["ranges"] == []
    exact = autonvtx(tmp_path, "summary", "t.json", "--filter", "step 1", "--each", "--tree")
    assert exact.returncode == 0 and "d:step 1" in exact.stdout and "d:step {n}" not in exact.stdout


@pytest.mark.skipif(sys.version_info < (3, 12), reason="regions need sys.monitoring (3.12+)")
def test_our_regions_named_from_a_template_share_a_row(tmp_path: Path) -> None:
    make_file(
        tmp_path / "loops.py",
        """
        def train(steps):
            total = 0
            for i in range(steps):
                total += i
            total += 1
            return total

        train(7)
        train(5)
    """,
    )
    make_file(
        tmp_path / "c.toml",
        """
        [[regions]]
        function = "__main__:train"
        loop = "first"

        [[regions]]
        function = "__main__:train"
        lines = "5-6"
    """,
    )
    done = autonvtx(tmp_path, "run", "--config", "c.toml", "--summary", "s.json", "loops.py")
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r["count"] for r in json.loads((tmp_path / "s.json").read_text())["ranges"]}
    # The loop's default name "{qualname} {i}" is one row; the span's "train lines 5-6" names a place.
    assert rows == {"train {n}": 12, "train lines 5-6": 2}
    each = autonvtx(tmp_path, "run", "--config", "c.toml", "--summary", "e.json", "--each", "loops.py")
    assert each.returncode == 0, each.stderr
    rows = {r["name"]: r["count"] for r in json.loads((tmp_path / "e.json").read_text())["ranges"]}
    assert rows == {**{f"train {i}": 1 for i in range(12)}, "train lines 5-6": 2}  # {i} counts on across calls


def test_run_summary_says_which_filter_matched_nothing(tmp_path: Path) -> None:
    make_file(
        tmp_path / "prog.py",
        """
        import nvtx
        for step in range(3):
            with nvtx.annotate(f"step {step}"):
                pass
    """,
    )
    done = autonvtx(tmp_path, "run", "--summary", "--filter", "nothing*", "prog.py")
    assert done.returncode == 0 and "(no range matches --filter 'nothing*')" in done.stderr, done.stderr
    assert "no ranges recorded" not in done.stderr and "Note: no range" not in done.stderr
    written = autonvtx(tmp_path, "run", "--summary", "s.csv", "--filter", "nothing*", "prog.py")
    assert "autonvtx: no range matches --filter 'nothing*'" in written.stderr, written.stderr
    shown = autonvtx(tmp_path, "run", "--summary", "--filter", "step {n}", "prog.py")
    assert shown.returncode == 0 and "step {n}" in shown.stderr and "  3  " in shown.stderr, shown.stderr


def test_colored_text_only_when_asked() -> None:
    assert "\x1b[" not in stats_text(rows(ViewOptions()))
    assert "\x1b[1m" in stats_text(rows(ViewOptions()), color=True)


# One rule for optional values and suffixes (`--summary [PATH]`, `--trace PATH`, `summary -o`)


def autonvtx(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    make_file(tmp_path / "script.py", "print('ran')\n")
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--summary", "out.html", "script.py"], "--summary: 'out.html' must end in .txt, .csv or .json"),
        (["run", "--summary=out.md", "script.py"], "--summary: 'out.md' must end in .txt, .csv or .json"),
        (["run", "--trace", "t.txt", "script.py"], "--trace: 't.txt' must end in .json or .json.gz"),
        (["summary", "t.json", "-o", "x.html"], "summary: -o: 'x.html' must end in .txt, .csv or .json"),
        (["run", "--tree", "script.py"], "shape --summary; add --summary"),
    ],
)
def test_output_names_whose_suffix_does_not_fit_are_refused(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "t.json").write_text('{"traceEvents": []}')
    result = autonvtx(tmp_path, *args)
    assert result.returncode == 2 and "ran" not in result.stdout
    assert result.stderr.startswith("autonvtx: ") and message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args, written",
    [
        (["run", "--summary", "script.py"], None),
        (["run", "--summary", "s.csv", "script.py"], "s.csv"),
        (["run", "--summary=s.json", "script.py"], "s.json"),
    ],
)
def test_summary_takes_the_next_word_only_when_it_is_an_output_name(
    tmp_path: Path, args: list[str], written: str | None
) -> None:
    result = autonvtx(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ran\n"
    if written is None:
        assert "Time %" in result.stderr
    else:
        assert (tmp_path / written).is_file()


# Hostile input (issue 21): deep nesting, and names that carry terminal escape sequences


def nested_trace(path: Path, depth: int, name: str = "f") -> Path:
    """A Chrome trace of one recursive function `depth` calls deep, on one thread."""
    events = [
        {"ph": "X", "pid": 1, "tid": 1, "ts": i, "dur": 2 * (depth - i), "name": name, "cat": "d"} for i in range(depth)
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_summary_tree_of_a_deep_recursion_is_printed(tmp_path: Path) -> None:
    nested_trace(tmp_path / "deep.json", 1500)
    result = autonvtx(tmp_path, "summary", "deep.json", "--tree")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.endswith("d:f")]
    assert len(lines) == 1500
    assert lines[-1].endswith("  " * 1499 + "d:f")


def test_terminal_escape_sequences_in_names_do_not_reach_the_terminal(tmp_path: Path) -> None:
    nested_trace(tmp_path / "evil.json", 2, name="\x1b]0;pwned\x07\x1b[31mred\x9b2J")
    result = autonvtx(tmp_path, "summary", "evil.json", "--each")  # the name exactly (its "0" stays)
    assert result.returncode == 0, result.stderr
    assert not any(ch in result.stdout for ch in "\x1b\x07\x9b")
    assert "\\x1b]0;pwned\\x07\\x1b[31mred\\x9b2J" in result.stdout
    # Machine-readable forms keep the name exactly.
    result = autonvtx(tmp_path, "summary", "evil.json", "-o", "s.json", "--each")
    assert result.returncode == 0, result.stderr
    names = {row["name"] for row in json.loads((tmp_path / "s.json").read_text())["ranges"]}
    assert names == {"\x1b]0;pwned\x07\x1b[31mred\x9b2J"}
