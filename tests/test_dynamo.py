"""torch.compile over selected functions, on both engines: the program compiles and runs as
without autonvtx, and a compiled function's calls get one range each (observed through the
recorder). Needs torch (CPU); dynamo runs with backend="eager", so no C++ compiler is used."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from conftest import make_file, run_autonvtx, skip_without

skip_without("torch")

# A decorated function with a closure, called from compiled code: dynamo guards on its
# __closure__ (the crash of issue 21, item 8).
LIBRARY = """
    import functools

    def scaled(fn):
        scale = 2.0

        @functools.wraps(fn)
        def inner(*args):
            return fn(*args) * scale
        return inner

    @scaled
    def helper(x):
        return x + 1

    def step(x):
        return helper(x).sum()

    class Layer:
        @scaled
        def forward(self, x):
            return x - 1

    layer = Layer()

    def step_method(x):
        return layer.forward(x).sum()
"""

CALLS_COMPILED = """
    import torch
    import mylib

    compiled = torch.compile(mylib.step, backend="eager")
    x = torch.ones(4)
    for _ in range(3):
        print(compiled(x).item())
    print(mylib.helper(x).sum().item())
    print(torch.compile(mylib.step_method, backend="eager")(x).item())
"""

COMPILES_OWN_FUNCTION = """
    import torch

    def step(x):
        return (x * 2).sum()

    compiled = torch.compile(step, backend="eager")
    x = torch.ones(4)
    for _ in range(3):
        print(compiled(x).item())
"""


@pytest.mark.parametrize("engine", ["wrap", "code"])
def test_compiled_code_calling_a_wrapped_closure_runs_as_without_autonvtx(workdir: Path, engine: str) -> None:
    make_file(workdir / "mylib" / "__init__.py", LIBRARY)
    make_file(workdir / "prog.py", CALLS_COMPILED)
    done = run_autonvtx("--engine", engine, "-t", "mylib", "prog.py", cwd=workdir, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["16.0", "16.0", "16.0", "16.0", "0.0"]
    names = Counter(done.range_names())
    if engine == "wrap" or "code engine cannot run" not in done.stderr:
        # Inside the compiled graph `helper` has no range (dynamo inlines the function);
        # called eagerly it has its own.
        assert names["helper"] == 1, names
    if engine == "wrap":
        assert names["step"] == 3, names  # one range per call of the compiled function


def test_a_compiled_copy_of_a_selected_function_is_not_ranged_twice(workdir: Path) -> None:
    make_file(workdir / "prog.py", COMPILES_OWN_FUNCTION)
    done = run_autonvtx(
        "--engine", "wrap", "-vv", "-t", "__main__", "--include", "step", "prog.py", cwd=workdir, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["8.0", "8.0", "8.0"]
    ranges = [r for r in done.ranges() if r["name"] == "step"]
    assert len(ranges) == 3  # not 6: `compiled` (functools.wraps of step) gets no range of its own
    assert "compiled: skipped (a wrapper of step made by functools.wraps" in done.stderr
