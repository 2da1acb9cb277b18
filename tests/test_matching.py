"""Tests for autonvtx.matching: module filter, precedence, reasons, unmatched patterns."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import make_file

from autonvtx.config import COMMAND_LINE_ORIGIN, Config, Rule
from autonvtx.configfile import load_config
from autonvtx.matching import Matcher, Selection


def rule(n: int, modules: tuple[str, ...], **kwargs: object) -> Rule:
    return Rule(modules, origin=f"rules.toml: rules[{n}]", **kwargs)  # type: ignore[arg-type]


def matcher(*rules: Rule) -> Matcher:
    return Matcher(Config(rules=rules))


# The cheap module filter, and glob semantics (case-sensitive fnmatch; '*' crosses dots).
@pytest.mark.parametrize(
    "globs, module, expected",
    [
        (("myproject", "myproject.*"), "myproject", True),
        (("myproject", "myproject.*"), "myproject.model.layers", True),
        (("myproject", "myproject.*"), "myprojectx", False),
        (("myproject", "myproject.*"), "MyProject", False),
        (("myproject", "myproject.*"), "other", False),
        (("myproject.*",), "myproject", False),
        (("*.models",), "a.b.models", True),
        (("pkg?",), "pkg1", True),
        (("pkg?",), "pkg10", False),
        (("pkg[12]",), "pkg2", True),
        (("pkg[!12]",), "pkg2", False),
        (("pkg[!12]",), "pkg3", True),
        (("__main__",), "__main__", True),
        (("__main__",), "__mp_main__", True),
        (("*",), "anything.at.all", True),
        ((), "anything", False),
    ],
)
def test_should_consider_module(globs: tuple[str, ...], module: str, expected: bool) -> None:
    m = matcher(rule(0, globs)) if globs else Matcher(Config())
    assert m.should_consider_module(module) is expected


@pytest.mark.parametrize(
    "globs",
    [
        ("pkg", "pkg.*"),  # -t pkg: a set lookup and str.startswith, no regex
        ("pkg",),
        ("pkg.*",),
        ("pkg*",),
        ("a", "b.*", "c.d*"),
        ("pkg", "*.models"),
        ("pkg.*", "pkg[12]"),
        ("pkg?", "x.*"),  # a regex for these
    ],
)
def test_module_globs_match_as_fnmatch_does(globs: tuple[str, ...]) -> None:
    # Every rule alone and all rules together decide each name exactly as fnmatch's regex.
    import fnmatch
    import re

    names = [
        "pkg",
        "pkg.sub",
        "pkg.sub.deep",
        "pkgx",
        "pkg1",
        "pkg2",
        "PKG",
        "Pkg.sub",
        "a",
        "ab",
        "b",
        "b.",
        "b.x",
        "c.d",
        "c.dx",
        "c",
        "x.y",
        "a.models",
        "pkg.\nsub",
        "",
        "other",
    ]
    for name in names:
        expected = any(re.match(fnmatch.translate(g), name) for g in globs)
        split = matcher(*(rule(i, (g,)) for i, g in enumerate(globs)))
        together = matcher(rule(0, globs))
        assert split.should_consider_module(name) is expected, (globs, name)
        assert together.should_consider_module(name) is expected, (globs, name)
        assert bool(together.rules_for_module(name)) is expected, (globs, name)


def test_non_target_modules_never_reach_the_rule_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    m = matcher(rule(0, ("myproject.*",)), rule(1, ("other",)))
    looked_up: list[str] = []
    real = m._compiled_for

    def spy(module: str):  # type: ignore[no-untyped-def]
        looked_up.append(module)
        return real(module)

    monkeypatch.setattr(m, "_compiled_for", spy)
    for name in ("os", "json.decoder", "numpy", "myproject.model", "other", "otherwise"):
        m.should_consider_module(name)
    assert looked_up == ["myproject.model", "other"]


def test_rules_for_module() -> None:
    a, b, c = rule(0, ("pkg.*",)), rule(1, ("other",)), rule(2, ("pkg.sub", "x"))
    m = matcher(a, b, c)
    assert m.rules_for_module("pkg.sub") == (a, c)
    assert m.rules_for_module("other") == (b,)
    assert m.rules_for_module("nothing") == ()


# Precedence. Rules targeting the module are read in order; a rule has an opinion on a
# name when one of its globs matches (exclude beats include within the rule); the last
# rule with an opinion decides.
PRESET = rule(0, ("lib", "lib.*"), exclude=("_*", "*._*"), domain="lib")
SCOPED = rule(1, ("lib.nn",), include=("Module.*",), color="red")
VETO = rule(2, ("lib.nn",), include=(), exclude=("Module.__call__",))
NARROW = rule(1, ("lib.*",), include=("Trainer.*",), exclude=("helper",))
CLI = Rule(("lib.nn",), include=("Module.__call__",), origin=COMMAND_LINE_ORIGIN)


@pytest.mark.parametrize(
    "rules, module, qualname, expected",
    [
        # One rule: include, then exclude.
        ((PRESET,), "lib", "train", (True, PRESET, "selected by rules.toml: rules[0] (include '*')")),
        ((PRESET,), "lib.io", "Reader.read", (True, PRESET, "selected by rules.toml: rules[0] (include '*')")),
        ((PRESET,), "lib", "_helper", (False, PRESET, "excluded by rules.toml: rules[0] (exclude '_*')")),
        ((PRESET,), "lib", "Reader._fill", (False, PRESET, "excluded by rules.toml: rules[0] (exclude '*._*')")),
        ((PRESET,), "other", "train", (False, None, "module not targeted")),
        ((SCOPED,), "lib.nn", "relu", (False, None, "no rule includes it")),
        # A later rule narrows nothing it does not mention: the preset still decides there.
        ((PRESET, SCOPED), "lib.nn", "relu", (True, PRESET, "selected by rules.toml: rules[0] (include '*')")),
        (
            (PRESET, SCOPED),
            "lib.nn",
            "Module.forward",
            (True, SCOPED, "selected by rules.toml: rules[1] (include 'Module.*')"),
        ),
        # ... and a later include wins over an earlier exclude, saying so.
        (
            (PRESET, SCOPED),
            "lib.nn",
            "Module._call_impl",
            (
                True,
                SCOPED,
                "selected by rules.toml: rules[1] (include 'Module.*'), overriding rules.toml: rules[0] (exclude '*._*')",
            ),
        ),
        ((PRESET, SCOPED), "lib.nn", "_private", (False, PRESET, "excluded by rules.toml: rules[0] (exclude '_*')")),
        # An exclude-only rule (include = []) vetoes earlier selections.
        (
            (PRESET, SCOPED, VETO),
            "lib.nn",
            "Module.__call__",
            (
                False,
                VETO,
                "excluded by rules.toml: rules[2] (exclude 'Module.__call__'), overriding rules.toml: rules[1] (include 'Module.*')",
            ),
        ),
        (
            (PRESET, SCOPED, VETO),
            "lib.nn",
            "Module.forward",
            (True, SCOPED, "selected by rules.toml: rules[1] (include 'Module.*')"),
        ),
        # A later rule's exclude applies even to names its include does not cover.
        (
            (PRESET, NARROW),
            "lib.train",
            "helper",
            (
                False,
                NARROW,
                "excluded by rules.toml: rules[1] (exclude 'helper'), overriding rules.toml: rules[0] (include '*')",
            ),
        ),
        (
            (PRESET, NARROW),
            "lib.train",
            "Trainer.step",
            (True, NARROW, "selected by rules.toml: rules[1] (include 'Trainer.*')"),
        ),
        ((PRESET, NARROW), "lib.train", "evaluate", (True, PRESET, "selected by rules.toml: rules[0] (include '*')")),
        # Within one rule exclude beats include; a rule not targeting the module has no say.
        (
            (NARROW,),
            "lib.train",
            "Trainer._x",
            (True, NARROW, "selected by rules.toml: rules[1] (include 'Trainer.*')"),
        ),
        (
            (NARROW, PRESET),
            "lib.train",
            "Trainer.step",
            (True, PRESET, "selected by rules.toml: rules[0] (include '*')"),
        ),
        ((NARROW, PRESET), "lib", "Trainer.step", (True, PRESET, "selected by rules.toml: rules[0] (include '*')")),
        # The command line comes last and wins.
        (
            (PRESET, SCOPED, VETO, CLI),
            "lib.nn",
            "Module.__call__",
            (
                True,
                CLI,
                "selected by command line (include 'Module.__call__'), overriding rules.toml: rules[2] (exclude 'Module.__call__')",
            ),
        ),
        # Same opinion twice: the later rule decides (its attributes apply), nothing overridden.
        (
            (PRESET, rule(1, ("lib",), color="blue")),
            "lib",
            "train",
            (True, rule(1, ("lib",), color="blue"), "selected by rules.toml: rules[1] (include '*')"),
        ),
    ],
)
def test_select(rules: tuple[Rule, ...], module: str, qualname: str, expected: tuple[object, ...]) -> None:
    assert matcher(*rules).select(module, qualname) == Selection(*expected)  # type: ignore[arg-type]


def test_select_mp_main_as_main() -> None:
    r = rule(0, ("__main__",), include=("work",))
    m = matcher(r)
    assert (
        m.select("__mp_main__", "work")
        == m.select("__main__", "work")
        == Selection(True, r, "selected by rules.toml: rules[0] (include 'work')")
    )
    assert m.rules_for_module("__mp_main__") == (r,)


def test_precedence_follows_file_order(tmp_path: Path) -> None:
    make_file(
        tmp_path / "preset.toml",
        """
        [[rules]]
        modules = ["app.*"]
        exclude = ["_*"]
    """,
    )
    make_file(
        tmp_path / "project.yaml",
        """
        rules:
          - modules: [app.core]
            include: [_setup]
            color: red
    """,
    )
    config = load_config(["project.yaml"], extra_sources=["preset.toml"], cwd=str(tmp_path))
    m = Matcher(config)
    chosen = m.select("app.core", "_setup")
    assert chosen.selected and chosen.rule is config.rules[1]
    assert chosen.reason == (
        "selected by project.yaml: rules[0] (include '_setup'), overriding preset.toml: rules[0] (exclude '_*')"
    )
    assert not m.select("app.core", "_other").selected
    assert config.style(chosen.rule, "app.core").color == 0xFFFF0000


# Unmatched patterns: asked about some modules and names, which patterns never matched?
@pytest.mark.parametrize(
    "rules, asked, expected",
    [
        (
            (rule(0, ("myprojet.*",)),),
            [("myproject.model", None)],
            ["rules.toml: rules[0].modules: 'myprojet.*' matched no module; did you mean 'myproject.*'?"],
        ),
        (
            (rule(0, ("myproject", "zzz")),),
            [("myproject", "f")],
            ["rules.toml: rules[0].modules: 'zzz' matched no module"],
        ),
        (
            (rule(0, ("m",), include=("Trainr.*", "f"), exclude=("_*", "g")),),
            [("m", "Trainer.step"), ("m", "f")],
            [
                "rules.toml: rules[0].include: 'Trainr.*' matched no qualified name in the module it targets;"
                " did you mean 'Trainer.*'?",
                "rules.toml: rules[0].exclude: 'g' matched no qualified name in the module it targets",
            ],
        ),
        # Excluding private names a module does not have is no typo (`autonvtx init` writes them).
        (
            (rule(0, ("m",), exclude=("_*", "*._*", "_x*")),),
            [("m", "f")],
            ["rules.toml: rules[0].exclude: '_x*' matched no qualified name in the module it targets"],
        ),
        # A name both included and overridden still proves its globs right; '*' is never a typo.
        ((rule(0, ("m.*",), exclude=("_*",)), rule(1, ("m.a",), include=("_x",))), [("m.a", "_x"), ("m.b", "f")], []),
        (
            (rule(0, ("m.*",), include=("Foo.*",)),),
            [("m.a", "f"), ("m.b", "g")],
            ["rules.toml: rules[0].include: 'Foo.*' matched no qualified name in the 2 modules it targets"],
        ),
        # A rule whose modules matched nothing reports only that.
        (
            (rule(0, ("nope",), include=("x",)),),
            [("m", "f")],
            ["rules.toml: rules[0].modules: 'nope' matched no module"],
        ),
        (
            (Rule(("mypkg.*",), include=("Modle.*",), origin=COMMAND_LINE_ORIGIN),),
            [("mypkg.a", "Model.fit"), ("mypkg", None)],
            ["--include: 'Modle.*' matched no qualified name in the module it targets; did you mean 'Model.*'?"],
        ),
        (
            (Rule(("mypkgg",), origin=COMMAND_LINE_ORIGIN),),
            [("mypkg", None)],
            ["--target: 'mypkgg' matched no module; did you mean 'mypkg'?"],
        ),
        ((rule(0, ("a",)),), [], ["rules.toml: rules[0].modules: 'a' matched no module"]),
        # `pkg.*` beside a `pkg` that matched: a package without (imported) submodules.
        ((rule(0, ("pkg", "pkg.*")),), [("pkg", "f")], []),
        (
            (rule(0, ("pkg", "pkgg.*")),),
            [("pkg", "f")],
            ["rules.toml: rules[0].modules: 'pkgg.*' matched no module; did you mean 'pkg.*'?"],
        ),
        # A class given where a module goes (a newcomer's -t 'Pipeline.*').
        (
            (Rule(("Pipeline.*",), origin=COMMAND_LINE_ORIGIN),),
            [("mypkg", None)],
            [
                "--target: 'Pipeline.*' matched no module; 'Pipeline' looks like a class: -t MODULE --include 'Pipeline.*'"
            ],
        ),
        (
            (rule(0, ("Trainer",)),),
            [("mypkg", None)],
            [
                "rules.toml: rules[0].modules: 'Trainer' matched no module; 'Trainer' looks like a class: its module goes"
                " in 'modules', 'Trainer' in 'include'"
            ],
        ),
    ],
)
def test_unmatched_patterns(rules: tuple[Rule, ...], asked: list[tuple[str, str | None]], expected: list[str]) -> None:
    m = matcher(*rules)
    for module, qualname in asked:
        if m.should_consider_module(module) and qualname is not None:
            m.select(module, qualname)
    assert m.unmatched_patterns() == expected


def test_unmatched_by_rule_and_presets_left_out_of_the_warnings() -> None:
    preset = Rule(("numpy.fft",), include=("fft",), origin="/x/numpy.toml: rules[0]")
    mine = rule(0, ("mypkg",), include=("trian",))
    m = Matcher(Config(rules=(preset, mine), preset_sources=("/x/numpy.toml",)))
    if m.should_consider_module("mypkg"):
        m.select("mypkg", "train")
    assert m.unmatched_by_rule() == [
        (preset, ["/x/numpy.toml: rules[0].modules: 'numpy.fft' matched no module"]),
        (
            mine,
            [
                "rules.toml: rules[0].include: 'trian' matched no qualified name in the module it targets; did you mean 'train'?"
            ],
        ),
    ]
    # A run warns about the user's own patterns only: a preset names what several versions
    # of a framework define, and a program uses part of it.
    assert m.unmatched_patterns() == [
        "rules.toml: rules[0].include: 'trian' matched no qualified name in the module it targets; did you mean 'train'?"
    ]


def reexporting_package(monkeypatch: pytest.MonkeyPatch, *, defines: bool) -> None:
    """`pkg` whose __init__ re-exports `f` from `pkg.core` (and, with `defines`, defines `g`)."""
    import types

    core = types.ModuleType("pkg.core")
    exec("def f(): pass", core.__dict__)
    package = types.ModuleType("pkg")
    package.__path__ = []  # type: ignore[attr-defined]
    package.f = core.f  # type: ignore[attr-defined]
    if defines:
        exec("def g(): pass", package.__dict__)
        package.g.__module__ = "pkg"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pkg", package)
    monkeypatch.setitem(sys.modules, "pkg.core", core)


@pytest.mark.parametrize(
    "modules, defines, expected",
    [
        # The package defines nothing and its submodule is not targeted: the rule selects nothing.
        (("pkg",), False, ["--target: 0 functions defined in 'pkg'; its submodules match 'pkg.*'"]),
        (("pkg",), True, []),  # it defines g: the rule does select something
        (("pkg", "pkg.*"), False, []),  # the submodule is targeted too
    ],
)
def test_a_package_that_only_reexports_says_its_submodules_match(
    monkeypatch: pytest.MonkeyPatch, modules: tuple[str, ...], defines: bool, expected: list[str]
) -> None:
    reexporting_package(monkeypatch, defines=defines)
    m = Matcher(Config(rules=(Rule(modules, origin=COMMAND_LINE_ORIGIN),)))
    for name in ("pkg", "pkg.core"):
        m.should_consider_module(name)
    assert m.unmatched_patterns() == expected


def test_run_and_list_say_a_reexporting_package_selects_nothing(tmp_path: Path) -> None:
    import subprocess

    from conftest import autonvtx_env

    make_file(tmp_path / "mypkg" / "__init__.py", "from .core import f\n")
    make_file(tmp_path / "mypkg" / "core.py", "def f():\n    return 1\n")
    make_file(tmp_path / "s.py", "import mypkg\nmypkg.f()\n")
    line = "--target: 0 functions defined in 'mypkg'; its submodules match 'mypkg.*'"
    for args in (["run", "-t", "mypkg", "-v", "s.py"], ["list", "-t", "mypkg", "mypkg"]):
        done = subprocess.run(
            [sys.executable, "-m", "autonvtx", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=autonvtx_env(),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert line in done.stdout + done.stderr, (args, done.stdout, done.stderr)


def test_the_scripts_own_name_as_a_module_glob_is_told_it_runs_as_main(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/home/me/train.py", "--epochs", "3"])
    m = matcher(Rule(("train",), origin=COMMAND_LINE_ORIGIN))
    m.should_consider_module("__main__")
    assert m.unmatched_patterns() == [
        "--target: 'train' matched no module; the script runs as module '__main__': target it as '__main__'"
    ]
