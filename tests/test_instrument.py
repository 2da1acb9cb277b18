"""Ranges emitted by wrapped functions, observed through the native recorder."""

from __future__ import annotations

import textwrap
import types
from collections import Counter
from pathlib import Path

import pytest
from conftest import run_under_recorder

from autonvtx import environment
from autonvtx.config import auto_color
from autonvtx.recorder.model import ProcessRecording, Range

REPO = Path(__file__).resolve().parents[1]
MODULES = Path(__file__).resolve().parent / "modules"
SHAPES = 'Rule(modules=("inst_shapes", "inst_shapes.*"), origin="test")'

PRELUDE = """\
import sys
sys.path.insert(0, {modules!r})
from autonvtx.config import Config, Rule, Settings
from autonvtx.matching import Matcher
from autonvtx.walk import Walker
from autonvtx.importer import ImportHook
matcher = Matcher(Config(settings={settings}, rules=({rules},)))
instrumenter = Walker(matcher)
hook = ImportHook(matcher, instrumenter)
"""


@pytest.fixture(autouse=True, params=["native", "pure-python"])
def range_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: ranges through autonvtx's native client, and through the pure-Python
    fallback (AUTONVTX_PURE_PYTHON=1, which record()'s subprocess inherits)."""
    from autonvtx import ranges

    if request.param == "native" and ranges._client is None:
        pytest.skip("autonvtx._nvtxclient is not built in this checkout")
    monkeypatch.setenv(environment.PURE_PYTHON, "1" if request.param == "pure-python" else "0")
    return str(request.param)


def record(
    tmp_path: Path, body: str, *, rules: str = SHAPES, settings: str = "Settings()"
) -> tuple[ProcessRecording, str]:
    """Run PRELUDE + body under the recorder; the one process's recording and its stdout."""
    prelude = PRELUDE.format(modules=str(MODULES), settings=settings, rules=rules)
    recordings, stdout = run_under_recorder(tmp_path, prelude + textwrap.dedent(body))
    assert len(recordings) == 1
    assert recordings[0].unmatched_pops == 0
    assert not [r for r in recordings[0].ranges if r.is_open]
    return recordings[0], stdout


def named(recording: ProcessRecording, name: str) -> list[Range]:
    return [r for r in recording.ranges if r.name == name]


def inside(inner: Range, outer: Range) -> bool:
    return inner.tid == outer.tid and outer.start_ns <= inner.start_ns and inner.end_ns <= outer.end_ns


def disjoint(ranges: list[Range]) -> bool:
    ordered = sorted(ranges, key=lambda r: r.start_ns)
    return all(a.end_ns <= b.start_ns for a, b in zip(ordered, ordered[1:]))


def test_function_range_carries_the_rule_style(tmp_path: Path) -> None:
    rules = (
        'Rule(modules=("inst_shapes.*",), color="green", domain="mine", category="model",'
        ' message="{module}:{qualname} {name} [{class}] {file}:{line}", origin="test")'
    )
    rec, _ = record(tmp_path, "import inst_shapes.kinds as k\nhook.install()\nk.outer(1)\n", rules=rules)
    (outer,) = named(rec, "inst_shapes.kinds:outer outer [] kinds.py:15")
    (plain,) = named(rec, "inst_shapes.kinds:plain plain [] kinds.py:10")
    assert (outer.domain, outer.color, outer.category) == ("mine", 0xFF008000, "model")
    assert inside(plain, outer)


def test_default_style_is_qualname_in_autonvtx_domain_with_module_color(tmp_path: Path) -> None:
    rec, _ = record(tmp_path, "hook.install()\nimport inst_shapes.kinds as k\nk.outer(1)\n")
    assert [r.name for r in rec.ranges] == ["outer", "plain"]
    assert {(r.domain, r.color, r.category) for r in rec.ranges} == {
        ("autonvtx", auto_color("inst_shapes.kinds"), None)
    }


def test_every_kind_of_method_gets_a_range_and_properties_and_repr_do_not(tmp_path: Path) -> None:
    rec, _ = record(
        tmp_path,
        """
        hook.install()
        from inst_shapes.kinds import *
        from inst_shapes import kinds
        t = Trainer(3)
        t.step(1); Trainer.step(t, 1); t(1)
        Trainer.static(1); t.static(1)
        Trainer.build(); t.build()
        t.doubled; repr(t)
        Trainer.Inner().run()
        list(t.epochs(2))
        Slotted(1).get()
        Square(2).area()
        Point(1, 2).norm1()
        WithMeta().hello()
        """,
    )
    assert Counter(r.name for r in rec.ranges) == Counter(
        {
            "Trainer.__init__": 3,  # Trainer(3) and twice through build()
            "Trainer.step": 3,  # the third inside Trainer.__call__
            "Trainer.__call__": 1,
            "Trainer.static": 2,
            "Trainer.build": 2,
            "Trainer.Inner.run": 1,
            "Trainer.epochs": 3,  # two values, then the resumption that finishes it
            "Slotted.__init__": 1,
            "Slotted.get": 1,
            "Square.__init__": 1,
            "Square.area": 1,
            "Point.__init__": 1,
            "Point.norm1": 1,
            "Meta.__call__": 1,
            "WithMeta.hello": 1,
        }
    )
    (call,) = named(rec, "Trainer.__call__")
    assert any(inside(step, call) for step in named(rec, "Trainer.step"))
    (meta_call,) = named(rec, "Meta.__call__")
    assert inside(named(rec, "WithMeta.hello")[0], meta_call) is False


def test_exception_pops_the_range_on_the_way_out(tmp_path: Path) -> None:
    rec, _ = record(
        tmp_path,
        """
        hook.install()
        import inst_shapes.kinds as k
        try:
            k.fails()
        except ValueError:
            pass
        k.plain(1)
        """,
    )
    (fails,) = named(rec, "fails")
    (plain,) = named(rec, "plain")
    assert fails.end_ns <= plain.start_ns


def test_generator_gets_one_range_per_resumption_nested_correctly(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        hook.install()
        import inst_shapes.kinds as k
        print(list(k.counter(3)))
        g = k.counter(5)
        next(g)
        try:
            g.throw(KeyError("x"))
        except KeyError:
            pass
        h = k.counter(5)
        next(h)
        h.close()
        """,
    )
    assert out.splitlines()[0] == "[1, 2, 3]"
    counters = named(rec, "counter")
    # 3 values + finishing resumption; next + throw; next + close.
    assert len(counters) == 4 + 2 + 2
    assert disjoint(counters)
    plains = named(rec, "plain")
    assert len(plains) == 3 + 1 + 1
    assert all(any(inside(p, c) for c in counters) for p in plains)


def test_interleaved_asyncio_tasks_get_a_range_per_call(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        import asyncio
        hook.install()
        import inst_shapes.kinds as k
        async def main():
            log = []
            print(await asyncio.gather(k.pause("a", 3, log), k.pause("b", 3, log)))
            print("".join(log))
            print(await k.parent(log))
            print(await k.Trainer().astep(5))
        asyncio.run(main())
        """,
    )
    assert out.splitlines() == ["['a', 'b']", "ababab", "child", "5"]
    # One start/end range per coroutine call (`coroutine = "call"`): the two gathered ones
    # overlap on one thread without nesting, which a start/end range allows.
    pauses = sorted(named(rec, "pause"), key=lambda r: r.start_ns)
    assert len(pauses) == 2 + 1 and {r.kind for r in pauses} == {"startend"}
    assert not disjoint(pauses[:2])
    (parent,) = named(rec, "parent")
    assert inside(pauses[2], parent)
    assert len(named(rec, "Trainer.astep")) == 1


def test_async_generator_gets_one_range_per_step(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        import asyncio
        hook.install()
        import inst_shapes.kinds as k
        async def main():
            print([x async for x in k.ticks(2)])
            agen = k.ticks(5)
            print(await agen.__anext__())
            await agen.aclose()
        asyncio.run(main())
        """,
    )
    assert out.splitlines() == ["[1, 2]", "1"]
    ticks = named(rec, "ticks")
    assert disjoint(ticks)
    plains = named(rec, "plain")
    assert len(plains) == 3
    assert all(any(inside(p, t) for t in ticks) for p in plains)


def test_threads_get_their_own_correctly_nested_ranges(tmp_path: Path) -> None:
    rec, _ = record(tmp_path, "hook.install()\nimport inst_shapes.kinds as k\nk.in_threads(3)\n")
    outers = named(rec, "outer")
    (main_range,) = named(rec, "in_threads")
    assert len({r.tid for r in outers}) == 3
    assert main_range.tid not in {r.tid for r in outers}
    for plain in named(rec, "plain"):
        assert sum(inside(plain, o) for o in outers) == 1


def test_modules_imported_before_install_are_patched(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        import inst_shapes.kinds as k
        from inst_shapes.kinds import outer
        hook.install()
        k.outer(1)
        outer(1)  # a reference taken before wrapping keeps the bare function
        print(sorted(instrumenter.reports))
        """,
    )
    assert [r.name for r in rec.ranges] == ["outer", "plain", "plain"]
    assert out.strip() == "['inst_shapes', 'inst_shapes.kinds']"


@pytest.mark.parametrize(
    "body",
    [
        "hook.install()\nfrom inst_shapes import reexport, kinds\n",
        # Already imported: install() sees reexport (importing kinds) before kinds is wrapped.
        "from inst_shapes import reexport, kinds\nhook.install()\n",
    ],
    ids=["hook-then-import", "import-then-hook"],
)
def test_a_reexported_function_has_one_wrapper(tmp_path: Path, body: str) -> None:
    rec, out = record(
        tmp_path,
        body
        + "print(reexport.plain is kinds.plain is reexport.also_plain)\n"
        + "reexport.plain(1)\nreexport.also_plain(1)\n",
    )
    assert out.strip() == "True"
    assert [r.name for r in rec.ranges] == ["plain", "plain"]


def test_nothing_is_wrapped_twice(tmp_path: Path) -> None:
    rules = SHAPES + ', Rule(modules=("inst_shapes.kinds",), include=("plain",), origin="again")'
    rec, out = record(
        tmp_path,
        """
        import importlib
        hook.install()
        import inst_shapes.kinds as k
        instrumenter.instrument(k)
        import inst_shapes.kinds
        importlib.reload(k)
        k.plain(1)
        print(type(k.plain.__wrapped__).__name__)
        """,
        rules=rules,
    )
    assert out.strip() == "function"
    assert [r.name for r in rec.ranges] == ["plain"]


def test_builtins_are_wrapped_only_when_the_rule_asks(tmp_path: Path) -> None:
    body = """
        hook.install()
        import math, _bisect
        math.sqrt(4.0)
        _bisect.bisect_right([1, 2], 1)
        print(instrumenter.reports["_bisect"].summary())
        """
    rules = 'Rule(modules=("math",), builtins=True, origin="t"), Rule(modules=("_bisect",), origin="u")'
    rec, out = record(tmp_path, body, rules=rules)
    assert [r.name for r in rec.ranges] == ["sqrt"]
    assert "builtin" in out


def test_instrument_main_wraps_only_what_each_statement_defined() -> None:
    from autonvtx.config import Config, Rule
    from autonvtx.engines.wrap import RangeWrapper
    from autonvtx.matching import Matcher
    from autonvtx.walk import Walker

    matcher = Matcher(Config(rules=(Rule(modules=("__main__",), origin="t"),)))
    instrumenter = Walker(matcher)
    main = types.ModuleType("__main__")  # the runner's fresh __main__, not this process's
    namespace = vars(main)
    exec("def first():\n    return 1\n", namespace)
    report = instrumenter.instrument_main(main)
    assert list(report.wrapped) == ["first"]
    wrapper = main.first
    exec("x = 1\n", namespace)
    instrumenter.instrument_main(main)  # nothing new: nothing walked
    exec("class K:\n    def run(self):\n        return 2\n", namespace)
    instrumenter.instrument_main(main)
    assert list(report.wrapped) == ["first", "K.run"]
    assert main.first is wrapper and isinstance(vars(main.K)["run"], RangeWrapper)
    exec("def first():\n    return 3\n", namespace)  # redefined: the new function is wrapped
    instrumenter.instrument_main(main)
    assert main.first is not wrapper and main.first() == 3
    assert isinstance(main.first, RangeWrapper)


def test_a_reference_remembered_after_its_function_was_wrapped_is_rebound_at_once() -> None:
    """Another thread may wrap a function between the walk's existing() and its
    remember_reference(): the reference is then rebound there and then, not left pending."""
    import types as _types

    from autonvtx.config import Config, Rule
    from autonvtx.engines.wrap import WrapEngine

    def helper() -> int:
        return 1

    config = Config(rules=(Rule(modules=("home",), origin="test"),))
    engine = WrapEngine(config)
    wrapper = engine.apply(helper, "home", "helper", config.rules[0])
    user = _types.ModuleType("user")
    user.helper = helper  # type: ignore[attr-defined]
    engine.remember_reference(helper, user, "helper")
    assert user.helper is wrapper  # type: ignore[attr-defined]
    assert not engine._pending
