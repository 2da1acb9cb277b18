"""The traceback of an exception the target did not catch, printed as Python prints it, with
autonvtx's own frames (the runner's, the import hook's) cut out: the user sees their program."""

from __future__ import annotations

import os
import sys
import types

# Frames whose code lives here are ours and are cut out of the tracebacks users see.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

_IMPORTLIB_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")

# Status of a process that ends on an unhandled KeyboardInterrupt: CPython kills itself
# with SIGINT (bpo-1054041), which shells report as 128 + 2; we exit with that status.
_KEYBOARD_INTERRUPT_STATUS = 130


def report_uncaught(error: BaseException) -> int:
    """Print ``error`` as PyErr_Print does (Python/pythonrun.c) and return the status."""
    remove_own_frames(error)
    traceback = error.__traceback__
    sys.last_type, sys.last_value, sys.last_traceback = type(error), error, traceback
    if sys.version_info >= (3, 12):
        sys.last_exc = error
    hook = getattr(sys, "excepthook", None)
    sys.audit("sys.excepthook", hook, type(error), error, traceback)
    if hook is None:
        sys.stderr.write("sys.excepthook is missing\n")
        sys.__excepthook__(type(error), error, traceback)
    else:
        try:
            hook(type(error), error, traceback)
        except SystemExit:
            raise
        except BaseException as hook_error:  # noqa: BLE001 - printed as Python prints it
            remove_own_frames(hook_error)
            _flush(sys.stdout)
            sys.stderr.write("Error in sys.excepthook:\n")
            sys.__excepthook__(type(hook_error), hook_error, hook_error.__traceback__)
            sys.stderr.write("\nOriginal exception was:\n")
            sys.__excepthook__(type(error), error, traceback)
    # Only exactly KeyboardInterrupt, as in pythonrun.c (run_eval_code_obj).
    return _KEYBOARD_INTERRUPT_STATUS if type(error) is KeyboardInterrupt else 1


def remove_own_frames(error: BaseException) -> None:
    """Cut our frames out of ``error``'s traceback and those of its chain and group."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if current.__traceback__ is not None:
            current.__traceback__ = _without_own_frames(current.__traceback__)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        pending.extend(getattr(current, "exceptions", ()))


def _without_own_frames(traceback: types.TracebackType) -> types.TracebackType | None:
    entries = []
    entry: types.TracebackType | None = traceback
    while entry is not None:
        entries.append(entry)
        entry = entry.tb_next
    kept: list[types.TracebackType] = []
    index = 0
    while index < len(entries):
        if not _is_own(entries[index]):
            kept.append(entries[index])
            index += 1
            continue
        end = index
        while end < len(entries) and _is_own(entries[end]):
            end += 1
        # Our loader between importlib frames splits the chunk that import.c's
        # remove_importlib_frames drops whole: it dropped the part after us (ending in
        # _call_with_frames_removed), so drop the part before us too.
        follows_import = bool(kept) and _is_importlib(kept[-1])
        trimmed_after = end < len(entries) and not _is_importlib(entries[end])
        if follows_import and trimmed_after and not sys.flags.verbose:
            while kept and _is_importlib(kept[-1]):
                kept.pop()
        index = end
    for outer, inner in zip(kept, kept[1:]):
        outer.tb_next = inner
    if kept:
        kept[-1].tb_next = None
        return kept[0]
    return None


def _is_own(entry: types.TracebackType) -> bool:
    return entry.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR)


def _is_importlib(entry: types.TracebackType) -> bool:
    return entry.tb_frame.f_code.co_filename in _IMPORTLIB_FILES


def flush_std_streams() -> None:
    # pythonrun.c, flush_io: before an error is printed and when the script ends.
    _flush(sys.stderr)
    _flush(sys.stdout)


def _flush(stream: object) -> None:
    try:
        stream.flush()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - Python ignores these too (flush_io)
        pass
