"""values.Value, the frozen value classes of the start path (config, rules, the target): what a
frozen dataclass gave them, kept; and Config's JSON for children, as json.dumps writes it."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from autonvtx.config import Config, RangeStyle, Region, Rule, Settings, compact_json, freeze_options
from autonvtx.values import FrozenValueError


def test_equality_hash_repr_and_order_of_fields() -> None:
    rule = Rule(("a",), origin="x")
    assert rule == Rule(("a",), ("*",), (), None, None, None, None, False, "x", "")
    assert rule != Rule(("a",)) and rule != ("a",) and hash(rule) == hash(Rule(("a",), origin="x"))
    assert repr(Settings()) == "Settings(domain='autonvtx', message='{qualname}', color='auto', engine='auto')"
    assert Config() == Config(Settings()) and Config().settings == Settings()


def test_frozen_replace_and_as_dict() -> None:
    style = RangeStyle("d", "m", 1, None)
    with pytest.raises(FrozenValueError):
        style.color = 2
    with pytest.raises(AttributeError):
        del style.domain
    assert style.replace(message="n") == RangeStyle("d", "n", 1, None) and style.message == "m"
    with pytest.raises(TypeError):
        style.replace(colour=3)
    config = Config(rules=(Rule(("a",)),), regions=(Region("m:f", lines=(1, 2)),))
    assert config.as_dict()["rules"] == (
        {
            "modules": ("a",),
            "include": ("*",),
            "exclude": (),
            "color": None,
            "domain": None,
            "category": None,
            "message": None,
            "builtins": False,
            "origin": "",
            "reading_of": "",
            "coroutine": None,
            "shapes": False,
        },
    )
    assert config.as_dict()["settings"] == {
        "domain": "autonvtx",
        "message": "{qualname}",
        "color": "auto",
        "engine": "auto",
    }


def test_pickled_and_copied_as_they_were() -> None:
    config = Config(
        Settings(domain="x"),
        (Rule(("a", "b.*"), color="red"),),
        ("rules.toml",),
        regions=(Region("m:f", loop="first"),),
    )
    assert pickle.loads(pickle.dumps(config)) == config
    assert copy.deepcopy(config) == config and copy.copy(config) == config


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "",
        'quote"d',
        "back\\slash",
        "tab\there",
        "line\nbreak",
        "\x7f",
        "é",
        "𝄞",
        "\u2028",
        0,
        -3,
        2**70,
        1.5,
        1e300,
        float("inf"),
        float("nan"),
        True,
        False,
        None,
        [],
        (),
        {},
        {"b": 1, "a": [1, "x", None]},
        {1: "int key"},
        [{"z": (1.0, "y")}, "s"],
    ],
)
def test_compact_json_is_json_dumps(value: object) -> None:
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), sort_keys=True)


def test_a_config_goes_to_children_and_back() -> None:
    config = Config(
        Settings(domain='d"q', message="{module}.{qualname}", color="#00ff00", engine="wrap"),
        (
            Rule(
                ("a", "b.*"),
                ("T.*",),
                ("_*",),
                color="red",
                domain="é",
                category="c",
                message="{name}",
                builtins=True,
                origin="rules.toml: rules[0]",
                reading_of="f.json: [0]",
            ),
        ),
        ("rules.toml", "command line"),
        plugins=("torch",),
        plugin_options=freeze_options({"torch": {"modules": True, "depth": 2, "ratio": 0.5, "name": "x"}}),
        preset_sources=("torch.toml",),
        regions=(Region("m:f", loop=3, lines=(4, 9), name="it {i}", capture=(1, 2), origin="r"),),
    )
    text = config.to_json()
    data = {**config.as_dict(), "plugin_options": {"torch": {"modules": True, "depth": 2, "ratio": 0.5, "name": "x"}}}
    assert text == json.dumps({"version": 1, **data}, separators=(",", ":"), sort_keys=True)
    assert Config.from_json(text) == config
