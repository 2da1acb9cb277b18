"""`autonvtx suggest`: one measured run of a program, and the rules worth keeping from it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import autonvtx_env, make_file

from autonvtx.suggest.calls import IMPORT_MARK, Measurement, build_tree, settle
from autonvtx.suggest.choice import Limits, choose

# A program with a data loader, a heavy function, a hot tiny helper and heavy work done while a
# module is imported. The loops are sized so that each heavy call lasts milliseconds and the
# helper's calls a fraction of a microsecond, far on either side of 20x a range's cost.
PROGRAM = Path(__file__).resolve().parent / "fixtures" / "suggest"


def write_program(directory: Path) -> Path:
    shutil.copytree(PROGRAM, directory, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    return directory / "train.py"


def autonvtx(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=timeout,
    )


def selected(config_path: Path) -> dict[str, set[str]]:
    """module -> include patterns, as autonvtx reads the config."""
    from autonvtx.configfile import load_config

    config = load_config([str(config_path)])
    found: dict[str, set[str]] = {}
    for rule in config.rules:
        for module in rule.modules:
            found.setdefault(module, set()).update(rule.include)
    return found


@pytest.fixture(scope="module")
def suggested(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """One suggestion for the program (a measured run is the slow part: made once)."""
    directory = tmp_path_factory.mktemp("suggest")
    write_program(directory)
    done = autonvtx("suggest", "-o", "rules.toml", "train.py", "3", cwd=directory)
    return done, directory, directory / "rules.toml"


def test_selects_the_heavy_function_the_loader_and_their_callers(suggested: tuple) -> None:
    done, _, config = suggested
    assert config.exists(), done.stderr
    rules = selected(config)
    assert "heavy" in rules.get("shop.model", set()), config.read_text()
    assert "load_batch" in rules.get("shop.data", set()), config.read_text()
    assert {"train_step", "main"} <= rules.get("__main__", set()), config.read_text()


def test_leaves_out_the_hot_helper_and_import_time_work(suggested: tuple) -> None:
    _, _, config = suggested
    patterns = {pattern for includes in selected(config).values() for pattern in includes}
    assert "tiny" not in patterns, config.read_text()
    assert "build_table" not in patterns, config.read_text()
    assert "*" not in patterns


def test_each_pattern_says_its_share_and_calls(suggested: tuple) -> None:
    _, _, config = suggested
    text = config.read_text()
    heavy = next(line for line in text.splitlines() if line.strip().startswith('"heavy"'))
    assert "% of time, 4 calls, mean" in heavy
    assert "autonvtx run --dry-run --config FILE" in text


def test_keeps_the_programs_output_and_exit_status(suggested: tuple) -> None:
    done, _, _ = suggested
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("trained "), done.stdout
    assert "autonvtx: suggest: " in done.stderr
    assert "Traceback" not in done.stderr


def test_list_and_dry_run_explain_the_suggested_rules(suggested: tuple) -> None:
    _, directory, config = suggested
    listed = autonvtx("list", "--config", str(config), "shop.model", "shop.data", cwd=directory)
    assert listed.returncode == 0, listed.stderr
    assert "shop.model:heavy  function" in listed.stdout
    assert "shop.data:load_batch  function" in listed.stdout
    dry = autonvtx("run", "--dry-run", "--config", str(config), "train.py", cwd=directory)
    assert dry.returncode == 0, dry.stderr
    assert "__main__:train_step  function" in dry.stdout
    assert "unmatched" not in dry.stdout


def test_the_suggested_rules_range_what_was_suggested(suggested: tuple) -> None:
    _, directory, config = suggested
    trace = directory / "check.json"
    done = autonvtx("run", "--config", str(config), "--trace", str(trace), "train.py", "3", cwd=directory)
    assert done.returncode == 3, done.stderr
    import json

    names = {event["name"] for event in json.loads(trace.read_text())["traceEvents"] if event.get("ph") == "X"}
    assert {"heavy", "load_batch", "train_step", "main"} <= names
    assert "tiny" not in names


def test_writes_to_standard_output_after_the_programs_own(tmp_path: Path) -> None:
    make_file(tmp_path / "work.py", "def work():\n    return sum(range(300000))\n\nprint(work())\n")
    done = autonvtx("suggest", "--min-share", "0", "work.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first, _, rest = done.stdout.partition("\n")
    assert first == str(sum(range(300000)))
    assert rest.startswith("# Suggested by: autonvtx suggest --min-share 0 work.py")
    assert '"work",' in rest


def test_imports_after_the_program_are_not_taken_from_its_time(tmp_path: Path) -> None:
    # The recorder imports what writes its summary after the program's last line: counted as the
    # program's imports, they left a short run a time near or below zero, its one function
    # holding 300-600% of it (or, on a loaded machine, over the cost budget and left out).
    make_file(tmp_path / "work.py", "def work():\n    return sum(range(300000))\n\nwork()\n")
    done = autonvtx("suggest", "--min-share", "0", "work.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    share = re.search(r'"work",  # ([0-9.]+)% of time', done.stdout)
    assert share is not None, done.stdout
    assert float(share.group(1)) <= 100.0


def test_rule_options_replace_the_broad_rules_of_the_measured_run(tmp_path: Path) -> None:
    write_program(tmp_path)
    done = autonvtx("suggest", "-t", "shop.*", "-o", "narrow.toml", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rules = selected(tmp_path / "narrow.toml")
    assert set(rules) == {"shop.model", "shop.data"}, (tmp_path / "narrow.toml").read_text()
    assert "# Suggested by: autonvtx suggest -t 'shop.*' train.py" in (tmp_path / "narrow.toml").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("missing.py",), r"^autonvtx: .*missing\.py.*No such file or directory"),
        (("-o", "nowhere/rules.toml", "train.py"), r"^autonvtx: suggest: -o 'nowhere/rules.toml': no such directory"),
        ((), r"^autonvtx: suggest: missing SCRIPT, -m MODULE or -c CODE"),
        (("--max-patterns", "0", "train.py"), r"^autonvtx: suggest: Invalid value for '--max-patterns'"),
    ],
)
def test_bad_input_is_one_line_and_status_2_before_the_program_runs(tmp_path: Path, args: tuple, message: str) -> None:
    import re

    write_program(tmp_path)
    done = autonvtx("suggest", *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), done.stderr
    assert "trained" not in done.stdout


# The choice itself, on measurements made by hand: what a rule keeps and why.


def measured(rows: list[tuple[tuple[str, ...], int, int]], cost: float = 100.0, run_ns: int = 0) -> Measurement:
    tree = build_tree([(path, count, total, 0) for path, count, total in rows])
    run = run_ns or sum(total for path, _, total in rows if len(path) == 1)
    return settle(Measurement(roots=tree, range_cost_ns=cost, run_ns=run))


def test_a_dispatcher_around_one_ranged_call_is_left_to_it() -> None:
    m = measured(
        [
            (("m:main",), 1, 10_000_000),
            (("m:main", "torch:Module._call_impl"), 10, 9_000_000),
            (("m:main", "torch:Module._call_impl", "m:Net.forward"), 10, 8_900_000),
        ]
    )
    chosen = {member.name for rule in choose(m).rules for entry in rule.entries for member in entry.members}
    assert chosen == {"m:main", "m:Net.forward"}


def test_time_under_imports_is_left_out_of_the_run_and_of_its_functions() -> None:
    m = measured(
        [
            ((IMPORT_MARK,), 1, 6_000_000),
            ((IMPORT_MARK, "lib:register"), 1, 5_000_000),
            (("m:main",), 1, 4_000_000),
            (("m:main", IMPORT_MARK), 1, 1_000_000),
        ],
        run_ns=10_000_000,
    )
    assert m.import_ns == 7_000_000
    assert m.functions["m:main"].net_ns == 3_000_000 - 100  # less the import and one range's cost
    suggestion = choose(m)
    names = {member.name for rule in suggestion.rules for entry in rule.entries for member in entry.members}
    assert names == {"m:main"}
    assert suggestion.left_out == {"run only while importing": 1}


def test_methods_of_one_name_in_a_module_share_one_glob_when_all_are_long() -> None:
    m = measured(
        [
            (("m:main",), 1, 100_000_000),
            (("m:main", "m:A.forward"), 10, 40_000_000),
            (("m:main", "m:B.forward"), 10, 30_000_000),
            (("m:main", "m:C.forward"), 10, 20_000_000),
        ]
    )
    rule = next(rule for rule in choose(m).rules if rule.module == "m")
    assert [entry.pattern for entry in rule.entries] == ["main", "*.forward"]


def test_a_tiny_function_stretched_by_a_busy_host_is_still_too_short() -> None:
    # getitem's calls take 1 us (the median) but a busy host stretched their mean to 3.5 us,
    # past 20 x a 100 ns range: on such a host networkx's Graph.__getitem__ was suggested and
    # its 136,000 ranges cost 2-4% of the section (here: 20,000 calls, 0.2% by the estimate).
    rows = [(("m:main",), 1, 1_000_000_000), (("m:main", "m:getitem"), 20_000, 70_000_000)]
    rows.append((("m:main", "m:work"), 100, 300_000_000))
    tree = build_tree([(path, count, total, 0) for path, count, total in rows])
    busy = Measurement(roots=tree, range_cost_ns=100.0, run_ns=1_000_000_000, median_ns={"m:getitem": 1_000.0})
    names = {member.name for rule in choose(settle(busy)).rules for entry in rule.entries for member in entry.members}
    assert "m:getitem" not in names and "m:work" in names


def test_the_cost_budget_and_the_pattern_limit_hold() -> None:
    rows: list[tuple[tuple[str, ...], int, int]] = [(("m:main",), 1, 1_000_000_000)]
    rows += [(("m:main", f"m:f{i}"), 100, 20_000_000) for i in range(40)]
    suggestion = choose(measured(rows), Limits(max_patterns=30))
    assert suggestion.patterns == 30
    assert suggestion.cost_share <= 0.01
    tight = choose(measured(rows), Limits(cost_share=0.0001))  # 10 range costs of 100 ns out of 1 s
    assert sum(entry.calls for rule in tight.rules for entry in rule.entries) <= 1000


def test_of_two_ranges_that_would_be_the_same_the_public_outer_one_stays() -> None:
    m = measured(
        [
            (("m:main",), 1, 100_000_000),
            (("m:main", "opt:Adam.step"), 10, 50_000_000),
            (("m:main", "opt:Adam.step", "opt:adam"), 10, 49_000_000),
            (("m:main", "opt:Adam.step", "opt:adam", "opt:_single_tensor_adam"), 10, 48_500_000),
            (("m:main", "ag:_run_backward"), 10, 40_000_000),
            (("m:main", "ag:_run_backward", "ag:backward"), 10, 39_000_000),
        ]
    )
    suggestion = choose(m)
    chosen = {member.name for rule in suggestion.rules for entry in rule.entries for member in entry.members}
    assert chosen == {"m:main", "opt:Adam.step", "ag:backward"}
    assert suggestion.left_out["twins of a function around or inside them"] == 2
    assert suggestion.left_out["private dispatchers to one ranged call"] == 1  # _run_backward


def test_with_gpu_time_functions_are_ranked_by_the_gpu_work_they_launch() -> None:
    rows = [
        (("m:main",), 1, 100_000_000, 10_000),
        (("m:main", "m:cpu_bound"), 1, 60_000_000, 0),
        (("m:main", "m:launches"), 1, 30_000_000, 9_000),
    ]
    m = settle(Measurement(roots=build_tree(rows), range_cost_ns=100.0, run_ns=100_000_000, gpu=True))
    suggestion = choose(m, Limits(max_patterns=2))
    assert suggestion.by_gpu
    chosen = {member.name for rule in suggestion.rules for entry in rule.entries for member in entry.members}
    assert chosen == {"m:main", "m:launches"}
    assert suggestion.gpu_coverage == 1.0


def test_call_paths_and_their_gpu_time_come_from_a_real_nsys_export() -> None:
    from autonvtx.suggest.measure import export_rows

    export = Path(__file__).resolve().parent / "fixtures" / "nsys" / "torch-2gpu-nsys2026.2.sqlite"
    rows, has_gpu = export_rows(str(export), "")
    assert has_gpu
    by_path = {path: (count, total, gpu) for path, count, total, gpu in rows}
    # A layer norm and the op inside it that launched the kernel: the GPU time is the inner
    # op's, charged to both (nsys 2026.2 capture of PyTorch's op ranges).
    inner = next(path for path in by_path if path[-1] == "aten::native_layer_norm, seq = 45332, op_id = 990738")
    assert inner[-2] == "aten::layer_norm, seq = 45332, op_id = 990737"
    assert by_path[inner][2] == by_path[inner[:-1]][2] > 0
    assert sum(gpu for path, (_, _, gpu) in by_path.items() if len(path) == 1) > 0
