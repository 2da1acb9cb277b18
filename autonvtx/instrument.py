"""Walk a module, wrap what the rules select with NVTX ranges, and record every decision."""
from __future__ import annotations

import functools
import threading
import types
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

import wrapt

from autonvtx import ranges
from autonvtx.matching import Matcher, normalize_module

# Dunders the interpreter calls only because a program named them in a statement or a call
# (`Trainer(...)`, `with`, `for`, `obj[i]`, `obj()`): a range there is the program's vocabulary.
# Every other dunder is a protocol hook the interpreter, the debugger, pickle, copy, dict/set,
# the garbage collector or autonvtx itself call implicitly (`__repr__` in a traceback,
# `__hash__`/`__eq__` in every dict lookup, `__getattr__` on every miss, `__del__` at any
# point, even at shutdown, `__init_subclass__` while a class is created): those are skipped.
WRAPPABLE_DUNDERS = frozenset({
    "__init__", "__post_init__", "__call__",
    "__enter__", "__exit__", "__aenter__", "__aexit__",
    "__iter__", "__next__", "__aiter__", "__anext__",
    "__getitem__", "__setitem__", "__delitem__",
})

# autonvtx's own machinery: wrapping it would put ranges inside the code that emits them.
_REFUSED_PACKAGES = ("autonvtx", "wrapt", "nvtx")

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: classes written in Python (settable attributes)
_module_dict = vars(types.ModuleType)["__dict__"].__get__  # no module __getattr__ involved
_BUILTIN_TYPES = (types.BuiltinFunctionType,)
_METHOD_LIKE = (functools.cached_property, functools.partialmethod, functools.singledispatchmethod)


def _is_builtin(value: Any) -> bool:
    return _kind(type(value)) == _BUILTIN


# What a value's type makes it, for the walk: decided once per type, not per value (a package
# targeted wholesale has tens of thousands of globals and class members, nearly all data).
_DATA, _CLASS, _RANGE_WRAPPER, _FUNCTION, _BUILTIN, _STATIC_OR_CLASS, _PROPERTY, _OTHER_CALLABLE = range(8)
_kinds: dict[type, int] = {}


def _kind(kind: type) -> int:
    try:
        return _kinds[kind]
    except KeyError:
        pass
    if issubclass(kind, type):
        found = _CLASS
    elif issubclass(kind, RangeWrapper):
        found = _RANGE_WRAPPER
    elif kind is types.FunctionType or issubclass(kind, wrapt.FunctionWrapper):
        found = _FUNCTION
    elif kind is staticmethod or kind is classmethod:
        found = _STATIC_OR_CLASS
    elif issubclass(kind, property):
        found = _PROPERTY
    elif _is_builtin_type(kind):
        found = _BUILTIN
    elif issubclass(kind, _METHOD_LIKE) or any("__call__" in vars(k) for k in kind.__mro__):
        found = _OTHER_CALLABLE  # callable(value), from its type as callable() decides
    else:
        found = _DATA
    if len(_kinds) < 10_000:  # types made on the fly are not kept alive without bound
        _kinds[kind] = found
    return found


def _is_builtin_type(kind: type) -> bool:
    # Cython compiles a module's functions to its own function type, one per Cython version.
    # NumPy >= 1.25 makes its public functions C callables of type _ArrayFunctionDispatcher
    # (NEP 18 dispatch), which behave like builtins.
    return (
        kind in _BUILTIN_TYPES
        or kind.__name__.endswith("cython_function_or_method")
        or kind.__name__ == "_ArrayFunctionDispatcher"
    )


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name[:2] == name[-2:] == "__"


# Protocol methods wrapt's proxy types define (for whatever object they proxy) that a function
# does not have. Duck-typing code asks for them: torch's context_decorator refuses a callable
# for which hasattr(ctx, "__enter__") holds, and is handed bound methods of wrapped functions.
# Not __getitem__: defined on a class it gives the type a sequence slot, and iter(wrapper)
# would then succeed where iter(function) raises (numpy.iterable, "try: iter(x)" checks).
_PROTOCOLS_FUNCTIONS_LACK = (
    "__enter__", "__exit__", "__aenter__", "__aexit__",
    "__len__", "__setitem__", "__delitem__", "__contains__", "__reversed__",
    "__int__", "__float__", "__complex__", "__index__", "__round__", "__trunc__", "__floor__",
    "__ceil__", "__bytes__",
)


class _LacksProtocol(AttributeError, TypeError):
    """An AttributeError to getattr()/hasattr(), a TypeError to the statement or builtin that
    uses the protocol (`with w:`, `len(w)`, `int(w)`): what each sees of a function."""


class _Lacking:
    """Stands on the wrapper type of plain functions for a protocol method that functions lack
    (wrapt's would forward to the function and fail only when called)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        raise _LacksProtocol(f"'function' object has no attribute '{self.name}'")


def _lacking_what_functions_lack(cls: type) -> type:
    for name in _PROTOCOLS_FUNCTIONS_LACK:
        setattr(cls, name, _Lacking(name))
    return cls


class RangeWrapper(wrapt.FunctionWrapper):
    """The FunctionWrapper autonvtx installs: a wrapt proxy that also pickles and copies like
    the function it wraps (wrapt's proxies refuse both, wrapt issue #158 and its docs)."""

    __slots__ = ()

    @classmethod
    def for_function(cls, func: Any, wrapper: Any) -> RangeWrapper:
        """A wrapper for a plain function called by name (`f(x)`), without wrapt's per-call
        `getattr(wrapped, "__self__")`: for a function that attribute is missing, and the
        AttributeError it raises costs more than the range (wrapt 2.x, _wrappers.c
        FunctionWrapperBase_call, bindings "function"/"callable"). Binding "staticmethod"
        skips that lookup and still binds like a function when found on a class (the
        descriptor is the function's own __get__, then the bound method's __self__ is used)."""
        if type(func) is not types.FunctionType or _FUNCTION_WRAPPER_BASE is None:
            return cls(func, wrapper)
        if _RangedFunctionWrapper is not None and ranges.is_native_range(wrapper):
            ranged: RangeWrapper = _RangedFunctionWrapper(func, wrapper)
            return ranged
        self = _PlainFunctionWrapper(func, wrapper)
        try:
            _FUNCTION_WRAPPER_BASE.__init__(self, func, None, wrapper, None, "staticmethod")
        except Exception:  # another wrapt: keep the wrapper wrapt made, slower but right
            return cls(func, wrapper)
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A string means "a global of this name" (pickle docs, object.__reduce__): pickle
        # stores module + qualname exactly as for the bare function and checks that the name
        # leads back to this very wrapper; unpickling needs no autonvtx.
        return self.__qualname__

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)

    def __copy__(self) -> RangeWrapper:
        return self  # copy.copy(function) is the function (copy._copy_immutable)

    def __repr__(self) -> str:
        return repr(self.__wrapped__)  # wrapt's repr names the proxy; programs print functions

    def __deepcopy__(self, memo: Any) -> RangeWrapper:
        return self


class BoundRangeWrapper(wrapt.BoundFunctionWrapper):
    """A RangeWrapper bound by attribute access: pickles like a bound method does."""

    __slots__ = ()

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Like method.__reduce__: getattr(self, name). For `Class.method` (no instance)
        # the owner class stands in, as the bare function pickles by `Class.method` too.
        instance = self._self_instance
        holder = self._self_owner if instance is None else instance
        return getattr, (holder, self.__name__)

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)

    def __copy__(self) -> BoundRangeWrapper:
        return self

    def __repr__(self) -> str:
        return repr(self.__wrapped__)

    def __deepcopy__(self, memo: Any) -> BoundRangeWrapper:
        return self


RangeWrapper.__bound_function_wrapper__ = BoundRangeWrapper


@_lacking_what_functions_lack  # only here: a wrapt decorator's wrapper may wrap a class
class _PlainFunctionWrapper(RangeWrapper):
    """A RangeWrapper around a plain Python function: binds as the function does, to a real
    bound method around the wrapper (what obj.method is without autonvtx: inspect.ismethod,
    __self__ and pickling follow). wrapt's own binding makes a BoundFunctionWrapper proxy on
    every attribute access, several times the cost of the range. Wrappers of anything else
    (a wrapt decorator's wrapper) keep wrapt's binding, which their wrapper may rely on."""

    __slots__ = ()

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(self, instance)

# _PlainFunctionWrapper whose call is native: push, the function's own vectorcall, pop, in C
# (wrapt's call path costs a dict, a tuple and a call of the wrapper, several times the
# range); it binds as _PlainFunctionWrapper does, and `obj.method()` skips the bound method
# as for a function. None without autonvtx's native NVTX client (or AUTONVTX_PURE_PYTHON=1).
_RangedFunctionWrapper = ranges.ranged_function_type(
    _PlainFunctionWrapper, f"{__name__}._RangedFunctionWrapper"
)

# _RangedFunctionWrapper(function, its native range) in one C call (ranges.ranged_wrapper_factory).
_make_ranged = ranges.ranged_wrapper_factory(_RangedFunctionWrapper)

_FUNCTION_WRAPPER_BASE = next(
    (c for c in RangeWrapper.__mro__ if c.__name__ == "_FunctionWrapperBase"), None
)


@dataclass
class ModuleReport:
    """What happened to one module: every name wrapped or skipped, each with its reason."""

    module: str
    wrapped: dict[str, str] = field(default_factory=dict)  # qualname -> reason
    skipped: dict[str, str] = field(default_factory=dict)  # qualname -> reason
    rebound: list[str] = field(default_factory=list)  # names pointed at an existing wrapper

    def skip(self, qualname: str, reason: str) -> None:
        self.skipped.setdefault(qualname, reason)

    def skip_counts(self) -> Counter[str]:
        return Counter(_reason_kind(reason) for reason in self.skipped.values())

    def summary(self) -> str:
        """One line for --verbose: `mod: wrapped 3, skipped 2 (1 property, 1 protocol method)`."""
        counts = ", ".join(f"{n} {kind}" for kind, n in self.skip_counts().most_common())
        line = f"{self.module}: wrapped {len(self.wrapped)}, skipped {len(self.skipped)}"
        if counts:
            line += f" ({counts})"
        if self.rebound:
            line += f", {len(self.rebound)} re-export(s) rebound"
        return line

    def lines(self) -> list[str]:
        """One line per decision, `module:qualname: wrapped (why)` or `... skipped (why)`."""
        out = [f"{self.module}:{q}: wrapped ({why})" for q, why in self.wrapped.items()]
        out += [f"{self.module}:{q}: skipped ({why})" for q, why in self.skipped.items()]
        return out


def _reason_kind(reason: str) -> str:
    # Reasons read "kind: detail"; counts group by kind.
    return reason.split(":", 1)[0]


class Instrumenter:
    """Wraps selected functions, once each, and keeps every target module's reference to a
    wrapped function pointing at its one wrapper.

    With `wrap=False` (no NVTX tool attached: no range could be seen) every decision is made
    and reported, and selected functions are left as they are, at no cost per call."""

    def __init__(self, matcher: Matcher, *, wrap: bool = True) -> None:
        self._matcher = matcher
        self._config = matcher.config
        self.select = matcher.select  # (module, qualname) -> Selection
        self.uniform_selection = matcher.uniform_selection
        self.wraps = wrap
        # (id(rule), module) -> (RangeStyle, *ranges.style_arguments(it)): one per module, not
        # one per function (the rules live as long as the config that holds them, so their ids
        # stay theirs).
        self._styles: dict[tuple[int, str], Any] = {}
        self._distinct_styles: dict[Any, Any] = {}
        self._texts: dict[str, str] = {}
        # id(original) -> its wrapper (whose __wrapped__ is the original, held so the id
        # stays unique).
        self._wrappers: dict[int, RangeWrapper] = {}
        # id(original) -> module-level names, in target modules, that still hold the
        # original because they were bound before the original was wrapped.
        self._pending: dict[int, list[tuple[weakref.ref[types.ModuleType], str]]] = {}
        self._main_seen: weakref.WeakKeyDictionary[types.ModuleType, dict[str, Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._reports: dict[str, ModuleReport] = {}
        # Guards only the dicts above; never held while anything else runs (no imports, no
        # user code), so it cannot take part in an import deadlock.
        self._lock = threading.Lock()

    @property
    def reports(self) -> dict[str, ModuleReport]:
        return dict(self._reports)

    def wrapped_count(self) -> int:
        return len(self._wrappers)

    def instrument(self, module: types.ModuleType) -> ModuleReport:
        """Wrap what the rules select among the functions and classes defined in `module`."""
        namespace = _module_dict(module)
        return self._instrument_items(module, namespace, list(namespace.items()))

    def instrument_main(self, module: types.ModuleType) -> ModuleReport:
        """Incremental instrument() for a script's `__main__`, called after each top-level
        statement: only names bound to a new function or class since the last call are walked."""
        namespace = _module_dict(module)
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
        self, module: types.ModuleType, namespace: dict[str, Any], items: list[tuple[str, Any]]
    ) -> ModuleReport:
        name = namespace.get("__name__")
        if not isinstance(name, str):
            name = "<unnamed module>"
        report = self._reports.get(name)
        if report is None:
            report = self._reports[name] = ModuleReport(name)
        if not items:
            return report
        if name.partition(".")[0] in _REFUSED_PACKAGES:
            report.skip("<module>", "autonvtx machinery: never instrumented")
            return report
        try:
            _ModuleWalk(self, module, namespace, name, report).walk(items)
        except Exception as exc:  # never raise into the program's import
            report.skip("<module>", f"instrumentation failed: {type(exc).__name__}: {exc}")
        return report

    def wrapper_for(self, func: Any, module: str, qualname: str, rule: Any) -> RangeWrapper:
        """The one wrapper of `func`, created on first request; pending references rebound."""
        # Reads take no lock: a dict lookup is atomic (the GIL, or the dict's own lock on a
        # free-threaded build); the lock makes "first wrapper wins" and the rebinding atomic.
        found = self._wrappers.get(id(func))
        if found is not None:
            return found
        styled = self._styles.get((id(rule), module))
        if styled is None:
            style = self._config.style(rule, module)
            styled = (style, *ranges.style_arguments(style))
            # One kept copy of each distinct style, not one per module.
            styled = self._styles[id(rule), module] = self._distinct_styles.setdefault(styled, styled)
        style, domain, color, category = styled
        if style.message == "{qualname}":  # the default: no file or line to look up
            message = qualname
        else:
            message = ranges.label_for(func, module, qualname).format(style.message)
        wrapper = None
        if _make_ranged is not None and type(func) is types.FunctionType:
            wrapper = _make_ranged(func, domain, message, color, category)
        # Else: generators and coroutines (a range per resumption), wrapt decorators' wrappers,
        # no native client (or one built from older sources, without ranged_wrapper).
        if wrapper is None:
            emitter = ranges.emitter_with_message(style, message)
            wrapper = RangeWrapper.for_function(func, ranges.wrapper_for(func, emitter))
        with self._lock:
            found = self._wrappers.setdefault(id(func), wrapper)
            pending = self._pending.pop(id(func), None) if self._pending else None
        if pending:
            _rebind(func, found, pending)
        return found

    def shared(self, text: str) -> str:
        """One kept copy of each distinct string (report reasons)."""
        return self._texts.setdefault(text, text)

    def existing_wrapper(self, value: Any) -> RangeWrapper | None:
        found = self._wrappers.get(id(value))  # no lock: see wrapper_for
        return found if found is not None and found.__wrapped__ is value else None

    def remember_reference(self, func: Any, module: types.ModuleType, attr: str) -> None:
        """Rebind `module.attr` (now `func`) to func's wrapper once there is one."""
        reference = (weakref.ref(module), attr)
        with self._lock:
            # Under the lock wrapper_for() takes to publish a wrapper and collect its pending
            # references: either the wrapper exists now, or it will find this reference.
            found = self._wrappers.get(id(func))
            if found is None:
                pending = self._pending.get(id(func))
                if pending is None:
                    self._pending[id(func)] = [reference]
                else:
                    pending.append(reference)
                return
        # Wrapped meanwhile, on another thread (the walk asked existing_wrapper() just before).
        _rebind(func, found, [reference])

    def should_consider_module(self, name: str) -> bool:
        return self._matcher.should_consider_module(name)

    def set_member(self, cls: type, attr: str, value: Any) -> None:
        """Put a wrapper on a class (a plan, autonvtx.listing, only records it)."""
        # type.__setattr__, not setattr: a metaclass's __setattr__ is the program's code.
        type.__setattr__(cls, attr, value)


def _rebind(
    func: Any, wrapper: Any, references: list[tuple[weakref.ref[types.ModuleType], str]]
) -> None:
    """Point each module name that still holds `func` at its wrapper."""
    for module_ref, attr in references:
        target = module_ref()
        if target is not None:
            namespace = _module_dict(target)
            if namespace.get(attr) is func:
                namespace[attr] = wrapper


def _is_candidate(value: Any) -> bool:
    kind = type(value)
    return (
        kind is types.FunctionType
        or issubclass(kind, type)
        or issubclass(kind, wrapt.FunctionWrapper)
        or _is_builtin(value)
    )


class _ModuleWalk:
    """One pass over a module's names. Reads only through vars() and type checks, so no
    code of the program runs (no property, no __getattr__, no metaclass hook)."""

    def __init__(
        self,
        instrumenter: Instrumenter,
        module: types.ModuleType,
        namespace: dict[str, Any],
        name: str,
        report: ModuleReport,
    ) -> None:
        self.inst = instrumenter
        self.module = module
        self.namespace = namespace
        self.name = name
        self.rule_module = normalize_module(name)
        self.report = report
        self.classes_seen: set[int] = set()
        # The decision for every name when the rules cannot tell this module's names apart (a
        # package targeted wholesale), else None: then each name is asked about.
        self.uniform = instrumenter.uniform_selection(name)
        self.uniform_reason = self.uniform.reason if self.uniform is not None else ""

    def walk(self, items: Iterable[tuple[str, Any]]) -> None:
        kinds = _kinds
        for attr, value in items:
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

    def _visit_global(self, attr: str, value: Any, kind: int) -> None:
        if kind == _CLASS:
            if vars(value).get("__module__") == self.name:
                self._visit_class(value, _qualname(value, attr))
            return
        if kind == _RANGE_WRAPPER:
            self.report.skip(attr, "already wrapped")
            return
        existing = self.inst.existing_wrapper(value)
        if existing is not None:
            # A re-export (or alias) of a function already wrapped at its definition site.
            self.namespace[attr] = existing
            self.report.rebound.append(attr)
            return
        if kind == _FUNCTION:
            home = value.__module__
            if home != self.name:
                self._remember(value, home, attr)
                return
            qualname = _qualname(value, attr)
            if attr[:2] == "__" and _is_dunder(attr) and attr not in WRAPPABLE_DUNDERS:
                self.report.skip(qualname, "protocol method: called implicitly")
                return
            wrapper = self._wrap(value, qualname)
            if wrapper is not None:
                self.namespace[attr] = wrapper
        else:
            if getattr(value, "__module__", None) == self.name:
                qualname = getattr(value, "__qualname__", attr)
                wrapper = self._wrap(value, qualname, builtin=True)
                if wrapper is not None:
                    self.namespace[attr] = wrapper

    def _remember(self, func: Any, home: Any, attr: str) -> None:
        # An imported function: wrapped (or not) where it is defined. If that module is a
        # target instrumented later, this name is rebound to the wrapper then.
        if isinstance(home, str) and self.inst.should_consider_module(home):
            self.inst.remember_reference(func, self.module, attr)

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
        if issubclass(type(func), RangeWrapper):
            self.report.skip(f"{qualname}.{attr}", "already wrapped")
            return
        if attr[:2] == "__" and _is_dunder(attr) and attr not in WRAPPABLE_DUNDERS:
            self.report.skip(f"{qualname}.{attr}", "protocol method: called implicitly")
            return
        existing = self.inst.existing_wrapper(func)
        if existing is None:
            if type(func) is not types.FunctionType and not issubclass(
                type(func), wrapt.FunctionWrapper
            ):
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
        self.inst.set_member(cls, attr, new)

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

    def _wrap(self, func: Any, qualname: str, builtin: bool = False) -> RangeWrapper | None:
        selection, reason = self.uniform, self.uniform_reason
        if selection is None:
            selection = self.inst.select(self.name, qualname)
            reason = selection.reason
        if not selection.selected:
            self.report.skip(qualname, f"not selected: {reason}")
            return None
        if builtin and not selection.rule.builtins:
            self.report.skip(qualname, "builtin: the rule does not set builtins = true")
            return None
        if not self.inst.wraps:
            self.report.skip(qualname, f"no NVTX tool attached: {reason}")
            return None
        wrapper = self.inst.wrapper_for(func, self.rule_module, qualname, selection.rule)
        # Reasons repeat (one per rule and glob): the matcher keeps one copy of each, not one
        # per function.
        self.report.wrapped[qualname] = reason
        return wrapper


def _qualname(obj: Any, fallback: str) -> str:
    # A function made by a factory (`f = make()`) is known by the name it is bound to, not
    # by "make.<locals>.inner".
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(qualname, str) or "<locals>" in qualname:
        return fallback
    return qualname
