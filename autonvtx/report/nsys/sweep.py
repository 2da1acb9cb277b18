"""Attribute GPU work to NVTX ranges in one time-ordered pass over ranges and launches."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import add
from typing import TYPE_CHECKING, Any

from autonvtx.report.figures import KernelShare, Row, Work
from autonvtx.report.nsys.export import (
    LaunchJoin,
    LaunchRow,
    NsysExport,
    Query,
    RangeRow,
    ReportError,
    ThreadFilter,
    damaged,
    native_sweep_module,
)

if TYPE_CHECKING:
    from autonvtx.report.nsys.labels import Labels


# The sweep in C (report/nsys/_native/sweep.c), reading the export itself; None where it is
# missing: `Sweep` below is its twin and runs then.
native = native_sweep_module()

# Up to this many NVTX events (ranges), or runtime calls and GPU work rows (launches), the native
# sweep reads them whole and orders them itself (about 50 bytes each): SQLite's sorter and
# join cost more.
WHOLE_AT_MOST = 1_000_000

# A range instance while it is open: [end, start, node, work], work None until GPU work is
# launched inside it (most ranges launch none), then [gpu first start, gpu last end, kernels,
# kernel ns, memcpys, memcpy bytes, memcpy ns, memsets, memset bytes, memset ns], covering
# itself and, once they end, the ranges it encloses.
_END, _START, _NODE, _W = 0, 1, 2, 3
_GMIN, _GMAX, _WORK = 0, 1, 2
WORK_FIELDS = ("kernels", "kernel_ns", "memcpy", "memcpy_bytes", "memcpy_ns", "memset", "memset_bytes", "memset_ns")
_NWORK = len(WORK_FIELDS)
# Per kind (kernel, memcpy, memset): where its count, bytes (or -1) and ns live in the work.
_SLOTS = ((0, -1, 1), (2, 3, 4), (5, 6, 7))

# A tree node's totals: instances, CPU ns, GPU span ns, then the work fields (inclusive).
INSTANCES, CPU_NS, SPAN_NS, WORK = 0, 1, 2, 3
# How many kernels a row names: those that took the most GPU time (views.build_rows).
TOP_KERNELS = 5


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
    # The rows per name (views.build_rows's), where the native sweep made them from its own
    # tables (sweep_export(rows=True)); None: build_rows makes them from the fields above. Where
    # they were made and only they were asked for (rows_only), the per-node lists (parent, key,
    # group, shadowed, start_end, totals), self_kernels and repeated are left empty: no tree.
    rows: list[Row] | None = field(default=None, compare=False, repr=False)

    def merge(self, other: Tally) -> None:
        """Add another sweep's tally (of other threads) into this one, node for node."""
        key_ids = {pair: i for i, pair in enumerate(self.keys)}
        index = {(self.parent[n], self.key[n], self.group[n], self.start_end[n]): n for n in range(len(self.parent))}
        mapped: list[int] = []
        for node in range(len(other.parent)):
            key = other.key[node]
            if key >= 0:
                pair = other.keys[key]
                key = key_ids.get(pair, -1)
                if key < 0:
                    key = key_ids[pair] = len(self.keys)
                    self.keys.append(pair)
            parent = mapped[other.parent[node]] if other.parent[node] >= 0 else -1
            slot = (parent, key, other.group[node], other.start_end[node])
            mine = index.get(slot)
            if mine is None:
                mine = index[slot] = self.add_node(
                    parent, key, other.group[node], other.shadowed[node], other.start_end[node]
                )
            mapped.append(mine)
            self.totals[mine] = [a + b for a, b in zip(self.totals[mine], other.totals[node])]
        for (node, kernel), (count, ns) in other.self_kernels.items():
            seen = self.self_kernels.setdefault((mapped[node], kernel), [0, 0])
            seen[0] += count
            seen[1] += ns
        for node, work in other.repeated.items():
            self.repeated[mapped[node]] = [a + b for a, b in zip(self.repeated.get(mapped[node], [0] * _NWORK), work)]
        for group, work in other.outside.items():
            self.outside[group] = [a + b for a, b in zip(self.outside.get(group, [0] * _NWORK), work)]
        self.launched = [a + b for a, b in zip(self.launched, other.launched)]
        self.misnested += other.misnested
        self.rows = None  # the merged tally's rows are build_rows's

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
        self.stack: list[list[Any]] = []  # open push/pop range instances, outermost first
        self.names: dict[int, int] = {}  # key id -> how many instances of it the stack holds
        self.active: list[list[Any]] = []  # start/end ranges (need not nest)
        self.root = root
        self.group = group


class Sweep:
    """Walks ranges (by start) and launches (by call start) of every thread together."""

    def __init__(
        self, group_of: Callable[[int], str], rename: Callable[[str], str] | None = None, only_with_work: bool = False
    ) -> None:
        self.tally = Tally()
        self._group_of = group_of
        self._rename = rename
        self._only_with_work = only_with_work
        self._threads: dict[int, _Thread] = {}
        self._roots: dict[str, int] = {}
        self._key_ids: dict[tuple[int, str], int] = {}
        self._nodes: dict[tuple[int, int, str | None], int] = {}

    def run(self, ranges: Iterable[RangeRow], launches: Iterable[LaunchRow]) -> Tally:
        # The range loop is written out in one function: it runs once per NVTX range, millions
        # of times on a large export, and each method call would cost as much as its body.
        launch_iter: Iterator[LaunchRow] = iter(launches)
        launch = self._launch
        w = next(launch_iter, None)
        threads = self._threads
        nodes = self._nodes
        tally = self.tally
        node_key = tally.key
        totals = tally.totals
        key_ids = self._key_ids
        rename = self._rename
        finish = self._finish
        only_with_work = self._only_with_work
        blank = [0] * (WORK + _NWORK)
        keys, parents, groups, shadows, start_ends = (
            tally.keys,
            tally.parent,
            tally.group,
            tally.shadowed,
            tally.start_end,
        )
        for global_tid, start, end, start_end, domain, name in ranges:
            # A range that starts when a call starts encloses it: launches strictly before go first.
            while w is not None and w[1] < start:
                launch(w)
                w = next(launch_iter, None)
            thread = threads.get(global_tid)
            if thread is None:
                thread = self._thread(global_tid)
            if rename is not None and name:
                name = rename(name)
            if start_end:
                self._start_end(thread, start, end, domain, name)
                continue
            stack = thread.stack
            while stack and stack[-1][0] < start:
                done = stack.pop()
                thread.names[node_key[done[2]]] -= 1
                if done[3] is None and not only_with_work:
                    node_totals = totals[done[2]]
                    node_totals[0] += 1
                    node_totals[1] += done[0] - done[1]
                else:
                    finish(done, stack[-1] if stack else None)
            parent = stack[-1][2] if stack else thread.root
            slot = (parent, domain, name)
            node = nodes.get(slot)
            names = thread.names
            if node is None:
                # A new position (with --each, nearly every range): `add_node` written out.
                pair = (domain, name or "")
                key = key_ids.get(pair)
                if key is None:
                    key = key_ids[pair] = len(keys)
                    keys.append(pair)
                node = nodes[slot] = len(node_key)
                parents.append(parent)
                node_key.append(key)
                groups.append(thread.group)
                # Shadowed: an instance of the same name encloses this position (recursion); the
                # position's work is already counted for the name there.
                shadows.append(names.get(key, 0) > 0)
                start_ends.append(False)
                totals.append(blank.copy())
            else:
                key = node_key[node]
            names[key] = names.get(key, 0) + 1
            stack.append([end, start, node, None])
        while w is not None:
            launch(w)
            w = next(launch_iter, None)
        for thread in threads.values():
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
        pair = (domain, name or "")
        key = self._key_ids.get(pair)
        if key is None:
            key = self._key_ids[pair] = len(self.tally.keys)
            self.tally.keys.append(pair)
        return key

    def _start_end(self, thread: _Thread, start: int, end: int, domain: int, name: str | None) -> None:
        # Start/end ranges need not nest with anything: each is a root of its own.
        key = self._key(domain, name)
        slot = (thread.root, -1 - domain, name)  # apart from push/pop ranges of the same name
        node = self._nodes.get(slot)
        if node is None:
            node = self._nodes[slot] = self.tally.add_node(thread.root, key, thread.group, False, True)
        thread.active.append([end, start, node, None])

    def _pop(self, thread: _Thread) -> None:
        instance = thread.stack.pop()
        thread.names[self.tally.key[instance[_NODE]]] -= 1
        self._finish(instance, thread.stack[-1] if thread.stack else None)

    def _finish(self, instance: list[Any], parent: list[Any] | None) -> None:
        """A range ended: fold its work into the range enclosing it and into its tree node."""
        work = instance[_W]
        if work is None and self._only_with_work:
            return
        totals = self.tally.totals[instance[_NODE]]
        totals[INSTANCES] += 1
        totals[CPU_NS] += instance[_END] - instance[_START]
        if work is None:
            return
        totals[SPAN_NS] += work[_GMAX] - work[_GMIN]
        totals[WORK:] = map(add, totals[WORK:], work[_WORK:])
        if parent is None:
            return
        if instance[_END] > parent[_END]:
            self.tally.misnested += 1
        enclosing = parent[_W]
        if enclosing is None:
            parent[_W] = work  # the ended range's list is free: hand it over rather than copy
            return
        enclosing[_WORK:] = map(add, enclosing[_WORK:], work[_WORK:])
        if work[_GMIN] < enclosing[_GMIN]:
            enclosing[_GMIN] = work[_GMIN]
        if work[_GMAX] > enclosing[_GMAX]:
            enclosing[_GMAX] = work[_GMAX]

    def _launch(self, row: LaunchRow) -> None:
        global_tid, at, kind, gpu_start, gpu_end, _device, kernel, size = row
        thread = self._threads.get(global_tid)
        if thread is None:
            thread = self._thread(global_tid)
        stack = thread.stack
        while stack and stack[-1][_END] < at:
            self._pop(thread)
        duration = gpu_end - gpu_start
        count_at, bytes_at, ns_at = _SLOTS[kind]
        _add(self.tally.launched, count_at, bytes_at, ns_at, duration, size)
        if thread.active:
            self._launch_among_start_end(thread, row, duration)
        elif stack:
            self._credit(stack[-1], row, duration, True)
        else:
            self._outside(thread, kind, duration, size)

    def _outside(self, thread: _Thread, kind: int, duration: int, size: int | None) -> None:
        outside = self.tally.outside.get(thread.group)
        if outside is None:
            outside = self.tally.outside[thread.group] = [0] * _NWORK
        count_at, bytes_at, ns_at = _SLOTS[kind]
        _add(outside, count_at, bytes_at, ns_at, duration, size)

    def _credit(self, instance: list[Any], row: LaunchRow, duration: int, top_kernel: bool) -> None:
        """Work launched inside `instance` (itself, not a range it encloses)."""
        kind, gpu_start, gpu_end, kernel, size = row[2], row[3], row[4], row[6], row[7]
        work = instance[_W]
        if work is None:
            work = instance[_W] = [gpu_start, gpu_end] + [0] * _NWORK
        else:
            if gpu_start < work[_GMIN]:
                work[_GMIN] = gpu_start
            if gpu_end > work[_GMAX]:
                work[_GMAX] = gpu_end
        count_at, bytes_at, ns_at = _SLOTS[kind]
        work[_WORK + count_at] += 1
        work[_WORK + ns_at] += duration
        if bytes_at >= 0:
            work[_WORK + bytes_at] += size or 0
        if kind == 0 and top_kernel:
            slot = (instance[_NODE], kernel)
            seen = self.tally.self_kernels.get(slot)
            if seen is None:
                self.tally.self_kernels[slot] = [1, duration]
            else:
                seen[0] += 1
                seen[1] += duration

    def _launch_among_start_end(self, thread: _Thread, row: LaunchRow, duration: int) -> None:
        """The launch's innermost push/pop range and every open start/end range containing it get it;
        a start/end range whose name already has it keeps it for the tree only."""
        at = row[1]
        stack = thread.stack
        if stack:
            self._credit(stack[-1], row, duration, True)
        still = []
        counted: set[int] = set()
        credited = bool(stack)
        for instance in thread.active:
            if instance[_END] < at:
                self._finish(instance, None)
                continue
            still.append(instance)
            key = self.tally.key[instance[_NODE]]
            repeat = thread.names.get(key, 0) > 0 or key in counted
            counted.add(key)
            credited = True
            self._credit(instance, row, duration, not repeat)
            if repeat:
                repeated = self.tally.repeated.get(instance[_NODE])
                if repeated is None:
                    repeated = self.tally.repeated[instance[_NODE]] = [0] * _NWORK
                count_at, bytes_at, ns_at = _SLOTS[row[2]]
                _add(repeated, count_at, bytes_at, ns_at, duration, row[7])
        thread.active = still
        if not credited:
            self._outside(thread, row[2], duration, row[7])


def _add(into: list[int], count_at: int, bytes_at: int, ns_at: int, duration: int, size: int | None) -> None:
    into[count_at] += 1
    into[ns_at] += duration
    if bytes_at >= 0:
        into[bytes_at] += size or 0


def sweep_export(
    export: NsysExport,
    labels: Labels,
    group_of: Callable[[int], str],
    rename: Callable[[str], str] | None = None,
    only_with_work: bool = False,
    device: int | None = None,
    threads: ThreadFilter = None,
    rows: bool = False,
    rows_only: bool = False,
) -> Tally:
    """The sweep of the export's ranges (domains keyed as `labels` keys them) and launches (on
    `device`, of `threads`): in C where the native part runs, else by `Sweep`; the same Tally
    either way (tests/test_sweep_native.py holds them equal). With `rows`, the native sweep also
    makes the tally's rows per name (`Tally.rows`, as views.build_rows would); with `rows_only`
    besides, a tally with rows holds no nodes (nothing is to make a tree of them)."""
    if native is not None:
        try:  # how many events to size its tables for; a file that fails here fails below as it would
            hint, work = export.size_hint(), export.work_size_hint()
        except ReportError:
            hint = work = 0
        # Rows few enough to hold in memory are ordered (ranges) and joined (launches) in C, the
        # rest by SQLite, whose sorter spills to disk.
        whole = 0 < hint <= WHOLE_AT_MOST
        ranges = export.ranges_query(threads, ordered=not whole)
        launches: Query | LaunchJoin | None = (
            export.launch_join(device, threads) if 0 < work <= WHOLE_AT_MOST else export.launches_query(device, threads)
        )
        try:
            parts = (Row, Work, KernelShare, labels.domain, export.names_of, TOP_KERNELS, rows_only) if rows else None
            fields = native.run(
                export.uri, ranges, launches, group_of, rename, only_with_work, labels.renumbered, hint, parts, whole
            )
        except native.SQLiteError as exc:
            raise damaged(export.path, exc) from None
        if fields is not None:  # None: something the native part leaves to Python (a NULL time, ...)
            return Tally(*fields)
    sweep = Sweep(group_of, rename, only_with_work)
    return sweep.run(labels.ranges_of(export, threads), export.launches(device, threads))
