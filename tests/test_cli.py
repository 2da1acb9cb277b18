"""`autonvtx run` end to end: rules in, ranges out, as the recorder saw them."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, default_verb, make_file, run_autonvtx

EXAMPLES = REPO / "examples"


def nested_in(child: dict, parent: dict) -> bool:
    return (
        child["tid"] == parent["tid"]
        and float(child["ts"]) >= float(parent["ts"])
        and float(child["ts"]) + float(child["dur"]) <= float(parent["ts"]) + float(parent["dur"])
    )


def copy_example(name: str, destination: Path) -> Path:
    target = destination / name
    shutil.copytree(EXAMPLES / name, target)
    return target


# The examples, as the README runs them


def test_readme_first_command_leaves_the_checkout_clean() -> None:
    # What the README's first command writes must not show up as untracked in `git status`.
    first_block = (REPO / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    outputs = re.findall(r"--trace (\S+)", first_block)
    assert outputs, first_block
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    for output in outputs:
        ignored = subprocess.run(["git", "check-ignore", "-q", output], cwd=REPO)
        assert ignored.returncode == 0, f"{output} would be left untracked in the checkout"


def test_readme_says_how_to_run_every_test_as_ci_does() -> None:
    readme = (REPO / "README.md").read_text()
    head = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    ci = (REPO / ".ci" / "run").read_text()
    [frameworks] = [line for line in ci.splitlines() if line.startswith("FRAMEWORKS=")]
    assert ".ci/run" in head
    for name in ("torch", "numba", "jax", "tensorflow"):
        assert name in frameworks and name in head, name
    # Every Python CI runs the suite on is named there, and the README's claim is what CI tests.
    versions = re.findall(r"^make_venv (3\.\d+)|^for version in ([\d. ]+); do", ci, re.M)
    tested = sorted({v for pair in versions for v in " ".join(pair).split()}, key=lambda v: int(v[2:]))
    assert tested == ["3.10", "3.11", "3.12", "3.13"]
    assert all(version in head for version in tested)
    assert "Python 3.10 to 3.13" in readme


def test_examples_and_presets_speak_in_the_projects_own_words() -> None:
    # "Seed 000" and "shared/seeds/..." are the project's working notes, meaningless to a user.
    internal = re.compile(r"\bseeds? \d{3}\b|shared/seeds", re.IGNORECASE)
    files = [
        *EXAMPLES.rglob("*.py"),
        *EXAMPLES.rglob("*.toml"),
        *(REPO / "configs").glob("*.toml"),
        *(REPO / "autonvtx").rglob("*.py"),
    ]
    found = [
        f"{path.relative_to(REPO)}: {line.strip()}"
        for path in files
        for line in path.read_text().splitlines()
        if internal.search(line)
    ]
    assert found == []


def test_quickstart_example_shows_loop_ranges_inside_f(workdir: Path) -> None:
    example = copy_example("quickstart", workdir)
    done = run_autonvtx("--summary", "quickstart.py", cwd=example)
    assert done.returncode == 0, done.stderr
    ranges = done.ranges()
    [f] = [r for r in ranges if r["name"] == "f"]
    loops = [r for r in ranges if r["name"] == "loop"]
    assert len(loops) == 5
    assert all(nested_in(loop, f) for loop in loops)
    assert {r["cat"] for r in ranges} == {"quickstart"}
    # The summary table goes to stderr, one row per range name.
    assert "quickstart:f" in done.stderr and "quickstart:loop" in done.stderr


def test_minitrain_example_annotates_the_package(workdir: Path) -> None:
    example = copy_example("minitrain", workdir)
    done = run_autonvtx("train.py", "--epochs", "2", cwd=example)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("loss per epoch:")
    names = done.range_names()
    assert names.count("Trainer.fit") == 1
    assert names.count("Trainer.step") == 8  # 2 epochs x 4 batches
    assert names.count("Linear.forward") == 24  # 3 layers per step
    assert "main" in names
    # Private helpers and dunders are excluded by the example's rules.
    assert not any("._" in name for name in names)
    ranges = done.ranges()
    [fit] = [r for r in ranges if r["name"] == "Trainer.fit"]
    assert all(nested_in(r, fit) for r in ranges if r["name"] == "Trainer.step")
    # The later, narrower rule gives data loading its own category and color.
    load = next(r for r in ranges if r["name"] == "BatchLoader.load_batch")
    assert load["args"]["category"] == "data" and load["args"]["color"] == "#ffa500"
    step = next(r for r in ranges if r["name"] == "Trainer.step")
    assert "category" not in step["args"]


def test_dataframe_example(workdir: Path) -> None:
    pytest.importorskip("pandas")
    example = copy_example("dataframe", workdir)
    done = run_autonvtx("workflow.py", cwd=example)
    assert done.returncode == 0, done.stderr
    names = done.range_names()
    for name in ("main", "make_frame", "agg_all", "split_agg", "join_means", "squared_diff"):
        assert name in names
    groupby = {r["name"]: r["args"].get("category") for r in done.ranges()}
    assert groupby["agg_all"] == "groupby" and groupby["make_frame"] is None


# Rules from the command line and from discovered config files


def test_target_rule_from_command_line(workdir: Path) -> None:
    make_file(workdir / "app/__init__.py", "")
    make_file(
        workdir / "app/core.py",
        """
        def public():
            return _private() + 1

        def _private():
            return 1
        """,
    )
    make_file(workdir / "main.py", "from app.core import public\nprint(public())\n")
    done = run_autonvtx("-t", "app.*", "--exclude", "_*", "main.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2\n"
    assert done.range_names() == ["public"]


@pytest.mark.parametrize(
    ("file_name", "text"),
    [
        ("autonvtx.toml", "[[rules]]\nmodules = ['__main__']\ninclude = ['work']\n"),
        (
            "pyproject.toml",
            "[project]\nname = 'x'\n\n[[tool.autonvtx.rules]]\nmodules = ['__main__']\ninclude = ['work']\n",
        ),
    ],
)
def test_config_discovered_in_working_directory(workdir: Path, file_name: str, text: str) -> None:
    make_file(workdir / file_name, text)
    make_file(workdir / "s.py", "def work():\n    return 1\n\ndef other():\n    return 2\n\nwork(); other()\n")
    done = run_autonvtx("s.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.range_names() == ["work"]


def test_standard_library_module_targeted_wholesale_behaves_the_same(workdir: Path) -> None:
    """json's own unit tests pass with every json function wrapped, as they do plainly.
    The ranges are read from the summary, not a trace: 3.13's test_json nests the pure-Python
    encoder 5,000 deep (3.12's, 100), and each chunk it yields resumes every generator of the
    yield-from chain below it: 50M ranges, a 9.4 GB JSON trace (the same on 3.12 at that depth)."""
    test_package = Path(sys.base_prefix, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}", "test")
    if not (test_package / "test_json").is_dir():
        pytest.skip("this Python was built without its test suite")
    plain = subprocess.run(
        [sys.executable, "-m", "unittest", "test.test_json"], cwd=workdir, capture_output=True, text=True
    )
    summary = workdir / "summary.json"
    done = run_autonvtx(
        "-t",
        "json",
        "-t",
        "json.*",
        "--summary",
        str(summary),
        "-m",
        "unittest",
        "test.test_json",
        cwd=workdir,
        trace=False,
    )
    assert done.returncode == plain.returncode == 0, done.stderr[-2000:]
    ran = [line for line in plain.stderr.splitlines() if line.startswith("Ran ")]
    assert ran and ran[0].split(" in ")[0] in done.stderr
    names = {row["name"] for row in json.loads(summary.read_text())["ranges"]}
    assert {"dumps", "loads", "JSONDecoder.decode", "JSONEncoder.encode"} <= names


# Bad input: a clear message, status 2, nothing run, no traceback


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "[[rules]]\nmodules = ['x']\ncolour = 'red'\n",
            r"rules\.toml: rules\[0\]\.colour: unknown key; did you mean 'color'\?",
        ),
        ("[[rules]]\nmodules = 3\n", r"rules\.toml: rules\[0\]\.modules: expected a list of strings"),
        (
            "[[rules]]\nmodules = ['x']\ninclude = ['[abc']\n",
            r"rules\.toml: rules\[0\]\.include\[0\]: bad glob '\[abc'",
        ),
        ("[autonvtx]\ncolor = 'grene'\n", r"rules\.toml: autonvtx\.color: unknown color 'grene'.*did you mean 'green'"),
        ("[[rules]]\ninclude = ['x']\n", r"rules\.toml: rules\[0\]: a rule needs 'modules'"),
        ("[[rules]\nmodules = ['x']\n", r"rules\.toml:1:\d+: invalid TOML"),
        ("[autonvtx]\nmessage = '{qualnme}'\n", r"unknown field \{qualnme\}"),
    ],
)
def test_bad_config_stops_before_the_target_runs(workdir: Path, config: str, message: str) -> None:
    make_file(workdir / "rules.toml", config)
    make_file(workdir / "s.py", "print('ran')\n")
    done = run_autonvtx("--config", "rules.toml", "s.py", cwd=workdir)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("autonvtx: ")
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    import re

    assert re.search(message, done.stderr), done.stderr
    assert not (workdir / "trace.json").exists()


def test_every_config_problem_is_one_line_of_its_own(workdir: Path) -> None:
    make_file(workdir / "rules.toml", "[autonvtx]\ndomian = 'x'\n[[rules]]\nmodules = ['x']\ninclde = ['y']\n")
    make_file(workdir / "s.py", "print('ran')\n")
    done = run_autonvtx("--config", "rules.toml", "s.py", cwd=workdir)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        "autonvtx: rules.toml: autonvtx.domian: unknown key; did you mean 'domain'?",
        "autonvtx: rules.toml: rules[0].inclde: unknown key; did you mean 'include'?",
    ]


def test_bad_yaml_names_line_and_column(workdir: Path) -> None:
    make_file(workdir / "rules.yaml", "rules:\n  - modules: [x\n    include: y\n")
    make_file(workdir / "s.py", "print('ran')\n")
    done = run_autonvtx("--config", "rules.yaml", "s.py", cwd=workdir)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("autonvtx: rules.yaml:") and "invalid YAML" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "missing.toml", "s.py"], "autonvtx: --config: no such file 'missing.toml'"),
        (["--include", "x", "s.py"], "autonvtx: --include: applies to the -t/--target rule"),
        (["--trace", "nodir/t.json", "s.py"], "autonvtx: --trace: directory"),
        (["--trace", "t.txt", "s.py"], "autonvtx: --trace: 't.txt' must end in .json or .json.gz"),
        (["--bogus", "s.py"], "autonvtx: run: No such option '--bogus'"),
        ([], "autonvtx: run: missing SCRIPT, -m MODULE or -c CODE"),
        (["-m"], "autonvtx: run: -m: option requires an argument"),
        (["missing.py"], "autonvtx: can't open file"),
        (["-m", "no_such_module_here"], "autonvtx: No module named no_such_module_here"),
    ],
)
def test_bad_arguments(workdir: Path, args: list[str], message: str) -> None:
    make_file(workdir / "s.py", "print('ran')\n")
    done = run_autonvtx(*args, cwd=workdir, trace=False)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_script_is_one_line_without_notes_or_unmatched_rule_warnings(workdir: Path) -> None:
    # A newcomer's typo drew the no-tool note and "'mypkg.*' matched no module" beside the one
    # line that mattered.
    done = run_autonvtx("-t", "mypkg.*", "missing.py", cwd=workdir, trace=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"autonvtx: can't open file '{workdir / 'missing.py'}': [Errno 2] No such file or directory"
    ]


def test_an_output_option_after_the_script_is_said_to_be_the_scripts(workdir: Path) -> None:
    # `autonvtx run -t x s.py --summary` ran without a tool, and the note said "add --summary".
    make_file(workdir / "s.py", "import sys\nprint(sys.argv[1:])\n")
    done = run_autonvtx("-t", "__main__", "s.py", "--summary", cwd=workdir, trace=False)
    assert (done.returncode, done.stdout) == (0, "['--summary']\n")  # the script's argument, as with python
    assert (
        "autonvtx: note: --summary comes after the script, so the script gets it, not autonvtx;"
        " autonvtx's options go before SCRIPT"
    ) in done.stderr.splitlines()
    quiet = run_autonvtx("--summary", "-t", "__main__", "s.py", "--trace", cwd=workdir, trace=False)
    assert "comes after the script" not in quiet.stderr  # autonvtx has an output: the script's own option


def test_a_discovered_config_command_line_rules_leave_unread_is_named_in_one_line(workdir: Path) -> None:
    # Only -v said it: README's task 2 ran beside examples/minitrain/autonvtx.toml without a word.
    make_file(workdir / "s.py", "pass\n")
    make_file(workdir / "autonvtx.toml", '[[rules]]\nmodules = ["__main__"]\ndomain = "mine"\n')
    done = run_autonvtx("-t", "__main__", "s.py", cwd=workdir, trace=False)
    assert done.returncode == 0, done.stderr
    assert (
        "autonvtx: note: autonvtx.toml not read: rules were given (a config is discovered only"
        " without --config, --preset and -t; add --config to use it too)"
    ) in done.stderr.splitlines()
    found = run_autonvtx("-v", "s.py", cwd=workdir, trace=False)
    assert "autonvtx: rules from autonvtx.toml" in found.stderr.splitlines()


NO_RULES = (
    "autonvtx: {command}: no rules found: looked for AUTONVTX_RULES, ./autonvtx.toml and [tool.autonvtx] in"
    " ./pyproject.toml{beside}; give rules with --config FILE, --preset NAME or -t 'MODULE_GLOB'"
    " (autonvtx init writes a starter ./autonvtx.toml)"
)


def test_no_rules_is_said_once_with_where_autonvtx_looked(workdir: Path) -> None:
    # Issue 11, 9: a run with no rules at all ran silently.
    make_file(workdir / "s.py", "print('ran')\n")
    make_file(workdir / "pyproject.toml", "[project]\nname = 'x'\n")  # no [tool.autonvtx]: not a config
    done = run_autonvtx("s.py", cwd=workdir, trace=False)
    assert (done.returncode, done.stdout) == (0, "ran\n")
    assert done.stderr.splitlines() == [NO_RULES.format(command="run", beside=", then the same beside the script")]
    listed = subprocess.run(
        [sys.executable, "-m", "autonvtx", "list", "json"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.splitlines() == [NO_RULES.format(command="list", beside="")]


@pytest.mark.parametrize("given", [["-t", "nothing_here"], ["--preset", "numpy"], ["--config", "rules.toml"], []])
def test_rules_given_or_discovered_say_nothing_of_it(workdir: Path, given: list[str]) -> None:
    make_file(workdir / "s.py", "print('ran')\n")
    make_file(workdir / ("rules.toml" if given else "autonvtx.toml"), "[[rules]]\nmodules = ['x']\n")
    done = run_autonvtx(*given, "s.py", cwd=workdir, trace=False)
    assert done.returncode == 0, done.stderr
    assert "no rules found" not in done.stderr


def test_run_help_shows_the_target_and_every_config_format(workdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "--help"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "Usage: autonvtx run [OPTIONS] SCRIPT [ARGS]..."
    config_help = done.stdout.partition("--config FILE")[2].partition("--preset")[0]
    assert ".toml" in config_help and ".yaml" in config_help and ".json" in config_help


def test_start_up_imports_wrapt_only_with_the_first_target(workdir: Path) -> None:
    # Issue 11, 12: wrapt's import brings asyncio and importlib.metadata (a third of the
    # start-up); a run whose targets are not imported yet has not paid for them.
    from autonvtx.recorder import native

    library = native.library_path()
    if library is None:
        pytest.skip("the native recorder is not built in this checkout")
    make_file(workdir / "autonvtx.toml", "[[rules]]\nmodules = ['colorsys']\n")
    make_file(
        workdir / "s.py",
        """
        import sys
        heavy = ("wrapt", "asyncio", "importlib.metadata")
        print([name for name in heavy if name in sys.modules])
        import colorsys
        print([name for name in heavy if name in sys.modules][:1], type(colorsys.rgb_to_hsv).__name__)
    """,
    )
    env = autonvtx_env(NVTX_INJECTION64_PATH=library, AUTONVTX_RECORDER_MODE="noop")
    done = run_autonvtx("s.py", cwd=workdir, trace=False, env=env)
    assert done.returncode == 0, done.stderr
    # The code engine (3.12+) never imports wrapt: the function stays a function.
    second = "[] function" if default_verb() == "monitored" else "['wrapt'] _RangedFunctionWrapper"
    assert done.stdout.splitlines() == ["[]", second]


def test_unmatched_patterns_are_reported_once_at_exit(workdir: Path) -> None:
    make_file(workdir / "rules.toml", "[[rules]]\nmodules = ['__main__']\ninclude = ['wrok']\n")
    make_file(workdir / "s.py", "def work():\n    print('worked')\n\nwork()\n")
    done = run_autonvtx("--config", "rules.toml", "s.py", cwd=workdir)
    assert done.returncode == 0
    assert done.stdout == "worked\n"
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "autonvtx: warning: rules.toml: rules[0].include: 'wrok' matched no qualified name "
        "in the module it targets; did you mean 'work'?"
    ]


def test_verbose_lists_wrapped_and_skipped(workdir: Path) -> None:
    make_file(
        workdir / "s.py",
        """
        class Box:
            def __init__(self):
                self.size = 1
            def __repr__(self):
                return "Box()"
            @property
            def area(self):
                return self.size
            def grow(self):
                self.size += 1

        Box().grow()
        """,
    )
    done = run_autonvtx("-t", "__main__", "-vv", "s.py", cwd=workdir)  # a tool: wrapped for real
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith(f"autonvtx: __main__:Box.grow: {default_verb()}") for line in lines)
    assert any(line.startswith("autonvtx: __main__:Box.__repr__: skipped") for line in lines)
    assert any(line.startswith("autonvtx: __main__:Box.area: skipped") for line in lines)
    assert any(line.startswith(f"autonvtx: {default_verb()} 2 functions in 1 module (") for line in lines)


# --summary forms and `autonvtx summary`


SLEEPS = """
import time
import nvtx

with nvtx.annotate("long"):
    time.sleep(0.2)
with nvtx.annotate("short"):
    time.sleep(0.02)
"""


@pytest.mark.parametrize("form", ["csv", "json"])
def test_summary_written_to_file(workdir: Path, form: str) -> None:
    make_file(workdir / "s.py", SLEEPS)
    done = run_autonvtx("--summary", f"out.{form}", "s.py", cwd=workdir, trace=False)
    assert done.returncode == 0, done.stderr
    text = (workdir / f"out.{form}").read_text()
    if form == "json":
        rows = {row["name"]: row for row in json.loads(text)["ranges"]}
    else:
        import csv

        rows = {row["name"]: row for row in csv.DictReader(text.splitlines())}
    # A sleep never ends early, and the rows hold nanoseconds: 0.2 s and 0.02 s at least, once each.
    assert float(rows["long"]["total_ns"]) >= 0.2e9 and float(rows["short"]["total_ns"]) >= 0.02e9
    assert int(rows["long"]["count"]) == int(rows["short"]["count"]) == 1


def test_summary_flag_does_not_swallow_the_script(workdir: Path) -> None:
    make_file(workdir / "s.py", "import sys\nprint(sys.argv)\n")
    done = run_autonvtx("--summary", "s.py", "--summary", cwd=workdir, trace=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['s.py', '--summary']\n"
    assert "Time %" in done.stderr


def test_summary_command_recomputes_the_run_table(workdir: Path) -> None:
    make_file(workdir / "s.py", SLEEPS)
    done = run_autonvtx("--summary", "run.json", "s.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    again = subprocess.run(
        [sys.executable, "-m", "autonvtx", "summary", "trace.json", "-o", "again.json"],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads((workdir / "again.json").read_text()) == json.loads((workdir / "run.json").read_text())


def test_summary_command_on_a_bad_file(workdir: Path) -> None:
    make_file(workdir / "bad.json", "not json")
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "summary", "bad.json"], cwd=workdir, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith("autonvtx: ") and "bad.json" in done.stderr and "Traceback" not in done.stderr


# The trace is written however the program ends


@pytest.mark.parametrize(
    ("ending", "status"),
    [
        ("pass", 0),
        ("raise SystemExit(3)", 3),
        ("raise ValueError('boom')", 1),
        ("raise KeyboardInterrupt", -2),  # killed by SIGINT, as under Python
    ],
)
def test_trace_written_however_the_program_ends(workdir: Path, ending: str, status: int) -> None:
    make_file(
        workdir / "s.py",
        f"import nvtx\nnvtx.push_range('left open')\nwith nvtx.annotate('done'):\n    pass\n{ending}\n",
    )
    done = run_autonvtx("s.py", cwd=workdir)
    assert done.returncode == status, done.stderr
    by_name = {r["name"]: r for r in done.ranges()}
    assert "open" not in by_name["done"]["args"]
    assert by_name["left open"]["args"]["open"] is True


def test_trace_written_on_sigterm(workdir: Path) -> None:
    make_file(
        workdir / "s.py",
        """
        import nvtx, sys
        nvtx.push_range("waiting")
        print("ready", flush=True)
        sys.stdin.read()
        """,
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "autonvtx", "run", "--trace", "trace.json", "s.py"],
        cwd=workdir,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=autonvtx_env(),
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == -signal.SIGTERM, stderr
    trace = json.loads((workdir / "trace.json").read_text())
    [waiting] = [e for e in trace["traceEvents"] if e.get("name") == "waiting"]
    assert waiting["args"]["open"] is True


def test_another_nvtx_tool_stays_in_charge(workdir: Path) -> None:
    make_file(workdir / "s.py", "import nvtx\nwith nvtx.annotate('x'):\n    print('ran')\n")
    env = autonvtx_env(NVTX_INJECTION64_PATH="/opt/other/libToolsInjection64.so")
    done = run_autonvtx("--summary", "s.py", cwd=workdir, env=env)
    assert done.returncode == 0
    assert done.stdout == "ran\n"
    assert done.stderr.count("another NVTX tool is attached") == 1
    assert "/opt/other/libToolsInjection64.so" in done.stderr
    assert not (workdir / "trace.json").exists()


def test_program_output_and_stdin_untouched_under_the_recorder(workdir: Path) -> None:
    make_file(workdir / "s.py", "import sys\ndata = sys.stdin.read()\nsys.stdout.write(data.upper())\n")
    done = run_autonvtx("--summary", "s.py", cwd=workdir, input="hello\n")
    assert done.returncode == 0
    assert done.stdout == "HELLO\n"
    assert os.path.exists(workdir / "trace.json")


def test_without_an_nvtx_tool_nothing_is_wrapped_and_autonvtx_says_how_to_attach_one(
    workdir: Path,
) -> None:
    make_file(
        workdir / "s.py",
        """
        def work():
            return 1
        print(type(work).__name__, work())
        """,
    )
    done = run_autonvtx("-t", "__main__", "-vv", "s.py", cwd=workdir, trace=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "function 1\n"  # left as it is: a call costs what it costs plainly
    lines = done.stderr.splitlines()
    assert [line for line in lines if "no NVTX tool is attached" in line] == [lines[0]]
    assert "nsys profile" in lines[0] and "--trace/--summary" in lines[0]
    assert "autonvtx: __main__:work: skipped (no NVTX tool attached: " in done.stderr


# Start-up (issue 6): a run loads only what its options need


def test_a_plain_run_loads_neither_the_recorder_nor_plugins_nor_presets_nor_ranges(workdir: Path) -> None:
    optional = [
        "autonvtx.recorder.session",
        "autonvtx.plugins",
        "autonvtx.presets",
        "autonvtx.ranks",
        "autonvtx.ranges",
    ]
    make_file(
        workdir / "probe.py",
        f"""
        import sys
        if len(sys.argv) > 1:
            import numpy
        print(*[name for name in {optional!r} if name in sys.modules])
        """,
    )
    plain = run_autonvtx("probe.py", cwd=workdir, trace=False)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "\n"
    # The probe does see them in a run that needs them: a preset with a plugin, and a target
    # already imported (json), so that wrapping starts.
    needed = run_autonvtx("--preset", "torch", "-t", "json", "probe.py", cwd=workdir)
    assert needed.returncode == 0, needed.stderr
    assert needed.stdout.split() == optional


# What a run loads (issue 24, start-up): nothing a run without that feature needs.
START_PATH_PROBE = """
    import json, sys

    def main():
        pass

    main()
    heavy = ("asyncio", "importlib.metadata", "email", "wrapt.importer", "wrapt.synchronization")
    print(json.dumps({"heavy": [m for m in heavy if m in sys.modules], "wrapt": "wrapt" in sys.modules,
                      "commands": sorted(m for m in sys.modules if m.startswith("autonvtx.cli.")),
                      "click": "click" in sys.modules}))
"""


@pytest.mark.parametrize(
    "engine",
    [
        "wrap",
        pytest.param("code", marks=pytest.mark.skipif(sys.version_info < (3, 12), reason="needs sys.monitoring")),
    ],
)
def test_a_run_loads_only_what_it_needs(tmp_path: Path, engine: str) -> None:
    # The wrap engine takes wrapt's wrapper types only (wrapt 2.x's __init__ pulls asyncio and
    # importlib.metadata); the code engine never imports wrapt; `run` loads no command module
    # (its own parser reads these options, cli.runargs), so no click either.
    make_file(tmp_path / "probe.py", START_PATH_PROBE)
    done = run_autonvtx("-v", "--engine", engine, "-t", "__main__", "probe.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{'monitored' if engine == 'code' else 'wrapped'} 1 function in 1 module" in done.stderr, done.stderr
    from autonvtx.cli.group import COMMAND_MODULES

    loaded = json.loads(done.stdout.splitlines()[-1])
    assert (loaded["heavy"], loaded["wrapt"]) == ([], engine == "wrap")
    assert "autonvtx.cli.launch" in loaded["commands"]
    assert set(loaded["commands"]) & set(COMMAND_MODULES.values()) == set()
    assert not loaded["click"]


def test_a_run_without_rules_loads_no_engine(tmp_path: Path) -> None:
    make_file(tmp_path / "probe.py", START_PATH_PROBE)
    done = run_autonvtx("probe.py", cwd=tmp_path, trace=False)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert (loaded["heavy"], loaded["wrapt"]) == ([], False)


def test_a_source_folder_without_native_parts_says_so_and_never_advises_the_pypi_name(tmp_path: Path) -> None:
    # `python -m autonvtx` in a source checkout's root imports ./autonvtx, where nothing is
    # built: the message says that, and how to go on (the name on PyPI is another project).
    import autonvtx

    shutil.copytree(
        Path(autonvtx.__file__).parent, tmp_path / "autonvtx", ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    (tmp_path / "prog.py").write_text("print('ran')\n")
    env = {k: v for k, v in autonvtx_env().items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "--trace", "t.json", "prog.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "the source folder imported from the working directory" in done.stderr
    assert "pip install --force-reinstall autonvtx" not in done.stderr


@pytest.mark.parametrize("where", ["AUTONVTX_RULES", "beside the script"])
def test_run_finds_rules_in_autonvtx_rules_or_beside_the_script_and_says_which_with_v(
    workdir: Path, where: str
) -> None:
    # Issue 23: `autonvtx run app/s.py` from the repository root said "no rules found" with
    # app/autonvtx.toml beside the script, and ignored AUTONVTX_RULES.
    make_file(workdir / "app" / "s.py", "def f():\n    pass\n\nf()\n")
    rules = make_file(
        workdir / "app" / ("autonvtx.toml" if where != "AUTONVTX_RULES" else "env.toml"),
        "[[rules]]\nmodules = ['__main__']\n",
    )
    env = autonvtx_env(AUTONVTX_RULES=str(rules)) if where == "AUTONVTX_RULES" else autonvtx_env()
    done = run_autonvtx("-v", "app/s.py", cwd=workdir, env=env)
    assert done.returncode == 0, done.stderr
    shown = str(rules) if where == "AUTONVTX_RULES" else os.path.join("app", "autonvtx.toml")
    assert f"autonvtx: rules from {shown}" in done.stderr.splitlines(), done.stderr
    assert "no rules found" not in done.stderr
    assert done.range_names() == ["f"]
