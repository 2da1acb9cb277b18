"""Wrapping is invisible to the program: one test per promised property, in-process."""

from __future__ import annotations

import abc
import asyncio
import copy
import dataclasses
import inspect
import pickle
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import fixture_modules

from autonvtx.config import Config, Rule
from autonvtx.engines.wrap import RangeWrapper
from autonvtx.importer import ImportHook
from autonvtx.matching import Matcher
from autonvtx.walk import Walker

pytestmark = pytest.mark.usefixtures("import_state_is_left_clean")

MODULES = str(Path(__file__).resolve().parent / "modules")


@pytest.fixture(params=["native", "pure-python"])
def kinds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """inst_shapes.kinds imported through the hook (uninstalled again: wrappers stay), with
    the native per-call path, then with the pure-Python fallback."""
    from autonvtx import ranges
    from autonvtx.engines import wrap as instrument

    if request.param == "native":
        if instrument._RangedFunctionWrapper is None:
            pytest.skip("autonvtx._nvtxclient is not built in this checkout")
    else:
        monkeypatch.setattr(ranges, "_native", None)
        monkeypatch.setattr(instrument, "_RangedFunctionWrapper", None)
    matcher = Matcher(Config(rules=(Rule(modules=("inst_shapes.*",), origin="test"),)))
    walker = Walker(matcher)
    hook = ImportHook(matcher, walker)
    sys.path.insert(0, MODULES)
    hook.install()
    try:
        import inst_shapes.kinds as module
    finally:
        hook.uninstall()
        sys.path.remove(MODULES)
    assert isinstance(module.plain, RangeWrapper)
    assert (type(module.plain) is instrument._RangedFunctionWrapper) == (request.param == "native")
    yield module
    for name in fixture_modules():
        del sys.modules[name]
    if walker.built_engine is not None:
        # On 3.12+ the engine ranges the coroutine functions' code through a sys.monitoring
        # tool id of the process: given back, for the tests after this one.
        walker.built_engine.restore()


def test_signature(kinds: Any) -> None:
    assert str(inspect.signature(kinds.plain)) == "(x)"
    assert str(inspect.signature(kinds.Trainer().step)) == "(x)"
    assert str(inspect.signature(kinds.Trainer.step)) == "(self, x)"
    assert str(inspect.signature(kinds.Trainer.build)) == "()"
    assert str(inspect.signature(kinds.Point)) == "(x: int, y: int = 0) -> None"


def test_wrapped_is_the_original_function(kinds: Any) -> None:
    original = kinds.plain.__wrapped__
    assert type(original) is types.FunctionType
    assert inspect.unwrap(kinds.plain) is original


def test_names_doc_and_module(kinds: Any) -> None:
    f = kinds.plain
    assert (f.__name__, f.__qualname__, f.__doc__, f.__module__) == ("plain", "plain", "Add one.", "inst_shapes.kinds")
    step = kinds.Trainer().step
    assert (step.__name__, step.__qualname__) == ("step", "Trainer.step")
    assert kinds.Trainer.Inner.run.__qualname__ == "Trainer.Inner.run"


def test_repr_is_the_functions(kinds: Any) -> None:
    assert repr(kinds.plain) == repr(kinds.plain.__wrapped__)


def test_isinstance_and_inspect_predicates(kinds: Any) -> None:
    assert isinstance(kinds.plain, types.FunctionType)
    assert inspect.isfunction(kinds.plain)
    assert inspect.isgeneratorfunction(kinds.counter)
    assert inspect.iscoroutinefunction(kinds.pause)
    assert inspect.isasyncgenfunction(kinds.ticks)
    assert kinds.plain == kinds.plain.__wrapped__
    assert hash(kinds.plain) == hash(kinds.plain.__wrapped__)


def test_duck_typing_sees_only_what_a_function_has(kinds: Any) -> None:
    """wrapt's proxy types define protocol methods for whatever they proxy; a function has none
    of these, and code asks (torch's context_decorator: hasattr(ctx, "__enter__"))."""
    from autonvtx.engines.wrap import _PROTOCOLS_FUNCTIONS_LACK

    originals = [kinds.plain.__wrapped__, types.MethodType(kinds.Trainer.step.__wrapped__, 1)]
    wrapped = [kinds.plain, kinds.Trainer().step, kinds.Trainer.step, kinds.counter]
    for name in _PROTOCOLS_FUNCTIONS_LACK:
        assert not any(hasattr(f, name) for f in originals), name  # the list is right
        assert not any(hasattr(f, name) for f in wrapped), name
        assert getattr(kinds.plain, name, None) is None
    # Using a protocol fails as for a function, with a TypeError.
    for use in (len, lambda f: f[0], lambda f: 1 in f, int, float, round, reversed, bytes):
        with pytest.raises(TypeError):
            use(kinds.plain)
    with pytest.raises(TypeError):
        with kinds.plain:
            pass
    # iter() refuses a wrapper as it refuses a function (no sequence protocol to fall back on).
    with pytest.raises(TypeError):
        iter(kinds.plain)
    # What functions do have still works.
    assert bool(kinds.plain) and callable(kinds.plain) and kinds.Trainer().step(3) == 6


def test_a_wrapt_decorated_class_keeps_its_protocols() -> None:
    """A wrapt decorator's wrapper can wrap anything: the protocols a function lacks are hidden
    only on wrappers of plain functions."""
    import enum
    import typing

    import wrapt

    @wrapt.decorator
    def logged(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return wrapped(*args, **kwargs)

    module = types.ModuleType("deco_classes")
    module.__dict__["__name__"] = "deco_classes"
    T = typing.TypeVar("T")

    class Box(typing.Generic[T]):
        pass

    class Color(enum.Enum):
        RED = 1
        BLUE = 2

    for cls in (Box, Color):
        cls.__module__ = "deco_classes"
        module.__dict__[cls.__name__] = logged(cls)
    matcher = Matcher(Config(rules=(Rule(modules=("deco_classes",), origin="test"),)))
    Walker(matcher).instrument(module)
    box, color = module.Box, module.Color
    assert isinstance(box, RangeWrapper) and isinstance(color, RangeWrapper)
    assert box[int] is not None and len(color) == 2 and color["RED"] is Color.RED
    assert Color.BLUE in color and hasattr(color, "__len__")


def test_generator_and_coroutine_objects_look_like_the_originals(kinds: Any) -> None:
    gen = kinds.counter(2)
    assert inspect.isgenerator(gen) and gen.__qualname__ == "counter"
    assert list(gen) == [1, 2]
    coro = kinds.pause("a", 1, [])
    assert inspect.iscoroutine(coro) and coro.__qualname__ == "pause"
    assert asyncio.run(coro) == "a"


def test_static_and_class_methods_keep_their_descriptor_kind(kinds: Any) -> None:
    Trainer = kinds.Trainer
    assert type(vars(Trainer)["static"]) is staticmethod
    assert type(vars(Trainer)["build"]) is classmethod
    assert Trainer.static(4) == Trainer().static(4) == 4

    class Sub(Trainer):
        pass

    assert type(Sub.build()) is Sub
    assert type(Sub().build()) is Sub


def test_bound_methods_bind_like_functions(kinds: Any) -> None:
    t = kinds.Trainer(3)
    assert inspect.ismethod(t.step) and t.step.__self__ is t
    assert t.step == t.step and t.step.__func__ is vars(kinds.Trainer)["step"]
    assert t.step(2) == kinds.Trainer.step(t, 2) == t(2) == 6


def test_properties_are_untouched(kinds: Any) -> None:
    assert type(vars(kinds.Trainer)["doubled"]) is property
    assert kinds.Trainer(3).doubled == 6


def test_pickling_by_reference(kinds: Any) -> None:
    t = kinds.Trainer(3)
    for obj in (kinds.plain, kinds.Trainer.static):
        data = pickle.dumps(obj)
        assert pickle.loads(data) is obj
        assert b"autonvtx" not in data and b"wrapt" not in data  # loads without autonvtx
    assert pickle.loads(pickle.dumps(kinds.Trainer.step))(t, 2) == 6
    assert pickle.loads(pickle.dumps(t.step))(2) == 6
    assert type(pickle.loads(pickle.dumps(kinds.Trainer.build))()) is kinds.Trainer
    assert pickle.loads(pickle.dumps(kinds.Point(1, 2))) == kinds.Point(1, 2)


def test_copy_returns_the_function_itself(kinds: Any) -> None:
    assert copy.copy(kinds.plain) is kinds.plain
    assert copy.deepcopy(kinds.plain) is kinds.plain
    assert copy.deepcopy({"f": kinds.plain})["f"] is kinds.plain


def test_singledispatch_dispatch_and_registration(kinds: Any) -> None:
    assert kinds.describe(1) == "int"
    assert kinds.describe("s") == "object"
    kinds.describe.register(float, lambda obj: "float")
    assert kinds.describe(1.5) == "float"
    assert float in kinds.describe.registry


def test_abstract_methods_stay_abstract(kinds: Any) -> None:
    assert vars(kinds.Base)["area"].__isabstractmethod__
    assert inspect.isabstract(kinds.Base)
    with pytest.raises(TypeError):
        kinds.Base()

    class Incomplete(kinds.Base):
        pass

    with pytest.raises(TypeError):
        Incomplete()
    assert isinstance(kinds.Square(2), abc.ABC) and kinds.Square(2).area() == 4


def test_dataclasses_behave_as_before(kinds: Any) -> None:
    p = kinds.Point(1, 2)
    assert [f.name for f in dataclasses.fields(p)] == ["x", "y"]
    assert p == kinds.Point(1, 2) and repr(p) == "Point(x=1, y=2)"
    assert dataclasses.replace(p, y=5).norm1() == 6
    assert dataclasses.asdict(p) == {"x": 1, "y": 2}


def test_slots(kinds: Any) -> None:
    s = kinds.Slotted(3)
    assert s.get() == 3
    assert not hasattr(s, "__dict__")


def test_metaclasses(kinds: Any) -> None:
    assert type(kinds.WithMeta) is kinds.Meta
    assert kinds.WithMeta().hello() == "hello"


def test_function_attributes_read_and_write_through(kinds: Any) -> None:
    assert kinds.marked.marker == 1
    kinds.marked.other = 2
    assert kinds.marked.__wrapped__.other == 2
    assert kinds.marked.__dict__ == {"marker": 1, "other": 2}


def test_protocol_dunders_are_left_alone(kinds: Any) -> None:
    assert type(vars(kinds.Trainer)["__repr__"]) is types.FunctionType
    assert type(vars(kinds.Point)["__eq__"]) is types.FunctionType
    assert isinstance(vars(kinds.Trainer)["__init__"], RangeWrapper)


def test_generators_keep_nothing_they_yielded_or_were_sent_alive(kinds: Any) -> None:
    import weakref

    gen = kinds.fresh_items(3)
    yielded = weakref.ref(next(gen))
    assert yielded() is None, "the wrapper kept the yielded value alive"
    sent = kinds.Item()
    sent_ref = weakref.ref(sent)
    yielded = weakref.ref(gen.send(sent))
    del sent
    assert yielded() is None and sent_ref() is None, "the wrapper kept a value alive"
    gen.close()

    async def drive() -> None:
        agen = kinds.fresh_async_items(2)
        first = weakref.ref(await agen.__anext__())
        assert first() is None, "the async wrapper kept the yielded value alive"
        await agen.aclose()

    asyncio.run(drive())
