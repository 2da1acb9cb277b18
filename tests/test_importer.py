"""The import hook: cheap rejection, chained loaders, clean install/uninstall, no deadlocks."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
import types
import zipfile
from collections.abc import Iterator
from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import Any

import pytest
from conftest import fixture_modules, make_file

from autonvtx.config import Config, Rule
from autonvtx.engines.wrap import RangeWrapper
from autonvtx.importer import ImportHook, InstrumentingLoader
from autonvtx.matching import Matcher
from autonvtx.walk import Walker

pytestmark = pytest.mark.usefixtures("import_state_is_left_clean")


@pytest.fixture
def src(tmp_path: Path) -> Iterator[Path]:
    """A directory on sys.path for this test's modules; they are forgotten afterwards."""
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in fixture_modules():
        del sys.modules[name]
    importlib.invalidate_caches()


class RecordingMatcher(Matcher):
    """The real matcher, remembering every name the cheap check was asked about."""

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.considered: list[str] = []

    def should_consider_module(self, name: str) -> bool:
        self.considered.append(name)
        return super().should_consider_module(name)


def make_hook(*modules: str) -> ImportHook:
    matcher = RecordingMatcher(Config(rules=(Rule(modules=modules, origin="test"),)))
    return ImportHook(matcher, Walker(matcher))


def loader_types() -> list[Any]:
    """importer.py's stand-in loader, and the native client's (chainedloader.c) where built."""
    from autonvtx.ranges import _client

    native = getattr(_client, "ChainedLoader", None)
    return [InstrumentingLoader] + ([native] if native is not None else [])


@pytest.fixture(params=loader_types(), ids=lambda t: t.__module__)
def loader_type(request: pytest.FixtureRequest) -> Any:
    return request.param


@pytest.fixture
def hook(loader_type: Any) -> Iterator[ImportHook]:
    hook = make_hook("inst_target*")
    if loader_type is not InstrumentingLoader:
        from autonvtx.ranges import _client

        hook.use_native(loader_type, _client.ChainedFinder, hook.matcher._considered)  # type: ignore[attr-defined]
    hook.install()
    yield hook
    hook.uninstall()


def test_install_puts_one_finder_first_and_uninstall_restores_meta_path() -> None:
    before = list(sys.meta_path)
    hook = make_hook("inst_target*")
    hook.install()
    hook.install()  # idempotent
    assert sys.meta_path[1:] == before and sys.meta_path[0] not in before
    hook.uninstall()
    hook.uninstall()
    assert sys.meta_path == before


def test_target_module_is_instrumented_and_its_loader_restored(hook: ImportHook, src: Path) -> None:
    make_file(
        src / "inst_target_a.py",
        """
        LOADER_SEEN = type(__loader__).__name__
        SOURCE = __loader__.get_source(__name__)  # delegated while the module executes
        def f():
            return 1
    """,
    )
    import inst_target_a as mod

    assert isinstance(mod.f, RangeWrapper) and mod.f() == 1
    assert mod.LOADER_SEEN == "InstrumentingLoader" and "def f" in mod.SOURCE
    assert type(mod.__loader__) is SourceFileLoader
    assert type(mod.__spec__.loader) is SourceFileLoader
    assert "f" in hook.instrumenter.reports["inst_target_a"].wrapped


def test_non_target_names_stop_at_the_cheap_check(hook: ImportHook, src: Path) -> None:
    make_file(src / "inst_other.py", "def g():\n    return 2\n")
    make_file(src / "inst_target_b.py", "import inst_other\ndef f():\n    return 1\n")
    looked_up: list[str] = []

    class Recording(importlib.abc.MetaPathFinder):
        """Right after the hook's finder, asked by it only (find_spec called directly below)."""

        def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
            looked_up.append(fullname)

    recording = Recording()
    sys.meta_path.insert(1, recording)
    try:
        assert sys.meta_path[0].find_spec("inst_other", None) is None
        assert sys.meta_path[0].find_spec("inst_target_b", None) is not None
    finally:
        sys.meta_path.remove(recording)
    import inst_target_b

    assert looked_up == ["inst_target_b"]
    assert {"inst_other", "inst_target_b"} <= set(hook.matcher.considered)
    assert type(inst_target_b.inst_other.__loader__) is SourceFileLoader
    assert type(inst_target_b.inst_other.g) is types.FunctionType


def test_already_imported_modules_are_patched_on_install(src: Path) -> None:
    make_file(src / "inst_target_c.py", "def f():\n    return 1\n")
    import inst_target_c

    hook = make_hook("inst_target_c")
    hook.install()
    hook.uninstall()
    assert isinstance(inst_target_c.f, RangeWrapper)


def test_wrappers_stay_after_uninstall(hook: ImportHook, src: Path) -> None:
    make_file(src / "inst_target_d.py", "def f():\n    return 1\n")
    import inst_target_d

    hook.uninstall()
    assert isinstance(inst_target_d.f, RangeWrapper)


def test_a_finder_calling_find_spec_on_itself_does_not_recurse(hook: ImportHook, src: Path) -> None:
    class ReentrantFinder:
        """Like finders that resolve names by asking importlib again (and guard themselves)."""

        def __init__(self) -> None:
            self.busy = False
            self.calls = 0

        def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
            if self.busy or not fullname.startswith("inst_"):
                return None
            self.calls += 1
            self.busy = True
            try:
                return importlib.util.find_spec(fullname)
            finally:
                self.busy = False

    reentrant = ReentrantFinder()
    sys.meta_path.insert(1, reentrant)
    try:
        make_file(src / "inst_target_e.py", "def f():\n    return 1\n")
        import inst_target_e
    finally:
        sys.meta_path.remove(reentrant)
    assert reentrant.calls == 1
    assert isinstance(inst_target_e.f, RangeWrapper)
    assert type(inst_target_e.__loader__) is SourceFileLoader


def test_import_that_starts_a_thread_importing_a_target_does_not_deadlock(hook: ImportHook, src: Path) -> None:
    make_file(
        src / "inst_target_spawner.py",
        """
        import threading
        def _load():
            import inst_target_loaded
        worker = threading.Thread(target=_load, daemon=True)
        worker.start()
        worker.join(timeout=30)
        FINISHED = not worker.is_alive()
        def f():
            return 1
    """,
    )
    make_file(src / "inst_target_loaded.py", "def g():\n    return 2\n")
    import inst_target_spawner

    assert inst_target_spawner.FINISHED
    assert isinstance(sys.modules["inst_target_loaded"].g, RangeWrapper)
    assert isinstance(inst_target_spawner.f, RangeWrapper)


def test_namespace_package_is_imported_and_skipped_with_a_reason(hook: ImportHook, src: Path) -> None:
    make_file(src / "inst_target_ns" / "inner.py", "def f():\n    return 1\n")
    import inst_target_ns.inner

    assert hook.skipped["inst_target_ns"].startswith("namespace package")
    assert isinstance(inst_target_ns.inner.f, RangeWrapper)


def test_zip_imported_module_is_instrumented(hook: ImportHook, src: Path) -> None:
    archive = src / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("inst_target_zipped.py", "def f():\n    return 1\n")
    sys.path.insert(0, str(archive))
    try:
        import inst_target_zipped
    finally:
        sys.path.remove(str(archive))
    assert isinstance(inst_target_zipped.f, RangeWrapper)
    assert type(inst_target_zipped.__loader__).__name__ == "zipimporter"


def test_failing_module_raises_its_own_error(hook: ImportHook, src: Path) -> None:
    make_file(src / "inst_target_broken.py", "raise KeyError('mine')\n")
    with pytest.raises(KeyError, match="mine"):
        import inst_target_broken  # noqa: F401
    assert "inst_target_broken" not in sys.modules


def test_instrumentation_failure_never_breaks_the_import(src: Path) -> None:
    class BrokenInstrumenter:
        def instrument(self, module: types.ModuleType) -> None:
            raise RuntimeError("bug")

    matcher = Matcher(Config(rules=(Rule(modules=("inst_target_f",), origin="t"),)))
    hook = ImportHook(matcher, BrokenInstrumenter())
    hook.install()
    try:
        make_file(src / "inst_target_f.py", "def f():\n    return 1\n")
        with pytest.warns(RuntimeWarning, match="inst_target_f: not instrumented"):
            import inst_target_f
    finally:
        hook.uninstall()
    assert inst_target_f.f() == 1


def test_module_replacing_itself_with_a_non_module_is_skipped(hook: ImportHook, src: Path) -> None:
    make_file(
        src / "inst_target_swap.py",
        """
        import sys
        class Namespace:
            def f(self):
                return 1
        sys.modules[__name__] = Namespace()
    """,
    )
    import inst_target_swap

    assert inst_target_swap.f() == 1
    assert "non-module" in hook.skipped["inst_target_swap"]


def test_module_replacing_itself_with_a_module_no_rule_targets_is_not_walked(hook: ImportHook, src: Path) -> None:
    make_file(
        src / "inst_target_alias.py",
        """
        import sys, types
        other = types.ModuleType("elsewhere_alias")
        exec("def g():\\n    return 2\\n", other.__dict__)
        sys.modules[__name__] = other
    """,
    )
    import inst_target_alias

    assert inst_target_alias.__name__ == "elsewhere_alias" and inst_target_alias.g() == 2
    assert type(inst_target_alias.g) is types.FunctionType
    assert "elsewhere_alias" not in hook.instrumenter.reports and "inst_target_alias" not in hook.skipped


def test_instrumenting_loader_delegates_what_it_does_not_override(loader_type: Any) -> None:
    class Real:
        def exec_module(self, module: types.ModuleType) -> None:
            module.x = 1

        def is_package(self, name: str) -> bool:
            return True

    seen: list[types.ModuleType] = []
    loader = loader_type(Real(), seen.append, lambda name, why: None)
    assert loader.is_package("anything") is True
    # Without a create_module of its own, importlib refuses the real loader: so does its stand-in.
    with pytest.raises(ImportError, match="must also define create_module"):
        loader.create_module(importlib.util.spec_from_loader("m", loader))
    module = types.ModuleType("m")
    module.__loader__ = loader
    loader.exec_module(module)
    assert seen == [module] and isinstance(module.__loader__, Real)


def test_reentrant_lookup_in_one_thread_does_not_block_another(hook: ImportHook, src: Path) -> None:
    # The re-entry guard is per thread: another thread importing a target while this one
    # is inside a lookup still gets it instrumented.
    make_file(src / "inst_target_g.py", "def f():\n    return 1\n")
    finder = sys.meta_path[0]
    finder._busy.__dict__.setdefault("names", set()).add("inst_target_g")
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(importlib.import_module("inst_target_g")))
    thread.start()
    thread.join(timeout=30)
    finder._busy.names.clear()
    assert result and isinstance(result[0].f, RangeWrapper)


# -- warnings raised while a target module imports ------------------------------------

WARNING_PROGRAM = {
    "main.py": "import lib_a\nimport lib_dep\nprint(lib_a.value + lib_dep.value)\n",
    # lib_dep warns about itself at the line importing it (in __main__), as a deprecated
    # module does; lib_b warns at the line of lib_a importing lib_a, three levels up.
    "lib_dep.py": "import warnings\nwarnings.warn('lib_dep is deprecated', DeprecationWarning, stacklevel=2)\nvalue = 1\n",
    "lib_a.py": "import lib_b\nvalue = lib_b.value\n",
    "lib_b.py": "import warnings\nwarnings.warn('from lib_b', UserWarning, stacklevel=3)\nvalue = 2\n",
}


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["-W", "error::DeprecationWarning"],
        ["-W", "ignore::DeprecationWarning:__main__"],
        ["-W", "error::UserWarning:__main__"],
        ["-W", "always"],
        ["-X", "frozen_modules=off"],
    ],
)
def test_import_time_warnings_are_attributed_as_python_attributes_them(tmp_path: Path, flags: list[str]) -> None:
    # Issue 11, 3: our loader's frame must be as invisible to `warnings` as importlib's.
    import os
    import subprocess

    from autonvtx.recorder import native

    library = native.library_path()
    if library is None:
        pytest.skip("the native recorder is not built in this checkout")
    for name, text in WARNING_PROGRAM.items():
        make_file(tmp_path / name, text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_", "PYTHONWARNINGS"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])

    def run(*args: str, **extra: str) -> tuple[int, str, str]:
        done = subprocess.run(
            [sys.executable, *flags, *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**env, **extra},
            timeout=120,
        )
        return done.returncode, done.stdout, done.stderr

    expected = run("main.py")
    # A no-op tool attached: functions are wrapped, and autonvtx has nothing to say.
    ours = run(
        "-m", "autonvtx", "run", "-t", "lib_*", "main.py", NVTX_INJECTION64_PATH=library, AUTONVTX_RECORDER_MODE="noop"
    )
    assert ours == expected


def test_finders_added_or_removed_after_the_first_target_are_asked_as_importlib_would(
    hook: ImportHook, src: Path
) -> None:
    # The finder keeps the finders after it between imports: a change of sys.meta_path made
    # after a target was imported must still be seen, in both directions.
    make_file(src / "inst_target_m1.py", "def f():\n    return 1\n")
    import inst_target_m1  # noqa: F401  (fills the finder's list of the finders after it)

    class Served(importlib.abc.Loader):
        def exec_module(self, module: types.ModuleType) -> None:
            exec("def g():\n    return 2\n", vars(module))

    class ServingFinder:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
            self.asked.append(fullname)
            if fullname == "inst_target_served":
                return importlib.util.spec_from_loader(fullname, Served())
            return None

    serving = ServingFinder()
    sys.meta_path.append(serving)
    try:
        import inst_target_served  # type: ignore[import-not-found]
    finally:
        sys.meta_path.remove(serving)
    assert inst_target_served.g() == 2 and isinstance(inst_target_served.g, RangeWrapper)
    assert type(inst_target_served.__loader__) is Served
    make_file(src / "inst_target_m2.py", "def f():\n    return 1\n")
    import inst_target_m2  # noqa: F401

    assert serving.asked == ["inst_target_served"]
    del sys.modules["inst_target_served"]


def test_the_real_loaders_create_module_makes_the_module(loader_type: Any) -> None:
    class Custom(types.ModuleType):
        pass

    class Real:
        def create_module(self, spec: Any) -> types.ModuleType:
            return Custom(spec.name)

        def exec_module(self, module: types.ModuleType) -> None:
            module.x = 1

    seen: list[types.ModuleType] = []
    loader = loader_type(Real(), seen.append, lambda name, why: None)
    spec = importlib.util.spec_from_loader("inst_custom_made", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    assert type(module) is Custom
    loader.exec_module(module)
    assert seen == [module] and module.x == 1 and isinstance(module.__loader__, Real)
    assert spec.loader.__class__ is Real


def test_a_non_module_made_by_the_real_loader_is_named_by_its_spec(loader_type: Any) -> None:
    class Real:
        def create_module(self, spec: Any) -> Any:
            return types.SimpleNamespace(__spec__=spec)  # importlib allows any object

        def exec_module(self, module: Any) -> None:
            module.x = 1

    skipped: list[tuple[str, str]] = []
    loader = loader_type(Real(), lambda module: None, lambda name, why: skipped.append((name, why)))
    spec = importlib.util.spec_from_loader("inst_not_a_module", loader)
    assert spec is not None
    made = importlib.util.module_from_spec(spec)
    loader.exec_module(made)
    # Both twins (native and Python) name it; the native one said "?".
    assert made.x == 1 and [name for name, _ in skipped] == ["inst_not_a_module"]
