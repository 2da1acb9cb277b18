"""The plugin mechanism: configuration, loading, activation on import, the context's helpers."""

from __future__ import annotations

import inspect
import os
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import make_file, run_under_recorder

from autonvtx import environment
from autonvtx.config import Config, auto_color, parse_color
from autonvtx.configfile import load_config
from autonvtx.errors import ConfigError
from autonvtx.plugins import PluginActivator, PluginContext, load_plugins
from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.trace import read_chrome_trace

REPO = Path(__file__).resolve().parents[1]
MODULES = Path(__file__).resolve().parent / "modules" / "plugin_shapes"


def autonvtx_run(
    tmp_path: Path, config: str, program: str, *, preload: str = "", **env: str
) -> tuple[subprocess.CompletedProcess[str], list[ProcessRecording]]:
    if native.library_path() is None:
        pytest.skip("the native recorder is not built in this checkout")
    make_file(tmp_path / "autonvtx.toml", config)
    make_file(tmp_path / "prog.py", program)
    trace = tmp_path / "trace.json"
    environ = {k: v for k, v in os.environ.items() if k != environment.NVTX_INJECTION64_PATH}
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(MODULES)])
    # `preload` is imported before autonvtx's command line starts (and installs its hook).
    launcher = f"import sys{', ' + preload if preload else ''}; from autonvtx.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", launcher, "run", "-v", "--trace", str(trace), "prog.py"],
        cwd=tmp_path,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    recordings = read_chrome_trace(trace) if trace.exists() else []
    return proc, recordings


def names(recordings: list[ProcessRecording], domain: str) -> list[str]:
    return [r.name for rec in recordings for r in rec.ranges if r.domain == domain]


PLUGIN_CONFIG = """
    [autonvtx]
    plugins = ["fakeplug.plugin"]

    [autonvtx.plugin."fakeplug.plugin"]
    prefix = "model."
"""

PROGRAM = """
    import pickle
    import fakefw

    a, b = fakefw.Layer("encoder"), fakefw.Layer.make("decoder")
    print(a.forward(1), b.forward(2), fakefw.Layer.kind(), fakefw.op(3), list(fakefw.gen(2)))
    print(fakefw.op.__wrapped__.__name__, fakefw.Layer.forward.__name__)
    print(pickle.loads(pickle.dumps(fakefw.op)) is fakefw.op)
"""


def test_plugin_activates_on_import_and_names_ranges_dynamically(tmp_path: Path) -> None:
    proc, recordings = autonvtx_run(tmp_path, PLUGIN_CONFIG, PROGRAM)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["2 3 Layer 6 [0, 1]", "op forward", "True"]
    assert sorted(names(recordings, "fake")) == sorted(
        ["model.encoder.forward", "model.decoder.forward", "Layer.make", "Layer.kind", "op", "gen", "gen", "gen"]
    )
    ranges = [r for rec in recordings for r in rec.ranges if r.domain == "fake"]
    assert {r.color for r in ranges} == {parse_color("red")}
    assert "autonvtx: fakeplug.plugin: activated on import of fakefw" in proc.stderr
    assert "autonvtx: fakeplug.plugin: second wrap of op: False" in proc.stderr


def test_plugin_options_reach_the_plugin(tmp_path: Path) -> None:
    config = PLUGIN_CONFIG + '    domain = "elsewhere"\n'
    proc, recordings = autonvtx_run(tmp_path, config, PROGRAM)
    assert proc.returncode == 0, proc.stderr
    assert "op" in names(recordings, "elsewhere")


UNWRAPPED = """
    import fakefw

    a, b = fakefw.Layer("encoder"), fakefw.Layer.make("decoder")
    print(a.forward(1), b.forward(2), fakefw.Layer.kind(), fakefw.op(3), list(fakefw.gen(2)))
    print(hasattr(fakefw.op, "__wrapped__"), hasattr(fakefw.Layer.forward, "__wrapped__"))
"""


def test_activation_error_is_one_warning_and_puts_back_what_the_plugin_replaced(tmp_path: Path) -> None:
    proc, recordings = autonvtx_run(tmp_path, PLUGIN_CONFIG, UNWRAPPED, FAKEPLUG_FAIL="1")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "activation failed" in line]
    assert warnings == [
        "autonvtx: warning: plugin 'fakeplug.plugin': activation failed (RuntimeError: boom); its ranges are off"
    ]
    # The plugin wrapped five functions before it raised: all five are the originals again.
    assert proc.stdout.splitlines() == ["2 3 Layer 6 [0, 1]", "False False"]
    assert names(recordings, "fake") == []


def test_plugin_whose_trigger_is_already_imported_activates_at_install(tmp_path: Path) -> None:
    proc, recordings = autonvtx_run(tmp_path, PLUGIN_CONFIG, PROGRAM, preload="fakefw")
    assert proc.returncode == 0, proc.stderr
    assert "op" in names(recordings, "fake")
    assert "autonvtx: fakeplug.plugin: activated on import of fakefw" in proc.stderr


@pytest.mark.parametrize(
    "plugin, message",
    [
        ("fakeplug.missing", r"plugin 'fakeplug.missing': cannot import 'fakeplug.missing'"),
        ("fakeplug.broken", r"plugin 'fakeplug.broken': fakeplug.broken.activate: expected a function"),
    ],
)
def test_bad_plugin_module_stops_before_the_target_runs(tmp_path: Path, plugin: str, message: str) -> None:
    config = f'[autonvtx]\nplugins = ["{plugin}"]\n'
    proc, _ = autonvtx_run(tmp_path, config, "print('ran')\n")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("autonvtx: ")
    import re

    assert re.search(message, proc.stderr), proc.stderr


# The pure parts, in this process.
def test_config_merges_plugins_and_options(tmp_path: Path) -> None:
    make_file(
        tmp_path / "a.toml",
        """
        [autonvtx]
        plugins = ["fakeplug.plugin"]
        [autonvtx.plugin."fakeplug.plugin"]
        prefix = "a"
        depth = 2
    """,
    )
    make_file(
        tmp_path / "b.toml",
        """
        [autonvtx]
        plugins = ["fakeplug.broken", "fakeplug.plugin"]
        [autonvtx.plugin."fakeplug.plugin"]
        prefix = "b"
    """,
    )
    config = load_config(["a.toml", "b.toml"], cwd=str(tmp_path))
    assert config.plugins == ("fakeplug.plugin", "fakeplug.broken")
    assert config.options_for("fakeplug.plugin") == {"prefix": "b", "depth": 2}
    assert Config.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    "text, message",
    [
        ('plugins = "torch"', r"autonvtx\.plugins: expected a list of plugin names, got string"),
        ('plugins = ["no such"]', r"autonvtx\.plugins\[0\]: unknown plugin 'no such'"),
        ('plugins = ["1x.y"]', r"autonvtx\.plugins\[0\]: bad plugin module '1x\.y'"),
        ("plugin = 3", r"autonvtx\.plugin: expected a table of plugin tables"),
        (
            '[autonvtx.plugin."a.b"]\nx = [1]',
            r"autonvtx\.plugin\.a\.b\.x: expected a string, number or boolean, got list",
        ),
        ("[autonvtx.plugin.a]\nx = 1", r"autonvtx\.plugin\.a: unknown plugin 'a'"),
        ("plugins = [1]", r"autonvtx\.plugins: expected a list of plugin names"),
    ],
)
def test_bad_plugin_config(tmp_path: Path, text: str, message: str) -> None:
    make_file(tmp_path / "c.toml", "[autonvtx]\n" + text + "\n")
    with pytest.raises(ConfigError, match=message):
        load_config(["c.toml"], cwd=str(tmp_path))


def test_unknown_builtin_plugin_suggests_a_close_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autonvtx.configfile import tables as config_module

    monkeypatch.setattr(config_module, "builtin_plugins", lambda: ["numba", "torch"])
    make_file(tmp_path / "c.toml", '[autonvtx]\nplugins = ["troch"]\n')
    with pytest.raises(
        ConfigError, match=r"unknown plugin 'troch'; expected one of 'numba', 'torch'.*did you mean 'torch'\?"
    ):
        load_config(["c.toml"], cwd=str(tmp_path))


def test_context_style_resolves_against_global_settings() -> None:
    from autonvtx.config import Settings

    config = Config(settings=Settings(domain="g", color="blue"))
    context = PluginContext("p", "fw", config, [])
    style = context.style()
    assert (style.domain, style.color, style.category) == ("g", parse_color("blue"), None)
    style = context.style(domain="d", color="auto", category="c", module="fw.nn")
    assert (style.domain, style.color, style.category) == ("d", auto_color("fw.nn"), "c")
    assert Config().style  # the default config's "auto" color is the trigger's
    assert PluginContext("p", "fw", Config(), []).style().color == auto_color("fw")


def test_context_emitters_are_cached_and_options_read_only() -> None:
    config = Config(plugins=("fakeplug.plugin",), plugin_options=(("fakeplug.plugin", (("k", 1),)),))
    context = PluginContext("fakeplug.plugin", "fw", config, [])
    style = context.style()
    first = context.emitter("a {b}", style)
    assert first.message == "a {b}"
    assert context.emitter("a {b}", style) is first
    assert context.emitter("other", style) is not first
    assert context.options == {"k": 1}
    with pytest.raises(TypeError):
        context.options["k"] = 2  # type: ignore[index]


def test_wrap_function_keeps_kinds_and_never_wraps_twice() -> None:
    class Owner:
        def method(self, x: int) -> int:
            """Doc."""
            return x

        @staticmethod
        def static(x: int) -> int:
            return x

        @classmethod
        def klass(cls, x: int) -> str:
            return cls.__name__

    notes: list[str] = []
    context = PluginContext("p", "fw", Config(), notes)
    original = Owner.method
    assert context.wrap_function(Owner, "method", "m")
    assert context.wrap_function(Owner, "static", "s")
    assert context.wrap_function(Owner, "klass", lambda args, kwargs: "k")
    assert not context.wrap_function(Owner, "method", "m")
    assert isinstance(vars(Owner)["static"], staticmethod)
    assert isinstance(vars(Owner)["klass"], classmethod)
    assert Owner.method.__wrapped__ is original
    assert inspect.signature(Owner.method) == inspect.signature(original)
    assert Owner.method.__doc__ == "Doc."
    assert (Owner().method(3), Owner.static(4), Owner.klass(5), Owner().klass(5)) == (3, 4, "Owner", "Owner")
    assert any("already wrapped" in n for n in notes)
    assert not context.wrap_function(Owner, "missing", "x")
    assert any("missing: not wrapped (AttributeError" in n for n in notes)


def test_dynamic_name_failure_warns_once_and_falls_back(capsys: pytest.CaptureFixture[str]) -> None:
    module = types.ModuleType("fw")
    exec("def f(x):\n    return x\n", vars(module))
    context = PluginContext("p", "fw", Config(), [])
    assert context.wrap_function(module, "f", lambda args, kwargs: 1 / 0)
    assert module.f(1) == 1 and module.f(2) == 2
    err = capsys.readouterr().err
    assert err.count("autonvtx: warning: plugin 'p': fw.f: range name failed (ZeroDivisionError") == 1


def test_activator_activates_once_and_reports() -> None:
    calls: list[str] = []
    module = types.ModuleType("fakefw")

    def activate(framework: types.ModuleType, context: PluginContext) -> None:
        calls.append(framework.__name__)

    from autonvtx.plugins import Plugin

    activator = PluginActivator(Config(), [Plugin("x.y", "fakefw", activate)])
    activator.activate(activator.plugins[0], module)
    activator.activate(activator.plugins[0], module)
    assert calls == ["fakefw"]
    assert activator.activated == ["x.y"]


def test_load_plugins_imports_the_named_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(MODULES))
    try:
        (plugin,) = load_plugins(Config(plugins=("fakeplug.plugin",)))
        assert (plugin.name, plugin.trigger) == ("fakeplug.plugin", "fakefw")
        assert "fakefw" not in sys.modules  # a plugin module does not import its framework
    finally:
        for name in [n for n in sys.modules if n.startswith("fakeplug")]:
            del sys.modules[name]


def test_pickle_of_plugin_wrapped_module_function_is_by_reference() -> None:
    module = types.ModuleType("fw_pickle_probe")
    exec("def f(x):\n    return x\n", vars(module))
    module.f.__module__ = "fw_pickle_probe"
    sys.modules["fw_pickle_probe"] = module
    try:
        assert PluginContext("p", "fw", Config(), []).wrap_function(module, "f", "f")
        assert pickle.loads(pickle.dumps(module.f)) is module.f
    finally:
        del sys.modules["fw_pickle_probe"]


HELPERS_PROGRAM = """
    import sys
    sys.path.insert(0, {modules!r})
    import fakefw
    from autonvtx.config import Config
    from autonvtx.control import Instrumentation

    owners = {{"Layer": fakefw.Layer, "fakefw": fakefw}}

    def snapshot():
        return {{(n, k): v for n, o in owners.items() for k, v in vars(o).items()}}

    def work():
        layer = fakefw.Layer("a")
        made = fakefw.Layer.make("b"), fakefw.Layer.make("anon")
        fakefw.tracing = True
        traced = layer.forward(10)
        fakefw.tracing = False
        compiled = fakefw.compile(fakefw.op)
        print(layer.forward(1), traced, [m.name for m in made], fakefw.Layer.kind(),
              compiled(3), compiled.lower())

    before = snapshot()
    instrumentation = Instrumentation(Config(plugins=("fakeplug.helpers",)), restorable=True)
    instrumentation.install()
    print("changed", sorted(f"{{n}}.{{k}}" for (n, k), v in snapshot().items() if before[n, k] is not v))
    work()
    instrumentation.uninstall()
    after = snapshot()
    print("restored", after.keys() == before.keys() and all(after[k] is v for k, v in before.items()))
    work()
    print("\\n".join(instrumentation.report_lines(detailed=False)))
"""


def test_every_helper_ranges_and_uninstall_puts_every_original_back(tmp_path: Path) -> None:
    recordings, out = run_under_recorder(tmp_path, HELPERS_PROGRAM.format(modules=str(MODULES)))
    lines = out.splitlines()
    assert lines[0] == "changed ['Layer.forward', 'Layer.kind', 'Layer.make', 'fakefw.compile', 'fakefw.op']"
    assert lines[1] == lines[3] == "2 11 ['b', 'anon'] Layer 6 lowered op"
    assert lines[2] == "restored True"
    assert "fakeplug.helpers: second replace of compile: False" in lines
    assert "fakeplug.helpers: fakefw.compile: already wrapped" in lines
    # Only the calls made while installed: the tracing call and the refused one have none,
    # the compiled call is one range around the wrapped op's.
    ranges = [r for rec in recordings for r in rec.ranges if r.domain == "helpers"]
    assert sorted(r.name for r in ranges) == sorted(["Layer.make", "Layer.kind", "a.forward", "compiled(op)", "op"])
    (compiled,) = [r for r in ranges if r.name == "compiled(op)"]
    assert any(r.name == "op" and compiled.start_ns <= r.start_ns <= r.end_ns <= compiled.end_ns for r in ranges)


def test_wrap_method_keeps_kinds_names_and_attributes_and_never_wraps_twice() -> None:
    from autonvtx.engines import RANGE_MARK

    class Owner:
        def method(self, x: int) -> int:
            """Doc."""
            return x

        method.flag = "set by the framework"  # type: ignore[attr-defined]

        @staticmethod
        def static(x: int) -> int:
            return x

        @classmethod
        def klass(cls, x: int) -> str:
            return cls.__name__

        builtin = len  # not a Python function: a function in its place would bind

    notes: list[str] = []
    written: list[tuple[object, str, object, object]] = []
    context = PluginContext("p", "fw", Config(), notes, written)
    emitter = context.emitter("r", context.style())
    seen: list[tuple[tuple[object, ...], dict[str, object]]] = []

    def chooser(args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        seen.append((args, kwargs))
        return emitter

    original = vars(Owner)["method"]
    assert context.wrap_method(Owner, "method", chooser)
    assert context.wrap_method(Owner, "static", chooser)
    assert context.wrap_method(Owner, "klass", chooser)
    assert not context.wrap_method(Owner, "method", chooser)
    assert not context.wrap_method(Owner, "builtin", chooser)
    assert not context.wrap_method(Owner, "missing", chooser)
    assert isinstance(vars(Owner)["static"], staticmethod)
    assert isinstance(vars(Owner)["klass"], classmethod)
    replaced = vars(Owner)["method"]
    assert getattr(replaced, RANGE_MARK) is True and replaced.__wrapped__ is original
    assert (replaced.__name__, replaced.__qualname__, replaced.__doc__, replaced.flag) == (
        "method",
        original.__qualname__,
        "Doc.",
        "set by the framework",
    )
    assert inspect.signature(Owner.method) == inspect.signature(original)
    owner = Owner()
    assert (owner.method(3), Owner.static(4), Owner.klass(5), owner.klass(x=6)) == (3, 4, "Owner", "Owner")
    assert seen == [((owner, 3), {}), ((4,), {}), ((Owner, 5), {}), ((Owner,), {"x": 6})]
    assert [(holder, attr) for holder, attr, _, _ in written] == [
        (Owner, "method"),
        (Owner, "static"),
        (Owner, "klass"),
    ]
    assert "Owner.method: already wrapped" in "\n".join(notes)
    assert "Owner.builtin: not wrapped (a builtin_function_or_method, not a Python function)" in "\n".join(notes)
    assert "Owner.missing: not wrapped (AttributeError" in "\n".join(notes)


def test_wrap_method_skips_refuses_and_survives_a_failing_chooser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    module = types.ModuleType("fw")
    exec("def f(x):\n    return x\n\ndef g(x):\n    return -x\n", vars(module))
    context = PluginContext("p", "fw", Config(), [])
    asked: list[int] = []
    skipping = [True]

    def refusing(args: tuple[int, ...], kwargs: dict[str, object]) -> None:
        asked.append(args[0])
        return None

    assert context.wrap_method(module, "f", refusing, skip_if=lambda: skipping[0])
    assert context.wrap_method(module, "g", lambda args, kwargs: 1 / 0)
    assert module.f(1) == 1  # skipped: the chooser is not asked
    skipping[0] = False
    assert module.f(2) == 2 and asked == [2]
    assert (module.g(1), module.g(2)) == (-1, -2)
    err = capsys.readouterr().err
    assert err.count("autonvtx: warning: plugin 'p': fw.g: range name failed (ZeroDivisionError") == 1


def test_replace_names_marks_and_refuses_what_is_no_function() -> None:
    from autonvtx.engines import RANGE_MARK

    module = types.ModuleType("fw")
    exec("def f(x):\n    '''Doc.'''\n    return x\n", vars(module))
    original = module.f
    notes: list[str] = []
    context = PluginContext("p", "fw", Config(), notes)

    def make(original: object) -> object:
        def twice(x: int) -> int:
            return 2 * original(x)  # type: ignore[operator]

        return twice

    assert not context.replace(module, "f", lambda original: len)
    assert module.f is original
    assert context.replace(module, "f", make)
    assert module.f(4) == 8
    assert (module.f.__name__, module.f.__doc__, module.f.__wrapped__) == ("f", "Doc.", original)
    assert getattr(module.f, RANGE_MARK) is True
    assert not context.replace(module, "f", make)
    assert notes[0].startswith("p: fw.f: not wrapped (TypeError: a replacement must be a Python function")
    assert notes[1] == "p: fw.f: already wrapped"


def test_wrap_callable_keeps_the_objects_api_and_restore_puts_originals_back() -> None:
    class Compiled:
        def __call__(self, x: int) -> int:
            return x + 1

        def lower(self) -> str:
            return "lowered"

    module = types.ModuleType("fw")
    exec("def f(x):\n    return x\n", vars(module))
    original = module.f
    activator = PluginActivator(Config(), [])
    context = PluginContext("p", "fw", Config(), activator.notes, activator.written)
    compiled = Compiled()
    wrapped = context.wrap_callable(compiled, lambda args, kwargs: context.emitter("c", context.style()))
    assert wrapped is not compiled and wrapped.__wrapped__ is compiled
    assert (wrapped(1), wrapped.lower(), isinstance(wrapped, Compiled)) == (2, "lowered", True)
    assert context.wrap_method(module, "f", lambda args, kwargs: None)
    assert module.f is not original
    assert activator.restore() == 1
    assert module.f is original and activator.written == []
