"""Walk a module: decide, for every function and method it defines, whether the rules select it
(and why), and hand the selected ones to an engine."""

from __future__ import annotations

import _thread
import types

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    import weakref
    from collections.abc import Callable
    from typing import Any

from autonvtx.codes import code_named, code_of, nested_codes
from autonvtx.compiled import already_ranged
from autonvtx.config import Rule
from autonvtx.decisions import MEMBER, ModuleReport
from autonvtx.engines import Engine
from autonvtx.engines.kinds import WRAP
from autonvtx.forklocks import renewed_in_fork_child
from autonvtx.matching import Matcher, Selection, normalize_module
from autonvtx.moduledicts import module_dict as _module_dict
from autonvtx.valuekinds import (
    BUILTIN as _BUILTIN,
    CLASS as _CLASS,
    DATA as _DATA,
    FUNCTION as _FUNCTION,
    KINDS as _kinds,
    PROPERTY as _PROPERTY,
    RANGE_WRAPPER as _RANGE_WRAPPER,
    STATIC_OR_CLASS as _STATIC_OR_CLASS,
    is_builtin as _is_builtin,
    is_wrapt_function_wrapper,
    kind_of as _kind,
)

# Dunders the interpreter calls only because a program named them in a statement or a call
# (`Trainer(...)`, `with`, `for`, `obj[i]`, `obj()`): a range there is the program's vocabulary.
# Every other dunder is a protocol hook the interpreter, the debugger, pickle, copy, dict/set,
# the garbage collector or autonvtx itself call implicitly (`__repr__` in a traceback,
# `__hash__`/`__eq__` in every dict lookup, `__getattr__` on every miss, `__del__` at any
# point, even at shutdown, `__init_subclass__` while a class is created): those are skipped.
WRAPPABLE_DUNDERS = frozenset(
    {
        "__init__",
        "__post_init__",
        "__call__",
        "__enter__",
        "__exit__",
        "__aenter__",
        "__aexit__",
        "__iter__",
        "__next__",
        "__aiter__",
        "__anext__",
        "__getitem__",
        "__setitem__",
        "__delitem__",
    }
)

# autonvtx's own machinery: wrapping it would put ranges inside the code that emits them.
REFUSED_PACKAGES = ("autonvtx", "wrapt", "nvtx")

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: classes written in Python (settable attributes)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name[:2] == name[-2:] == "__"


_CODE = types.CodeType
_UNASKED = object()


class Walker:
    """Decides, module by module, what the rules select, and hands each selected function to
    the engine (made on first need: a process that imports no target never loads it).

    With `apply=False` (no NVTX tool attached: no range could be seen) every decision is made
    and reported, and selected functions are left as they are, at no cost per call."""

    def __init__(
        self,
        matcher: Matcher,
        engine: Engine | None = None,
        *,
        apply: bool = True,
        make_engine: Callable[[], Engine] | None = None,
        verb: str = "wrapped",
    ) -> None:
        self._matcher = matcher
        self.select = matcher.select  # (module, qualname) -> Selection
        self.uniform_selection = matcher.uniform_selection
        self._uniform_known = matcher.uniform_known  # uniform_selection()'s cache, read directly
        # id(uniform Selection) -> (its reason, its rule, the engine's uniform_walk or None):
        # made once per set of rules, not per module (hundreds in a package targeted wholesale).
        self._uniform_plans: dict[int, tuple[str, Any, Any]] = {}
        self.applies = apply
        self.verb = verb
        self._engine = engine
        self._make_engine = make_engine
        self._main_seen: weakref.WeakKeyDictionary[types.ModuleType, dict[str, Any]] | None = None
        self._reports: dict[str, ModuleReport] = {}
        # Modules met while the engine itself was being imported, walked right after.
        self._deferred: list[types.ModuleType] | None = None
        # threading.RLock's, without threading (start-up); free again in a fork child
        self._engine_lock = renewed_in_fork_child(_thread.RLock())
        self._uniform_walks: dict[Any, Any] = {}  # per engine, its uniform_walk (None: none)
        self.plans: Any = None  # modulepath.ModulePlans: the native walks, told to the import hook

    @property
    def built_engine(self) -> Engine | None:
        """The engine, or None when no module needed it yet."""
        return self._engine

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._make_engine_once(None)
        assert self._engine is not None, "the engine is being made on this thread"
        return self._engine

    def _new_engine(self) -> Engine:
        if self._make_engine is not None:
            return self._make_engine()
        return WRAP.build(self._matcher.config)

    @property
    def reports(self) -> dict[str, ModuleReport]:
        return dict(self._reports)

    def instrument(self, module: types.ModuleType) -> ModuleReport:
        """Decide, and apply, what the rules select among the functions and classes defined
        in `module`."""
        engine = self._engine
        if engine is None:
            self._make_engine_once(module)
            engine = self._engine
            if engine is None:  # met while the engine itself was being imported
                return self._report_for(_module_dict(module).get("__name__"))
        namespace = _module_dict(module)
        if not engine.changes_namespaces:
            namespace = dict(namespace)  # the walk rebinds names: let it rebind a copy
        # The namespace itself: the walks take their own snapshot of it (the native one without
        # a tuple per name: hundreds per module of a package targeted wholesale).
        return self._instrument_items(module, namespace, namespace)

    def instrument_main(self, module: types.ModuleType) -> ModuleReport:
        """Incremental instrument() for a script's `__main__`, called after each top-level
        statement: only names bound to a new function or class since the last call are walked."""
        if self._engine is None:
            self._make_engine_once(None)
        namespace = _module_dict(module)
        if self._main_seen is None:
            import weakref  # here: not imported at start-up (issue 24)

            self._main_seen = weakref.WeakKeyDictionary()
        seen = self._main_seen.setdefault(module, {})
        fresh = [
            (name, value)
            for name, value in list(namespace.items())
            if seen.get(name) is not value and _is_candidate(value)
        ]
        report = self._instrument_items(module, namespace, fresh)
        for name, _ in fresh:
            seen[name] = namespace.get(name)
        return report

    def _instrument_items(
        self,
        module: types.ModuleType,
        namespace: dict[str, Any],
        items: list[tuple[str, Any]] | dict[str, Any],
    ) -> ModuleReport:
        name = namespace.get("__name__")
        if type(name) is str:
            report = self._reports.get(name)
            if report is None:  # made here, not by _report_for(): a call less per module
                report = self._reports[name] = ModuleReport(name, self.verb)
        else:
            report = self._report_for(name)
        name = report.module
        if not items:
            return report
        if name.partition(".")[0] in REFUSED_PACKAGES:
            report.skip("<module>", "autonvtx machinery: never instrumented")
            return report
        try:
            ModuleWalk(self, module, namespace, name, report).walk(items)
        except Exception as exc:  # never raise into the program's import
            report.skip("<module>", f"instrumentation failed: {type(exc).__name__}: {exc}")
        return report

    def _make_engine_once(self, module: types.ModuleType | None) -> None:
        # Two threads importing their first targets at once make one engine (the lock is
        # re-entrant: importing the engine may import a target on this same thread, which is
        # then walked right after, not with a half-imported engine).
        with self._engine_lock:
            if self._engine is not None:
                return
            if self._deferred is not None:
                if module is not None:
                    self._deferred.append(module)
                return
            self._deferred = []
            try:
                self._engine = self._new_engine()
            finally:
                deferred, self._deferred = self._deferred, None
        for earlier in deferred:
            self.instrument(earlier)

    def _report_for(self, name: Any) -> ModuleReport:
        if not isinstance(name, str):
            name = "<unnamed module>"
        report = self._reports.get(name)
        if report is None:
            report = self._reports[name] = ModuleReport(name, self.verb)
        return report

    def should_consider_module(self, name: str) -> bool:
        return self._matcher.should_consider_module(name)


def _is_candidate(value: Any) -> bool:
    kind = type(value)
    return kind is types.FunctionType or issubclass(kind, type) or is_wrapt_function_wrapper(kind) or _is_builtin(value)


class ModuleWalk:
    """One pass over a module's names. Reads only through vars() and type checks, so no
    code of the program runs (no property, no __getattr__, no metaclass hook)."""

    # No instance dictionary: one walk per target module (hundreds when a package is targeted
    # wholesale, issue 24).
    __slots__ = (
        "walker",
        "engine",
        "reaches_nested",
        "module",
        "namespace",
        "name",
        "rule_module",
        "report",
        "classes_seen",
        "uniform",
        "uniform_reason",
    )

    def __init__(
        self,
        walker: Walker,
        module: types.ModuleType,
        namespace: dict[str, Any],
        name: str,
        report: ModuleReport,
    ) -> None:
        self.walker = walker
        engine = walker._engine
        if engine is None:
            engine = walker.engine
        self.engine = engine
        # The code engine ranges code objects: functions nested in the ones walked too.
        self.reaches_nested = engine.reaches_nested
        self.module = module
        self.namespace = namespace
        self.name = name
        self.rule_module = normalize_module(name)
        self.report = report
        self.classes_seen: set[int] = set()
        # The decision for every name when the rules cannot tell this module's names apart (a
        # package targeted wholesale), else None: then each name is asked about.
        uniform: Any = walker._uniform_known.get(name, _UNASKED)
        if uniform is _UNASKED:
            uniform = walker.uniform_selection(name)
        self.uniform: Selection | None = uniform
        plan = walker._uniform_plans.get(id(uniform)) if uniform is not None else ("",)  # the matcher keeps it
        if plan is None:
            plan = walker._uniform_plans[id(uniform)] = self._uniform_plan(uniform)
        self.uniform_reason = plan[0]

    def _uniform_plan(self, uniform: Any) -> tuple[str, Any, Any]:
        # An engine that can walk a module one rule selects as a whole, in one native call:
        # its uniform_walk, asked for once per engine (not per module).
        make = None
        if uniform.selected and uniform.rule is not None and self.walker.applies:
            make = self.walker._uniform_walks.get(self.engine, _UNASKED)
            if make is _UNASKED:
                make = self.walker._uniform_walks[self.engine] = getattr(self.engine, "uniform_walk", None)
        return uniform.reason, uniform.rule, make

    def walk(self, items: list[tuple[str, Any]] | dict[str, Any]) -> None:
        """Walk `items`, (name, value) pairs or a namespace (its pairs as they are now)."""
        uniform = self.uniform
        if uniform is not None:
            reason, rule, make = self.walker._uniform_plans[id(uniform)]
            if make is not None:
                native = make(self.rule_module, rule)
                if native is not None:
                    report = self.report
                    # The same decisions in C for what it knows (plain functions, classes), the
                    # methods below for the rest (_native/uniform.c); `items` exactly as given.
                    native(
                        items,
                        (
                            self.name,
                            reason,
                            report.names_wrapped_for(reason),
                            report.skips,
                            self.classes_seen,
                            _kinds,
                            _kind,
                            WRAPPABLE_DUNDERS,
                            self._visit_global,
                            self._visit_member,
                            self._wrap,
                            self._failed,
                            rule.builtins,
                            self.namespace,
                            report.rebound,
                            self._remember,
                            MEMBER,
                        ),
                    )
                    if (plans := self.walker.plans) is not None:
                        plans.add(uniform, reason, rule, self.engine, self.rule_module)
                    return
        kinds = _kinds
        for attr, value in list(items.items()) if isinstance(items, dict) else items:
            kind = kinds.get(type(value))
            if kind is None:
                kind = _kind(type(value))
            if kind == _DATA or kind >= _STATIC_OR_CLASS:
                # Data, modules, instances: most of a module's names, never wrapped (decided
                # here, before any call: a package targeted wholesale has tens of thousands).
                continue
            try:
                self._visit_global(attr, value, kind)
            except Exception as exc:
                self.report.skip(attr, f"cannot wrap: {type(exc).__name__}: {exc}")

    def _failed(self, where: str, exc: BaseException) -> None:
        self.report.skip(where, f"cannot wrap: {type(exc).__name__}: {exc}")

    def _visit_global(self, attr: str, value: Any, kind: int) -> None:
        if kind == _CLASS:
            if vars(value).get("__module__") == self.name:
                self._visit_class(value, _qualname(value, attr))
            return
        if kind == _RANGE_WRAPPER:
            self.report.skip(attr, already_ranged(value))
            return
        existing = self.engine.existing(value)
        if existing is not None:
            # A re-export (or alias) of a function already wrapped at its definition site.
            self.engine.bind(self.namespace, attr, existing)
            self.report.rebound.append(attr)
            return
        if kind == _FUNCTION:
            home = value.__module__
            if home != self.name:
                self._remember(value, home, attr)
                return
            qualname = _qualname(value, attr)
            if qualname != attr and self._dresses_another(attr, value, qualname):
                return
            if attr[:2] == "__" and _is_dunder(attr) and attr not in WRAPPABLE_DUNDERS:
                self.report.skip(qualname, "protocol method: called implicitly")
                return
            wrapper = self._wrap(value, qualname)
            if wrapper is not None:
                self.engine.bind(self.namespace, attr, wrapper)
        else:
            if getattr(value, "__module__", None) == self.name:
                qualname = getattr(value, "__qualname__", attr)
                wrapper = self._wrap(value, qualname, builtin=True)
                if wrapper is not None:
                    self.engine.bind(self.namespace, attr, wrapper)

    def _dresses_another(self, attr: str, value: Any, qualname: str) -> bool:
        """Whether `value`, bound under another name, is a wrapper made by functools.wraps
        around the function this module defines as `qualname` (`compiled =
        torch.compile(step)`): it wraps a call of that function, whose range covers it, so
        it gets none of its own (two nested ranges per call otherwise)."""
        if "." in qualname:
            return False
        own = self.namespace.get(qualname)
        if own is None or own is value or not callable(own):
            return False
        inner = getattr(value, "__wrapped__", None)
        while inner is not None and inner is not own and getattr(own, "__wrapped__", None) is not inner:
            inner = getattr(inner, "__wrapped__", None)
        if inner is None:
            return False
        self.report.skip(
            attr, f"a wrapper of {qualname} made by functools.wraps: {qualname}'s own range covers its calls"
        )
        return True

    def _remember(self, func: Any, home: Any, attr: str) -> None:
        # An imported function: wrapped (or not) where it is defined. If that module is a
        # target instrumented later, this name is rebound to the wrapper then.
        if isinstance(home, str) and self.walker.should_consider_module(home):
            self.engine.remember_reference(func, self.module, attr)

    def _visit_class(self, cls: type, qualname: str) -> None:
        if id(cls) in self.classes_seen:
            return
        self.classes_seen.add(id(cls))
        if not cls.__flags__ & _HEAPTYPE:
            self.report.skip(qualname, "C type: its attributes cannot be set")
            return
        kinds = _kinds
        for attr, raw in list(vars(cls).items()):
            kind = kinds.get(type(raw))
            if kind is None:
                kind = _kind(type(raw))
            if kind == _DATA:
                # Data (slots' member descriptors, __dict__, constants) is not worth a line.
                continue
            try:
                self._visit_member(cls, attr, raw, kind, qualname)
            except Exception as exc:
                self.report.skip(f"{qualname}.{attr}", f"cannot wrap: {type(exc).__name__}: {exc}")

    def _visit_member(self, cls: type, attr: str, raw: Any, kind: int, qualname: str) -> None:
        if kind == _FUNCTION or kind == _RANGE_WRAPPER:
            func, rewrap = raw, None
        elif kind == _STATIC_OR_CLASS:
            func, rewrap = raw.__func__, type(raw)
        else:
            self._visit_other_member(attr, raw, kind, f"{qualname}.{attr}")
            return
        if _kind(type(func)) == _RANGE_WRAPPER:
            self.report.skip(f"{qualname}.{attr}", "already wrapped")
            return
        if attr[:2] == "__" and _is_dunder(attr) and attr not in WRAPPABLE_DUNDERS:
            self.report.skip(f"{qualname}.{attr}", "protocol method: called implicitly")
            return
        existing = self.engine.existing(func)
        if existing is None:
            if type(func) is not types.FunctionType and not is_wrapt_function_wrapper(type(func)):
                self.report.skip(f"{qualname}.{attr}", f"not a plain function: {type(func).__name__}")
                return
            own = getattr(func, "__qualname__", None)
            # A class that names its public home in __module__ (pandas' and numpy's
            # set_module) is walked there, while its methods keep the module they were
            # written in: a qualname naming this class body still makes them its own.
            if func.__module__ != self.name and own != f"{qualname}.{attr}":
                self.report.skip(f"{qualname}.{attr}", f"defined elsewhere: in {func.__module__}")
                return
            if not isinstance(own, str) or "<locals>" in own:
                own = f"{qualname}.{attr}"  # made by a factory: known by where it is bound
            existing = self._wrap(func, own)
            if existing is None:
                return
        new = existing if rewrap is None else rewrap(existing)
        self.engine.set_member(cls, attr, new)

    def _visit_other_member(self, attr: str, raw: Any, kind: int, member: str) -> None:
        if kind == _CLASS:
            if vars(raw).get("__module__") == self.name and raw.__qualname__ == member:
                self._visit_class(raw, member)
        elif kind == _PROPERTY:
            self.report.skip(member, "property: descriptors are left untouched")
        elif kind == _BUILTIN:
            self.report.skip(member, "builtin method: only module-level builtins are wrapped")
        else:  # callables and method-like descriptors are worth a line
            self.report.skip(member, f"not a plain function: {type(raw).__name__}")

    def _wrap(self, func: Any, qualname: str, builtin: bool = False) -> Any:
        code = None
        if self.reaches_nested and not builtin:
            # The code engine ranges code objects: the one that defines this name (most
            # often the function's own: asked first, without a call).
            code = func.__code__ if type(func) is types.FunctionType else None
            if code is None or code.co_qualname != qualname:
                code = code_named(func, qualname)
            if code is None:
                runs = getattr(code_of(func), "co_qualname", "?")
                # A factory's function, or a decorator's wrapper without __wrapped__ (its code
                # serves every function it decorates): decided where that code is defined.
                self.report.skip(qualname, f"code of another name: it runs {runs}, decided by that name")
                return None
            if _CODE in map(type, code.co_consts):  # most functions define none
                self._visit_nested(code)
        decided = self._decide(qualname, builtin)
        if decided is None:
            return None
        rule, reason = decided
        # Reasons repeat (one per rule and glob): the matcher keeps one copy of each.
        self.report.add_wrapped(qualname, reason)
        if code is not None and not (rule.shapes and type(func) is types.FunctionType):
            self.engine.apply_code(code, self.rule_module, qualname, rule)
            return None
        # Shapes need the call's arguments, which sys.monitoring's callbacks do not get: a
        # wrapper serves such rules on the code engine too.
        return self.engine.apply(func, self.rule_module, qualname, rule)

    def _decide(self, qualname: str, builtin: bool = False) -> tuple[Rule, str] | None:
        """The rule that selects `qualname` and why, or None with the reason it is skipped
        reported (not selected, a builtin the rule leaves out, no NVTX tool attached)."""
        selection, reason = self.uniform, self.uniform_reason
        if selection is None:
            selection = self.walker.select(self.name, qualname)
            reason = selection.reason
        rule = selection.rule
        if not selection.selected or rule is None:
            self.report.skip(qualname, f"not selected: {reason}")
            return None
        if builtin and not rule.builtins:
            self.report.skip(qualname, "builtin: the rule does not set builtins = true")
            return None
        if not self.walker.applies:
            self.report.skip(qualname, f"no NVTX tool attached: {reason}")
            return None
        return rule, reason

    def _visit_nested(self, code: types.CodeType) -> None:
        """Decide about the functions defined inside `code`, by their `co_qualname`
        (`make_step.<locals>.step`); lambdas and generator expressions have no name to
        select by and are left alone."""
        for inner in nested_codes(code):
            name = inner.co_name
            if name[:1] == "<":
                continue
            qualname = inner.co_qualname
            if name[:2] == "__" and _is_dunder(name) and name not in WRAPPABLE_DUNDERS:
                self.report.skip(qualname, "protocol method: called implicitly")
                continue
            decided = self._decide(qualname)
            if decided is not None:
                rule, reason = decided
                self.engine.apply_code(inner, self.rule_module, qualname, rule)
                self.report.add_wrapped(qualname, reason)


def _qualname(obj: Any, fallback: str) -> str:
    # A function made by a factory (`f = make()`) is known by the name it is bound to, not
    # by "make.<locals>.inner".
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(qualname, str) or "<locals>" in qualname:
        return fallback
    return qualname
