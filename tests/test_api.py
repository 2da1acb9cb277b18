"""The public API: autonvtx.install() / uninstall() and the IPython extension; every range seen
through the recorder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, make_file, run_autonvtx, run_under_recorder

import autonvtx

MYMOD = """
    def work(x):
        return x + 1

    class Model:
        def step(self):
            return work(1)

        @staticmethod
        def helper():
            return 2
"""


def names(recordings: list) -> list[str]:
    return [r.name for rec in recordings for r in sorted(rec.ranges, key=lambda r: r.start_ns)]


ENGINES = [
    "wrap",
    pytest.param("code", marks=pytest.mark.skipif(sys.version_info < (3, 12), reason="needs sys.monitoring")),
]


@pytest.mark.parametrize("engine", ENGINES)
def test_install_ranges_then_uninstall_restores_every_function(tmp_path: Path, engine: str) -> None:
    make_file(tmp_path / "mymod.py", MYMOD)
    recordings, out = run_under_recorder(
        tmp_path,
        f"""
        import autonvtx, mymod
        work, step, helper = mymod.work, vars(mymod.Model)["step"], vars(mymod.Model)["helper"]
        handle = autonvtx.install(targets=["mymod"], engine={engine!r})
        print(mymod.work is work, type(vars(mymod.Model)["helper"]).__name__)
        mymod.work(1); mymod.Model().step(); mymod.Model.helper()
        handle.uninstall()
        print(mymod.work is work, vars(mymod.Model)["step"] is step, vars(mymod.Model)["helper"] is helper)
        mymod.work(2)  # after uninstall: no range
        with autonvtx.install(targets=["mymod"], exclude=["Model.*"], engine={engine!r}) as again:
            mymod.work(3); mymod.Model().step()
        print(mymod.work is work, again.active)
        """,
    )
    # The wrap engine replaces functions while installed; the code engine never does.
    assert out.split("\n")[:3] == [f"{engine == 'code'} staticmethod", "True True True", "True False"]
    # The second install excludes Model.step, not the work() it calls.
    assert names(recordings) == ["work", "Model.step", "work", "Model.helper", "work", "work"]


def test_install_sees_later_imports_and_main_functions(tmp_path: Path) -> None:
    make_file(tmp_path / "mymod.py", MYMOD)
    recordings, _ = run_under_recorder(
        tmp_path,
        """
        import autonvtx

        def train():
            return 1

        handle = autonvtx.install(targets=["mymod", "__main__"])
        import mymod  # imported after install(): instrumented as it is imported
        train(); mymod.work(1)
        print("\\n".join(handle.report()))
        """,
    )
    assert names(recordings) == ["train", "work"]


def test_install_is_used_under_autonvtx_run(tmp_path: Path) -> None:
    make_file(tmp_path / "mymod.py", MYMOD)
    make_file(
        tmp_path / "prog.py",
        """
        import autonvtx, mymod
        with autonvtx.install(config="rules.toml"):
            mymod.work(1)
        mymod.work(2)
        """,
    )
    make_file(tmp_path / "rules.toml", '[[rules]]\nmodules = ["mymod"]\ndomain = "api"\n')
    done = run_autonvtx("prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [(e["name"], e["cat"]) for e in done.ranges()] == [("work", "api")]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"config": "missing.toml"}, autonvtx.ConfigError, r"no such file 'missing.toml'"),
        ({"targets": "mymod"}, autonvtx.UsageError, r"install: targets: expected a list of strings"),
        ({"targets": ["my mod"]}, autonvtx.ConfigError, r"--target: bad glob 'my mod'"),
        ({}, autonvtx.UsageError, r"install: no rules found: looked for AUTONVTX_RULES, ./autonvtx.toml"),
    ],
)
def test_bad_input_raises_autonvtx_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict, error: type, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=message):
        autonvtx.install(**kwargs)
    assert issubclass(error, autonvtx.AutonvtxError) and not issubclass(error, SystemExit)


def test_importing_the_package_stays_cheap() -> None:
    code = "import sys, autonvtx; print(sorted(m for m in sys.modules if m.startswith('autonvtx')))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**autonvtx_env(), "PYTHONPATH": str(REPO)},
    ).stdout
    assert out.strip() == "['autonvtx', 'autonvtx.errors']"


def test_ipython_extension_instruments_cells(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    ipython = shutil.which("ipython", path=os.path.dirname(sys.executable))
    if ipython is None:
        pytest.skip("no ipython command beside this Python")
    make_file(tmp_path / "mymod.py", MYMOD)
    session = "\n".join(
        [
            "ip = get_ipython()",
            "ip.run_line_magic('load_ext', 'autonvtx')",
            "ip.run_line_magic('autonvtx', \"-t __main__ -t mymod --exclude 'Model.*'\")",
            # A call in the cell that defines the function has its range (autonvtx.cells).
            "ip.run_cell('import mymod\\ndef cell_fn():\\n    return mymod.work(1)\\ncell_fn()')",
            "ip.run_cell('cell_fn(); mymod.Model().step()')",
            "ip.run_line_magic('autonvtx', '')",
            "ip.run_line_magic('autonvtx', 'off')",
            "ip.run_cell('cell_fn()')",
            "ip.run_line_magic('autonvtx', '--bogus')",
        ]
    )
    errors: list[str] = []
    recordings, out = run_under_recorder(
        tmp_path,
        f"""
        import subprocess, sys
        done = subprocess.run([{ipython!r}, "--quick", "--no-banner", "-c", {session!r}],
                              capture_output=True, text=True)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        """,
        env={"IPYTHONDIR": str(tmp_path / "ipython")},
        stderr=errors,
    )
    verb = "monitored" if sys.version_info >= (3, 12) else "wrapped"  # the default engine's
    assert f"autonvtx: installed: {verb} 0 functions in 1 module (0 skipped)" in out, out + errors[0]
    # `%autonvtx` alone: what the cells and the import since then brought.
    assert f"autonvtx: {verb} 2 functions in 2 modules (2 skipped)" in out
    assert "autonvtx: uninstalled; every replaced function is back" in out
    assert re.search(r"autonvtx: %autonvtx: No such option:? '?--bogus", errors[0])  # the CLI's own words
    assert sorted(names(recordings)) == ["cell_fn", "cell_fn", "work", "work", "work"]  # work() inside Model.step too


def test_is_instrumented_knows_a_plugins_replacement() -> None:
    # A plugin's hand-built replacement (torch's Module._call_impl) carries the mark on the
    # function itself, not on its type.
    from autonvtx.config import Config
    from autonvtx.plugins import PluginContext

    class Owner:
        def step(self) -> int:
            return 1

    original = vars(Owner)["step"]
    context = PluginContext("p", "fw", Config(), [])

    def make(inner):  # type: ignore[no-untyped-def]
        def step(self):  # type: ignore[no-untyped-def]
            return inner(self)

        return step

    assert not autonvtx.is_instrumented(Owner.step)
    assert context.replace(Owner, "step", make)
    assert vars(Owner)["step"] is not original and Owner().step() == 1
    assert autonvtx.is_instrumented(Owner.step) and autonvtx.is_instrumented(Owner().step)


def test_the_magic_parses_with_the_run_commands_rule_option_declarations() -> None:
    # `%autonvtx --engine wrap` was "unknown option": the magic had its own parser.
    from autonvtx.api import parse_magic
    from autonvtx.cli.options import RULE_OPTIONS, RuleArgs

    parsed = parse_magic(["--engine", "wrap", "-t", "mymod", "--exclude", "_*", "--config=a.toml", "-vv"])
    assert parsed == (RuleArgs(configs=("a.toml",), targets=("mymod",), excludes=("_*",), engine="wrap"), 2)
    assert parse_magic([]) == (RuleArgs(), 0)
    with pytest.raises(autonvtx.UsageError, match="%autonvtx: Invalid value for '--engine'"):
        parse_magic(["--engine", "fast"])
    # Every rule option `run` declares, by every name it has.
    names = {name for option in RULE_OPTIONS for name in option(lambda: None).__click_params__[0].opts}
    assert names == {"--config", "--preset", "-t", "--target", "--include", "--exclude", "--engine"}
    for name in sorted(names):
        value = "wrap" if name == "--engine" else "x"
        assert parse_magic([name, value]) != (RuleArgs(), 0), name
