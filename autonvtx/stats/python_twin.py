"""The Python oracle twin of the native exporter's statistics (`_native/export.c`): the same rows.

`summarize` computes the statistics model (`stats.RangeStats`) from recordings read back into
memory, for saved traces (`summary`, `report`, `diff`); the exporter computes them while it
streams a run's files. Tests hold the two equal, row for row (pyinstrument keeps its C
modules and their Python twins side by side the same way). Arrangement (sort, filter, cut)
is the model's own (`stats.view.arrange` with `stats.model.row_order`), shared by both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.stats.model import RangeStats, ViewOptions, class_name, group_title, row_naming, row_order
from autonvtx.stats.view import arrange

_Key = int  # a row's id in `_Rows`: its (parent row, domain, name)


class _Rows:
    """Row keys as small ids, each (parent row or -1, domain, name): a tree row's key is its path
    from the outermost range, held without copying the path (a recursion thousands of levels
    deep would otherwise key each row by a tuple as long as its depth)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, str, str], int] = {}
        self.keys: list[tuple[int, str, str]] = []
        self.depths: list[int] = []
        self.paths: dict[int, str] = {}

    def id(self, parent: int, domain: str, name: str) -> int:
        entry = (parent, domain, name)
        found = self.ids.get(entry)
        if found is None:
            found = self.ids[entry] = len(self.keys)
            self.keys.append(entry)
            self.depths.append(self.depths[parent] + 1 if parent >= 0 else 0)
        return found

    def parent(self, key: int) -> int:
        return self.keys[key][0]

    def depth(self, key: int) -> int:
        return self.depths[key]

    def path(self, key: int) -> str:
        """``outer > inner``, built on the parent's path (remembered): one join a level."""
        missing = []
        while key >= 0 and key not in self.paths:
            missing.append(key)
            key = self.keys[key][0]
        for item in reversed(missing):
            parent, domain, name = self.keys[item]
            own = f"{domain}:{name}" if domain else name
            self.paths[item] = f"{self.paths[parent]} > {own}" if parent >= 0 else own
        return self.paths[missing[0]] if missing else self.paths[key]


def summarize(recordings: Iterable[ProcessRecording], options: ViewOptions = ViewOptions()) -> list[RangeStats]:
    """Statistics over all ranges, per group, arranged as `options` say (largest total first).

    Self time subtracts the time of the push/pop ranges nested directly inside a push/pop
    range on the same thread, whatever their domain. Start/end ranges may overlap anything
    and cross threads, so they neither have children nor count as one. Unless `options.each`,
    names that differ only in their numbers share a row (`stats.name_template`): its figures are
    over every instance of every such name, as the native exporter counts them.
    """
    named = row_naming(options.each)
    fold = (lambda name: class_name(named(name))) if options.group == "class" else named
    # Whose warm-up --skip-first leaves out: the row's (`step {n}`'s first steps), or under
    # --group class each recorded name's (each module its own first calls).
    warms = (lambda name: name) if options.group == "class" else named
    groups: dict[str, list[tuple[_Key, Range, int, bool]]] = {}
    spans: dict[str, tuple[int, int]] = {}  # the time each group's counted instances span (no warm-up)
    table = _Rows()
    for rec in recordings:
        marked = _skip_first(_instances(rec.ranges, fold, options.tree, table), options.skip_first, warms, table)
        kept = [(r, self_ns, key) for r, self_ns, key, counts in marked if counts]
        for (r, self_ns, key), outermost in zip(kept, _outermost(kept)):
            title = group_title(options.by, rec, r.tid if options.by == "thread" else 0)
            first, last = spans.get(title, (r.start_ns, r.end_ns))
            spans[title] = (min(first, r.start_ns), max(last, r.end_ns))
            groups.setdefault(title, []).append((key, r, self_ns, outermost))
    rows: list[RangeStats] = []
    for title, entries in groups.items():
        wall = spans[title][1] - spans[title][0]
        # Time % within the group, as % Wall is: each --by table stands on its own.
        grand_total = sum(r.end_ns - r.start_ns for _, r, _, outer in entries if outer)
        by_key: dict[_Key, list[tuple[Range, int, bool]]] = {}
        for key, r, self_ns, outermost in entries:
            by_key.setdefault(key, []).append((r, self_ns, outermost))
        for key, instances in by_key.items():
            rows.append(_stats(key, table, instances, grand_total, wall, title, options.tree))
    return arrange(rows, options.view, row_order(options.sort))


def _outermost(instances: Sequence[tuple[Range, int, _Key]]) -> list[bool]:
    """Per counted instance: whether its time is its row's, i.e. no counted push/pop instance of
    the same row encloses it on its thread. A recursive range's time then counts once in its
    Total (as cProfile's cumulative time does, and as a report on an Nsight Systems export
    counts it); start/end ranges may overlap on purpose (concurrent work) and each counts."""
    result = [True] * len(instances)
    pushes = sorted(
        (i for i, (r, _, _) in enumerate(instances) if r.kind == "push"),
        key=lambda i: (instances[i][0].tid, instances[i][0].start_ns, -instances[i][0].end_ns),
    )
    stack: list[tuple[int, _Key]] = []  # (end, row key) of the enclosing counted instances
    open_rows: dict[_Key, int] = {}
    previous_tid: int | None = None
    for i in pushes:
        r, _, key = instances[i]
        if r.tid != previous_tid:
            stack.clear()
            open_rows.clear()
            previous_tid = r.tid
        while stack and stack[-1][0] <= r.start_ns:
            open_rows[stack.pop()[1]] -= 1
        result[i] = not open_rows.get(key)
        open_rows[key] = open_rows.get(key, 0) + 1
        stack.append((r.end_ns, key))
    return result


def _skip_first(
    instances: list[tuple[Range, int, _Key]], count: int, named: Callable[[str], str], table: _Rows
) -> list[tuple[Range, int, _Key, bool]]:
    """Each instance, and whether it counts: each range's first `count` instances on each thread
    under its parent row (its warm-up, by start) do not; by `named` range name (`step {n}`'s
    first steps unless --each), not by the class row that --group class folds it into, as the
    native exporter counts them."""
    seen: dict[tuple[int, int, str, str], int] = {}
    marked = []
    # By start, an enclosing range before the ranges it holds (as the exporter meets pushes).
    ordered = sorted(instances, key=lambda item: (item[0].start_ns, -item[0].end_ns)) if count else instances
    for r, self_ns, key in ordered:
        which = (r.tid, table.parent(key), r.domain, named(r.name))
        seen[which] = seen.get(which, 0) + 1
        marked.append((r, self_ns, key, seen[which] > count))
    return marked


def _instances(
    ranges: Sequence[Range], fold: Callable[[str], str], tree: bool, table: _Rows
) -> list[tuple[Range, int, _Key]]:
    """Each range with its self time and its row key (its path from the outermost range in a tree)."""
    result: list[tuple[Range, int, _Key]] = []
    pushes: list[Range] = []
    for r in ranges:
        if r.kind == "push":
            pushes.append(r)
        else:
            result.append((r, r.end_ns - r.start_ns, table.id(-1, r.domain, fold(r.name))))
    # Per thread in start order, parents before their children (the longer first on ties).
    pushes.sort(key=lambda r: (r.tid, r.start_ns, -r.end_ns))
    child_ns = [0] * len(pushes)
    keys: list[_Key] = []
    stack: list[tuple[int, int]] = []  # (index into pushes, end) of the enclosing ranges
    previous_tid: int | None = None
    for index, r in enumerate(pushes):
        if r.tid != previous_tid:
            stack.clear()
            previous_tid = r.tid
        start, end = r.start_ns, r.end_ns
        while stack and stack[-1][1] <= start:
            stack.pop()
        above = -1
        if stack:
            parent, parent_end = stack[-1]
            # Push/pop ranges on one thread nest by construction; clip anyway, so a
            # damaged recording yields odd numbers rather than negative self times.
            child_ns[parent] += (end if end < parent_end else parent_end) - start
            if tree:
                above = keys[parent]
        keys.append(table.id(above, r.domain, fold(r.name)))
        stack.append((index, end))
    for r, children, key in zip(pushes, child_ns, keys):
        own_ns = r.end_ns - r.start_ns - children
        result.append((r, own_ns if own_ns > 0 else 0, key))
    return result


def _stats(
    key: _Key,
    table: _Rows,
    instances: list[tuple[Range, int, bool]],
    grand_total: int,
    wall: int,
    group: str,
    tree: bool,
) -> RangeStats:
    durations = sorted(r.end_ns - r.start_ns for r, _, _ in instances)
    count = len(durations)
    every = sum(durations)
    total = sum(r.end_ns - r.start_ns for r, _, outermost in instances if outermost)
    middle = count // 2
    median = float(durations[middle]) if count % 2 else (durations[middle - 1] + durations[middle]) / 2
    stddev = 0.0
    if count > 1:
        # Exact integer sums: float accumulation over millions of values drifts.
        spread = count * sum(d * d for d in durations) - every * every
        stddev = math.sqrt(spread / (count * (count - 1)))
    _, domain, name = table.keys[key]
    return RangeStats(
        domain=domain,
        name=name,
        count=count,
        total_ns=total,
        self_ns=sum(s for _, s, _ in instances),
        mean_ns=every / count,
        median_ns=median,
        min_ns=durations[0],
        max_ns=durations[-1],
        stddev_ns=stddev,
        percent=100.0 * total / grand_total if grand_total else 0.0,
        open_count=sum(1 for r, _, _ in instances if r.is_open),
        wall_percent=100.0 * total / wall if wall > 0 else 0.0,
        group=group,
        depth=table.depth(key) if tree else 0,
        path=table.path(key) if tree else "",  # an outermost row names itself, as the exporter's do
    )
