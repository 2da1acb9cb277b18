"""Hostile config files (issue 21, item 10): nesting past the parsers' recursion, a YAML alias
bomb, nsys-JSON names of thousands of parts. Each gets one line naming the file and what was
expected, exit status 2, no traceback, and no unbounded time or memory. A seeded fuzzer of
mutated configs allows a config error or success, never another exception."""

from __future__ import annotations

import json
import random
import re
import textwrap
from pathlib import Path

import pytest
from conftest import make_file, run_autonvtx

from autonvtx.configfile import load_config
from autonvtx.errors import AutonvtxError

DEPTH = 20_000  # past the default recursion limit of every parser


def alias_bomb() -> str:
    """A few hundred bytes of YAML that expand to 9**10 strings."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    lines.append("rules:\n  - modules: *a9")
    return "\n".join(lines) + "\n"


HOSTILE = [
    ("deep.toml", "[autonvtx]\ndomain = " + "[" * DEPTH + "]" * DEPTH + "\n", r"deep\.toml: nested too deeply"),
    ("deep.yaml", "rules:\n  - modules: " + "[" * DEPTH + "]" * DEPTH + "\n", r"deep\.yaml: nested too deeply"),
    ("deep.json", "[" * DEPTH + "]" * DEPTH, r"deep\.json: nested too deeply"),
    ("bomb.yaml", alias_bomb(), r"bomb\.yaml: holds more than 100,000 values \(YAML aliases expanded\)"),
    (
        "self.yaml",
        "rules: &r\n  - modules: *r\n",
        r"self\.yaml: a table or list holds itself \(a YAML alias inside its own anchor\)",
    ),
    (
        "dots.json",
        json.dumps([{"module": "m", "functions": [".".join(["a"] * 20_000)]}]),
        r"dots\.json: \[0\]\.functions\[0\]: expected at most 100 dotted parts, got 20000",
    ),
]


@pytest.mark.parametrize("name, text, message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_config_is_one_line_and_status_2(workdir: Path, name: str, text: str, message: str) -> None:
    (workdir / name).write_text(text)
    done = run_autonvtx("--config", name, "-c", "print('ran')", cwd=workdir, trace=False, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # nothing ran
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("autonvtx: ")
    assert re.search(message, line), line


def test_a_config_of_64_levels_still_reads(tmp_path: Path) -> None:
    # The bound leaves room: a real config nests 3 or 4 levels.
    nested = "[" * 60 + '"x"' + "]" * 60
    make_file(
        tmp_path / "ok.toml",
        """
        [autonvtx]
        description = "fine"
        [[rules]]
        modules = ["m"]
        """,
    )
    load_config(["ok.toml"], cwd=str(tmp_path))
    (tmp_path / "deep.toml").write_text(f"[[rules]]\nmodules = {nested}\n")
    with pytest.raises(AutonvtxError, match="expected a list|expected a string|module glob"):
        load_config(["deep.toml"], cwd=str(tmp_path))  # wrong, but said as a config error


SEEDS = [
    """
    [autonvtx]
    domain = "d"
    message = "{module}:{qualname}"
    color = "#ff8800"
    engine = "wrap"

    [[rules]]
    modules = ["pkg", "pkg.*"]
    include = ["Trainer.*", "step"]
    exclude = ["_*"]
    category = "model"

    [[regions]]
    function = "pkg.train:main"
    loop = 1
    name = "step {i}"
    """,
]
YAML_SEED = """
autonvtx:
  domain: d
rules:
  - modules: [pkg, "pkg.*"]
    include: ["*"]
    color: green
"""
NSYS_SEED = json.dumps([{"module": "pkg", "domain": "D", "color": "00FF00", "functions": ["a.b", "f"]}])
JUNK = ["[", "]", "{", "}", '"', "'", "=", ":", "-", "*", "&a", "*a", "\n", "\x00", "\xe9", "\\", "#", ",", "..."]


def mutate(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        at = rng.randrange(len(chars) + 1)
        if op < 0.4:
            chars[at:at] = list(rng.choice(JUNK) * rng.randint(1, 3))
        elif op < 0.7 and chars:
            del chars[at : at + rng.randint(1, 8)]
        elif chars:
            start = rng.randrange(len(chars))
            chars[at:at] = chars[start : start + rng.randint(1, 40)]  # a duplicated span
    return "".join(chars)


def test_fuzzed_configs_give_a_config_error_or_a_config(tmp_path: Path) -> None:
    rng = random.Random(21)
    seeds = [("c.toml", textwrap.dedent(SEEDS[0])), ("c.yaml", YAML_SEED), ("c.json", NSYS_SEED)]
    for case in range(300):
        name, seed = seeds[case % len(seeds)]
        path = tmp_path / name
        path.write_bytes(mutate(seed, rng).encode("utf-8", "surrogateescape"))
        try:
            load_config([name], cwd=str(tmp_path))
        except AutonvtxError as error:
            assert str(error).startswith(name), (case, str(error))
