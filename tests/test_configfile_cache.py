"""configfile.cache: a config file's text parsed once is used again for exactly that text, and
never when it changed; a run with an unchanged config imports no TOML parser."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autonvtx.configfile import cache, formats
from conftest import autonvtx_env, make_file

RULES = "[[rules]]\nmodules = ['colorsys']\ninclude = ['rgb_*']\n"


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return tmp_path / "cache"


def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the TOML parser is handed from now on."""
    seen: list[str] = []
    parse = formats._parse_toml

    def counting(display: str, text: str) -> Any:
        seen.append(text)
        return parse(display, text)

    monkeypatch.setattr(formats, "_parse_toml", counting)
    return seen


def test_the_same_text_is_parsed_once(tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_file(tmp_path / "rules.toml", RULES)
    seen = parses(monkeypatch)
    first = formats.parse_file("rules.toml", str(path), "toml")
    again = formats.parse_file("rules.toml", str(path), "toml")
    assert first == again == {"rules": [{"modules": ["colorsys"], "include": ["rgb_*"]}]}
    assert seen == [RULES]
    assert len(os.listdir(cache_home / "autonvtx" / "configs")) == 1


def test_a_changed_text_is_parsed_again_even_of_the_same_length(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = make_file(tmp_path / "rules.toml", RULES)
    seen = parses(monkeypatch)
    formats.parse_file("rules.toml", str(path), "toml")
    changed = RULES.replace("rgb_*", "hsv_*")
    path.write_text(changed)
    assert formats.parse_file("rules.toml", str(path), "toml")["rules"][0]["include"] == ["hsv_*"]
    assert seen == [RULES, changed]


def test_an_entry_for_another_text_with_the_same_name_is_not_used(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = make_file(tmp_path / "rules.toml", RULES)
    formats.parse_file("rules.toml", str(path), "toml")
    [entry] = (cache_home / "autonvtx" / "configs").iterdir()
    entry.write_bytes(b"\x00not marshal")  # a broken entry is a miss
    seen = parses(monkeypatch)
    assert formats.parse_file("rules.toml", str(path), "toml")["rules"][0]["modules"] == ["colorsys"]
    assert seen == [RULES]
    monkeypatch.setattr(cache, "_entry_path", lambda kind, text: str(entry))  # another text's entry
    other = make_file(tmp_path / "other.toml", "[autonvtx]\ndomain = 'd'\n")
    assert formats.parse_file("other.toml", str(other), "toml") == {"autonvtx": {"domain": "d"}}


@pytest.mark.parametrize("why", ["dates", "dont_write_bytecode", "unwritable"])
def test_nothing_is_kept_when_it_cannot_or_must_not_be(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    text = RULES + ("[autonvtx]\ndescription = 'x'\n" if why != "dates" else "when = 2024-01-02\n")
    path = make_file(tmp_path / "rules.toml", text)
    if why == "dont_write_bytecode":
        monkeypatch.setattr(sys, "dont_write_bytecode", True)
    if why == "unwritable":
        cache_home.write_text("a file where the directory would be")
    seen = parses(monkeypatch)
    first = formats.parse_file("rules.toml", str(path), "toml")
    assert formats.parse_file("rules.toml", str(path), "toml") == first
    assert seen == [text, text]


def test_a_run_with_an_unchanged_config_imports_no_toml_parser(tmp_path: Path) -> None:
    make_file(tmp_path / "rules.toml", RULES)
    make_file(tmp_path / "probe.py", """
        import sys
        print(sorted(m for m in ("tomllib", "tomli") if m in sys.modules))
    """)
    env = autonvtx_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    seen = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "autonvtx", "run", "--config", "rules.toml", "probe.py"],
                              cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        seen.append(json.loads(done.stdout.replace("'", '"')))
    assert seen == [["tomllib" if sys.version_info >= (3, 11) else "tomli"], []]
