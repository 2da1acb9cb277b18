"""autonvtx's own NVTX client (ranges.py and its native extension), observed through the recorder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_file, run_under_recorder

from autonvtx import environment, ranges
from autonvtx.recorder.model import ProcessRecording, Range

REPO = Path(__file__).resolve().parents[1]


def record(tmp_path: Path, body: str) -> tuple[ProcessRecording, str]:
    """Run `body` under the recorder; the one process's recording and its stdout."""
    (recording,), stdout = run_under_recorder(tmp_path, body)
    return recording, stdout


needs_native = pytest.mark.skipif(ranges._client is None, reason="autonvtx._nvtxclient is not built in this checkout")


@needs_native
def test_name_thread_names_os_threads_for_the_tool(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        import threading
        from autonvtx import ranges

        def work():
            ranges.name_thread(threading.get_native_id(), "worker \\u00e9")
            print(threading.get_native_id())

        t = threading.Thread(target=work)
        t.start(); t.join()
        ranges.name_thread(threading.get_native_id(), "main")
        ranges.name_thread(threading.get_native_id(), "main, renamed")
        print(threading.get_native_id())
        """,
    )
    worker, main = (int(line) for line in out.split())
    assert rec.thread_names[worker] == "worker \u00e9"
    assert rec.thread_names[main] == "main, renamed"  # the last name wins


def test_name_thread_without_the_extension_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranges, "_client", None)
    assert ranges.name_thread(1, "x") is None


@needs_native
@pytest.mark.parametrize(
    ("args", "error"),
    [((1,), TypeError), ((1, b"x"), TypeError), ((-1, "x"), OverflowError), ((2**32, "x"), OverflowError)],
)
def test_name_os_thread_rejects_bad_arguments(args: tuple[object, ...], error: type) -> None:
    with pytest.raises(error):
        ranges._client.name_os_thread(*args)


EVENTS_PROGRAM = """
import sys
sys.path.insert(0, {modules!r})
from autonvtx import ranges
from autonvtx.config import Config, Rule
from autonvtx.importer import ImportHook
from autonvtx.walk import Walker
from autonvtx.matching import Matcher
rules = (  # the last rule that selects a function styles it
    Rule(modules=("inst_shapes.*",), origin="t"),
    Rule(modules=("inst_shapes.kinds",), include=("Trainer.*",), color="green",
         domain="mine", category="model", origin="t"),
)
matcher = Matcher(Config(rules=rules))
hook = ImportHook(matcher, Walker(matcher))
hook.install()
import nvtx
import inst_shapes.kinds as k
with nvtx.annotate("user", domain="mine", category="io"):  # the program's own category
    k.outer(1)
t = k.Trainer(2)
t.step(1); k.Trainer.static(1); t.build(); list(t.epochs(2))
try:
    k.fails()
except ValueError:
    pass
print(ranges.is_native(), type(k.plain).__name__)
"""


def events(rec: ProcessRecording) -> list[tuple[object, ...]]:
    """What a tool sees of each range, in order, with its nesting depth on its thread."""

    def depth(inner: Range) -> int:
        return sum(
            1
            for r in rec.ranges
            if r is not inner and r.tid == inner.tid and r.start_ns <= inner.start_ns and inner.end_ns <= r.end_ns
        )

    return [(r.name, r.domain, r.color, r.category, depth(r)) for r in rec.ranges]


@needs_native
def test_native_and_pure_python_paths_emit_identical_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program = EVENTS_PROGRAM.format(modules=str(Path(__file__).parent / "modules"))
    seen = {}
    for pure in ("0", "1"):
        monkeypatch.setenv(environment.PURE_PYTHON, pure)
        rec, out = record(tmp_path / pure, program)
        seen[pure] = (events(rec), out.split())
    assert seen["0"][1] == ["True", "_RangedFunctionWrapper"]
    assert seen["1"][1] == ["False", "_PlainFunctionWrapper"]
    assert seen["0"][0] == seen["1"][0]
    names = [e[0] for e in seen["0"][0]]
    assert names[:3] == ["user", "outer", "plain"] and "Trainer.step" in names
    categories = {e[0]: e[3] for e in seen["0"][0]}
    assert (categories["user"], categories["Trainer.step"]) == ("io", "model")


@needs_native
def test_a_native_range_is_called_as_wrapt_calls_a_wrapper() -> None:
    prepared = ranges._client.Range("autonvtx", "f", 0xFF00FF00, 0)
    assert (prepared.domain, prepared.message) == ("autonvtx", "f")

    def f(*args: object, **kwargs: object) -> object:
        return args, kwargs

    assert prepared(f, None, (1, 2), {"k": 3}) == ((1, 2), {"k": 3})
    assert prepared(f, None, (), {}) == ((), {})
    for bad in [(f, None, (1,)), (f, None, [1], {}), (f, None, (), [])]:
        with pytest.raises(TypeError):
            prepared(*bad)
    with pytest.raises(ValueError):
        ranges._client.Range("", "f")


@needs_native
def test_the_one_call_maker_wraps_plain_and_suspending_functions() -> None:
    from autonvtx.engines import wrap as instrument

    make = ranges.ranged_wrapper_factory(instrument._RangedFunctionWrapper)
    assert make is not None

    def f(x: object) -> object:
        return x

    def gen() -> object:
        yield 1

    async def coro() -> None:
        pass

    wrapper = make(f, "autonvtx", "f-message", 0xFF00FF00, 0)
    assert type(wrapper) is instrument._RangedFunctionWrapper and wrapper(7) == 7
    assert wrapper.__wrapped__ is f
    assert (wrapper._self_range.domain, wrapper._self_range.message) == ("autonvtx", "f-message")
    # Generators and coroutines: the wrapper drives what they return, a range per resumption.
    for suspending in (gen, coro):
        made = make(suspending, "autonvtx", suspending.__name__, 0, 0)
        assert type(made) is instrument._RangedFunctionWrapper and made.__wrapped__ is suspending
    with pytest.raises(TypeError):
        make(len, "autonvtx", "len", 0, 0)  # a builtin is not a plain function
    with pytest.raises(TypeError):
        ranges._client.ranged_wrapper(instrument.RangeWrapper, f, "autonvtx", "f", 0, 0)
    with pytest.raises(ValueError):
        make(f, "", "f", 0, 0)


@needs_native
def test_the_native_wrapper_type_is_collected_and_refuses_a_broken_state() -> None:
    import gc
    import weakref

    from autonvtx.engines import wrap as instrument

    kind = instrument._RangedFunctionWrapper
    prepared = ranges._client.Range("autonvtx", "f")

    def f(x: object) -> object:
        return x

    wrapper = kind(f, prepared)
    assert wrapper(1) == 1 and wrapper._self_range is prepared
    holder = [wrapper]
    f.cycle = holder  # type: ignore[attr-defined]  # function -> list -> wrapper -> function
    alive = weakref.ref(wrapper)
    del wrapper, holder, f
    gc.collect()
    assert alive() is None
    broken = kind(lambda: 1, prepared)
    del broken._self_range
    with pytest.raises(TypeError, match="not initialized"):
        broken()
    with pytest.raises(TypeError):
        kind(len, prepared)  # a builtin is not a plain function
    with pytest.raises(TypeError):
        kind(lambda: 1, object())


DRIVERS_PROGRAM = """
import asyncio, inspect, types, weakref
from autonvtx import ranges
from autonvtx.config import RangeStyle

def ranged(func):
    style = RangeStyle("autonvtx", "{qualname}", 0xFF00FF00, None)
    wrapper = ranges.wrapper_for(func, ranges.emitter_with_message(style, func.__qualname__))
    return lambda *args, **kwargs: wrapper(func, None, args, kwargs)

def gen():
    got = yield 1
    return (got, "a tuple")          # StopIteration's value, not its args

class Box:
    pass

def gives():
    yield Box()
    yield None

@types.coroutine
def legacy():
    yield
    return "legacy"

async def coro():
    return await ranged(legacy)()

g = ranged(gen)()
print(inspect.isgenerator(g), g.__qualname__, next(g))
try:
    g.send(5)
except StopIteration as stop:
    print(stop.value)
def delegating():
    return (yield from ranged(gen)())  # resumed by next(): the return value comes back too

print(list(delegating()), end=" ")
try:
    next(iter(delegating()))
    next(d := delegating()); next(d)
except StopIteration as stop:
    print(stop.value)
g = ranged(gives)()
alive = weakref.ref(next(g))          # a plain generator keeps nothing it yielded
print(alive() is None)
g.close()                             # a resumption too: GeneratorExit at its yield
c = ranged(coro)()
print(inspect.iscoroutine(c), c.__qualname__, asyncio.run(c))
"""


@needs_native
@pytest.mark.parametrize("pure", ["0", "1"])
def test_generator_drivers_keep_values_types_and_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pure: str
) -> None:
    monkeypatch.setenv(environment.PURE_PYTHON, pure)
    rec, out = record(tmp_path, DRIVERS_PROGRAM)
    assert out.splitlines() == [
        "True gen 1",
        "(5, 'a tuple')",
        "[1] (None, 'a tuple')",
        "True",
        "True coro legacy",
    ]
    assert rec.unmatched_pops == 0 and not [r for r in rec.ranges if r.is_open]
    # gen: two resumptions each time, and one for the close() of the one dropped after one;
    # gives: one, then close(); legacy (a generator-based coroutine): one per step, two; coro:
    # one start/end range over its call, around both.
    assert [r.name for r in rec.ranges if r.kind == "push"] == [*["gen"] * 8, "gives", "gives", "legacy", "legacy"]
    (coro,) = [r for r in rec.ranges if r.kind == "startend"]
    assert coro.name == "coro"
    assert all(coro.start_ns <= r.start_ns and r.end_ns <= coro.end_ns for r in rec.ranges if r.name == "legacy")


CLOSED_COROUTINE_PROGRAM = """
async def fetch():
    return 1

async def main():
    return await fetch()

import asyncio
asyncio.run(main())
closed = fetch()
closed.close()                     # closed before it ran: no warning, as under python
dropped = fetch()
del dropped                        # dropped before it ran: one warning, as under python
print("done")
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_coroutine_closed_before_it_ran_does_not_warn(workdir: Path, pure: str) -> None:
    from conftest import autonvtx_env, run_autonvtx

    script = make_file(workdir / "fetch.py", CLOSED_COROUTINE_PROGRAM)
    env = autonvtx_env(PYTHONWARNINGS="error", **{environment.PURE_PYTHON: pure})
    plain = subprocess.run([sys.executable, str(script)], cwd=workdir, env=env, capture_output=True, text=True)
    ours = run_autonvtx("-t", "__main__", str(script), cwd=workdir, env=env)
    assert plain.returncode == ours.returncode == 0, ours.stderr
    assert ours.stdout == plain.stdout == "done\n"
    warned = [line for line in plain.stderr.splitlines() if "never awaited" in line]
    assert len(warned) == 1 and warned[0].startswith("RuntimeWarning: coroutine 'fetch'")
    assert [line for line in ours.stderr.splitlines() if "never awaited" in line] == warned
    # The awaited one, wrapped: its call's one start/end range ("b"/"e" events in the trace).
    started = [e["name"] for e in ours.trace["traceEvents"] if e.get("ph") == "b"]
    assert started.count("fetch") == 1


@needs_native
def test_the_native_wrapper_keeps_no_dictionary_and_reads_names_through() -> None:
    import gc

    from autonvtx.engines import wrap as instrument

    def f(x: object) -> object:
        """f's doc"""
        return x

    wrapper = instrument._RangedFunctionWrapper(f, ranges._client.Range("autonvtx", "f"))
    # wrapt gives each proxy a dictionary holding copies of __module__ and __doc__: none here.
    assert not [r for r in gc.get_referents(wrapper) if type(r) is dict]
    assert (wrapper.__module__, wrapper.__doc__) == (__name__, "f's doc")
    wrapper.__doc__ = "changed"
    wrapper.__module__ = "elsewhere"
    assert (f.__doc__, f.__module__) == ("changed", "elsewhere") == (wrapper.__doc__, wrapper.__module__)
    wrapper.marker = 1  # type: ignore[attr-defined]  # set on the function, as wrapt does
    assert f.marker == 1  # type: ignore[attr-defined]


LAZY_RANGES_PROGRAM = """
import asyncio, sys, types
from autonvtx import ranges
from autonvtx.config import Config, Rule
from autonvtx.engines.wrap import WrapEngine
from autonvtx.matching import Matcher
from autonvtx.walk import Walker

module = types.ModuleType("lazy_mod")
exec('''
def called(x):
    return x
def never(x):
    return x
async def fetched():
    return 1
alias = called
class Box:
    def method(self):
        return called(2)
''', vars(module))
sys.modules["lazy_mod"] = module
config = Config(rules=(Rule(modules=("lazy_mod",), origin="test"),))
Walker(Matcher(config), WrapEngine(config)).instrument(module)   # the native walk: one rule, whole
# On 3.12+ the coroutine function is not wrapped: its code is monitored (engines/coroutines.py).
kinds = lambda: [type(getattr(f, "_self_range", None)).__name__ for f in (module.called, module.never, module.fetched)]
print(*kinds(), module.alias is module.called)
before = ranges._client.rebind_ranges()
print(module.Box().method(), module.alias(3), asyncio.run(module.fetched()))
print(*kinds(), ranges._client.rebind_ranges() - before)
"""


@needs_native
def test_a_wholesale_walk_makes_a_range_on_the_first_call(tmp_path: Path) -> None:
    rec, out = record(tmp_path, LAZY_RANGES_PROGRAM)
    if sys.version_info >= (3, 12):  # fetched keeps no wrapper: its code has its range
        assert out.splitlines() == [
            "PendingStyle PendingStyle NoneType True",
            "2 3 1",
            "Range PendingStyle NoneType 2",  # called, Box.method: two ranges made
        ]
    else:
        assert out.splitlines() == [
            "PendingStyle PendingStyle PendingStyle True",
            "2 3 1",
            "Range PendingStyle Range 3",  # called, Box.method, fetched: three ranges made
        ]
    assert [r.name for r in rec.ranges] == ["Box.method", "called", "called", "fetched"]


BULK_WRAPPERS_PROGRAM = """
import gc, inspect, pickle, sys, types
from autonvtx.config import Config, Rule
from autonvtx.engines.wrap import WrapEngine
from autonvtx.matching import Matcher
from autonvtx.walk import Walker

module = types.ModuleType("bulk_mod")
exec('''
def f0(x):
    "doc 0"
    return x
def f1(x, *, y=1):
    return x + y
def f2(*args, **kwargs):
    return len(args) + len(kwargs)
class Box:
    def method(self, z):
        return f1(z)
    @staticmethod
    def build():
        return Box()
''', vars(module))
sys.modules["bulk_mod"] = module
config = Config(rules=(Rule(modules=("bulk_mod",), origin="test"),))
Walker(Matcher(config), WrapEngine(config)).instrument(module)   # the native walk: one rule, whole

def state(w):
    return (type(w).__name__, w._self_binding, w._self_instance, w._self_enabled, w._self_parent,
            type(w._self_wrapper).__name__, [type(r).__name__ for r in gc.get_referents(w) if type(r) is dict])

wrappers = [module.f0, module.f1, module.f2, vars(module.Box)["method"], vars(module.Box)["build"].__func__]
print(len({repr(state(w)) for w in wrappers}), state(wrappers[0])[:2])
print([w.__wrapped__.__name__ for w in wrappers], module.f0.__doc__, inspect.signature(module.f1))
print(pickle.loads(pickle.dumps(module.f2)) is module.f2, module.f0(1), module.f1(1, y=2), module.f2(1, a=2))
print(module.Box.build().method(3), inspect.ismethod(module.Box().method))
"""


@needs_native
def test_wrappers_made_in_bulk_read_and_call_as_the_first_one_wrapt_made(tmp_path: Path) -> None:
    # The first wrapper is made by wrapt, the next ones filled from it as a template
    # (ranged.c): the same wrapt state, no dictionary, the same transparency and ranges.
    rec, out = record(tmp_path, BULK_WRAPPERS_PROGRAM)
    assert out.splitlines() == [
        "1 ('_RangedFunctionWrapper', 'function')",
        "['f0', 'f1', 'f2', 'method', 'build'] doc 0 (x, *, y=1)",
        "True 1 3 2",
        "4 True",
    ]
    assert [r.name for r in sorted(rec.ranges, key=lambda r: r.start_ns)] == [
        "f0",
        "f1",
        "f2",
        "Box.build",
        "Box.method",
        "f1",
    ]
