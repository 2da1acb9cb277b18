"""Process start-up (autonvtx.autostart.process_startup): a plain `python` whose environment names
a rules file in AUTONVTX_RULES instruments itself and its children; nothing a config or a
plugin does there stops the program from starting. Ranges are seen through the recorder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_file, run_under_recorder

MYMOD = """
    def work(x):
        return x + 1

    class Model:
        def step(self):
            return work(1)
"""

AUTOSTART = """
    import subprocess, sys, mymod
    mymod.work(1)
    subprocess.run([sys.executable, "-c", "import mymod; mymod.Model().step()"], check=True)
"""


@pytest.fixture(autouse=True)
def needs_the_pth() -> None:
    found = list((Path(sys.prefix) / "lib").glob("python*/site-packages/autonvtx-autostart.pth"))
    if not found:
        pytest.skip("autonvtx is not installed in this Python (the .pth comes with the install)")


def names(recordings: list) -> list[str]:
    return [r.name for rec in recordings for r in sorted(rec.ranges, key=lambda r: r.start_ns)]


def test_autonvtx_rules_instruments_a_plain_python_and_its_children(tmp_path: Path) -> None:
    make_file(tmp_path / "mymod.py", MYMOD)
    make_file(tmp_path / "rules.toml", '[[rules]]\nmodules = ["mymod"]\n')
    errors: list[str] = []
    recordings, _ = run_under_recorder(
        tmp_path, AUTOSTART, env={"AUTONVTX_RULES": "rules.toml", "AUTONVTX_VERBOSE": "1"}, stderr=errors
    )
    assert sorted(names(recordings)) == ["Model.step", "work", "work"]
    verb = "monitored" if sys.version_info >= (3, 12) else "wrapped"  # the default engine's
    assert len([line for line in errors[0].splitlines() if f"{verb} 2 functions in 1 module" in line]) == 2


def test_a_bad_autonvtx_rules_file_is_one_line_and_the_program_runs(tmp_path: Path) -> None:
    make_file(tmp_path / "mymod.py", MYMOD)
    make_file(tmp_path / "rules.toml", '[[rules]]\nmodule = ["mymod"]\n')
    errors: list[str] = []
    recordings, _ = run_under_recorder(tmp_path, AUTOSTART, env={"AUTONVTX_RULES": "rules.toml"}, stderr=errors)
    assert names(recordings) == []
    lines = [line for line in errors[0].splitlines() if line.startswith("autonvtx:")]
    assert len(lines) == 2  # the program and its child, each once
    assert "AUTONVTX_RULES=rules.toml: not instrumented:" in lines[0] and "rules[0].module" in lines[0]


def test_a_relative_autonvtx_rules_reaches_children_started_elsewhere(tmp_path: Path) -> None:
    # Resolved once, in the first process: a child started in another directory reads the same
    # file (it used to look for ./rules.toml where it started, and ran uninstrumented).
    make_file(tmp_path / "mymod.py", MYMOD)
    make_file(tmp_path / "rules.toml", '[[rules]]\nmodules = ["mymod"]\n')
    (tmp_path / "elsewhere").mkdir()
    program = f"""
        import os, subprocess, sys
        child = "import sys; sys.path.insert(0, {str(tmp_path)!r}); import mymod; mymod.Model().step()"
        subprocess.run([sys.executable, "-c", child], cwd={str(tmp_path / "elsewhere")!r}, check=True)
        print(os.environ["AUTONVTX_RULES"])
    """
    errors: list[str] = []
    recordings, out = run_under_recorder(tmp_path, program, env={"AUTONVTX_RULES": "rules.toml"}, stderr=errors)
    assert sorted(names(recordings)) == ["Model.step", "work"], errors[0]
    assert out.strip() == str(tmp_path / "rules.toml")
    assert "autonvtx:" not in errors[0]


def run_python(tmp_path: Path, rules: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """`python -c "print('ran')"` with AUTONVTX_RULES naming a file holding `rules`."""
    make_file(tmp_path / "rules.toml", rules)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    env.update(AUTONVTX_RULES="rules.toml", PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]), **extra)
    return subprocess.run(
        [sys.executable, "-c", "print('ran')"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "plugin, module",
    [
        # Importing unittest.__main__ runs test discovery, which ends with sys.exit().
        ("unittest.__main__", None),
        ("myplugins.exits", "import sys\nsys.exit(3)\n"),
        ("myplugins.interrupted", "raise KeyboardInterrupt\n"),
    ],
)
def test_nothing_a_plugin_raises_stops_python_from_starting(tmp_path: Path, plugin: str, module: str | None) -> None:
    # An exception other than Exception out of a .pth line is "Fatal Python error:
    # init_import_site": the program never started.
    if module is not None:
        make_file(tmp_path / "myplugins" / "__init__.py", "")
        make_file(tmp_path / (plugin.replace(".", "/") + ".py"), module)
    done = run_python(tmp_path, f'[autonvtx]\nplugins = ["{plugin}"]\n')
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("autonvtx:")]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("autonvtx: AUTONVTX_RULES=rules.toml: not instrumented: ")
    assert "Fatal Python error" not in done.stderr
