"""engines and engines.kinds: each engine is a record with its capabilities and factory, every
engine has the whole `Engine` protocol, and the settings name exactly the engines there are."""

from __future__ import annotations

import sys

import pytest

from autonvtx.config import Config
from autonvtx.engines import ENGINES, Engine
from autonvtx.engines.kinds import CODE, KINDS, WRAP, choose_engine
from autonvtx.engines.plan import PlanEngine

PROTOCOL = sorted(name for name in (*vars(Engine), *Engine.__annotations__) if not name.startswith("_"))


def test_the_settings_are_auto_and_every_engine() -> None:
    assert ENGINES == ("auto", *KINDS)


def test_the_protocol_is_what_the_walk_uses() -> None:
    assert PROTOCOL == [
        "apply",
        "apply_code",
        "bind",
        "changes_namespaces",
        "existing",
        "reaches_nested",
        "remember_reference",
        "restore",
        "set_member",
    ]


def built(kind_name: str) -> Engine:
    if kind_name == "code" and choose_engine("code")[0] is not CODE:
        pytest.skip("the code engine cannot run here")
    engine = KINDS[kind_name].build(Config(), restorable=True)
    return engine


@pytest.mark.parametrize("kind_name", sorted(KINDS))
def test_each_engine_has_the_whole_protocol_and_says_what_its_record_says(kind_name: str) -> None:
    engine = built(kind_name)
    try:
        assert [name for name in PROTOCOL if not hasattr(engine, name)] == []
        assert engine.reaches_nested == KINDS[kind_name].reaches_nested
    finally:
        engine.restore()


def test_the_plan_engine_has_the_whole_protocol() -> None:
    engine = PlanEngine(reaches_nested=True)
    assert [name for name in PROTOCOL if not hasattr(engine, name)] == []
    assert engine.restore() == 0


def test_the_choice_is_a_record_with_a_reason_when_it_is_not_the_one_asked_for() -> None:
    assert choose_engine("wrap") == (WRAP, None)
    kind, note = choose_engine("code")
    if sys.version_info < (3, 12):
        assert kind is WRAP and note is not None and "3.12" in note
    else:
        assert (kind, note) == (CODE, None) or (kind is WRAP and note is not None)
    assert choose_engine("auto")[0] is (WRAP if sys.version_info < (3, 12) else kind)
