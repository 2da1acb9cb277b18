"""Attribute GPU work to NVTX ranges in one time-ordered pass over ranges and launches."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from autonvtx.report.export import LaunchRow, RangeRow

# A range instance while it is open: [end, start, node, gpu first start, gpu last end] and then
# the work launched inside it (itself and, once they end, the ranges it encloses):
# kernels, kernel ns, memcpys, memcpy bytes, memcpy ns, memsets, memset bytes, memset ns.
_END, _START, _NODE, _GMIN, _GMAX = 0, 1, 2, 3, 4
_WORK = 5
WORK_FIELDS = ("kernels", "kernel_ns", "memcpy", "memcpy_bytes", "memcpy_ns", "memset", "memset_bytes", "memset_ns")
_NWORK = len(WORK_FIELDS)
# Per kind (kernel, memcpy, memset): where its count, bytes (or -1) and ns live in the work.
_SLOTS = ((0, -1, 1), (2, 3, 4), (5, 6, 7))
_NO_GPU = 1 << 62

# A tree node's totals: instances, CPU ns, GPU span ns, then the work fields (inclusive).
INSTANCES, CPU_NS, SPAN_NS, WORK = 0, 1, 2, 3


@dataclass
class Tally:
    """What the sweep found: a tree of range nodes per group, with their inclusive totals."""

    keys: list[tuple[int, str]] = field(default_factory=list)  # key id -> (domainId, name)
    parent: list[int] = field(default_factory=list)  # node -> parent node (-1: a group root)
    key: list[int] = field(default_factory=list)  # node -> key id (-1: a group root)
    group: list[str] = field(default_factory=list)  # node -> group label
    shadowed: list[bool] = field(default_factory=list)  # node's name already encloses it
    start_end: list[bool] = field(default_factory=list)  # node holds start/end ranges
    totals: list[list[int]] = field(default_factory=list)  # node -> [instances, cpu, span, *work]
    self_kernels: dict[tuple[int, object], list[int]] = field(default_factory=dict)  # (node, kernel) -> [n, ns]
    outside: dict[str, list[int]] = field(default_factory=dict)  # group -> work outside every range
    launched: list[int] = field(default_factory=lambda: [0] * _NWORK)  # all work the sweep saw
    misnested: int = 0  # push/pop ranges that outlived the range enclosing them
    # Work a start/end range's node holds that its name already counted (through a push/pop
    # range of the same name, or another start/end instance): the tree keeps it, rows do not.
    repeated: dict[int, list[int]] = field(default_factory=dict)

    def add_node(self, parent: int, key: int, group: str, shadowed: bool, start_end: bool) -> int:
        self.parent.append(parent)
        self.key.append(key)
        self.group.append(group)
        self.shadowed.append(shadowed)
        self.start_end.append(start_end)
        self.totals.append([0] * (WORK + _NWORK))
        return len(self.parent) - 1


class _Thread:
    """One thread's open ranges: the push/pop stack and the start/end ranges still open."""

    __slots__ = ("stack", "names", "active", "root", "group")

    def __init__(self, root: int, group: str) -> None:
        self.stack: list[list[int]] = []
        self.names: dict[int, int] = {}  # key id -> how many instances of it the stack holds
        self.active: list[list[int]] = []  # start/end ranges (need not nest)
        self.root = root
        self.group = group


class Sweep:
    """Walks ranges (by start) and launches (by call start) of every thread together."""

    def __init__(self, group_of: Callable[[int], str], rename: Callable[[str], str] | None = None,
                 only_with_work: bool = False) -> None:
        self.tally = Tally()
        self._group_of = group_of
        self._rename = rename
        self._only_with_work = only_with_work
        self._threads: dict[int, _Thread] = {}
        self._roots: dict[str, int] = {}
        self._key_ids: dict[tuple[int, str], int] = {}
        self._nodes: dict[tuple[int, int], int] = {}

    def run(self, ranges: Iterable[RangeRow], launches: Iterable[LaunchRow]) -> Tally:
        range_iter: Iterator[RangeRow] = iter(ranges)
        launch_iter: Iterator[LaunchRow] = iter(launches)
        r = next(range_iter, None)
        w = next(launch_iter, None)
        push, launch = self._push, self._launch
        while r is not None and w is not None:
            # A range that starts when a call starts encloses it: ranges go first on ties.
            if r[1] <= w[1]:
                push(r)
                r = next(range_iter, None)
            else:
                launch(w)
                w = next(launch_iter, None)
        while r is not None:
            push(r)
            r = next(range_iter, None)
        while w is not None:
            launch(w)
            w = next(launch_iter, None)
        for thread in self._threads.values():
            while thread.stack:
                self._pop(thread)
            for instance in thread.active:
                self._finish(instance, None)
            thread.active = []
        return self.tally

    def _thread(self, global_tid: int) -> _Thread:
        thread = self._threads.get(global_tid)
        if thread is None:
            group = self._group_of(global_tid)
            root = self._roots.get(group)
            if root is None:
                root = self._roots[group] = self.tally.add_node(-1, -1, group, False, False)
            thread = self._threads[global_tid] = _Thread(root, group)
        return thread

    def _key(self, domain: int, name: str | None) -> int:
        text = name or ""
        if self._rename is not None:
            text = self._rename(text)
        pair = (domain, text)
        key = self._key_ids.get(pair)
        if key is None:
            key = self._key_ids[pair] = len(self.tally.keys)
            self.tally.keys.append(pair)
        return key

    def _node(self, parent: int, key: int, group: str, shadowed: bool, start_end: bool) -> int:
        node = self._nodes.get((parent, key))
        if node is None:
            node = self._nodes[(parent, key)] = self.tally.add_node(parent, key, group, shadowed, start_end)
        return node

    def _push(self, row: RangeRow) -> None:
        global_tid, start, end, start_end, domain, name = row
        thread = self._thread(global_tid)
        key = self._key(domain, name)
        instance = [end, start, 0, _NO_GPU, -1] + [0] * _NWORK
        if start_end:
            # Start/end ranges need not nest with anything: each is a root of its own.
            instance[_NODE] = self._node(thread.root, key, thread.group, False, True)
            thread.active.append(instance)
            return
        stack = thread.stack
        while stack and stack[-1][_END] < start:
            self._pop(thread)
        parent = stack[-1][_NODE] if stack else thread.root
        names = thread.names
        depth = names.get(key, 0)
        instance[_NODE] = self._node(parent, key, thread.group, depth > 0, False)
        names[key] = depth + 1
        stack.append(instance)

    def _pop(self, thread: _Thread) -> None:
        instance = thread.stack.pop()
        key = self.tally.key[instance[_NODE]]
        thread.names[key] -= 1
        parent = thread.stack[-1] if thread.stack else None
        if parent is not None and instance[_END] > parent[_END]:
            self.tally.misnested += 1
        self._finish(instance, parent)

    def _finish(self, instance: list[int], parent: list[int] | None) -> None:
        """A range ended: fold its work into the range enclosing it and into its tree node."""
        has_work = instance[_GMAX] >= 0
        if parent is not None and has_work:
            for i in range(_WORK, _WORK + _NWORK):
                parent[i] += instance[i]
            if instance[_GMIN] < parent[_GMIN]:
                parent[_GMIN] = instance[_GMIN]
            if instance[_GMAX] > parent[_GMAX]:
                parent[_GMAX] = instance[_GMAX]
        if self._only_with_work and not has_work:
            return
        totals = self.tally.totals[instance[_NODE]]
        totals[INSTANCES] += 1
        totals[CPU_NS] += instance[_END] - instance[_START]
        if has_work:
            totals[SPAN_NS] += instance[_GMAX] - instance[_GMIN]
            for i in range(_NWORK):
                totals[WORK + i] += instance[_WORK + i]

    def _launch(self, row: LaunchRow) -> None:
        global_tid, at, kind, gpu_start, gpu_end, _device, kernel, size = row
        thread = self._thread(global_tid)
        stack = thread.stack
        while stack and stack[-1][_END] < at:
            self._pop(thread)
        targets = [stack[-1]] if stack else []
        repeats: list[list[int]] = []
        if thread.active:
            still = []
            counted: set[int] = set()
            for instance in thread.active:
                if instance[_END] < at:
                    self._finish(instance, None)
                    continue
                still.append(instance)
                key = self.tally.key[instance[_NODE]]
                if thread.names.get(key, 0) > 0 or key in counted:
                    repeats.append(instance)
                counted.add(key)
                targets.append(instance)
            thread.active = still
        duration = gpu_end - gpu_start
        count_at, bytes_at, ns_at = _SLOTS[kind]
        launched = self.tally.launched
        launched[count_at] += 1
        launched[ns_at] += duration
        if bytes_at >= 0:
            launched[bytes_at] += size or 0
        if not targets:
            outside = self.tally.outside.get(thread.group)
            if outside is None:
                outside = self.tally.outside[thread.group] = [0] * _NWORK
            outside[count_at] += 1
            outside[ns_at] += duration
            if bytes_at >= 0:
                outside[bytes_at] += size or 0
            return
        for instance in targets:
            instance[_WORK + count_at] += 1
            instance[_WORK + ns_at] += duration
            if bytes_at >= 0:
                instance[_WORK + bytes_at] += size or 0
            if gpu_start < instance[_GMIN]:
                instance[_GMIN] = gpu_start
            if gpu_end > instance[_GMAX]:
                instance[_GMAX] = gpu_end
            if kind == 0 and not any(instance is repeat for repeat in repeats):
                slot = (instance[_NODE], kernel)
                seen = self.tally.self_kernels.get(slot)
                if seen is None:
                    self.tally.self_kernels[slot] = [1, duration]
                else:
                    seen[0] += 1
                    seen[1] += duration
        for instance in repeats:
            repeated = self.tally.repeated.get(instance[_NODE])
            if repeated is None:
                repeated = self.tally.repeated[instance[_NODE]] = [0] * _NWORK
            repeated[count_at] += 1
            repeated[ns_at] += duration
            if bytes_at >= 0:
                repeated[bytes_at] += size or 0
