"""--budget PCT: a function whose range costs more than PCT% of its own time, measured over its
first calls with the attached tool, has its ranges turned off; every other range stays exact,
ranges open when it is turned off close as they would have (recursion), on both engines, with
threads and generators. Seen through the recorder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, make_file, run_under_recorder

from autonvtx import budget, ranges
from autonvtx.errors import UsageError

needs_native = pytest.mark.skipif(ranges._client is None, reason="autonvtx._nvtxclient is not built in this checkout")
ENGINES = ["wrap"] + (["code"] if sys.version_info >= (3, 12) else [])

WORK = """
import time

def helper(x):                      # hot and tiny: its range costs more than it does
    return x + 1

def heavy(batch):                   # milliseconds: its range costs next to nothing
    time.sleep(0.002)
    return batch

def load(n):                        # a data loader: a range per resumption, each a millisecond
    for i in range(n):
        time.sleep(0.001)
        yield i

def recurse(n):                     # tiny and recursive: turned off in the middle of one
    return helper(n) if n == 0 else recurse(n - 1) + 0
"""

PROGRAM = """
import sys, threading
import autonvtx
autonvtx.install(targets=["budgetpkg.*"], engine=ENGINE, budget=2)
from budgetpkg import work
for _ in range(40):
    work.recurse(5)                 # six frames a call: the 100th range closes mid-recursion
for batch in work.load(20):
    work.heavy(batch)
threads = [threading.Thread(target=lambda: [work.helper(i) for i in range(3000)]) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done")
"""


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
def test_a_hot_tiny_helper_is_turned_off_and_the_rest_stays_exact(tmp_path: Path, engine: str) -> None:
    make_file(tmp_path / "budgetpkg" / "__init__.py", "")
    make_file(tmp_path / "budgetpkg" / "work.py", WORK)
    stderr: list[str] = []
    (rec,), out = run_under_recorder(tmp_path, PROGRAM.replace("ENGINE", repr(engine)), stderr=stderr)
    assert out == "done\n"
    assert rec.unmatched_pops == 0 and not [r for r in rec.ranges if r.is_open]
    names = [r.name for r in rec.ranges]
    # Kept, exact: every call of heavy, every resumption of the loader (20 values, the end).
    assert names.count("heavy") == 20
    assert names.count("load") == 21
    # helper: its first 100 ranges measured (a few more in flight on other threads), then
    # none, of 40 + 12,000 calls.
    assert 100 <= names.count("helper") <= 110
    # recurse: 100 measured, the last in the middle of a call whose two outer frames had
    # pushed theirs: those close when their frames return, and nested correctly.
    recursions = sorted((r for r in rec.ranges if r.name == "recurse"), key=lambda r: r.start_ns)
    assert len(recursions) == 102
    outer, inner = recursions[-2:]
    assert outer.start_ns <= inner.start_ns and inner.end_ns <= outer.end_ns
    # The trace notes each, where and when it happened: an NVTX mark in the range's domain.
    marks = sorted(m.name for m in rec.marks if m.name.startswith("autonvtx --budget:"))
    assert [m.split(" turned off")[0] for m in marks] == ["autonvtx --budget: helper", "autonvtx --budget: recurse"]
    # One line at exit names what was turned off, and only that.
    (line,) = [line for line in stderr[0].splitlines() if line.startswith("autonvtx: --budget")]
    assert "2 functions" in line and "helper (" in line and "recurse (" in line
    assert "heavy" not in line and "load" not in line


UNINSTALLED = """
import os
import autonvtx
from budgetpkg import work
with autonvtx.install(targets=["budgetpkg.*"], engine=ENGINE, budget=2):
    for i in range(150):
        work.helper(i)
print(os.environ.get("AUTONVTX_BUDGET"))
with autonvtx.install(targets=["budgetpkg.*"], engine=ENGINE):  # no budget asked for
    for i in range(300):
        work.helper(i)
"""


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
def test_uninstall_ends_the_budget(tmp_path: Path, engine: str) -> None:
    make_file(tmp_path / "budgetpkg" / "__init__.py", "")
    make_file(tmp_path / "budgetpkg" / "work.py", WORK)
    (rec,), out = run_under_recorder(tmp_path, UNINSTALLED.replace("ENGINE", repr(engine)))
    assert out == "None\n"  # children started later get no budget
    # 100 measured ranges under the first installation, then all 300 of the second.
    assert [r.name for r in rec.ranges].count("helper") == 400


def test_a_budget_must_be_a_percentage() -> None:
    assert budget.parse_percent("2") == 2.0
    assert budget.parse_percent("0.5") == 0.5
    for bad in ("0", "-1", "101", "nan", "two", ""):
        with pytest.raises(UsageError, match=r"--budget: expected a percentage above 0 and at most 100, got"):
            budget.parse_percent(bad)


def test_run_refuses_a_bad_budget_with_one_line(tmp_path: Path) -> None:
    make_file(tmp_path / "prog.py", "print('ran')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "--budget", "lots", "-t", "x", "prog.py"],
        cwd=tmp_path,
        env=autonvtx_env(PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "autonvtx: --budget: expected a percentage above 0 and at most 100, got 'lots'"
    assert proc.stdout == ""


def test_profile_and_the_magic_pass_the_budget_on() -> None:
    from autonvtx.api import parse_magic_budget
    from autonvtx.cli.profile import inner_run_command
    from autonvtx.cli.ruleargs import RuleArgs

    assert parse_magic_budget(["-t", "mypkg.*", "--budget", "2"]) == (RuleArgs(targets=("mypkg.*",)), 0, "2")
    command = inner_run_command(RuleArgs(targets=("mypkg.*",)), (), False, 0, ("script", "p.py", ()), "2")
    assert "--budget=2" in command and command.index("--budget=2") < command.index("p.py")


@needs_native
def test_a_child_process_keeps_its_parent_s_budget(tmp_path: Path) -> None:
    from conftest import run_autonvtx

    make_file(tmp_path / "budgetpkg" / "__init__.py", "")
    make_file(tmp_path / "budgetpkg" / "work.py", WORK)
    make_file(tmp_path / "child.py", "from budgetpkg import work\nfor i in range(3000):\n    work.helper(i)\n")
    make_file(
        tmp_path / "parent.py",
        "import subprocess, sys\nsubprocess.run([sys.executable, 'child.py'], check=True)\nprint('done')\n",
    )
    done = run_autonvtx("--budget", "2", "-t", "budgetpkg.*", "parent.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    assert 100 <= done.range_names().count("helper") <= 101
    assert "autonvtx: --budget 2%: ranges turned off after 100 calls for 1 function" in done.stderr


SHAPED = """
import autonvtx

class Array:                        # array-like: what a shapes rule describes
    shape, dtype = (32, 128), "float64"

install = autonvtx.install(CONFIG, engine=ENGINE, budget=2)
from budgetpkg import work
for _ in range(300):
    work.helper(Array())
for _ in range(5):
    work.heavy(Array())
"""


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
def test_the_budget_reaches_rules_with_shapes(tmp_path: Path, engine: str) -> None:
    make_file(tmp_path / "budgetpkg" / "__init__.py", "")
    make_file(tmp_path / "budgetpkg" / "work.py", WORK.replace("return x + 1", "return x"))
    config = make_file(tmp_path / "rules.toml", '[[rules]]\nmodules = ["budgetpkg.*"]\nshapes = true\n')
    source = SHAPED.replace("CONFIG", repr(str(config))).replace("ENGINE", repr(engine))
    (rec,), _ = run_under_recorder(tmp_path, source)
    names = [r.name for r in rec.ranges]
    assert names.count("helper [32x128 float64]") == 100  # measured, then turned off
    assert names.count("heavy [32x128 float64]") == 5


def test_the_exit_line_names_a_function_turned_off_twice_once() -> None:
    off = [("d", "helper", 300.0, 100.0), ("d", "other", 200.0, 50.0), ("d", "helper", 310.0, 90.0)]
    line = budget.exit_line(2, off)
    assert "for 2 functions" in line and line.count("helper (") == 1
