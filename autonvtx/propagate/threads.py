"""Python thread names as OS thread names (what Nsight Systems shows) and NVTX thread names."""

from __future__ import annotations

import _thread
import os
import sys

from autonvtx import environment

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

# Linux keeps 15 bytes of a thread name (TASK_COMM_LEN is 16 with the NUL): prctl(2).
OS_NAME_BYTES = 15

# Python 3.14 names OS threads itself when they start (gh-59705, `_thread.set_name`).
_PYTHON_NAMES_OS_THREADS = hasattr(_thread, "set_name")
_CAN_NAME_OS_THREADS = sys.platform.startswith("linux")

_original_bootstrap_inner: Callable[[threading.Thread], None] | None = None
_original_name: property | None = None
_fork_hook_registered = False
# Whether names also go to NVTX: decided once, at install (after `autonvtx run` attached the
# recorder), so a program that later drops NVTX_INJECTION64_PATH from its environment (to keep
# its own children unprofiled) still has its threads named in this process's recording.
_names_to_nvtx = False


def install() -> None:
    """Name every thread as it starts, again when `thread.name` changes, and the ones alive now.

    The main thread gets only its NVTX name: its OS name is the process's name (what `ps`,
    `top` and `pkill` see), which Python leaves alone too. In a process that has not imported
    `threading` yet, this happens right after it is imported (`ThreadingFinder`): no Thread
    can start before, and a program that never imports it does not pay for it (start-up).
    """
    global _names_to_nvtx
    if _original_bootstrap_inner is not None or _finder in sys.meta_path:
        return
    _names_to_nvtx = environment.is_tool_configured()  # else no tool would see the names
    threading = sys.modules.get("threading")
    if threading is None:
        sys.meta_path.insert(0, _finder)
        # The main thread's NVTX name now, as threading will call it (only threading renames it).
        _name_for_nvtx(_thread.get_native_id(), _main_thread_name("MainThread"))
    else:
        _patch(threading)


def _patch(threading: ModuleType) -> None:
    global _original_bootstrap_inner, _original_name, _fork_hook_registered
    thread_class: Any = threading.Thread
    _original_bootstrap_inner = thread_class._bootstrap_inner
    _original_name = thread_class.__dict__["name"]
    thread_class._bootstrap_inner = _bootstrap_inner
    thread_class.name = property(_original_name.fget, _set_name, doc=_original_name.__doc__)
    if not _fork_hook_registered:
        # A fork child's recorder forgets the parent's thread names (they name other threads).
        os.register_at_fork(after_in_child=_after_fork)
        _fork_hook_registered = True
    for thread in threading.enumerate():
        if thread.native_id is not None:
            name_thread(thread, thread.native_id)


def uninstall() -> None:
    """Stop naming threads; names already given stay."""
    global _original_bootstrap_inner, _original_name
    _stop_watching()
    if _original_bootstrap_inner is None or _original_name is None:
        return
    thread_class: Any = sys.modules["threading"].Thread
    thread_class._bootstrap_inner = _original_bootstrap_inner
    thread_class.name = _original_name
    _original_bootstrap_inner = _original_name = None


def is_installed() -> bool:
    """Whether threads are named: patched, or waiting for `threading` to be imported."""
    return _original_bootstrap_inner is not None or _finder in sys.meta_path


class ThreadingFinder:
    """First on sys.meta_path while `threading` is not imported: when it is, takes its real spec
    from the finders after it and chains its loader, so that naming is installed right after
    `threading` executed; then leaves sys.meta_path."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> ModuleSpec | None:
        if fullname != "threading":
            return None
        _stop_watching()
        from importlib.util import find_spec  # imported by the runner already

        spec = find_spec(fullname)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        from autonvtx.importer import InstrumentingLoader

        spec.loader = InstrumentingLoader(spec.loader, _patch, _not_patched)  # type: ignore[assignment]
        return spec

    def invalidate_caches(self) -> None:
        pass


def _not_patched(name: str, why: str) -> None:
    pass  # `threading` replaced itself in sys.modules: nothing to name threads through


def _stop_watching() -> None:
    from autonvtx.importer import remove_finder

    remove_finder(_finder)


_finder = ThreadingFinder()


def name_thread(thread: threading.Thread, tid: int) -> None:
    """Give OS thread `tid` the Python name of `thread`; never raises."""
    name = thread.name
    try:
        if thread is not sys.modules["threading"].main_thread():  # imported: `thread` is its
            set_os_thread_name(tid, name)
        else:
            name = _main_thread_name(name)
    except Exception:  # a name is a nicety: never break the program's thread
        pass
    _name_for_nvtx(tid, name)


def _main_thread_name(name: str) -> str:
    """The main thread's NVTX name, with the process's rank in a distributed job ("rank 1: MainThread")."""
    from autonvtx.ranks import detect_rank, label_thread_with_rank

    return label_thread_with_rank(name, detect_rank())


def _name_for_nvtx(tid: int, name: str) -> None:
    try:
        if _names_to_nvtx:  # ranges (the NVTX client) is loaded only then: start-up, issue 6
            from autonvtx.ranges import name_thread as name_nvtx_thread

            name_nvtx_thread(tid, name)
    except Exception:  # a name is a nicety: never break the program's thread
        pass


def set_os_thread_name(tid: int, name: str) -> None:
    """Write the name the kernel keeps for thread `tid` of this process (truncated to 15 bytes)."""
    if not _CAN_NAME_OS_THREADS or _PYTHON_NAMES_OS_THREADS:
        return
    # /proc/self/task/<tid>/comm names any thread of this process (proc(5)), where
    # pthread_setname_np would need the thread's pthread_t and ctypes.
    try:
        with open(f"/proc/self/task/{tid}/comm", "wb", buffering=0) as comm:
            comm.write(os_thread_name(name))
    except OSError:
        pass  # the thread ended meanwhile, or /proc is not mounted


def os_thread_name(name: str) -> bytes:
    """`name` as the kernel can keep it: UTF-8, cut to 15 bytes on a character boundary."""
    encoded = name.encode("utf-8", "replace")[:OS_NAME_BYTES]
    return encoded.decode("utf-8", "ignore").encode("utf-8")


def _bootstrap_inner(self: threading.Thread) -> None:
    # Runs first in the new thread: its ranges then already carry its name.
    name_thread(self, _thread.get_native_id())
    assert _original_bootstrap_inner is not None
    _original_bootstrap_inner(self)


def _set_name(self: threading.Thread, name: str) -> None:
    assert _original_name is not None and _original_name.fset is not None
    _original_name.fset(self, name)
    tid = self.native_id
    if tid is not None and self.is_alive():
        name_thread(self, tid)


def _after_fork() -> None:
    if _original_bootstrap_inner is None:
        return
    current = sys.modules["threading"].current_thread()
    name_thread(current, _thread.get_native_id())
