"""Locks of ours that a fork child gets fresh.

A fork keeps only the thread that called it: a lock another thread held at that moment stays
held in the child for good, and the child's next use of it (its next import of a target
module, say) waits forever. CPython renews its own locks in the child for the same reason
(threading's _after_fork); these are renewed there too."""

from __future__ import annotations

import os
import weakref

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    Lock = TypeVar("Lock")

_locks: weakref.WeakSet[Any] = weakref.WeakSet()


def renewed_in_fork_child(lock: Lock) -> Lock:
    """`lock` (a `_thread` lock or RLock), made free again in every fork child of this process
    unless the forking thread itself holds it (it releases it as it would have)."""
    _locks.add(lock)
    return lock


def _renew_in_child() -> None:
    for lock in list(_locks):
        owned = getattr(lock, "_is_owned", None)  # an RLock says whether this thread holds it
        if owned is not None and owned():
            continue
        lock._at_fork_reinit()


os.register_at_fork(after_in_child=_renew_in_child)
