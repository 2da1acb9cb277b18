"""The import hook: hands each target module to the instrumenter right after it executed."""

from __future__ import annotations

import _thread
import os
import sys
import types
import warnings
from importlib.machinery import ModuleSpec

from autonvtx.moduledicts import module_dict as _module_dict

# The script and `-m` targets never pass through an import hook: the runner instruments
# them (Walker.instrument_main). In the snapshot they are autonvtx's own entry point.
_MAIN_NAMES = ("__main__", "__mp_main__")

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Protocol
else:
    Protocol = object  # plain classes at run time: only mypy reads them


class _Matcher(Protocol):
    def should_consider_module(self, name: str) -> bool: ...


class _Instrumenter(Protocol):
    def instrument(self, module: types.ModuleType) -> Any: ...


class InstrumentingLoader:
    """Stands in for a target module's real loader during its execution only: delegates
    everything, runs the real exec_module, restores the real loader on the module, then
    calls back (wrapt's _ImportHookChainedLoader does the same: chain, don't reimplement)."""

    # No instance dictionary: one stand-in per target module (hundreds when a package is
    # targeted wholesale), each a GC-tracked object the collections walk (issue 24).
    # create_module: the real loader's own, bound (importlib calls it with no frame of ours
    # between: one Python call less per target module).
    __slots__ = ("loader", "_on_executed", "_on_skipped", "create_module")

    def __init__(
        self,
        loader: Any,
        on_executed: Callable[[types.ModuleType], None],
        on_skipped: Callable[[str, str], None],
    ) -> None:
        self.loader = loader
        self._on_executed = on_executed
        self._on_skipped = on_skipped
        self.create_module = getattr(loader, "create_module", _missing_create_module)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_resource_reader, is_package, ... while the module executes
        # (tracebacks and importlib.resources ask __loader__ / __spec__.loader).
        return getattr(self.loader, name)

    def exec_module(self, module: types.ModuleType) -> None:
        if not isinstance(module, types.ModuleType):
            # The real create_module made another kind of object, as importlib allows: it is
            # executed as under Python, and left without ranges.
            self.loader.exec_module(module)
            name = getattr(getattr(module, "__spec__", None), "name", None)
            self._on_skipped(name if isinstance(name, str) else "?", "its loader made a non-module object")
            return
        try:
            self.loader.exec_module(module)
        finally:
            namespace = _module_dict(module)
            spec = namespace.get("__spec__")
            real = self.loader
            if (
                type(real) not in STAND_INS
                and namespace.get("__loader__") is self
                and type(spec) is ModuleSpec
                and spec.loader is self
            ):
                # The usual case, without a call: the module names its real loader again.
                namespace["__loader__"] = spec.loader = real
            else:
                self._restore(module)
        # importlib hands out whatever sys.modules holds once the module has executed (a
        # module may replace itself there); that is the object to instrument.
        name = getattr(spec, "name", None)
        final = sys.modules.get(name, module) if isinstance(name, str) else module
        if final is not module:
            if not isinstance(final, types.ModuleType):
                self._on_skipped(name, "replaced itself in sys.modules by a non-module object")
                return
            self._restore(final)
        self._on_executed(final)

    def _restore(self, module: types.ModuleType) -> None:
        # Written to the module's dict directly: a module subclass's __setattr__ is the
        # program's code, and nothing of the program runs on autonvtx's behalf.
        namespace = _module_dict(module)
        real = self.loader
        while type(real) in STAND_INS:  # chained twice (propagate.threads' and ours)
            real = real.loader
        if namespace.get("__loader__") is self:
            namespace["__loader__"] = real
        spec = namespace.get("__spec__")
        if isinstance(spec, ModuleSpec) and spec.loader is self:  # type: ignore[comparison-overlap]  # a stand-in, not a Loader subclass
            spec.loader = real


# While a target module executes, InstrumentingLoader.exec_module's frame sits between
# importlib's. `warnings` skips importlib's frames when it counts a stacklevel: those whose
# file name contains both "importlib" and "_bootstrap" (warnings._is_internal_filename, and
# is_internal_frame/is_internal_filename in Python/_warnings.c, 3.10 to 3.13). Our frame gets
# such a name too, so `warn(..., stacklevel=2)` in a module being imported points at the
# importing line, and the filters (e.g. DeprecationWarning shown in __main__) decide as under
# plain Python. The name starts with this file's path: tracebacks still say whose frame it
# is, and the runner trims it as it trims all of ours.
LOADER_FRAME_FILENAME = f"{os.path.abspath(__file__)} (chained loader, as importlib._bootstrap)"
InstrumentingLoader.exec_module.__code__ = InstrumentingLoader.exec_module.__code__.replace(
    co_filename=LOADER_FRAME_FILENAME
)


# The stand-in loader types: this one, and the native client's (ImportHook.use_native()).
STAND_INS: list[type] = [InstrumentingLoader]


def _missing_create_module(spec: ModuleSpec) -> None:
    # What importlib's module_from_spec says of a loader that defines exec_module() alone.
    raise ImportError("loaders that define exec_module() must also define create_module()")


class InstrumentingFinder:
    """First on sys.meta_path. Rejects non-target names with the matcher's cheap check; for
    targets, asks the finders after it for the real spec and wraps only its loader."""

    def __init__(self, hook: ImportHook) -> None:
        self._hook = hook
        # Names being looked up on this thread (re-entry): threading.local's own type, without
        # importing threading (start-up, issue 24).
        self._busy = _thread._local()
        # (ids of sys.meta_path's entries, the finders after this one) as last seen: the same
        # list for every import until sys.meta_path changes (the finders are held, so no id
        # is reused meanwhile).
        self._after: tuple[tuple[int, ...], list[Any]] = ((), [])

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> ModuleSpec | None:
        hook = self._hook
        if not hook.matcher.should_consider_module(fullname) and fullname not in hook.triggers:
            return None
        local = self._busy
        try:
            busy = local.names
        except AttributeError:  # this thread's first target
            busy = local.names = set()
        if fullname in busy:
            return None  # a later finder called find_spec for the same name: step aside
        busy.add(fullname)
        try:
            spec = self._real_spec(fullname, path, target)
        finally:
            busy.discard(fullname)
        if spec is None:
            return None
        return self.chain(fullname, spec)

    def chain(self, fullname: str, spec: ModuleSpec) -> ModuleSpec:
        """`spec` with a stand-in for its loader, or as it is with the reason noted."""
        hook = self._hook
        loader = spec.loader
        if loader is None:
            hook.note_skipped(fullname, "namespace package: no code to instrument")
            return spec
        if not hasattr(loader, "exec_module"):
            hook.note_skipped(fullname, f"legacy loader without exec_module: {type(loader).__name__}")
            return spec
        lazy = getattr(sys.modules.get("importlib.util"), "LazyLoader", None)
        # By the class's MRO, not isinstance(): LazyLoader is an importlib.abc.Loader, whose
        # ABCMeta check cost more than the rest of find_spec for each target module.
        if lazy is not None and lazy in type(loader).__mro__:
            hook.note_skipped(fullname, "lazy loader: the module executes on first attribute access")
            return spec
        # A stand-in that delegates to the real loader (not an importlib.abc.Loader subclass:
        # its defaults would answer for the real loader).
        spec.loader = hook.loader_type(loader, hook.on_executed, hook.on_skipped)
        return spec

    def _real_spec(self, fullname: str, path: Any, target: Any) -> ModuleSpec | None:
        key = tuple(map(id, sys.meta_path))
        seen, after = self._after
        if key != seen:
            finders = list(sys.meta_path)  # a finder may change sys.meta_path while asked
            try:
                start = finders.index(self) + 1
            except ValueError:
                start = 0  # called directly, not through sys.meta_path: ask everyone else
            after = [finder for finder in finders[start:] if finder is not self]
            self._after = (key, after)
        for finder in after:
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is not None:
                spec: ModuleSpec | None = find_spec(fullname, path, target)
                if spec is not None:
                    return spec
        return None

    def invalidate_caches(self) -> None:
        pass


def remove_finder(finder: object) -> None:
    """Take this exact finder off sys.meta_path (by identity: a finder may define __eq__),
    leaving every other entry where it is."""
    for i, entry in enumerate(sys.meta_path):
        if entry is finder:
            del sys.meta_path[i]
            break


class ImportHook:
    """Instruments target modules as they are imported, and those already imported.

    install() puts one finder first on sys.meta_path; uninstall() removes exactly that
    finder. Wrappers already installed stay in place after uninstall(): functions keep
    emitting ranges (removing them would mean finding every reference the program took).
    """

    def __init__(self, matcher: _Matcher, instrumenter: _Instrumenter) -> None:
        self.matcher = matcher
        self.instrumenter = instrumenter
        self.skipped: dict[str, str] = {}  # module -> why the hook could not instrument it
        self._finder: InstrumentingFinder | None = None
        # Post-import callbacks (wrapt's register_post_import_hook, for plugins): module
        # name -> callbacks, each called once, right after that module executed.
        self.triggers: dict[str, list[Callable[[types.ModuleType], None]]] = {}
        # What each module's stand-in loader calls back, bound once (not per target module).
        self.on_executed: Callable[[types.ModuleType], None] = self.module_executed
        self.on_skipped = self.note_skipped
        self.loader_type: Any = InstrumentingLoader
        self._native_finder: tuple[Any, dict[str, bool]] | None = None

    def use_native(self, loader: type, finder: type | None = None, considered: dict[str, bool] | None = None) -> None:
        """From now on, stand in for target modules' loaders with the native client's
        InstrumentingLoader (chainedloader.c), and with `finder` (chainedfinder.c, reading the
        matcher's cache `considered`) look imports up: no Python frame of autonvtx's per module."""
        loader.set_stand_in_type(InstrumentingLoader)  # type: ignore[attr-defined]
        if loader not in STAND_INS:
            STAND_INS.append(loader)
        self.loader_type = loader
        if finder is not None and considered is not None:
            self._native_finder = (finder, considered)
            if self._finder is not None:
                self._use_native_finder(self._finder)

    def _use_native_finder(self, finder: InstrumentingFinder) -> None:
        assert self._native_finder is not None
        native, considered = self._native_finder
        # Its find_spec for importlib to call: the finder itself stays on sys.meta_path. It
        # holds what it reads (on_executed, loader_type, the matcher's cache, triggers) as they
        # are now, where the Python finder reads the hook's each time: use_native() comes last.
        finder.find_spec = native(  # type: ignore[method-assign]
            finder,
            considered,
            self.matcher.should_consider_module,
            self.triggers,
            finder.chain,
            self.loader_type,
            self.on_executed,
            self.on_skipped,
        )

    @property
    def installed(self) -> bool:
        return self._finder is not None

    def install(self) -> None:
        if self._finder is not None:
            return
        self._finder = InstrumentingFinder(self)
        if self._native_finder is not None:
            self._use_native_finder(self._finder)
        sys.meta_path.insert(0, self._finder)
        for name, module in list(sys.modules.items()):
            if name in _MAIN_NAMES or not isinstance(module, types.ModuleType):
                continue
            if getattr(_module_dict(module).get("__spec__"), "_initializing", False):
                continue  # still executing: its loader is not ours, so it stays as it is
            if self.matcher.should_consider_module(name) or name in self.triggers:
                self.on_executed(module)  # the native path once it is made (modulepath.py)

    def when_imported(self, name: str, callback: Callable[[types.ModuleType], None]) -> None:
        """Call `callback(module)` once, right after module `name` has executed; at once if
        it is already imported and the hook installed."""
        module = sys.modules.get(name)
        if self._finder is not None and isinstance(module, types.ModuleType):
            if not getattr(_module_dict(module).get("__spec__"), "_initializing", False):
                self._run_callback(name, callback, module)
                return
        self.triggers.setdefault(name, []).append(callback)

    def uninstall(self) -> None:
        finder, self._finder = self._finder, None
        if finder is not None:
            remove_finder(finder)

    def module_executed(self, module: types.ModuleType) -> None:
        name = _module_dict(module).get("__name__")
        triggers = self.triggers
        if triggers:
            if name in triggers:
                # Instrument first (the module's own rules), then hand it to its callbacks.
                callbacks = triggers.pop(name, [])
                if self.matcher.should_consider_module(name):
                    self._instrument(module)
                for callback in callbacks:
                    self._run_callback(name, callback, module)
                return
        # Only a target: a module may execute under a name the rules do not target (it
        # replaced itself in sys.modules; a name in sys.modules that is not its own).
        if type(name) is str and not self.matcher.should_consider_module(name):
            return
        try:
            self.instrumenter.instrument(module)
        except Exception as exc:  # instrumentation never breaks the program's import
            self._not_instrumented(module, exc)

    def _instrument(self, module: types.ModuleType) -> None:
        try:
            self.instrumenter.instrument(module)
        except Exception as exc:  # instrumentation never breaks the program's import
            self._not_instrumented(module, exc)

    @staticmethod
    def _not_instrumented(module: types.ModuleType, exc: Exception) -> None:
        name = getattr(module, "__name__", "?")
        warnings.warn(f"autonvtx: {name}: not instrumented: {exc!r}", RuntimeWarning, 2)

    def _run_callback(self, name: str, callback: Callable[[types.ModuleType], None], module: types.ModuleType) -> None:
        try:
            callback(module)
        except Exception as exc:  # a post-import callback never breaks the program's import
            warnings.warn(f"autonvtx: {name}: post-import callback failed: {exc!r}", RuntimeWarning, 2)

    def note_skipped(self, name: str, reason: str) -> None:
        self.skipped[name] = reason
