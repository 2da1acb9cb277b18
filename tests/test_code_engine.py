"""The code engine (3.12+) end to end: ranges without replacing any function, nested functions
selected by their co_qualname, the engine chosen by config and command line, and the fallback
to the wrap engine with one line saying why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import autonvtx_env, make_file, run_autonvtx, run_under_recorder

needs_monitoring = pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")

REGISTRY = """
    import functools

    FILTERS = {}

    def register(func):
        FILTERS[func.__name__] = func
        return func

    @register
    def upper(text):
        return text.upper()

    def make_step(scale):
        def step(x):
            return helper(x) * scale
        return step

    def helper(x):
        return x + 1

    def logged(func):
        @functools.wraps(func)
        def wrapper(*args):
            return func(*args)
        return wrapper

    @logged
    def decorated(x):
        return x

    later = functools.partial(helper, 1)
"""


def ranges_of(done) -> list[str]:
    return [e["name"] for e in sorted(done.ranges(), key=lambda e: e["ts"])]


@needs_monitoring
def test_references_taken_before_instrumenting_get_ranges_and_pickle(tmp_path: Path) -> None:
    make_file(tmp_path / "engine_mod.py", REGISTRY)
    make_file(
        tmp_path / "prog.py",
        """
        import pickle, sys
        from engine_mod import FILTERS, later, make_step, upper, decorated
        import engine_mod

        step = make_step(2)
        FILTERS["upper"]("a"); later(); step(1); decorated(3)
        # The registry pickles by name: the module still holds the very same function.
        assert pickle.loads(pickle.dumps(FILTERS)) == FILTERS
        print(upper is engine_mod.upper, type(upper).__name__, step.__qualname__)

        def caller():
            return sys._getframe(0).f_code.co_name

        print(engine_mod.helper(1) == 2, caller())
        """,
    )
    done = run_autonvtx(
        "--engine", "code", "-t", "engine_mod", "--exclude", "register", "--exclude", "logged", "prog.py", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "True function make_step.<locals>.step"
    # The decorator's inner function is reached too: excluding `logged` leaves
    # `logged.<locals>.wrapper` to the globs that match its own name.
    assert ranges_of(done) == [
        "make_step",
        "upper",
        "helper",
        "make_step.<locals>.step",
        "helper",
        "logged.<locals>.wrapper",
        "decorated",
        "helper",
    ]


@needs_monitoring
def test_list_shows_nested_functions_for_the_code_engine_only(tmp_path: Path) -> None:
    make_file(tmp_path / "engine_mod.py", REGISTRY)
    listed = {}
    for engine in ("code", "wrap"):
        done = subprocess.run(
            [sys.executable, "-m", "autonvtx", "list", "--json", "--engine", engine, "-t", "engine_mod", "engine_mod"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=autonvtx_env(),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        (rule,) = json.loads(done.stdout)["rules"]
        listed[engine] = {(s["qualname"], s["kind"]) for s in rule["selected"]}
    nested = {("make_step.<locals>.step", "nested"), ("logged.<locals>.wrapper", "nested")}
    assert nested <= listed["code"]
    assert not nested & listed["wrap"]
    assert listed["code"] - nested == listed["wrap"]


@needs_monitoring
def test_code_engine_in_children_and_the_config_key(tmp_path: Path) -> None:
    make_file(tmp_path / "engine_mod.py", REGISTRY)
    make_file(tmp_path / "autonvtx.toml", '[autonvtx]\nengine = "code"\n\n[[rules]]\nmodules = ["engine_mod"]\n')
    make_file(
        tmp_path / "prog.py",
        """
        import multiprocessing, autonvtx, engine_mod

        def child():
            print(autonvtx.is_instrumented(engine_mod.helper), engine_mod.helper is engine_mod.FILTERS.get("x", engine_mod.helper))
            engine_mod.helper(1)

        if __name__ == "__main__":
            process = multiprocessing.get_context("spawn").Process(target=child)
            process.start(); process.join()
        """,
    )
    done = run_autonvtx("-v", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True True\n"
    assert "autonvtx: engine: code (sys.monitoring; no function replaced)" in done.stderr
    assert ranges_of(done) == ["helper"]


@needs_monitoring
def test_no_free_tool_id_falls_back_to_wrappers_with_one_line(tmp_path: Path) -> None:
    make_file(tmp_path / "engine_mod.py", REGISTRY)
    errors: list[str] = []
    recordings, out = run_under_recorder(
        tmp_path,
        """
        import sys, autonvtx
        for tool in range(6):
            if sys.monitoring.get_tool(tool) is None:
                sys.monitoring.use_tool_id(tool, "someone else")
        import engine_mod
        with autonvtx.install(targets=["engine_mod"], engine="code"):
            engine_mod.helper(1)
            print(autonvtx.is_instrumented(engine_mod.helper), engine_mod.helper.__wrapped__.__name__)
        """,
        stderr=errors,
    )
    assert out == "True helper\n"
    [line] = [line for line in errors[0].splitlines() if line.startswith("autonvtx:")]
    assert line.startswith("autonvtx: engine 'code': the code engine cannot run (no free sys.monitoring tool id")
    assert line.endswith("; using the wrap engine")
    assert [r.name for rec in recordings for r in rec.ranges] == ["helper"]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="before 3.12 only")
def test_asking_for_the_code_engine_before_312_says_so(tmp_path: Path) -> None:
    make_file(tmp_path / "prog.py", "def work():\n    return 1\nwork()\n")
    done = run_autonvtx("--engine", "code", "-t", "__main__", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        f"autonvtx: engine 'code': the code engine cannot run (Python {sys.version_info[0]}."
        f"{sys.version_info[1]} has no sys.monitoring (3.12+)); using the wrap engine"
    ) in done.stderr.splitlines()
    assert ranges_of(done) == ["work"]


def test_a_bad_engine_is_a_config_error(tmp_path: Path) -> None:
    make_file(tmp_path / "autonvtx.toml", '[autonvtx]\nengine = "cod"\n\n[[rules]]\nmodules = ["x"]\n')
    make_file(tmp_path / "prog.py", "print('ran')\n")
    done = run_autonvtx("prog.py", cwd=tmp_path, trace=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(
        "autonvtx: autonvtx.toml: autonvtx.engine: unknown engine 'cod'; expected one of 'auto', 'code', 'wrap'; did you mean 'code'?"
    )


# Walks stdlib packages with an engine, natively (uniform.c) or in Python only, and prints every
# decision and what was applied: the Python walk is the native walk's oracle.
WALK_TWIN = """
import importlib, json, os, sys
from autonvtx.recorder import native
os.environ["NVTX_INJECTION64_PATH"] = native.library_path()
os.environ["AUTONVTX_RECORDER_MODE"] = "noop"
PACKAGES = ("json", "email", "collections", "asyncio", "dataclasses", "enum", "typing",
            "argparse", "logging", "unittest", "xml.etree.ElementTree", "http.client",
            "concurrent.futures", "importlib.metadata", "tomllib", "functools", "abc",
            "contextlib", "inspect", "textwrap", "string", "fractions")
if sys.version_info < (3, 11):
    PACKAGES = tuple(p for p in PACKAGES if p != "tomllib")  # 3.11+
for name in PACKAGES:
    importlib.import_module(name)
# Where installed, a package whose functions are mostly decorated (networkx's argmap).
try:
    import networkx
    PACKAGES += ("networkx",)
except ImportError:
    pass
from autonvtx.config import Config, Rule
from autonvtx.engines import is_marked
from autonvtx.engines.code import CodeEngine
from autonvtx.engines.wrap import WrapEngine
from autonvtx.matching import Matcher
from autonvtx.ranges import CodeMonitor
from autonvtx.walk import Walker

how, engine_name = sys.argv[1], sys.argv[2]
rule = Rule(modules=tuple(m for p in PACKAGES for m in (p, p + ".*")), origin="test")
config = Config(rules=(rule,))
if engine_name == "code":
    monitor = CodeMonitor()
    assert monitor.install() is None
    engine = CodeEngine(config, monitor)
else:
    engine = WrapEngine(config, restorable=True)
if how == "python":
    type(engine).uniform_walk = lambda self, module, rule: None
walker = Walker(Matcher(config), engine, verb="monitored")
modules = sorted((n, m) for n, m in sys.modules.items()
                 if isinstance(m, type(sys)) and walker.should_consider_module(n)
                 and walker.uniform_selection(n) is not None)
for name, module in modules:
    walker.instrument(module)
# In order: --verbose and `list` print decisions in the order they were taken.
reports = {name: [list(r.wrapped.items()), list(r.skipped.items()), r.rebound]
           for name, r in walker.reports.items()}
if engine_name == "code":
    applied = sorted(f"{c.co_filename}:{c.co_firstlineno}:{c.co_qualname}" for c in monitor._walked())
else:
    def shown(holder, attr, value):
        inner = getattr(value, "__func__", value)
        return f"{holder}.{attr}={type(value).__name__}:{type(inner).__name__}:{inner.__wrapped__.__qualname__}"
    applied = [shown(n, a, v) for n, m in modules for a, v in vars(m).items() if is_marked(v)]
    applied += [shown(f"{n}.{c.__qualname__}", a, v) for n, m in modules for c in vars(m).values()
                if isinstance(c, type) for a, v in vars(c).items() if is_marked(getattr(v, "__func__", v))]
    applied += [f"written {type(h).__name__} {a}" for h, a, _, _ in engine._written]
    applied.append(f"restored {engine.restore()}")
print(json.dumps({"reports": reports, "applied": applied}))
"""


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param("code", marks=needs_monitoring),
        "wrap",
    ],
)
def test_the_native_walk_decides_as_the_python_walk(tmp_path: Path, engine: str) -> None:
    # A package targeted wholesale is walked in C (plain functions, classes written in Python)
    # with the Python walk's methods for the rest: same reports, same functions given ranges,
    # and for the wrap engine the same writes, restored alike.
    script = make_file(tmp_path / "twin.py", WALK_TWIN)
    outputs = {}
    for how in ("native", "python"):
        done = subprocess.run(
            [sys.executable, str(script), how, engine], capture_output=True, text=True, env=autonvtx_env(), timeout=120
        )
        assert done.returncode == 0, done.stderr
        outputs[how] = json.loads(done.stdout)
    native, python = outputs["native"], outputs["python"]
    assert len(native["applied"]) > 500
    assert native["applied"] == python["applied"]
    assert native["reports"] == python["reports"]
    assert not any("<module>" in skipped for _, skipped, _ in native["reports"].values())


NESTING = """
    def inner(x):
        return x + 1

    def outer(n):
        return sum(inner(i) for i in range(n))

    def failing():
        inner(0)
        raise ValueError("no")

    def counter(n):
        for i in range(n):
            yield inner(i)

    class Model:
        def forward(self, x):
            return outer(x)

        @staticmethod
        def build():
            return Model()

        def __repr__(self):
            return "Model()"
"""


def nested_names(done) -> list[tuple[str, int]]:
    # (name, depth) in the order ranges began: depth from containment on the one thread.
    events = sorted(done.ranges(), key=lambda e: (e["ts"], -e["dur"]))
    found, open_ends = [], []
    for e in events:
        open_ends = [end for end in open_ends if end > e["ts"]]
        found.append((e["name"], len(open_ends)))
        open_ends.append(e["ts"] + e["dur"])
    return found


@pytest.mark.parametrize("engine", [pytest.param("code", marks=needs_monitoring), "wrap"])
def test_a_module_targeted_whole_nests_as_one_walked_in_python(tmp_path: Path, engine: str) -> None:
    # `-t nest_mod` selects every name alike: the native walk (uniform.c; for the code engine a
    # range made on each code's first run). `--exclude` of a name that does not exist makes
    # the rules tell names apart: the Python walk. Both give the same ranges, nested alike.
    make_file(tmp_path / "nest_mod.py", NESTING)
    make_file(
        tmp_path / "prog.py",
        """
        import nest_mod
        m = nest_mod.Model.build()
        m.forward(3)
        list(nest_mod.counter(2))
        try:
            nest_mod.failing()
        except ValueError:
            pass
        print(repr(m))
        """,
    )
    runs = {}
    for how, extra in (("native", ()), ("python", ("--exclude", "no_such_name"))):
        done = run_autonvtx("--engine", engine, "-t", "nest_mod", *extra, "prog.py", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Model()\n"
        runs[how] = nested_names(done)
    assert runs["native"] == runs["python"]
    assert runs["native"][:6] == [
        ("Model.build", 0),
        ("Model.forward", 0),
        ("outer", 1),
        ("inner", 2),
        ("inner", 2),
        ("inner", 2),
    ]
    assert ("failing", 0) in runs["native"] and ("Model.__repr__", 0) not in runs["native"]
    assert [name for name, _ in runs["native"]].count("counter") == 3  # 2 items, then the end


@needs_monitoring
@pytest.mark.parametrize("color", [None, "green"])
def test_a_package_targeted_wholesale_colors_each_module_its_own_way(tmp_path: Path, color: str | None) -> None:
    # The native walk is made once per rule and color, not per module: each module still gets
    # its own auto color, and a rule's own color holds for all of its modules.
    from autonvtx.config import auto_color, parse_color

    names = [f"m{i}" for i in range(8)]
    for name in names:
        make_file(tmp_path / "colorpkg" / f"{name}.py", f"def {name}():\n    return 1\n")
    make_file(tmp_path / "colorpkg" / "__init__.py", "")
    make_file(tmp_path / "plain.py", "def plain():\n    return 2\n")
    rules = '[autonvtx]\nengine = "code"\n\n[[rules]]\nmodules = ["colorpkg", "colorpkg.*"]\n'
    if color is not None:
        rules += f'color = "{color}"\n'
    make_file(tmp_path / "rules.toml", rules + '\n[[rules]]\nmodules = ["plain"]\n')
    (recording,), _ = run_under_recorder(
        tmp_path,
        f"""
        import importlib, sys
        sys.path.insert(0, {str(tmp_path)!r})
        from autonvtx.api import install
        install(config={str(tmp_path / "rules.toml")!r})
        import plain
        for name in {names!r}:
            getattr(importlib.import_module("colorpkg." + name), name)()
        plain.plain()
        """,
    )
    colors = {r.name: r.color for r in recording.ranges}
    expected = {n: auto_color(f"colorpkg.{n}") if color is None else parse_color(color) for n in names}
    assert colors == {**expected, "plain": auto_color("plain")}
    if color is None:
        assert len(set(colors.values())) > 2  # the palette spreads them: one walk for all would not


LATE = """
    import types

    def called(x):
        return x + 1

    def never_called(x):
        return x * 2

    def counter(n):
        for i in range(n):
            yield called(i)

    # Made before the walk from the same code object: a code object's range is every copy's.
    copy = types.FunctionType(called.__code__, globals(), "copy")
    started = counter(3)
    first = next(started)  # suspended before the walk, resumed after it
"""


@needs_monitoring
def test_a_wholesale_walk_leaves_instrumentation_to_each_code_s_first_run(tmp_path: Path) -> None:
    # The native walk sets each code object's local events as set_local_events does, and
    # CPython instruments the code at its next RESUME (globalevents.c, monitoring_turn_on_later):
    # get_local_events reads the same events, a code never run stays as it was compiled, and
    # every run, of any function made from the code or a generator resumed, gets its range.
    make_file(tmp_path / "late_mod.py", LATE)
    (recording,), out = run_under_recorder(
        tmp_path,
        f"""
        import dis, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import late_mod
        from autonvtx.api import install
        from autonvtx import ranges
        install(targets=["late_mod"], engine="code")
        tool = ranges.CodeMonitor.active.tool_id
        events = {{f.__name__: sys.monitoring.get_local_events(tool, f.__code__)
                  for f in (late_mod.called, late_mod.never_called, late_mod.counter)}}
        print(len(set(events.values())), events["never_called"] != 0)
        first = next(dis.get_instructions(late_mod.never_called, adaptive=True)).opname
        print(first)
        print(late_mod.copy(1), list(late_mod.started), late_mod.called(5))
        first = next(dis.get_instructions(late_mod.called, adaptive=True)).opname
        print(first)
        """,
    )
    assert out.splitlines() == ["1 True", "RESUME", "2 [2, 3] 6", "INSTRUMENTED_RESUME"]
    names = [r.name for r in sorted(recording.ranges, key=lambda r: r.start_ns)]
    # copy(1); the generator's two resumptions, each calling called(); its end; called(5).
    assert names == ["called", "counter", "called", "counter", "called", "counter", "called"]


@needs_monitoring
def test_without_lazy_instrumentation_the_walk_gives_the_same_ranges(tmp_path: Path) -> None:
    # lazy_local_events(False): set_local_events itself, instrumenting at once; same ranges.
    make_file(tmp_path / "late_mod.py", LATE)
    program = f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import late_mod
        import autonvtx._nvtxclient as client
        from autonvtx.api import install
        client.lazy_local_events(sys.argv[-1] == "lazy")
        install(targets=["late_mod"], engine="code")
        print(late_mod.copy(1), list(late_mod.started), late_mod.called(5))
        """
    seen = []
    for how in ("lazy", "eager"):
        (tmp_path / how).mkdir()
        (recording,), out = run_under_recorder(tmp_path / how, program.replace("sys.argv[-1]", repr(how)))
        seen.append((out, [r.name for r in sorted(recording.ranges, key=lambda r: r.start_ns)]))
    assert seen[0] == seen[1]
    assert seen[0][1].count("called") == 4
