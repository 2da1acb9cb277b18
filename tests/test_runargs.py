"""`autonvtx run`'s own parser (`cli.runargs`, no click: start-up, issue 24) against click's
reading of the same command line: what the own parser accepts, click reads the same way; what it
leaves to click (help, mistakes, --summary and the view options), click reads or refuses."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from conftest import autonvtx_env, make_file

from autonvtx.cli.run import TARGET_KEY, run as run_command
from autonvtx.cli.runargs import DEFAULTS, OPTIONS, parse_run
from autonvtx.cli.views import VIEW_OPTION_DEFAULTS
from autonvtx.errors import AutonvtxError


def click_reads(args: list[str]) -> tuple[dict[str, Any], Any] | BaseException:
    """(parameters, target) as click reads `autonvtx run ARGS`, or what it raised."""
    try:
        context = run_command.make_context("run", list(args))
    except (click.ClickException, click.exceptions.Exit, AutonvtxError) as error:
        return error
    return context.params, context.meta.get(TARGET_KEY)


def assert_same_reading(args: list[str]) -> bool:
    """Whether the own parser took `args`; if it did, click reads them the same way."""
    own = parse_run(args)
    if own is None:
        return False
    read = click_reads(args)
    assert not isinstance(read, BaseException), (args, own, read)
    params, target = read
    assert own == ({name: params[name] for name in DEFAULTS}, target), args
    assert {name: params[name] for name in VIEW_OPTION_DEFAULTS} == VIEW_OPTION_DEFAULTS, args
    return True


# Every option of run the own parser reads, in each of the forms click accepts, and the target
# in each form (script, `--`, -m, -c, glued or not), with options after the target (the target's).
EVERY_OPTION = [
    "--config",
    "r.toml",
    "--config=s.yaml",
    "--preset",
    "torch",
    "-t",
    "mypkg.*",
    "-tother",
    "--target",
    "a",
    "--target=b",
    "--include",
    "T.*",
    "--include=f",
    "--exclude",
    "_*",
    "--exclude=g",
    "--engine",
    "wrap",
    "--engine=code",
    "-v",
    "-vv",
    "--verbose",
    "--dry-run",
    "--trace",
    "t.json",
    "--trace=u.json",
    "--buffer-mb",
    "64",
    "--buffer-mb=0128",
    "--keep",
    "last",
    "--keep=all",
    "--no-children",
    "--capture",
    "__main__:train:1-2",
    "--capture=m:f:3-4",
    "--ranks",
    "0,3",
    "--ranks=1-2",
]
ACCEPTED = [
    ["s.py"],
    ["s.py", "a", "--help", "-v", "--config", "x"],
    ["-m", "pkg.mod", "--help"],
    ["-mpkg.mod", "x"],
    ["-c", "print(1)", "a", "-t", "b"],
    ["-cprint(1)"],
    ["--", "s.py", "-v"],
    ["--", "-dash.py"],
    ["--", "--"],
    [*EVERY_OPTION, "s.py", "--dry-run"],
    [*EVERY_OPTION, "-m", "json.tool", "--keep", "x"],
    [*EVERY_OPTION, "--", "s.py", "--no-children"],
    ["-t", "mypkg", "s.py"],
    ["--trace", "a.json", "--trace", "b.json", "s.py"],  # the last of a single value
    ["-v", "--verbose", "-vvv", "s.py"],
    ["--config", "--", "s.py"],  # a value, whatever it looks like
    ["--config", "-m", "s.py"],
    ["-t", "-v", "s.py"],
    ["--config=", "s.py"],
    ["--target=", "-c", "1"],
    ["-t=x", "s.py"],
    ["-tv", "s.py"],
    ["-", "x"],
    ["", "x"],
    ["--no-children", "--no-children", "s.py"],
    ["-m", "-v"],
    ["-c", ""],
]
LEFT_TO_CLICK = [
    [],
    ["--help"],
    ["-h"],
    ["-t", "x", "--help", "s.py"],
    ["--"],
    ["-m"],
    ["-c"],
    ["-v", "-m"],
    ["--bogus", "s.py"],
    ["-x", "s.py"],
    ["-vt", "a", "s.py"],
    ["-vtx", "s.py"],
    ["--dry-run=1", "s.py"],
    ["--verbose=2", "s.py"],
    ["--no-children=", "s.py"],
    ["--engine", "bogus", "s.py"],
    ["--engine", "WRAP", "s.py"],
    ["--keep", "some", "s.py"],
    ["--buffer-mb", "x", "s.py"],
    ["--buffer-mb", "-1", "s.py"],
    ["--buffer-mb", " 5", "s.py"],
    ["--buffer-mb", "1_0", "s.py"],
    ["--summary", "s.py"],
    ["--summary=out.txt", "s.py"],
    ["--summary", "--tree", "s.py"],
    ["--top", "3", "s.py"],
    ["--config"],
    ["-t"],
    ["--trace", "s.py"],  # the script is --trace's value: no target
    ["--targ", "x", "s.py"],  # click takes no abbreviation
    ["--Config", "x", "s.py"],
    ["-t", "a"],
]


@pytest.mark.parametrize("args", ACCEPTED, ids=" ".join)
def test_what_the_own_parser_accepts_click_reads_the_same(args: list[str]) -> None:
    assert assert_same_reading(args)


@pytest.mark.parametrize("args", LEFT_TO_CLICK, ids=" ".join)
def test_help_mistakes_and_the_summary_options_are_left_to_click(args: list[str]) -> None:
    assert parse_run(args) is None


def test_random_command_lines_read_alike() -> None:
    # Tokens of every kind, mixed: options, values that look like options, targets, mistakes.
    tokens = [
        *EVERY_OPTION,
        "-t",
        "--config",
        "--trace",
        "--engine",
        "--keep",
        "--buffer-mb",
        "-v",
        "-m",
        "-c",
        "-mx",
        "-cy",
        "--",
        "-",
        "s.py",
        "x",
        "",
        "--summary",
        "--tree",
        "--bogus",
        "-vt",
        "-x",
        "-h",
        "--dry-run=1",
        "auto",
        "last",
        "7",
        "-1",
        "--engine=nope",
    ]
    generator = random.Random(24)
    accepted = 0
    for _ in range(3000):
        args = generator.choices(tokens, k=generator.randint(0, 8))
        accepted += assert_same_reading(args)
    assert accepted > 600  # the comparison saw many accepted lines, not only left-over ones


def test_every_run_option_is_read_here_or_shapes_the_summary() -> None:
    # A new option of `run` needs its default here (start_run is called with every parameter),
    # and this parser reading it (or leaving it to click: --summary and the view options).
    names = {param.name for param in run_command.params if isinstance(param, click.Option)} - {"help"}
    assert names == set(DEFAULTS) | set(VIEW_OPTION_DEFAULTS)
    read = {param.name for param in run_command.params for opt in param.opts if opt in OPTIONS}
    assert read == set(DEFAULTS) - {"summary"}
    for param in run_command.params:  # (their defaults: `["s.py"]` above reads them all)
        if param.name in read:
            assert set(param.opts) <= set(OPTIONS), param.opts


def test_a_plain_run_loads_no_click(tmp_path: Path) -> None:
    make_file(
        tmp_path / "probe.py",
        """
        import json, sys
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("click", "dataclasses", "inspect",
                                                                               "typing", "tomllib"))))
    """,
    )
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "-v", "probe.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


# issue 23: an unknown command says where the commands are listed, and the closest one


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("nosuchcmd", "autonvtx: No such command 'nosuchcmd' (see 'autonvtx --help')"),
        ("rnu", "autonvtx: No such command 'rnu'; did you mean 'run'? (see 'autonvtx --help')"),
        ("reprot", "autonvtx: No such command 'reprot'; did you mean 'report'? (see 'autonvtx --help')"),
    ],
)
def test_an_unknown_command_points_to_the_list(tmp_path: Path, command: str, message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", command, "x"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, "", message + "\n")
