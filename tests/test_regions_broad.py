"""A region whose glob selects every function (`*:*`): placed in the functions the program runs
only, at their first call, so its cost follows what runs (it once took 25 s and printed 4,951
warnings for a 0.09 s program); its warnings stay one line, and the region works."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import make_file, run_autonvtx, run_under_recorder

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12), reason="regions need sys.monitoring (3.12+)")

MODULE = """
    import json

    def work(i):
        return i

    def a():
        return 1

    def b():
        return 2

    def c():
        return 3

    def train(n):
        for i in range(n):
            work(i)

    def never_called():
        for x in range(3):
            pass

    def main():
        a(), b(), c()
        train(3)
        print(json.dumps([1]))
"""


def test_a_region_on_every_function_is_placed_where_the_program_runs_and_works(tmp_path: Path) -> None:
    make_file(tmp_path / "loops.py", MODULE)
    make_file(tmp_path / "prog.py", "import loops\nloops.main()\n")
    make_file(tmp_path / "regions.toml", '[[regions]]\nfunction = "*:*"\nloop = "first"\nname = "{qualname} {i}"\n')
    done = run_autonvtx("-v", "--config", "regions.toml", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[1]\n"
    # The region works: the first call of train already has its iterations.
    assert [e["name"] for e in done.ranges() if e["name"].startswith("train ")] == ["train 0", "train 1", "train 2"]
    # Placed only in what ran: never_called's loop is not looked at, train's is.
    assert "region loops:train (loops.py:15): first loop" in done.stderr, done.stderr
    assert "loops:never_called" not in done.stderr
    # Every function that ran without a loop is one warning line, however many there are.
    warnings = [
        line for line in done.stderr.splitlines() if line.startswith("autonvtx: warning:") and "regions" in line
    ]
    assert len(warnings) == 1, done.stderr
    assert "functions it selects could not be placed" in warnings[0]
    # autonvtx's own code is never given a region.
    assert "region autonvtx." not in done.stderr and "autonvtx.runner:" not in done.stderr


GENERATOR = """
    def gen():
        for i in range(4):
            yield i

    g = gen()
    first = next(g)
"""


def test_a_generator_begun_before_its_region_was_placed_gets_its_iterations(tmp_path: Path) -> None:
    # The generator starts while its module is imported, before the region could be placed in
    # it: its first resumption places it (no call would announce it).
    make_file(tmp_path / "loops.py", GENERATOR)
    make_file(tmp_path / "prog.py", "import loops\nprint(loops.first, list(loops.g))\n")
    make_file(tmp_path / "regions.toml", '[[regions]]\nfunction = "loops:gen"\nloop = "first"\n')
    done = run_autonvtx("--config", "regions.toml", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "0 [1, 2, 3]\n"
    names = [e["name"] for e in done.ranges()]
    assert {"gen 0", "gen 1", "gen 2"} <= set(names), names


RUNNING = """
    import autonvtx

    def main():
        autonvtx.install("regions.toml")
        for i in range(3):
            pass
        print("ran")

    main()
"""


def test_a_function_running_when_regions_are_installed_gets_them_at_once(tmp_path: Path) -> None:
    # install() from inside the function: no call of it is left to announce it.
    make_file(tmp_path / "regions.toml", '[[regions]]\nfunction = "__main__:main"\nloop = "first"\nname = "it {i}"\n')
    recordings, stdout = run_under_recorder(tmp_path, RUNNING)
    assert stdout == "ran\n"
    names = sorted(r.name for recording in recordings for r in recording.ranges)
    assert names == ["it 0", "it 1", "it 2"], names
