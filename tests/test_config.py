"""Tests for autonvtx.config: loading, merging, discovery and every validation message."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import make_file

from autonvtx.config import COMMAND_LINE_ORIGIN, Config, RangeStyle, Rule, Settings, auto_color, parse_color
from autonvtx.configfile import load_config
from autonvtx.errors import AutonvtxError, ConfigError


def run_python(code: str, **env: str) -> str:
    """Run `code` in a fresh interpreter that imports this checkout of autonvtx."""
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": path, **env},
    ).stdout


def load(tmp_path: Path, name: str, text: str, **kwargs: object) -> Config:
    make_file(tmp_path / name, text)
    return load_config([name], cwd=str(tmp_path), **kwargs)  # type: ignore[arg-type]


FULL_TOML = """
    [autonvtx]
    domain = "mine"
    message = "{module}:{qualname}"
    color = "#00ff00"

    [[rules]]
    modules = ["myproject", "myproject.*"]
    include = ["*"]
    exclude = ["_*", "*._*"]
    color = "green"
    domain = "myproject"
    category = "model"
    message = "{class}.{name}"
    builtins = true

    [[rules]]
    modules = "other"
"""

FULL_YAML = """
    autonvtx:
      domain: mine
      message: "{module}:{qualname}"
      color: "#00ff00"
    rules:
      - modules: [myproject, myproject.*]
        include: ["*"]
        exclude: [_*, "*._*"]
        color: green
        domain: myproject
        category: model
        message: "{class}.{name}"
        builtins: true
      - modules: other
"""


def test_full_toml(tmp_path: Path) -> None:
    config = load(tmp_path, "rules.toml", FULL_TOML)
    assert config == Config(
        settings=Settings(domain="mine", message="{module}:{qualname}", color="#00ff00"),
        rules=(
            Rule(
                modules=("myproject", "myproject.*"),
                include=("*",),
                exclude=("_*", "*._*"),
                color="green",
                domain="myproject",
                category="model",
                message="{class}.{name}",
                builtins=True,
                origin="rules.toml: rules[0]",
            ),
            Rule(modules=("other",), origin="rules.toml: rules[1]"),
        ),
        sources=("rules.toml",),
    )


@pytest.mark.parametrize("name", ["rules.yaml", "rules.yml"])
def test_yaml_equals_toml(tmp_path: Path, name: str) -> None:
    from_toml = load(tmp_path, "rules.toml", FULL_TOML)
    from_yaml = load(tmp_path, name, FULL_YAML)
    assert from_yaml.settings == from_toml.settings
    assert [dict(r.as_dict(), origin="") for r in from_yaml.rules] == [
        dict(r.as_dict(), origin="") for r in from_toml.rules
    ]
    assert from_yaml.rules[1].origin == f"{name}: rules[1]"


def test_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, "rules.toml", '[[rules]]\nmodules = ["a"]\n')
    assert config.settings == Settings("autonvtx", "{qualname}", "auto")
    assert config.rules == (Rule(("a",), ("*",), (), None, None, None, None, False, "rules.toml: rules[0]"),)


@pytest.mark.parametrize("name, text", [("empty.toml", ""), ("empty.yaml", ""), ("empty.yaml", "# nothing\n")])
def test_empty_file_is_an_empty_config(tmp_path: Path, name: str, text: str) -> None:
    assert load(tmp_path, name, text) == Config(Settings(), (), (name,))


def test_files_merge_in_order(tmp_path: Path) -> None:
    make_file(
        tmp_path / "preset.toml",
        """
        [autonvtx]
        domain = "preset"
        color = "red"
        [[rules]]
        modules = ["torch.*"]
    """,
    )
    make_file(
        tmp_path / "a.toml",
        """
        [autonvtx]
        domain = "a"
        [[rules]]
        modules = ["a"]
    """,
    )
    make_file(
        tmp_path / "b.yaml",
        """
        autonvtx:
          message: "{name}"
        rules:
          - modules: [b]
    """,
    )
    config = load_config(
        ["a.toml", "b.yaml"],
        targets=["c.*"],
        includes=["f"],
        excludes=["_*"],
        extra_sources=["preset.toml"],
        cwd=str(tmp_path),
    )
    assert config.settings == Settings(domain="a", message="{name}", color="red")
    assert [r.origin for r in config.rules] == [
        "preset.toml: rules[0]",
        "a.toml: rules[0]",
        "b.yaml: rules[0]",
        COMMAND_LINE_ORIGIN,
    ]
    assert config.rules[-1] == Rule(("c.*",), ("f",), ("_*",), origin=COMMAND_LINE_ORIGIN)
    assert config.sources == ("preset.toml", "a.toml", "b.yaml", COMMAND_LINE_ORIGIN)


@pytest.mark.parametrize(
    "targets, includes, excludes, expected",
    [
        (["a"], [], [], Rule(("a",), ("*",), (), origin=COMMAND_LINE_ORIGIN)),
        (["a", "b.*"], ["T.*"], [], Rule(("a", "b.*"), ("T.*",), (), origin=COMMAND_LINE_ORIGIN)),
        (["a"], [], ["_*"], Rule(("a",), ("*",), ("_*",), origin=COMMAND_LINE_ORIGIN)),
    ],
)
def test_command_line_rule(
    tmp_path: Path, targets: list[str], includes: list[str], excludes: list[str], expected: Rule
) -> None:
    make_file(tmp_path / "autonvtx.toml", '[[rules]]\nmodules = ["ignored"]\n')
    config = load_config([], targets=targets, includes=includes, excludes=excludes, cwd=str(tmp_path))
    assert config.rules == (expected,)  # -t alone skips discovery


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"includes": ["f"]},
            r"^--include: applies to the -t/--target rule; expected -t/--target with it$",
        ),
        ({"excludes": ["f"]}, r"^--exclude: applies to the -t/--target rule"),
        (
            {"targets": ["my/pkg.py"]},
            r"^--target: bad module glob 'my/pkg.py' \(it looks like a file path\)",
        ),
        ({"targets": ["a"], "includes": ["[ab"]}, r"^--include: bad glob '\[ab': unbalanced '\['$"),
        ({"targets": ["a"], "excludes": [""]}, r"^--exclude: empty glob$"),
        ({"targets": ["a.."]}, r"^--target: bad module glob 'a\.\.'"),
    ],
)
def test_command_line_errors(tmp_path: Path, kwargs: dict[str, list[str]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config([], cwd=str(tmp_path), **kwargs)  # type: ignore[arg-type]


# Discovery.
def test_discovery_prefers_autonvtx_toml(tmp_path: Path) -> None:
    make_file(tmp_path / "autonvtx.toml", '[[rules]]\nmodules = ["from_autonvtx"]\n')
    make_file(tmp_path / "pyproject.toml", '[[tool.autonvtx.rules]]\nmodules = ["from_pyproject"]\n')
    config = load_config([], cwd=str(tmp_path))
    assert [r.modules for r in config.rules] == [("from_autonvtx",)]
    assert config.sources == ("autonvtx.toml",)


def test_discovery_reads_pyproject(tmp_path: Path) -> None:
    make_file(
        tmp_path / "pyproject.toml",
        """
        [project]
        name = "x"

        [tool.autonvtx]
        domain = "proj"

        [[tool.autonvtx.rules]]
        modules = ["x.*"]
        color = "blue"
    """,
    )
    config = load_config([], cwd=str(tmp_path))
    assert config.settings.domain == "proj"
    assert config.rules == (Rule(("x.*",), color="blue", origin="pyproject.toml: tool.autonvtx.rules[0]"),)


def test_discovery_ignores_pyproject_without_table(tmp_path: Path) -> None:
    make_file(tmp_path / "pyproject.toml", '[project]\nname = "x"\n[tool.black]\nline-length = 99\n')
    assert load_config([], cwd=str(tmp_path)) == Config()


def test_discovery_finds_nothing(tmp_path: Path) -> None:
    assert load_config([], cwd=str(tmp_path)) == Config()


def test_explicit_config_skips_discovery(tmp_path: Path) -> None:
    make_file(tmp_path / "autonvtx.toml", '[[rules]]\nmodules = ["discovered"]\n')
    make_file(tmp_path / "other.toml", '[[rules]]\nmodules = ["explicit"]\n')
    assert load_config(["other.toml"], cwd=str(tmp_path)).sources == ("other.toml",)


def test_preset_alone_skips_discovery(tmp_path: Path) -> None:
    make_file(tmp_path / "autonvtx.toml", '[[rules]]\nmodules = ["discovered"]\n')
    make_file(tmp_path / "p" / "torch.toml", '[[rules]]\nmodules = ["torch"]\n')
    config = load_config([], extra_sources=["p/torch.toml"], cwd=str(tmp_path))
    assert config.sources == ("p/torch.toml",)


def test_explicit_pyproject(tmp_path: Path) -> None:
    make_file(tmp_path / "sub" / "pyproject.toml", '[tool.autonvtx]\ncolor = "red"\n')
    assert load_config(["sub/pyproject.toml"], cwd=str(tmp_path)).settings.color == "red"


def test_paths_relative_to_cwd_or_absolute(tmp_path: Path) -> None:
    path = make_file(tmp_path / "rules.toml", '[[rules]]\nmodules = ["a"]\n')
    assert load_config([str(path)], cwd="/").rules[0].modules == ("a",)


# Validation: (file name, text, message regex). Every message starts with the location.
# fmt: off
BAD = [
    ("rules.toml", '[[rules]]\nmodules = ["a"]\n[[rules]]\nmodules = ["b"]\n[[rules]]\nmodules = ["c"]\ncolour = "red"\n',
     r"^rules\.toml: rules\[2\]\.colour: unknown key; did you mean 'color'\?$"),
    ("rules.toml", "[[rules]]\nmodules = 3\n",
     r"^rules\.toml: rules\[0\]\.modules: expected a list of strings, got integer 3$"),
    ("rules.toml", '[[rules]]\nmodules = ["a", 1]\n',
     r"^rules\.toml: rules\[0\]\.modules: expected a list of strings, got list \['a', 1\]$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\n[[rules]]\nmodules = ["b"]\ninclude = ["ok", "[abc"]\n',
     r"^rules\.toml: rules\[1\]\.include\[1\]: bad glob '\[abc': unbalanced '\['$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\nexclude = "[!x"\n',
     r"^rules\.toml: rules\[0\]\.exclude: bad glob '\[!x': unbalanced '\['$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\ninclude = ["a b"]\n',
     r"^rules\.toml: rules\[0\]\.include\[0\]: bad glob 'a b': contains whitespace$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\ninclude = ["pkg.mod:func"]\n',
     r"^rules\.toml: rules\[0\]\.include\[0\]: bad glob 'pkg\.mod:func': .*put the module in 'modules'$"),
    ("rules.toml", '[[rules]]\nmodules = ["src/pkg/mod.py"]\n',
     r"^rules\.toml: rules\[0\]\.modules\[0\]: bad module glob 'src/pkg/mod\.py' \(it looks like a file path\)"),
    ("rules.toml", '[[rules]]\nmodules = [".pkg"]\n',
     r"^rules\.toml: rules\[0\]\.modules\[0\]: bad module glob '\.pkg'; expected a dotted module name"),
    ("rules.toml", "[[rules]]\nmodules = []\n",
     r"^rules\.toml: rules\[0\]\.modules: expected at least one module glob$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\ninclude = []\n',
     r"^rules\.toml: rules\[0\]\.include: empty, and the rule excludes nothing"),
    ("rules.toml", '[autonvtx]\ncolor = "grene"\n',
     r"^rules\.toml: autonvtx\.color: unknown color 'grene'; expected a color name, '#rrggbb' or 'auto'; did you mean 'green'\?$"),
    ("rules.toml", '[autonvtx]\ncolor = "#12345"\n',
     r"^rules\.toml: autonvtx\.color: unknown color '#12345'"),
    ("rules.toml", "[autonvtx]\ncolor = 0xff0000\n",
     r"^rules\.toml: autonvtx\.color: expected a string, got integer 16711680$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\ncolor = "bleu"\n',
     r"^rules\.toml: rules\[0\]\.color: unknown color 'bleu'.*did you mean 'blue'\?$"),
    ("rules.toml", "[[rules]]\n", r"^rules\.toml: rules\[0\]: a rule needs 'modules'$"),
    ("rules.toml", '[[rules]]\ninclude = ["x"]\n',
     r"^rules\.toml: rules\[0\]: a rule needs 'modules'$"),
    ("rules.toml", '[autonvtx]\nmessage = "{qualnme}"\n',
     r"^rules\.toml: autonvtx\.message: unknown field \{qualnme\} in '\{qualnme\}'; expected \{module\}, \{qualname\}, \{name\}, \{class\}, \{file\}, \{line\}; did you mean 'qualname'\?$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\nmessage = "{}"\n',
     r"^rules\.toml: rules\[0\]\.message: unknown field \{\}"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\nmessage = "{name"\n',
     r"^rules\.toml: rules\[0\]\.message: bad template '\{name'"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\nmessage = "{name!z}"\n',
     r"^rules\.toml: rules\[0\]\.message: bad template"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\ndomain = ""\n',
     r"^rules\.toml: rules\[0\]\.domain: expected a non-empty string$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\ncategory = 1\n',
     r"^rules\.toml: rules\[0\]\.category: expected a string, got integer 1$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\nbuiltins = "yes"\n',
     r"^rules\.toml: rules\[0\]\.builtins: expected true or false, got string 'yes'$"),
    ("rules.toml", "[rulez]\n", r"^rules\.toml: rulez: unknown key; did you mean 'rules'\?$"),
    ("rules.toml", 'domain = "x"\n',
     r"^rules\.toml: domain: unknown key \(global settings go in the \[autonvtx\] table\)$"),
    ("rules.toml", '[autonvtx]\nmodules = ["a"]\n',
     r"^rules\.toml: autonvtx\.modules: unknown key \(rule keys go in a \[\[rules\]\] table\)$"),
    ("rules.toml", '[autonvtx]\ndomian = "a"\n',
     r"^rules\.toml: autonvtx\.domian: unknown key; did you mean 'domain'\?$"),
    ("rules.toml", "autonvtx = 1\n", r"^rules\.toml: autonvtx: expected a table, got integer 1$"),
    ("rules.toml", "[rules]\nmodules = 1\n",
     r"^rules\.toml: rules: expected a list of tables \(\[\[rules\]\]\), got table"),
    ("rules.toml", "rules = [1]\n", r"^rules\.toml: rules\[0\]: expected a table, got integer 1$"),
    ("rules.toml", '[[rules]]\nmodules = ["a"]\ncolor = "red\n',
     r"^rules\.toml:3:\d+: invalid TOML: "),
    ("rules.toml", '[autonvtx]\ndomain = "a"\ndomain = "b"\n',
     r"^rules\.toml:3:\d+: invalid TOML: "),
    ("rules.toml", "[autonvtx", r"^rules\.toml:1:\d+: invalid TOML: "),
    ("rules.yaml", "rules:\n  - modules: [a\n  - b: c: d\n",
     r"^rules\.yaml:\d+:\d+: invalid YAML: "),
    ("rules.yaml", "autonvtx:\n  color: red\n bad: 1\n", r"^rules\.yaml:3:2: invalid YAML: "),
    ("rules.yaml", "true: 1\n", r"^rules\.yaml: True: unknown key$"),
    ("rules.yaml", "- a\n- b\n",
     r"^rules\.yaml: expected a mapping at the top level, got list \['a', 'b'\]$"),
    ("rules.yaml", "just text\n",
     r"^rules\.yaml: expected a mapping at the top level, got string 'just text'$"),
    ("rules.yaml", "rules:\n  - modules: [a]\n    color: null\n",
     r"^rules\.yaml: rules\[0\]\.color: expected a string, got null$"),
    ("rules.yaml", "rules:\n  - modules: [a]\n    1: x\n",
     r"^rules\.yaml: rules\[0\]\.1: unknown key$"),
    ("rules.yaml", "rules:\n  - modules: [a]\n    builtins: 1\n",
     r"^rules\.yaml: rules\[0\]\.builtins: expected true or false, got integer 1$"),
    ("pyproject.toml", '[tool.autonvtx]\ncolour = "red"\n',
     r"^pyproject\.toml: tool\.autonvtx\.colour: unknown key; did you mean 'color'\?$"),
    ("pyproject.toml", "[[tool.autonvtx.rules]]\nmodules = 1\n",
     r"^pyproject\.toml: tool\.autonvtx\.rules\[0\]\.modules: expected a list of strings, got integer 1$"),
    ("pyproject.toml", '[project]\nname = "x"\n',
     r"^pyproject\.toml: no \[tool\.autonvtx\] table$"),
    ("rules.ini", "",
     r"^--config: 'rules\.ini': unsupported file type; expected \.toml, \.yaml, \.yml or \.json"),
    ("autonvtx.toml", '[autonvtx]\ndescription = ""\n',
     r"^autonvtx\.toml: autonvtx\.description: expected a non-empty string$"),
    ("autonvtx.toml", 'plugins = ["x.y"]\n',
     r"^autonvtx\.toml: plugins: unknown key \(global settings go in the \[autonvtx\] table\)$"),
]
# fmt: on


@pytest.mark.parametrize("name, text, message", BAD)
def test_bad_config(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load(tmp_path, name, text)
    assert isinstance(info.value, AutonvtxError) and info.value.exit_status == 2


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    # Issue 11, 8: as linters do, one run lists every mistake, each with its file and key.
    text = """
        colour = "red"
        [autonvtx]
        domian = "a"
        color = "grene"
        [[rules]]
        modules = ["a", "b c", "src/x.py"]
        inclde = ["x"]
        [[rules]]
        color = "bleu"
        builtins = "yes"
        [[rules]]
        modules = "ok"
        exclude = "[x"
    """
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "rules.toml", text)
    lines = str(info.value).splitlines()
    assert [
        line.partition(": unknown")[0].partition(": bad")[0].partition(": expected")[0].partition(": a rule")[0]
        for line in lines
    ] == [
        "rules.toml: colour",
        "rules.toml: autonvtx.domian",
        "rules.toml: autonvtx.color",
        "rules.toml: rules[0].inclde",
        "rules.toml: rules[0].modules[1]",
        "rules.toml: rules[0].modules[2]",
        "rules.toml: rules[1]",
        "rules.toml: rules[1].color",
        "rules.toml: rules[1].builtins",
        "rules.toml: rules[2].exclude",
    ], lines
    assert "did you mean 'domain'?" in lines[1] and "did you mean 'include'?" in lines[3]


def test_problems_of_several_files_are_reported_together(tmp_path: Path) -> None:
    make_file(tmp_path / "a.toml", "[autonvtx]\ndomian = 'x'\n")
    make_file(tmp_path / "b.yaml", "rules:\n  - modules: [a]\n    colr: red\n")
    with pytest.raises(ConfigError) as info:
        load_config(["a.toml", "missing.toml", "b.yaml"], cwd=str(tmp_path))
    assert str(info.value).splitlines() == [
        "a.toml: autonvtx.domian: unknown key; did you mean 'domain'?",
        "--config: no such file 'missing.toml'",
        "b.yaml: rules[0].colr: unknown key; did you mean 'color'?",
    ]


def test_malformed_toml_position(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^rules\.toml:3:7: invalid TOML: Invalid value$"):
        load(tmp_path, "rules.toml", '[autonvtx]\ndomain = "a"\ncolor=?\n')


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--config: no such file 'x\.toml'$"):
        load_config(["x.toml"], cwd=str(tmp_path))
    with pytest.raises(ConfigError, match=r"^preset: no such file 'p\.toml'$"):
        load_config([], extra_sources=["p.toml"], cwd=str(tmp_path))


def test_discovered_pyproject_malformed(tmp_path: Path) -> None:
    make_file(tmp_path / "pyproject.toml", "[project\n")
    with pytest.raises(ConfigError, match=r"^pyproject\.toml:1:\d+: invalid TOML"):
        load_config([], cwd=str(tmp_path))


# Colors.
@pytest.mark.parametrize(
    "text, expected",
    [
        ("red", 0xFFFF0000),
        ("Green", 0xFF008000),
        ("blue", 0xFF0000FF),
        ("gray", 0xFF808080),
        ("grey", 0xFF808080),
        ("#12abEF", 0xFF12ABEF),
        ("#000000", 0xFF000000),
        ("white", 0xFFFFFFFF),
    ],
)
def test_parse_color(text: str, expected: int) -> None:
    assert parse_color(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("grene", r"did you mean 'green'\?$"),
        ("#fff", r"^unknown color '#fff'"),
        ("auto", r"unknown color 'auto'"),
        ("", r"^unknown color ''"),
    ],
)
def test_parse_color_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_color(text)


def test_auto_color_is_stable_and_spread() -> None:
    modules = [f"pkg.mod{i}" for i in range(40)]
    colors = [auto_color(m) for m in modules]
    assert all(c >> 24 == 0xFF for c in colors)
    assert len(set(colors)) >= 12
    # Stable across interpreters regardless of PYTHONHASHSEED.
    code = "from autonvtx.config import auto_color; print(auto_color('pkg.mod7'))"
    for seed in ("1", "2"):
        out = run_python(code, PYTHONHASHSEED=seed)
        assert int(out) == auto_color("pkg.mod7")


def test_style() -> None:
    config = Config(Settings(domain="d", message="{qualname}", color="auto"))
    plain = Rule(("a",))
    assert config.style(plain, "a") == RangeStyle("d", "{qualname}", auto_color("a"), None)
    custom = Rule(("a",), color="red", domain="r", category="c", message="{name}")
    assert config.style(custom, "a") == RangeStyle("r", "{name}", 0xFFFF0000, "c")
    fixed = Config(Settings(color="#010203"))
    assert fixed.style(plain, "a").color == 0xFF010203
    assert fixed.style(Rule(("a",), color="auto"), "a").color == auto_color("a")


# Serialization for child processes.
def test_json_round_trip(tmp_path: Path) -> None:
    config = load_config(
        ["rules.toml"],
        targets=["x"],
        includes=["f"],
        cwd=str(make_file(tmp_path / "rules.toml", FULL_TOML).parent),
    )
    text = config.to_json()
    assert "\n" not in text  # one line, fit for an environment variable
    assert Config.from_json(text) == config
    assert Config.from_json(Config().to_json()) == Config()


def test_json_round_trip_keeps_plugins_and_presets(tmp_path: Path) -> None:
    make_file(
        tmp_path / "p.toml",
        """
        [autonvtx]
        description = "a preset"
        plugins = ["mypkg.plugin"]
        [autonvtx.plugin."mypkg.plugin"]
        flag = true
        depth = 2
        ratio = 0.5
        name = "x"
    """,
    )
    config = load_config([], extra_sources=["p.toml"], cwd=str(tmp_path))
    assert config.preset_sources == ("p.toml",)
    assert config.options_for("mypkg.plugin") == {"flag": True, "depth": 2, "ratio": 0.5, "name": "x"}
    assert Config.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{}",
        "[]",
        '{"version": 2}',
        '{"version": 1, "settings": {"x": 1}, "rules": [], "sources": []}',
    ],
)
def test_from_json_errors(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^resolved configuration: unreadable"):
        Config.from_json(text)


def test_importing_is_light() -> None:
    code = textwrap.dedent("""
        import sys
        import autonvtx.config, autonvtx.matching
        print(sorted(m for m in ("nvtx", "wrapt", "yaml", "numpy", "tomllib", "tomli") if m in sys.modules))
    """)
    out = run_python(code)
    assert out.strip() == "[]"


def test_yaml_is_imported_only_for_yaml(tmp_path: Path) -> None:
    make_file(tmp_path / "rules.toml", '[[rules]]\nmodules = ["a"]\n')
    make_file(tmp_path / "rules.yaml", "rules:\n  - modules: [a]\n")
    code = textwrap.dedent(f"""
        import sys
        from autonvtx.configfile import load_config
        load_config(["rules.toml"], cwd={str(tmp_path)!r})
        print("yaml" in sys.modules)
        load_config(["rules.yaml"], cwd={str(tmp_path)!r})
        print("yaml" in sys.modules)
    """)
    out = run_python(code)
    assert out.split() == ["False", "True"]
