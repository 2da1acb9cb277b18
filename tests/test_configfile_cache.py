"""configfile.cache: a config file's text parsed once is used again for exactly that text, and
never when it changed; a run with an unchanged config imports no TOML parser."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_env, make_file

from autonvtx.configfile import cache, formats

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
    make_file(
        tmp_path / "probe.py",
        """
        import sys
        print(sorted(m for m in ("tomllib", "tomli") if m in sys.modules))
    """,
    )
    env = autonvtx_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    seen = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "autonvtx", "run", "--config", "rules.toml", "probe.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        seen.append(json.loads(done.stdout.replace("'", '"')))
    assert seen == [["tomllib" if sys.version_info >= (3, 11) else "tomli"], []]


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"\x00not marshal",
        b"[\xff\xff\xff\x7f",  # a list claiming two billion items
        b")\x04\xe9\x01\x00\x00\x00",  # a tuple cut short
        b"\xe3" + b"\x00" * 40,  # a code object of zeros
    ],
)
def test_a_corrupt_entry_is_a_miss_and_is_replaced(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch, damage: bytes
) -> None:
    path = make_file(tmp_path / "rules.toml", RULES)
    formats.parse_file("rules.toml", str(path), "toml")
    [entry] = (cache_home / "autonvtx" / "configs").iterdir()
    entry.write_bytes(damage)
    seen = parses(monkeypatch)
    assert formats.parse_file("rules.toml", str(path), "toml")["rules"][0]["modules"] == ["colorsys"]
    assert formats.parse_file("rules.toml", str(path), "toml")["rules"][0]["modules"] == ["colorsys"]
    assert seen == [RULES]  # parsed once more, then kept again


@pytest.mark.parametrize("foreign", ["another user's", "writable by others"])
def test_an_entry_someone_else_could_have_written_is_not_used(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch, foreign: str
) -> None:
    """A cache directory shared with other users (XDG_CACHE_HOME on a shared disk) could hold
    entries with other rules for the same text: only this user's own entries count."""
    path = make_file(tmp_path / "rules.toml", RULES)
    formats.parse_file("rules.toml", str(path), "toml")
    [entry] = (cache_home / "autonvtx" / "configs").iterdir()
    if foreign == "another user's":
        monkeypatch.setattr(os, "getuid", lambda: entry.stat().st_uid + 1)
    else:
        entry.chmod(0o666)
    seen = parses(monkeypatch)
    formats.parse_file("rules.toml", str(path), "toml")
    assert seen == [RULES]


def test_a_read_only_cache_directory_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/autonvtx-cache")  # a read-only file system, even for root
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = make_file(tmp_path / "rules.toml", RULES)
    seen = parses(monkeypatch)
    for _ in range(2):
        assert formats.parse_file("rules.toml", str(path), "toml")["rules"][0]["modules"] == ["colorsys"]
    assert seen == [RULES, RULES]


def test_the_oldest_entries_go_past_the_bound(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache, "MAX_ENTRIES", 3)
    where = cache_home / "autonvtx" / "configs"
    texts = [RULES.replace("rgb_*", f"f{i}") for i in range(5)]
    for age, text in enumerate(texts):
        cache.keep("toml", text, {"n": age})
        os.utime(cache._entry_path("toml", text), (1_000_000 + age,) * 2)  # written in order, seconds apart
    assert len(list(where.iterdir())) == 3
    assert [cache.load("toml", text) for text in texts] == [None, None, {"n": 2}, {"n": 3}, {"n": 4}]


def test_concurrent_first_runs_share_one_good_entry(tmp_path: Path) -> None:
    make_file(tmp_path / "rules.toml", RULES)
    make_file(tmp_path / "probe.py", "")
    env = autonvtx_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "autonvtx", "run", "--config", "rules.toml", "probe.py"]
    runs = [
        subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(6)
    ]
    assert [run.wait(timeout=120) for run in runs] == [0] * 6
    [entry] = (tmp_path / "cache" / "autonvtx" / "configs").iterdir()  # no temporary file left
    assert marshal.loads(entry.read_bytes())[2] == RULES
