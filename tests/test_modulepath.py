"""The per-module path in C (modulepath.py, _native/modulepath.c, _native/chainedloader.c): the
modules of a package targeted wholesale after the first are walked from their loader in one C
call, with the decisions, reports, ranges and colors the Python way gives."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import make_file, run_under_recorder

# One module's source: every kind of name a walk decides about, some of them handed by the C
# walk to the Python walk's methods (a partial, an itemgetter, a re-exported function).
BODY = """
    import functools, operator
    from json import dumps  # another module's function: decided there
    from math import sqrt as root  # a builtin the rule does not wrap

    LOADER = type(__loader__).__module__  # which stand-in loader executed this module

    def plain(x):
        return x + 1

    def _private(x):
        return x

    def gen(n):
        yield from range(n)

    async def coro():
        return 1

    def factory():
        def inner():
            return 2
        return inner

    made = factory()  # bound to a name other than its code's

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args):
            return func(*args)
        return wrapper

    @decorate
    def decorated(x):
        return x

    halve = functools.partial(operator.truediv, b=2)
    second = operator.itemgetter(1)
    square = lambda x: x * x

    class Model:
        def __init__(self):
            self.n = 1

        def forward(self, x):
            return x + self.n

        @staticmethod
        def static(x):
            return x

        @classmethod
        def build(cls):
            return cls()

        length = staticmethod(len)  # a static method of a builtin: the Python walk's

        @property
        def size(self):
            return self.n

        def __repr__(self):
            return "Model()"

        def __call__(self, x):
            return self.forward(x)

        class Inner:
            def deep(self):
                return 3

    def run():
        m = Model.build()
        m(1)
        Model.static(2)
        Model.Inner().deep()
        list(gen(2))
        made()
        decorated(1)
        _private(plain(1))
        square(2)
        try:
            coro().send(None)
        except StopIteration:
            pass
"""

PROGRAM = """
    import gc, importlib, json, sys
    sys.path.insert(0, {root!r})
    import autonvtx
    if {before!r}:  # imported before install(): walked as install() finds them
        for name in {names!r}:
            importlib.import_module("mppkg." + name)
    installation = autonvtx.install(config={rules!r})
    loaders = {{}}
    for name in {names!r}:
        module = importlib.import_module("mppkg." + name)
        loaders[name] = module.LOADER
        module.run()
    hook = installation._instrumentation.hook
    reports = installation._instrumentation.walker.reports
    lines = {{name: [line.replace("mppkg." + name, "mppkg.M") for line in sorted(reports["mppkg." + name].lines())]
             for name in {names!r}}}
    # Which reports' lists the collector still walks (the native path leaves out lists of names).
    tracked = {{name: gc.is_tracked(reports["mppkg." + name]._skips) for name in {names!r}}}
    print(json.dumps({{"path": type(hook.on_executed).__name__, "taken": getattr(hook.on_executed, "taken", None),
                      "loaders": loaders, "lines": lines, "tracked": tracked}}))
"""


def engines() -> list[str]:
    return ["wrap", "code"] if sys.version_info >= (3, 12) else ["wrap"]


def run_package(
    tmp_path: Path, engine: str, modules: int, color: str | None, builtins: bool = False, before: bool = False
) -> tuple[dict[str, Any], Any]:
    names = [f"m{i:02d}" for i in range(modules)]
    make_file(tmp_path / "mppkg" / "__init__.py", "")
    for name in names:
        make_file(tmp_path / "mppkg" / f"{name}.py", BODY)
    # The package itself is not a target: mppkg.m00 is the first module walked, the Python way.
    rules = f'[autonvtx]\nengine = "{engine}"\n\n[[rules]]\nmodules = ["mppkg.*"]\n'
    if color is not None:
        rules += f'color = "{color}"\n'
    if builtins:
        rules += "builtins = true\n"
    make_file(tmp_path / "rules.toml", rules)
    recordings, out = run_under_recorder(
        tmp_path, PROGRAM.format(root=str(tmp_path), rules=str(tmp_path / "rules.toml"), names=names, before=before)
    )
    (recording,) = recordings
    return json.loads(out.strip().splitlines()[-1]), recording


@pytest.mark.parametrize("engine", engines())
@pytest.mark.parametrize("before", [False, True], ids=["imported-after", "imported-before"])
def test_modules_after_the_first_are_walked_natively_with_the_same_decisions_and_ranges(
    tmp_path: Path, engine: str, before: bool
) -> None:
    from autonvtx.config import parse_color

    modules = 12
    seen, recording = run_package(tmp_path, engine, modules, color="green", builtins=True, before=before)
    assert seen["path"] == "ModulePath"
    assert seen["taken"] == modules - 1  # one color: only the first went the Python way
    if before:  # executed before there was a hook: by their own loaders
        assert set(seen["loaders"].values()) == {"_frozen_importlib_external"}
    else:
        assert seen["loaders"]["m00"] == "autonvtx.importer"  # before the first plan
        assert {seen["loaders"][f"m{i:02d}"] for i in range(1, modules)} == {"autonvtx._nvtxclient"}
    assert seen["tracked"]["m00"] and not any(seen["tracked"][f"m{i:02d}"] for i in range(1, modules))
    first = seen["lines"]["m00"]
    assert any("Model.forward: " in line for line in first) and any("skipped" in line for line in first)
    assert any(line.startswith("mppkg.M:Model.length: ") for line in first)  # the Python walk's decision
    assert all(lines == first for lines in seen["lines"].values())
    # Every module's run() gave the same ranges as the one walked the Python way.
    counts = Counter(r.name for r in recording.ranges)
    assert counts["run"] == modules and counts["Model.forward"] == modules
    assert all(n % modules == 0 for n in counts.values()), counts
    assert {r.color for r in recording.ranges} == {parse_color("green")}


@pytest.mark.parametrize("engine", engines())
def test_each_module_keeps_its_own_auto_color_on_the_native_path(tmp_path: Path, engine: str) -> None:
    # The native path finds a module's walk by its auto color (crc32 of its name, as
    # config.auto_color): the first module of each color goes the Python way, the rest not.
    from autonvtx.config import auto_color

    modules = 30
    seen, recording = run_package(tmp_path, engine, modules, color=None)
    colors = {f"m{i:02d}": auto_color(f"mppkg.m{i:02d}") for i in range(modules)}
    assert seen["taken"] == modules - len(set(colors.values()))
    runs = [r.color for r in recording.ranges if r.name == "run"]
    assert runs == list(colors.values())


def test_an_error_before_the_walk_hands_the_module_to_the_python_way() -> None:
    import types

    from autonvtx.ranges import _client

    if _client is None or not hasattr(_client, "ModulePath"):
        pytest.skip("the native client is not built")

    class Odd(str):
        """A key whose comparison raises: looking the module's name up fails."""

        def __hash__(self) -> int:
            return hash("m")

        def __eq__(self, other: object) -> bool:
            raise RuntimeError("odd key")

    python_way: list[types.ModuleType] = []
    path = _client.ModulePath(
        python_way.append, {}, {"m": True}, {Odd("m"): None}, {}, None, None, None, {}, None, frozenset(), None, (), ()
    )
    module = types.ModuleType("m")
    path(module)
    assert python_way == [module] and path.taken == 0


def test_bad_arguments_to_the_native_path_raise_and_release_nothing() -> None:
    from autonvtx.ranges import _client

    if _client is None or not hasattr(_client, "ModulePath"):
        pytest.skip("the native client is not built")
    slow = [].append
    before = sys.getrefcount(slow)
    for _ in range(3):  # each failed construction once released what it had only borrowed
        with pytest.raises(TypeError, match="tuples"):
            _client.ModulePath(slow, {}, {}, {}, {}, None, None, None, {}, None, frozenset(), None, "not a tuple", ())
    assert sys.getrefcount(slow) == before


def test_the_native_finder_serves_a_tuple_meta_path_and_leaves_no_state_behind(tmp_path: Path) -> None:
    make_file(tmp_path / "mppkg" / "__init__.py", "")
    for name in ("a", "b", "c", "d"):
        make_file(tmp_path / "mppkg" / f"{name}.py", "def f():\n    return 1\n")
    recordings, out = run_under_recorder(
        tmp_path,
        f"""
        import gc, importlib, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import autonvtx
        for cycle in range(3):  # a native finder per install(), each used
            with autonvtx.install(targets=["mppkg.*"], engine="wrap") as installation:
                importlib.import_module(f"mppkg.{{'abc'[cycle]}}")
        installation = autonvtx.install(targets=["mppkg.*"], engine="wrap")
        hook = installation._instrumentation.hook
        sys.meta_path = tuple(sys.meta_path)  # importlib takes any sequence
        import mppkg.d
        sys.meta_path = list(sys.meta_path)
        # Nothing of the finders' per-thread state is left in the thread's state dictionary.
        left = [k for o in gc.get_objects() if type(o) is dict for k in o
                if isinstance(k, str) and k.startswith("autonvtx finder")]
        print(type(hook.on_executed).__name__, autonvtx.is_instrumented(sys.modules["mppkg.d"].f), left)
    """,
    )
    assert out.split() == ["ModulePath", "True", "[]"]
