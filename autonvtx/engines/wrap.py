"""The wrap engine: a selected function is replaced, where it is bound, by a transparent wrapt
wrapper whose calls push and pop its range; and the one patching helper plugins use too."""

from __future__ import annotations

import _thread
import functools
import sys
import types
from _weakref import ref as _weak_ref  # weakref.ref, without weakref and threading (start-up)

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    import weakref
    from collections.abc import Callable
    from typing import Any

    import wrapt

    from autonvtx.engines.coroutines import CoroutineCodes
else:  # wrapt's wrapper types only: the rest of wrapt 2.x costs start-up (see wraptcore)
    from autonvtx.engines.wraptcore import load_wrapt

    wrapt = load_wrapt()

from autonvtx import ranges, resumptions, shapes
from autonvtx.config import Config, Rule, auto_color
from autonvtx.engines import RANGE_MARK, is_marked, key_of
from autonvtx.engines.wraptcore import (
    PROTOCOLS_FUNCTIONS_LACK as _PROTOCOLS_FUNCTIONS_LACK,  # noqa: F401
    lacking_what_functions_lack,
)
from autonvtx.forklocks import renewed_in_fork_child
from autonvtx.moduledicts import module_dict as _module_dict

# inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR: on 3.12+ the code flags of functions
# ranged through their code, not wrapped (engines/coroutines.py says why); none before.
_CODE_RANGED_FLAGS = 0x80 | 0x200 if sys.version_info >= (3, 12) else 0


class RangeWrapper(wrapt.FunctionWrapper):  # type: ignore[type-arg]  # wraps any callable
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
            _FUNCTION_WRAPPER_BASE.__init__(self, func, None, wrapper, None, "staticmethod")  # type: ignore[misc]  # the base's own __init__, on purpose
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


class BoundRangeWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[type-arg]  # binds any callable
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


RangeWrapper.__bound_function_wrapper__ = BoundRangeWrapper  # type: ignore[misc]  # wrapt reads it from the class
setattr(RangeWrapper, RANGE_MARK, True)
setattr(BoundRangeWrapper, RANGE_MARK, True)


@lacking_what_functions_lack  # only here: a wrapt decorator's wrapper may wrap a class
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
_RangedFunctionWrapper = ranges.ranged_function_type(_PlainFunctionWrapper, f"{__name__}._RangedFunctionWrapper")

# _RangedFunctionWrapper(function, its native range) in one C call (ranges.ranged_wrapper_factory).
_make_ranged = ranges.ranged_wrapper_factory(_RangedFunctionWrapper)

_FUNCTION_WRAPPER_BASE = next((c for c in RangeWrapper.__mro__ if c.__name__ == "_FunctionWrapperBase"), None)


class WrapEngine:
    """Wraps selected functions, once each, and keeps every target module's reference to a
    wrapped function pointing at its one wrapper. On Python 3.12+ coroutine and async generator
    functions are ranged through their code objects instead, where the code engine's machinery
    can run (engines/coroutines.py: no wrapper reaches 60 ns a resumption there): they stay
    in place, and apply() returns None for them."""

    changes_namespaces = True
    reaches_nested = False  # it ranges functions, never code objects: no apply_code() calls

    def __init__(self, config: Config, *, restorable: bool = False) -> None:
        self._config = config
        # With `restorable` (the API's install()), every write is remembered, so that restore()
        # can put the originals back; a run never uninstalls and keeps no such list.
        self._written: list[tuple[Any, str, Any, Any]] | None = [] if restorable else None
        # (id(rule), module) -> (RangeStyle, *ranges.style_arguments(it)): one per module, not
        # one per function (the rules live as long as the config that holds them, so their ids
        # stay theirs).
        self._styles: dict[tuple[int, str], Any] = {}
        self._distinct_styles: dict[Any, Any] = {}
        # uniform_walk(): per rule, a style and whether its color is auto; walks per color.
        self._rule_styles: dict[int, tuple[Any, bool]] = {}
        self.uniform_walkers: dict[int, dict[int, Callable[..., None]]] = {}  # rule -> color -> walk
        self._walk_function: Any = False  # ranges.uniform_walk_function(), asked once per engine
        # key_of(original) -> its wrapper (whose __wrapped__ holds the original: the key stays its).
        self._wrappers: dict[Any, RangeWrapper] = {}
        # key_of(original) -> module-level names in target modules bound to it before it was wrapped.
        self._pending: dict[Any, list[tuple[weakref.ref[types.ModuleType], str]]] = {}
        # Guards only the dicts above; never held while anything else runs (no imports, no
        # user code), so it cannot take part in an import deadlock.
        self._lock = renewed_in_fork_child(_thread.allocate_lock())
        self._coroutines: CoroutineCodes | None = None  # made for the first coroutine function

    def wrapped_count(self) -> int:
        return len(self._wrappers)

    def apply(self, func: Any, module: str, qualname: str, rule: Rule) -> RangeWrapper | None:
        """The one wrapper of `func`, created on first request; pending references rebound. None
        for a function ranged through its code (3.12+ coroutines): nothing is bound."""
        # Reads take no lock: a dict lookup is atomic (the GIL, or the dict's own lock on a
        # free-threaded build); the lock makes "first wrapper wins" and the rebinding atomic.
        found = self._wrappers.get(key_of(func))
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
        if (
            _CODE_RANGED_FLAGS
            and type(func) is types.FunctionType
            and func.__code__.co_flags & _CODE_RANGED_FLAGS
            and self._code_ranges().give_range(func, qualname, message, domain, color, category)
        ):
            self._pending.pop(func, None)  # every reference runs its code: nothing to rebind
            return None
        wrapper = None
        if rule.shapes and not resumptions.suspending_kind(getattr(getattr(func, "__code__", None), "co_flags", 0)):
            # A range named per call by its arguments' shapes (a dict look-up once seen).
            shaped = shapes.wrapper(style, message)
            if _RangedFunctionWrapper is not None and type(func) is types.FunctionType and shapes.is_native(shaped):
                try:
                    wrapper = _RangedFunctionWrapper(func, shaped)  # the call's key read in C, no wrapt
                except TypeError:  # an extension built from older sources (an editable install)
                    wrapper = None
            if wrapper is None:
                wrapper = RangeWrapper.for_function(func, shaped)
        elif _make_ranged is not None and type(func) is types.FunctionType:
            wrapper = _make_ranged(func, domain, message, color, category)
        # Else: generators and coroutines (a range per resumption), wrapt decorators' wrappers,
        # no native client (or one built from older sources, without ranged_wrapper).
        if wrapper is None:
            emitter = ranges.emitter_with_message(style, message)
            wrapper = RangeWrapper.for_function(func, ranges.wrapper_for(func, emitter))
        with self._lock:
            found = self._wrappers.setdefault(key_of(func), wrapper)
            pending = self._pending.pop(key_of(func), None) if self._pending else None
        if pending:
            self._rebind(func, found, pending)
        return found

    def _code_ranges(self) -> CoroutineCodes:
        if self._coroutines is None:
            # Imported here: a run that selects no coroutine function does not load it (start-up).
            from autonvtx.engines.coroutines import CoroutineCodes

            made = CoroutineCodes()
            with self._lock:
                if self._coroutines is None:
                    self._coroutines = made
        return self._coroutines

    def apply_code(self, code: types.CodeType, module: str, qualname: str, rule: Rule) -> None:
        raise TypeError("the wrap engine ranges functions, not code objects (reaches_nested is False)")

    def uniform_walk(self, module: str, rule: Rule) -> Callable[..., None] | None:
        """The native walk (uniform.c) of `module`, which `rule` selects as a whole, made once
        per rule and color; None for a message other than the name, or no native client."""
        if (walk := self._walk_function) is False:
            walk = self._walk_function = ranges.uniform_walk_function()
        if walk is None or _RangedFunctionWrapper is None or rule.shapes:
            return None  # shapes: apply() makes each function's wrapper
        ruled = self._rule_styles.get(id(rule))
        if ruled is None:
            setting = self._config.color_setting(rule)
            ruled = self._rule_styles[id(rule)] = (self._config.style(rule, module), setting == "auto")
        style, auto = ruled
        if style.message != "{qualname}":
            return None
        color = auto_color(module) if auto else style.color  # what Config.style() gives
        walker = (walkers := self.uniform_walkers.setdefault(id(rule), {})).get(color)  # modulepath.c too
        if walker is None:
            domain, color, category = ranges.style_arguments(self._config.style(rule, module))
            apply = lambda func, qualname: self.apply(func, module, qualname, rule)  # noqa: E731
            walker = walkers[color] = functools.partial(
                walk,
                (
                    "wrap",
                    domain,
                    color,
                    category,
                    _RangedFunctionWrapper,
                    self._wrappers,
                    self._pending,
                    self._rebind,
                    apply,
                    self._written,
                ),
            )
        return walker

    def existing(self, value: Any) -> RangeWrapper | None:
        found = self._wrappers.get(key_of(value))  # no lock: see apply
        return found if found is not None and found.__wrapped__ is value else None

    def remember_reference(self, func: Any, module: types.ModuleType, attr: str) -> None:
        """Rebind `module.attr` (now `func`) to func's wrapper once there is one."""
        if self._coroutines is not None and self._coroutines.ranges_code_of(func):
            return  # ranged through its code: every reference runs it
        reference = (_weak_ref(module), attr)
        with self._lock:
            # Under the lock apply() takes to publish a wrapper and collect its pending
            # references: either the wrapper exists now, or it will find this reference.
            key = key_of(func)
            found = self._wrappers.get(key)
            if found is None:
                pending = self._pending.get(key)
                if pending is None:
                    self._pending[key] = [reference]
                else:
                    pending.append(reference)
                return
        # Wrapped meanwhile, on another thread (the walk asked existing() just before).
        self._rebind(func, found, [reference])

    def _rebind(self, func: Any, wrapper: Any, references: list[tuple[weakref.ref[types.ModuleType], str]]) -> None:
        """Point each module name that still holds `func` at its wrapper."""
        for module_ref, attr in references:
            target = module_ref()
            if target is not None:
                namespace = _module_dict(target)
                if namespace.get(attr) is func:
                    self.bind(namespace, attr, wrapper)

    def bind(self, namespace: dict[str, Any], attr: str, value: Any) -> None:
        if self._written is not None:
            self._written.append((namespace, attr, namespace.get(attr), value))
        namespace[attr] = value

    def set_member(self, cls: type, attr: str, value: Any) -> None:
        if self._written is not None:
            self._written.append((cls, attr, vars(cls).get(attr), value))
        # type.__setattr__, not setattr: a metaclass's __setattr__ is the program's code.
        type.__setattr__(cls, attr, value)

    def restore(self) -> int:
        """Put back every original this engine replaced, where the wrapper is still in place
        (a name the program rebound since is its own), and stop ranging code; the count restored."""
        restored = self._coroutines.restore() if self._coroutines is not None else 0
        if not self._written:
            return restored
        written, self._written = self._written, []
        return restored + restore_writes(written)


def restore_writes(written: list[tuple[Any, str, Any, Any]]) -> int:
    """Undo (holder, attr, original, wrapper) writes, newest first, where the wrapper is still
    what the holder (a module namespace or a class) has."""
    restored = 0
    for holder, attr, original, wrapper in reversed(written):
        current = holder.get(attr) if isinstance(holder, dict) else vars(holder).get(attr)
        if current is not wrapper:
            continue
        if isinstance(holder, dict):
            holder[attr] = original
        else:
            type.__setattr__(holder, attr, original)
        restored += 1
    return restored


def is_range_wrapper(value: Any) -> bool:
    """Whether `value` is a wrapper of autonvtx's (from a rule or a plugin)."""
    return isinstance(value, RangeWrapper)


def patch_attribute(
    owner: Any,
    attr: str,
    make: Callable[[Any], ranges.Wrapper],
    written: list[tuple[Any, str, Any, Any]] | None = None,
) -> str | None:
    """Put a range wrapper around `owner.attr` (a class, a module or another object), the
    wrapper rules install: `make(function)` gives its wrapt wrapper callable. Static and class
    methods keep their kind, nothing is wrapped twice, no metaclass or module `__setattr__`
    runs; the write is appended to `written` (see restore_writes). None when done, else why not."""

    def build(func: Any) -> Any:
        return RangeWrapper.for_function(func, make(func))

    return _patch(owner, attr, build, written, function_only=False)


if TYPE_CHECKING:
    # What a conditional range asks on every call: (args, kwargs) -> the emitter of this call's
    # range, or None for no range. For a method args[0] is the instance, as the function sees it.
    EmitterChooser = Callable[[tuple[Any, ...], dict[str, Any]], "ranges.Emitter | None"]
    # Told when a chooser raised (the call then runs without a range); must not raise itself.
    ErrorHandler = Callable[[Exception], None]


def replace_attribute(
    owner: Any,
    attr: str,
    make: Callable[[Any], Any],
    written: list[tuple[Any, str, Any, Any]] | None = None,
) -> str | None:
    """Put `make(original)`, a Python function, in place of `owner.attr`: patch_attribute for
    a replacement built by hand (or by ranged_function). It takes the original's name,
    qualname, module, doc, attributes and `__wrapped__` (functools.update_wrapper) and the
    mark, so that nothing replaces it twice; static and class methods keep their kind (`make`
    gets the function inside). A class member that is no Python function (a builtin method, a
    callable object) is refused: a function in its place would bind where it did not. None
    when done, else why not."""
    import functools

    def build(func: Any) -> Any:
        new = make(func)
        if type(new) is not types.FunctionType:
            raise TypeError(f"a replacement must be a Python function, got {type(new).__name__}")
        functools.update_wrapper(new, func)
        new.__dict__[RANGE_MARK] = True
        return new

    return _patch(owner, attr, build, written, function_only=True)


def _patch(
    owner: Any,
    attr: str,
    build: Callable[[Any], Any],
    written: list[tuple[Any, str, Any, Any]] | None,
    *,
    function_only: bool,
) -> str | None:
    import inspect

    # The raw entry, never getattr: static and class methods keep their kind (wrapt's rule).
    if isinstance(owner, (type, types.ModuleType)) and attr in vars(owner):
        raw = vars(owner)[attr]
    else:
        raw = inspect.getattr_static(owner, attr)
    rewrap: Any = None
    func = raw
    if isinstance(raw, (staticmethod, classmethod)):
        func, rewrap = raw.__func__, type(raw)
    if is_marked(func):
        return "already wrapped"
    if not callable(func):
        return f"not wrapped (not callable: {type(func).__name__})"
    if function_only and rewrap is None and isinstance(owner, type) and type(func) is not types.FunctionType:
        return f"not wrapped (a {type(func).__name__}, not a Python function)"
    new = build(func)
    if rewrap is not None:
        new = rewrap(new)
    if isinstance(owner, type):
        holder: Any = owner
        type.__setattr__(owner, attr, new)
    elif isinstance(owner, types.ModuleType):
        holder = _module_dict(owner)
        holder[attr] = new
    else:
        setattr(owner, attr, new)
        return None  # an instance's attribute: not restorable through its class
    if written is not None:
        written.append((holder, attr, raw, new))
    return None


def _never() -> bool:
    return False


def ranged_function(
    func: Callable[..., Any],
    emitter_for: EmitterChooser,
    *,
    skip_if: Callable[[], bool] | None = None,
    on_error: ErrorHandler | None = None,
) -> Callable[..., Any]:
    """A plain Python function calling `func` inside the range `emitter_for` chooses for each
    call (None: no range). `skip_if()`, checked first, calls `func` directly when true.

    A function, not a wrapt proxy: compilers that trace Python inline it as they would the
    original (torch.compile folds `torch.compiler.is_compiling` given as `skip_if` to a
    constant, so nothing of the range enters its graph: no graph break; TensorFlow's autograph
    decides whether to convert it by the module name it takes from the original, as it
    decided for the original: autograph's conversion.is_allowlisted). Install it with
    replace_attribute, which names it after `func`. For a function that returns a generator or
    coroutine the range covers the call that creates it."""
    skip = _never if skip_if is None else skip_if

    def ranged(*args: Any, **kwargs: Any) -> Any:
        if skip():
            return func(*args, **kwargs)
        try:
            emitter = emitter_for(args, kwargs)
        except Exception as exc:  # choosing a range never breaks the call: none then
            if on_error is not None:
                on_error(exc)
            emitter = None
        if emitter is None:
            return func(*args, **kwargs)
        emitter.push()
        try:
            return func(*args, **kwargs)
        finally:
            emitter.pop()

    return ranged


def choosing_wrapper(emitter_for: EmitterChooser, on_error: ErrorHandler | None = None) -> ranges.Wrapper:
    """The wrapt wrapper callable of a range chosen per call by `emitter_for` (see
    ranged_function), for a RangeWrapper (patch_attribute, ranged_proxy)."""

    def call(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        try:
            emitter = emitter_for(args if instance is None else (instance, *args), kwargs)
        except Exception as exc:  # choosing a range never breaks the call: none then
            if on_error is not None:
                on_error(exc)
            emitter = None
        if emitter is None:
            return wrapped(*args, **kwargs)
        emitter.push()
        try:
            return wrapped(*args, **kwargs)
        finally:
            emitter.pop()

    return call


def ranged_proxy(value: Any, emitter_for: EmitterChooser, on_error: ErrorHandler | None = None) -> RangeWrapper:
    """`value` (any callable object) in a RangeWrapper whose calls get the range `emitter_for`
    chooses: everything else the object offers (its attributes, methods, binding) goes straight
    to it, and it pickles and copies as it does (a callable a framework hands out, which must
    stay that object to the program: JAX's jitted functions)."""
    return RangeWrapper.for_function(value, choosing_wrapper(emitter_for, on_error))
