"""`autonvtx list`, `run --dry-run` and `init`: what rules select, decided by the walk that
wraps, without wrapping anything."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, default_verb, make_file, run_autonvtx

from autonvtx import listing
from autonvtx.config import Config, Rule
from autonvtx.configfile import load_config

MODULES = REPO / "tests" / "modules"


def autonvtx(*args: str, cwd: Path, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    path = [str(REPO)] + ([str(extra_path)] if extra_path else [])
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args],
        cwd=cwd,
        env=autonvtx_env(PYTHONPATH=os.pathsep.join(path)),
        capture_output=True,
        text=True,
        timeout=180,
    )


def listed(stdout: str) -> dict[str, str]:
    """`module:qualname` -> kind, from list's text output."""
    found = {}
    for line in stdout.splitlines():
        match = re.match(r"  (\S+:\S+) +(\S.*)$", line)
        if match and not line.startswith("  unmatched"):
            found[match.group(1)] = match.group(2)
    return found


def test_list_prints_what_each_rule_selects_with_kinds(tmp_path: Path) -> None:
    done = autonvtx(
        "list", "-t", "inst_shapes.*", "--exclude", "_*", "inst_shapes.reexport", cwd=tmp_path, extra_path=MODULES
    )
    assert done.returncode == 0, done.stderr
    found = listed(done.stdout)
    assert found["inst_shapes.kinds:plain"] == "function"
    assert found["inst_shapes.kinds:Trainer.step"] == "method"
    assert found["inst_shapes.kinds:Trainer.static"] == "staticmethod"
    assert found["inst_shapes.kinds:Trainer.build"] == "classmethod"
    assert found["inst_shapes.kinds:Trainer.astep"] == "async"
    assert found["inst_shapes.kinds:counter"] == "generator"
    assert found["inst_shapes.kinds:Trainer.Inner.run"] == "method"
    # Protocol methods, properties and excluded names are not selected; re-exports are not
    # listed twice (inst_shapes.reexport only rebinds kinds' wrapper).
    assert not {
        "inst_shapes.kinds:Trainer.__repr__",
        "inst_shapes.kinds:Trainer.doubled",
        "inst_shapes.kinds:_private",
    } & set(found)
    assert not [name for name in found if name.startswith("inst_shapes.reexport:")]
    assert done.stdout.splitlines()[0] == "command line: modules inst_shapes.*; exclude _*"
    assert re.search(r"^\d+ functions selected in 1 of 2 targeted modules by 1 rule$", done.stdout, re.M)


def test_list_of_a_reexport_walked_after_its_definition_is_clean(tmp_path: Path) -> None:
    """kinds is imported (and walked) before reexport: the plan finds its planned wrapper as a
    run finds the real one, and says nothing of reexport's names, not "cannot wrap"."""
    done = autonvtx(
        "list",
        "-v",
        "-t",
        "inst_shapes.*",
        "inst_shapes.kinds",
        "inst_shapes.reexport",
        cwd=tmp_path,
        extra_path=MODULES,
    )
    assert done.returncode == 0, done.stderr
    assert "inst_shapes.kinds:plain" in listed(done.stdout)
    assert "cannot wrap" not in done.stdout + done.stderr
    assert "inst_shapes.reexport:" not in done.stdout + done.stderr


def test_list_and_run_decide_the_same(tmp_path: Path) -> None:
    """list uses the walk a run uses: the selected set equals what -vv says was wrapped."""
    args = ["-t", "inst_shapes.*", "--exclude", "*.norm1"]
    listing_done = autonvtx(
        "list", *args, "inst_shapes.kinds", "inst_shapes.reexport", cwd=tmp_path, extra_path=MODULES
    )
    assert listing_done.returncode == 0, listing_done.stderr
    make_file(
        tmp_path / "prog.py",
        f"""
        import sys
        sys.path.insert(0, {str(MODULES)!r})
        import inst_shapes.kinds, inst_shapes.reexport
    """,
    )
    run_done = run_autonvtx(*args, "-vv", "prog.py", cwd=tmp_path)
    assert run_done.returncode == 0, run_done.stderr
    wrapped = {m.group(1) for m in re.finditer(rf"^autonvtx: (\S+:\S+): {default_verb()} \(", run_done.stderr, re.M)}
    assert wrapped and set(listed(listing_done.stdout)) == wrapped


def test_list_reports_patterns_that_matched_nothing(tmp_path: Path) -> None:
    make_file(
        tmp_path / "rules.toml",
        """
        [[rules]]
        modules = ["inst_shapes.kinds", "inst_shapes.kindz"]
        include = ["Trainer.*", "Trainr.step"]
    """,
    )
    done = autonvtx("list", "--config", "rules.toml", "inst_shapes.kinds", cwd=tmp_path, extra_path=MODULES)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        "  unmatched: rules.toml: rules[0].modules: 'inst_shapes.kindz' matched no module; did you mean 'inst_shapes.kinds'?"
        in lines
    )
    assert any(
        line.startswith("  unmatched: rules.toml: rules[0].include: 'Trainr.step' matched no qualified name")
        and line.endswith("did you mean 'Trainer.step'?")
        for line in lines
    ), lines


def test_list_json(tmp_path: Path) -> None:
    done = autonvtx(
        "list",
        "--json",
        "-t",
        "inst_shapes.kinds",
        "--include",
        "Trainer.st*",
        "inst_shapes.kinds",
        cwd=tmp_path,
        extra_path=MODULES,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (rule,) = data["rules"]
    assert rule["origin"] == "command line"
    assert [(s["module"], s["qualname"], s["kind"]) for s in rule["selected"]] == [
        ("inst_shapes.kinds", "Trainer.static", "staticmethod"),
        ("inst_shapes.kinds", "Trainer.step", "method"),
    ]
    assert rule["selected"][1]["reason"] == "selected by command line (include 'Trainer.st*')"
    assert data["modules"] == ["inst_shapes.kinds"]
    assert rule["unmatched"] == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["list", "-t", "x", "no_such_module_here"], "autonvtx: list: No module named 'no_such_module_here'; expected"),
        (
            ["export", "-t", "x", "no_such_module_here"],
            "autonvtx: export: No module named 'no_such_module_here'; expected",
        ),
        (["list", "--preset", "nupmy", "numpy"], "autonvtx: --preset: unknown preset 'nupmy'"),
        (["list", "-t", "x"], "autonvtx: list: Missing argument 'MODULES...'."),
    ],
)
def test_list_errors(tmp_path: Path, args: list[str], message: str) -> None:
    done = autonvtx(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr


def test_plan_wraps_nothing() -> None:
    sys.path.insert(0, str(MODULES))
    try:
        import inst_shapes.kinds as kinds

        before = dict(vars(kinds)), dict(vars(kinds.Trainer))
        config = Config(rules=(Rule(modules=("inst_shapes.kinds",), origin="t"),))
        plan = listing.plan_modules(config, ["inst_shapes.kinds"])
        assert "Trainer.step" in {p.qualname for p in plan.all_selected()}
        assert (dict(vars(kinds)), dict(vars(kinds.Trainer))) == before
        assert "wrapt" not in type(kinds.plain).__module__
    finally:
        sys.path.remove(str(MODULES))
        for name in [n for n in sys.modules if n.startswith("inst_shapes")]:
            del sys.modules[name]


def test_list_is_fast_on_a_big_package(tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    done = autonvtx("list", "--preset", "pandas", "pandas", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^(\d+) functions selected in \d+ of \d+ targeted modules by 4 rules$", done.stdout, re.M)
    if int(pandas.__version__.split(".")[0]) >= 3:  # the version the preset is verified on
        assert "unmatched" not in done.stdout  # the preset matches this pandas exactly


def test_list_shows_what_plugins_would_do(tmp_path: Path) -> None:
    plugins = REPO / "tests" / "modules" / "plugin_shapes"
    make_file(tmp_path / "c.toml", '[autonvtx]\nplugins = ["fakeplug.plugin"]\n')
    done = autonvtx("list", "--config", "c.toml", "fakefw", cwd=tmp_path, extra_path=plugins)
    assert done.returncode == 0, done.stderr
    assert "plugin fakeplug.plugin (activates on import of fakefw)" in done.stdout
    assert re.search(r"^  fakefw:Layer.forward +per call, named by layer$", done.stdout, re.M)
    assert "2 functions ranged by plugins" in done.stdout
    done = autonvtx("list", "--config", "c.toml", "json", cwd=tmp_path, extra_path=plugins)
    assert "  inactive here: fakefw is not imported" in done.stdout


# run --dry-run
def test_dry_run_lists_the_targets_imports_and_runs_nothing(tmp_path: Path) -> None:
    make_file(
        tmp_path / "prog.py",
        f"""
        import sys
        sys.path.insert(0, {str(MODULES)!r})
        import json
        try:
            from inst_shapes import kinds
        except ImportError:
            kinds = None

        def main():
            print("ran")

        class Job:
            def go(self):
                return 1
            def __repr__(self):
                return "Job"

        if __name__ == "__main__":
            main()
    """,
    )
    # sys.path.insert above is a statement: dry-run reads imports, it does not run them, so
    # the fixture package is put on the path the way a user's environment would.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autonvtx",
            "run",
            "--dry-run",
            "-t",
            "inst_shapes.kinds",
            "-t",
            "__main__",
            "--include",
            "plain",
            "--include",
            "main",
            "--include",
            "Job.*",
            "prog.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=autonvtx_env(PYTHONPATH=os.pathsep.join([str(REPO), str(MODULES)])),
    )
    assert done.returncode == 0, done.stderr
    assert "ran" not in done.stdout
    lines = done.stdout.splitlines()
    assert lines[0].startswith("dry run: ") and lines[0].endswith("prog.py")
    assert lines[1] == "top-level imports: sys, json, inst_shapes, inst_shapes.kinds"
    found = listed(done.stdout)
    assert found == {
        "inst_shapes.kinds:plain": "function",
        "__main__:main": "function",
        "__main__:Job.go": "method",
    }


SCRIPT_DEFINITIONS = """
    import contextlib

    def top():
        def inner():
            return 1
        return inner()

    with contextlib.nullcontext():
        def in_with():
            return 1
    for _ in range(2):
        def in_for():
            return 1
    while True:
        def in_while():
            return 1
        break
    try:
        def in_try():
            return 1
    finally:
        pass

    class Job:
        def go(self):
            return 1

        @staticmethod
        def helper():
            return 2

        def steps(self):
            yield 1

    top(); in_with(); in_for(); in_while(); in_try(); Job().go(); Job.helper(); list(Job().steps())
"""


def test_dry_run_lists_what_the_run_instruments_in_the_script(tmp_path: Path) -> None:
    # The same walk: functions defined under a top-level with/for/while/try are bound in
    # __main__ and a run instruments them; the dry run listed only those under if/try before.
    make_file(tmp_path / "prog.py", SCRIPT_DEFINITIONS)
    dry = autonvtx("run", "--dry-run", "-t", "__main__", "prog.py", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    done = run_autonvtx("-vv", "-t", "__main__", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    verb = default_verb()
    ran = sorted(re.findall(rf"^autonvtx: __main__:(\S+): {verb} ", done.stderr, re.MULTILINE))
    nested = ["top.<locals>.inner"] if verb == "monitored" else []  # the code engine reaches it
    assert ran == sorted(
        ["top", "in_with", "in_for", "in_while", "in_try", "Job.go", "Job.helper", "Job.steps", *nested]
    ), done.stderr
    assert sorted(q.partition(":")[2] for q in listed(dry.stdout)) == ran
    assert listed(dry.stdout)["__main__:Job.helper"] == "staticmethod"
    assert listed(dry.stdout)["__main__:Job.steps"] == "generator"


def test_dry_run_of_a_module_reads_its_source(tmp_path: Path) -> None:
    done = autonvtx(
        "run", "--dry-run", "-t", "__main__", "--include", "main", "-m", "json.tool", "x.json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "json" in done.stdout.splitlines()[1].split(": ", 1)[1].split(", ")
    assert listed(done.stdout) == {"__main__:main": "function"}
    assert "unmatched" not in done.stdout


def test_top_level_imports_reads_only_the_top_level() -> None:
    source = """
import a, b.c
from d import e
from . import relative
from f.g import *
if True:
    import h
try:
    import i
except ImportError:
    import j
def later():
    import never
class K:
    import never_either
"""
    assert listing.top_level_imports(source, "<test>") == ["a", "b.c", "d", "d.e", "f.g", "h", "i", "j"]


# init
def test_init_writes_a_starter_config_that_loads(tmp_path: Path) -> None:
    make_file(tmp_path / "mypkg" / "__init__.py", "")
    make_file(tmp_path / "tests" / "__init__.py", "")
    done = autonvtx("init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "autonvtx: wrote autonvtx.toml\n"
    text = (tmp_path / "autonvtx.toml").read_text()
    assert text.startswith("# autonvtx: which functions get NVTX ranges")
    config = load_config([], cwd=str(tmp_path))
    assert config.rules[-1].modules == ("mypkg", "mypkg.*")
    installed = [name for name in ("numpy", "pandas", "torch") if _importable(name)]
    for name in installed:
        assert f"{name}" in re.search(r"^# Frameworks installed here: (.*)\.$", text, re.M).group(1)
    preset_names = {os.path.basename(p)[:-5] for p in config.preset_sources}
    assert set(installed) <= preset_names
    done = autonvtx("init", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "autonvtx: init: autonvtx.toml: already exists; left as it is\n"


def test_init_pyproject_appends_and_refuses_twice(tmp_path: Path) -> None:
    make_file(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    done = autonvtx("init", "--pyproject", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith('[project]\nname = "x"\n\n# autonvtx')
    config = load_config([], cwd=str(tmp_path))
    assert config.rules[-1].modules == ("__main__",)  # no package here: the script's own
    done = autonvtx("init", "--pyproject", cwd=tmp_path)
    assert done.returncode == 2
    assert "already has a [tool.autonvtx] table" in done.stderr


@pytest.mark.parametrize("package", [False, True])
def test_init_advice_works_as_written_and_its_first_run_warns_nothing(tmp_path: Path, package: bool) -> None:
    # Issue 23: the starter advised `autonvtx list MODULE` for a rule that targets only
    # __main__ (which `list` cannot show), and its first run warned about its own excludes.
    make_file(tmp_path / "s.py", "def main():\n    pass\n\nmain()\n")
    if package:
        make_file(tmp_path / "mypkg" / "__init__.py", "def work():\n    pass\n")
        make_file(tmp_path / "s.py", "import mypkg\n\nmypkg.work()\n")
    assert autonvtx("init", cwd=tmp_path).returncode == 0
    advice = re.search(
        r"^# Check what these rules select with `autonvtx ([^`]+)`", (tmp_path / "autonvtx.toml").read_text(), re.M
    )
    assert advice is not None
    args = advice.group(1).replace("SCRIPT", "s.py").split()
    assert args == (["list", "mypkg"] if package else ["run", "--dry-run", "s.py"])
    shown = autonvtx(*args, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert ("mypkg:work" if package else "__main__:main") in shown.stdout, shown.stdout
    ran = autonvtx("run", "--summary", "s.py", cwd=tmp_path)
    assert ran.returncode == 0 and "warning" not in ran.stderr, ran.stderr


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_init_imports_no_framework() -> None:
    code = (
        "import sys; from autonvtx.starter import starter_text; starter_text('.'); "
        "print(sorted(m for m in ('numpy', 'pandas', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=autonvtx_env(PYTHONPATH=str(REPO))
    ).stdout
    assert out == "[]\n"
