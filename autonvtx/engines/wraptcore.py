"""wrapt's wrapper types without the rest of wrapt: what the wrap engine needs at start-up.

wrapt 2.x's `__init__` imports every feature it has: `wrapt.synchronization` imports asyncio
(with ssl, socket, concurrent.futures, logging) and `wrapt.importer` imports importlib.metadata
(with email and zipfile), about 35 ms of CPU on 3.11 where the wrap engine needs only
`FunctionWrapper` and `BoundFunctionWrapper` (wrapt's `__wrapt__`, its C types). Those load
here with the package's `__init__` held back; `wrapt` is put in sys.modules as that package
with a PEP 562 `__getattr__` that runs the real `__init__` the first time a name it defines is
asked for (`import wrapt; wrapt.decorator`, `from wrapt import ObjectProxy`), so the program's
own `import wrapt` gets all of wrapt, and the same types: a wrapper made here is a
`wrapt.FunctionWrapper` there. wrapt 1.x (whose `__init__` is cheap) is imported as it is.

Also what wrapt's proxy types offer that functions lack, for the wrap engine to take back.
"""

from __future__ import annotations

import _thread
import importlib
import importlib.util
import os
import sys
import types

from autonvtx.forklocks import renewed_in_fork_child

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from typing import Any

# wrapt 2.x's module choosing between its C and Python wrapper types (wrapt 1.x has none).
_CORE = "wrapt.__wrapt__"
# Its C types alone: `__wrapt__` first imports `wrapt.wrappers`, the Python twins, and with them
# `inspect` (about 8 ms of start-up on 3.11, issue 24); the C types are the ones `__wrapt__`
# hands on, unless WRAPT_DISABLE_EXTENSIONS asks for the Python ones.
_C_TYPES = "wrapt._wrappers"
# threading.RLock's, without importing threading (start-up); free again in a fork child
_lock = renewed_in_fork_child(_thread.RLock())


def load_wrapt() -> types.ModuleType:
    """The `wrapt` package, with at least FunctionWrapper and BoundFunctionWrapper usable: the
    whole of wrapt when it is imported already, is 1.x or cannot be held back, else its core."""
    with _lock:
        present = sys.modules.get("wrapt")
        if present is None:
            present = _package_without_init()
        if present is None:
            import wrapt

            return wrapt
        return sys.modules.get(_CORE) or sys.modules.get(_C_TYPES) or present


def _package_without_init() -> types.ModuleType | None:
    """The wrapt package with its core imported and its `__init__` deferred; None for a wrapt
    without a core module (1.x) or one this cannot find as a plain package directory."""
    spec = importlib.util.find_spec("wrapt")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if spec is None or spec.loader is None or len(locations) != 1:
        return None
    if not os.path.isfile(os.path.join(locations[0], "__wrapt__.py")):
        return None
    get_code = getattr(spec.loader, "get_code", None)
    if get_code is None:
        return None
    package = importlib.util.module_from_spec(spec)
    # Completable before anyone can see it: another thread's `import wrapt` gets all of wrapt.
    package.__getattr__ = _completer(package, get_code)  # type: ignore[method-assign]
    sys.modules["wrapt"] = package
    try:
        _import_core()
    except BaseException:
        _forget_partial()
        raise
    return package


def _import_core() -> None:
    if not os.environ.get("WRAPT_DISABLE_EXTENSIONS"):
        try:
            importlib.import_module(_C_TYPES)
            return
        except ImportError:  # a wrapt without its extension: the Python types, through __wrapt__
            pass
    importlib.import_module(_CORE)


def _completer(package: types.ModuleType, get_code: Any) -> Any:
    def __getattr__(name: str) -> Any:
        # First use of a name the package's `__init__` defines: run it now, in the package's
        # own namespace (its submodules already imported are found in sys.modules).
        with _lock:
            namespace = vars(package)
            if namespace.get("__getattr__") is __getattr__:
                del namespace["__getattr__"]
                exec(get_code("wrapt"), namespace)
        if name in namespace:
            return namespace[name]
        raise AttributeError(f"module 'wrapt' has no attribute {name!r}")

    return __getattr__


def _forget_partial() -> None:
    for name in [n for n in sys.modules if n == "wrapt" or n.startswith("wrapt.")]:
        del sys.modules[name]


# Protocol methods wrapt's proxy types define (for whatever object they proxy) that a function
# does not have. Duck-typing code asks for them: torch's context_decorator refuses a callable
# for which hasattr(ctx, "__enter__") holds, and is handed bound methods of wrapped functions.
# Not __getitem__: defined on a class it gives the type a sequence slot, and iter(wrapper)
# would then succeed where iter(function) raises (numpy.iterable, "try: iter(x)" checks).
PROTOCOLS_FUNCTIONS_LACK = (
    "__enter__",
    "__exit__",
    "__aenter__",
    "__aexit__",
    "__bytes__",
    "__len__",
    "__setitem__",
    "__delitem__",
    "__contains__",
    "__reversed__",
    "__int__",
    "__float__",
    "__complex__",
    "__index__",
    "__round__",
    "__trunc__",
    "__floor__",
    "__ceil__",
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


def lacking_what_functions_lack(cls: type) -> type:
    """`cls` (a wrapper type of plain functions) made to lack what functions lack."""
    for name in PROTOCOLS_FUNCTIONS_LACK:
        setattr(cls, name, _Lacking(name))
    return cls
