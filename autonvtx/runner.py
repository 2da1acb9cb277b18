"""Run the target script, module or code string exactly as the ``python`` command would."""

from __future__ import annotations
import __future__

import builtins
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import types
import warnings

from autonvtx import tracebacks
from autonvtx.errors import TargetNotFoundError
from autonvtx.values import Value

# Annotations only (typing costs start-up, issue 24); `ast` is imported when the script runs
# statement by statement.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import ast
    from collections.abc import Callable, Mapping
    from typing import Literal, NoReturn

    MainStatementCallback = Callable[[types.ModuleType], object]

_FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag
del _name


class Target(Value):
    """What the user asked to run, as given on the command line."""

    __slots__ = ("kind", "value", "args")
    kind: Literal["script", "module", "code"]
    value: str
    args: tuple[str, ...]

    def __init__(self, kind: Literal["script", "module", "code"], value: str, args: tuple[str, ...] = ()) -> None:
        self._set(kind, value, args)


class ResolvedTarget(Value):
    """A target found and ready to execute; built by :func:`resolve`.

    `argv0` is ``sys.argv[0]`` once the target runs; `filename` the file name its code is
    compiled under (shown in tracebacks); `main_attrs` the attributes Python gives ``__main__``
    beyond those of the interpreter's bare one; `forgets_file`: Python removes
    ``__file__``/``__cached__`` from ``__main__`` when a script ends; `pending_error` was raised
    by the target's own code while finding it (a parent package's import): Python prints it as
    a traceback, so :func:`execute` does too."""

    __slots__ = (
        "target",
        "argv0",
        "filename",
        "main_attrs",
        "source",
        "code",
        "is_pyc",
        "forgets_file",
        "pending_error",
    )
    target: Target
    argv0: str
    filename: str
    main_attrs: Mapping[str, object]
    source: bytes | str | None
    code: types.CodeType | None
    is_pyc: bool
    forgets_file: bool
    pending_error: BaseException | None

    def __init__(
        self,
        target: Target,
        argv0: str,
        filename: str,
        main_attrs: Mapping[str, object],
        source: bytes | str | None = None,
        code: types.CodeType | None = None,
        is_pyc: bool = False,
        forgets_file: bool = False,
        pending_error: BaseException | None = None,
    ) -> None:
        self._set(target, argv0, filename, main_attrs, source, code, is_pyc, forgets_file, pending_error)


def resolve(target: Target) -> ResolvedTarget:
    """Find ``target`` as Python would, after setting ``sys.argv`` and ``sys.path[0]``.

    Raises :class:`TargetNotFoundError` worded as Python words it.  Nothing of the target
    runs, except the parent packages of a ``-m`` module, which Python imports too.
    """
    if target.kind == "code":
        sys.argv = ["-c", *target.args]
        if not _is_safe_path():
            _replace_path0("")
        return ResolvedTarget(target, "-c", "<string>", {}, source=target.value)
    if target.kind == "module":
        sys.argv = ["-m", *target.args]
        if not _is_safe_path():
            _replace_path0(os.getcwd())
        return _resolve_module(target)
    if target.kind == "script":
        sys.argv = [target.value, *target.args]
        return _resolve_script(target)
    raise ValueError(f"unknown target kind {target.kind!r}")


def execute(
    resolved: ResolvedTarget,
    *,
    on_main_statement: MainStatementCallback | None = None,
) -> NoReturn:
    """Run ``resolved`` in a fresh ``__main__``; always ends by raising ``SystemExit``.

    The ``SystemExit`` carries what the interpreter would exit with: the target's own
    ``SystemExit`` unchanged (its code may be ``None``, an int or a message Python prints
    to stderr, so let it propagate rather than reading ``.code``), 0 on success, 1 after
    printing an uncaught exception through ``sys.excepthook``, 130 for ``KeyboardInterrupt``.

    With ``on_main_statement``, the main module's code runs one top-level statement at a
    time and the callback sees the module after each one (the script never passes through
    an import hook, so this is where its functions can be wrapped before they are called).
    """
    error = resolved.pending_error
    main = None
    if error is None:
        main = _fresh_main_module(resolved)
        sys.modules["__main__"] = main
        sys.argv[0] = resolved.argv0
        error = _run_user_code(resolved, main, on_main_statement)
    tracebacks.flush_std_streams()
    status = 0 if error is None else tracebacks.report_uncaught(error)
    global _unhandled_keyboard_interrupt
    _unhandled_keyboard_interrupt = type(error) is KeyboardInterrupt
    del error
    if main is not None and resolved.forgets_file:
        # _PyRun_SimpleFileObject deletes them before atexit handlers run.
        main.__dict__.pop("__file__", None)
        main.__dict__.pop("__cached__", None)
    raise SystemExit(status)


_unhandled_keyboard_interrupt = False


def end_as_python_would() -> None:
    """An exit handler of a run (`start_run` registers it before any other): after an uncaught
    KeyboardInterrupt, have the process end by SIGINT once the interpreter has finalized, as
    CPython does (Modules/main.c, exit_sigint), so a parent sees it killed by SIGINT (-2, a
    shell's 130), not a plain exit status 130. The kill waits for finalization (a C exit hook in
    the native client) because the program's unclosed files are flushed there. Where another
    NVTX tool is attached, or the native client is missing, the exit stays an exit (130): the
    tool's C exit hooks keep the events a signal would lose."""
    if _unhandled_keyboard_interrupt:
        from autonvtx.termination import end_by_sigint_after_finalizing

        end_by_sigint_after_finalizing()


def _resolve_script(target: Target) -> ResolvedTarget:
    path = target.value
    absolute = _abspath(path)
    importer = _path_importer(path)
    if importer is not None:
        # A directory or zip file: Python puts it on sys.path, even under -P, and runs
        # its __main__ module through runpy (Modules/main.c, pymain_run_python).
        if _is_safe_path():
            sys.path.insert(0, absolute)
        else:
            _replace_path0(absolute)
        return _resolve_main_in_path(target, absolute)
    if not _is_safe_path():
        _replace_path0(os.path.dirname(os.path.realpath(path)))
    try:
        with open(absolute, "rb") as file:
            source = file.read()
    except OSError as exc:
        message = f"can't open file {absolute!r}: [Errno {exc.errno}] {os.strerror(exc.errno or 0)}"
        raise TargetNotFoundError(message) from None
    is_pyc = path.endswith(".pyc") or source[:2] == importlib.util.MAGIC_NUMBER[:2]
    loader_class = importlib.machinery.SourcelessFileLoader if is_pyc else importlib.machinery.SourceFileLoader
    attrs = {
        "__file__": absolute,
        "__cached__": None,
        "__loader__": loader_class("__main__", absolute),
    }
    return ResolvedTarget(target, path, absolute, attrs, source=source, is_pyc=is_pyc, forgets_file=True)


def _resolve_main_in_path(target: Target, path0: str) -> ResolvedTarget:
    # runpy._get_main_module_details: hide our own __main__ so find_spec looks on sys.path.
    saved_main = sys.modules.pop("__main__", None)
    try:
        found = _find_module("__main__")
    except TargetNotFoundError as exc:
        if "__main__" in str(exc):
            raise TargetNotFoundError(f"can't find '__main__' module in {path0!r}") from None
        raise
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
    if isinstance(found, BaseException):
        return ResolvedTarget(target, target.value, target.value, {}, pending_error=found)
    spec, code = found
    return ResolvedTarget(target, target.value, code.co_filename, _module_attrs(spec), code=code)


def _resolve_module(target: Target) -> ResolvedTarget:
    found = _find_module(target.value)
    if isinstance(found, BaseException):
        return ResolvedTarget(target, "-m", target.value, {}, pending_error=found)
    spec, code = found
    argv0 = spec.origin or "-m"
    return ResolvedTarget(target, argv0, code.co_filename, _module_attrs(spec), code=code)


def _module_attrs(spec: importlib.machinery.ModuleSpec) -> dict[str, object]:
    # runpy._run_code
    return {
        "__name__": "__main__",
        "__file__": spec.origin,
        "__cached__": spec.cached,
        "__doc__": None,
        "__loader__": spec.loader,
        "__package__": spec.parent,
        "__spec__": spec,
    }


def _find_module(
    name: str,
) -> tuple[importlib.machinery.ModuleSpec, types.CodeType] | BaseException:
    """runpy._get_module_details, with its error messages; returns the exception the
    target's own code raised while being found, for execute to report."""
    if name.startswith("."):
        raise TargetNotFoundError("Relative module names not supported")
    package, _, _ = name.rpartition(".")
    if package:
        try:
            __import__(package)
        except ImportError as exc:
            # A missing parent is reported by find_spec below; anything else is the
            # package's own failure, which Python shows as a traceback.
            if exc.name is None or (exc.name != package and not package.startswith(exc.name + ".")):
                return exc
        except BaseException as exc:  # noqa: BLE001 - the target's own failure
            if isinstance(exc, SystemExit):
                raise
            return exc
        existing = sys.modules.get(name)
        if existing is not None and not hasattr(existing, "__path__"):
            _warn_found_in_sys_modules(name, package)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        message = f"Error while finding module specification for {name!r} ({type(exc).__name__}: {exc})"
        if name.endswith(".py"):
            message += f". Try using '{name[:-3]}' instead of '{name}' as the module name."
        raise TargetNotFoundError(message) from None
    if spec is None:
        raise TargetNotFoundError(f"No module named {name}")
    if spec.submodule_search_locations is not None:
        if name == "__main__" or name.endswith(".__main__"):
            raise TargetNotFoundError("Cannot use package as __main__ module")
        try:
            return _find_module(name + ".__main__")
        except TargetNotFoundError as exc:
            if name not in sys.modules:
                raise
            raise TargetNotFoundError(f"{exc}; {name!r} is a package and cannot be directly executed") from None
    loader = spec.loader
    if loader is None:
        raise TargetNotFoundError(f"{name!r} is a namespace package and cannot be executed")
    try:
        code = loader.get_code(name)  # type: ignore[attr-defined]
    except ImportError as exc:
        raise TargetNotFoundError(str(exc)) from None
    except BaseException as exc:  # noqa: BLE001 - e.g. its SyntaxError, shown as a traceback
        if isinstance(exc, SystemExit):
            raise
        return exc
    if code is None:
        raise TargetNotFoundError(f"No code object available for {name}")
    return spec, code


def _warn_found_in_sys_modules(name: str, package: str) -> None:
    message = (
        f"{name!r} found in sys.modules after import of package {package!r}, but prior "
        f"to execution of {name!r}; this may result in unpredictable behaviour"
    )
    # Attribute it to runpy's line, as Python does, rather than to this file.
    lineno = 1
    try:
        with open(getattr(sys.modules["runpy"], "__file__", "") or "", encoding="utf-8") as file:
            for number, line in enumerate(file, 1):
                if "warn(RuntimeWarning(msg))" in line:
                    lineno = number
                    break
    except (KeyError, OSError):
        pass
    warnings.warn_explicit(RuntimeWarning(message), RuntimeWarning, "<frozen runpy>", lineno, "runpy")


def _fresh_main_module(resolved: ResolvedTarget) -> types.ModuleType:
    """A ``__main__`` like the interpreter's (pylifecycle.c, add_main_module), then
    completed as pythonrun.c (script, ``-c``) or runpy (``-m``, directory, zip) does."""
    main = types.ModuleType("__main__")
    namespace = main.__dict__
    if sys.version_info < (3, 14):
        namespace["__annotations__"] = {}
    namespace["__builtins__"] = builtins
    namespace["__loader__"] = importlib.machinery.BuiltinImporter
    namespace.update(resolved.main_attrs)
    return main


def _run_user_code(
    resolved: ResolvedTarget,
    main: types.ModuleType,
    on_main_statement: MainStatementCallback | None,
) -> BaseException | None:
    """Run the target; return the exception it ended with (``SystemExit`` propagates).

    Exceptions from ``on_main_statement`` are ours, not the target's: they propagate too.
    """
    try:
        codes = _main_codes(resolved, by_statement=on_main_statement is not None)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - e.g. its SyntaxError, reported like Python
        return exc
    for code in codes:
        try:
            exec(code, main.__dict__)
        except SystemExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - the target's failure, reported like Python
            return exc
        if on_main_statement is not None:
            on_main_statement(main)
    return None


def _main_codes(resolved: ResolvedTarget, *, by_statement: bool) -> list[types.CodeType]:
    if by_statement:
        codes = _statement_codes(resolved)
        if codes is not None:
            return codes
    return [_whole_code(resolved)]


def _whole_code(resolved: ResolvedTarget) -> types.CodeType:
    if resolved.code is not None:
        return resolved.code
    if resolved.is_pyc:
        return _pyc_code(resolved)
    assert resolved.source is not None
    return compile_script(resolved.source, resolved.filename)


def compile_script(source: str | bytes, filename: str) -> types.CodeType:
    """`source` compiled as `python` compiles a script: by the native twin where it is built
    (builtins.compile's first call builds every `ast` type, which `python` never does: about
    3 ms of a start-up, issue 24), else by compile() itself, with the same result."""
    try:
        from autonvtx._sourcecode import compile_exec
    except ImportError:  # not built: the same code object, a little later
        pass
    else:
        code = compile_exec(source, filename)
        if code is not NotImplemented:
            return code
    # dont_inherit: this module's own `from __future__ import annotations` must not leak.
    return compile(source, filename, "exec", dont_inherit=True)


def _pyc_code(resolved: ResolvedTarget) -> types.CodeType:
    # pythonrun.c, run_pyc_file: check the magic number, skip the 16-byte header (PEP 552).
    data = resolved.source
    assert isinstance(data, bytes)
    if data[:4] != importlib.util.MAGIC_NUMBER:
        raise RuntimeError("Bad magic number in .pyc file")
    code = marshal.loads(data[16:])
    if not isinstance(code, types.CodeType):
        raise RuntimeError("Bad code object in .pyc file")
    return code


def _statement_codes(resolved: ResolvedTarget) -> list[types.CodeType] | None:
    """One code object per top-level statement, or None when there is no source."""
    source = resolved.source
    if source is None and resolved.code is not None:
        source = _module_source(resolved)
    if source is None or resolved.is_pyc:
        return None
    import ast  # here: a run whose rules do not select __main__ never needs it (start-up)

    filename = resolved.filename
    # compile() rather than ast.parse(), whose frame would show in a SyntaxError's traceback.
    tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    assert isinstance(tree, ast.Module)
    # Compiling the whole module first raises the SyntaxErrors only it can see (a late
    # `from __future__`, `global x` after `x = 1`) before any statement runs; its
    # warnings are left to the per-statement compiles so each is shown once.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = compile(tree, filename, "exec", dont_inherit=True)
    flags = whole.co_flags & _FUTURE_FLAGS
    codes = []
    for index, statement in enumerate(tree.body):
        body: list[ast.stmt] = [statement]
        if index > 0 and _is_docstring_like(statement):
            # Alone in its module a bare string would become __doc__; a `pass` first
            # keeps it an expression statement, as it is in the whole module.
            body = [ast.copy_location(ast.Pass(), statement), statement]
        module = ast.Module(body=body, type_ignores=[])
        codes.append(compile(module, filename, "exec", flags=flags, dont_inherit=True))
    return codes


def _is_docstring_like(statement: ast.stmt) -> bool:
    import ast

    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _module_source(resolved: ResolvedTarget) -> str | None:
    spec = resolved.main_attrs.get("__spec__")
    loader = resolved.main_attrs.get("__loader__")
    get_source = getattr(loader, "get_source", None)
    if spec is None or get_source is None:
        return None
    try:
        source = get_source(spec.name)  # type: ignore[attr-defined]
    except ImportError:
        return None
    return source if isinstance(source, str) else None


def _path_importer(path: str) -> object | None:
    """The sys.path importer for ``path`` (a directory or zip file), as
    PyImport_GetImporter finds it, or None for a plain file."""
    try:
        return sys.path_importer_cache[path]
    except KeyError:
        pass
    for hook in sys.path_hooks:
        try:
            importer = hook(path)
        except ImportError:
            continue
        sys.path_importer_cache.setdefault(path, importer)
        return importer
    return None


def _abspath(path: str) -> str:
    # Python joins, without normalising (Python/fileutils.c, _Py_abspath): `./d/` stays.
    if os.path.isabs(path):
        return path
    return os.getcwd() + os.sep + path


def _is_safe_path() -> bool:
    """``-P``/PYTHONSAFEPATH (and -I, which implies it): leave sys.path alone."""
    if sys.version_info >= (3, 11):
        return bool(sys.flags.safe_path)
    return bool(sys.flags.isolated)


def _replace_path0(path0: str) -> None:
    # sys.path[0] is the entry the interpreter added for autonvtx itself (the console
    # script's bin directory, or the cwd under `python -m autonvtx`): replace it.
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)
