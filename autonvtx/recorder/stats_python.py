"""The Python oracle twin of the native exporter's statistics (`_native/export.c`): the same rows.

`summarize` computes the statistics model (`stats.RangeStats`) from recordings read back into
memory, for saved traces (`summary`, `report`, `diff`); the exporter computes them while it
streams a run's files. Tests hold the two equal, row for row (pyinstrument keeps its C
modules and their Python twins side by side the same way). Arrangement (sort, filter, cut)
is the model's own, `stats.arrange`, shared by both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from autonvtx.recorder.model import ProcessRecording, Range
from autonvtx.recorder.stats import RangeStats, ViewOptions, arrange, class_name, group_title, row_naming

_Key = tuple[str, ...]  # (domain, name) per level: a flat row has one level, a tree row its path


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
    groups: dict[str, list[tuple[_Key, Range, int]]] = {}
    spans: dict[str, tuple[int, int]] = {}  # the time each group's counted instances span (no warm-up)
    for rec in recordings:
        for r, self_ns, key, kept in _skip_first(_instances(rec.ranges, fold, options.tree), options.skip_first, warms):
            if not kept:
                continue
            title = group_title(options.by, rec, r.tid if options.by == "thread" else 0)
            first, last = spans.get(title, (r.start_ns, r.end_ns))
            spans[title] = (min(first, r.start_ns), max(last, r.end_ns))
            groups.setdefault(title, []).append((key, r, self_ns))
    rows: list[RangeStats] = []
    grand_total = sum(r.end_ns - r.start_ns for entries in groups.values() for _, r, _ in entries)
    for title, entries in groups.items():
        wall = spans[title][1] - spans[title][0]
        by_key: dict[_Key, list[tuple[Range, int]]] = {}
        for key, r, self_ns in entries:
            by_key.setdefault(key, []).append((r, self_ns))
        for key, instances in by_key.items():
            rows.append(_stats(key, instances, grand_total, wall, title))
    return arrange(rows, options)


def _skip_first(
    instances: list[tuple[Range, int, _Key]], count: int, named: Callable[[str], str]
) -> list[tuple[Range, int, _Key, bool]]:
    """Each instance, and whether it counts: each range's first `count` instances on each thread
    under its parent row (its warm-up, by start) do not; by `named` range name (`step {n}`'s
    first steps unless --each), not by the class row that --group class folds it into, as the
    native exporter counts them."""
    seen: dict[tuple[int, _Key, str, str], int] = {}
    marked = []
    for r, self_ns, key in sorted(instances, key=lambda item: item[0].start_ns) if count else instances:
        which = (r.tid, key[:-2], r.domain, named(r.name))
        seen[which] = seen.get(which, 0) + 1
        marked.append((r, self_ns, key, seen[which] > count))
    return marked


def _instances(ranges: Sequence[Range], fold: Callable[[str], str], tree: bool) -> list[tuple[Range, int, _Key]]:
    """Each range with its self time and its row key (its path from the outermost range in a tree)."""
    result: list[tuple[Range, int, _Key]] = []
    pushes: list[Range] = []
    for r in ranges:
        if r.kind == "push":
            pushes.append(r)
        else:
            result.append((r, r.end_ns - r.start_ns, (r.domain, fold(r.name))))
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
        own: _Key = (r.domain, fold(r.name))
        if stack:
            parent, parent_end = stack[-1]
            # Push/pop ranges on one thread nest by construction; clip anyway, so a
            # damaged recording yields odd numbers rather than negative self times.
            child_ns[parent] += (end if end < parent_end else parent_end) - start
            if tree:
                own = keys[parent] + own
        keys.append(own)
        stack.append((index, end))
    for r, children, key in zip(pushes, child_ns, keys):
        own_ns = r.end_ns - r.start_ns - children
        result.append((r, own_ns if own_ns > 0 else 0, key))
    return result


def _stats(key: _Key, instances: list[tuple[Range, int]], grand_total: int, wall: int, group: str) -> RangeStats:
    durations = sorted(r.end_ns - r.start_ns for r, _ in instances)
    count = len(durations)
    total = sum(durations)
    middle = count // 2
    median = float(durations[middle]) if count % 2 else (durations[middle - 1] + durations[middle]) / 2
    stddev = 0.0
    if count > 1:
        # Exact integer sums: float accumulation over millions of values drifts.
        spread = count * sum(d * d for d in durations) - total * total
        stddev = math.sqrt(spread / (count * (count - 1)))
    labels = [f"{key[i]}:{key[i + 1]}" if key[i] else key[i + 1] for i in range(0, len(key), 2)]
    return RangeStats(
        domain=key[-2],
        name=key[-1],
        count=count,
        total_ns=total,
        self_ns=sum(s for _, s in instances),
        mean_ns=total / count,
        median_ns=median,
        min_ns=durations[0],
        max_ns=durations[-1],
        stddev_ns=stddev,
        percent=100.0 * total / grand_total if grand_total else 0.0,
        open_count=sum(1 for r, _ in instances if r.is_open),
        wall_percent=100.0 * total / wall if wall > 0 else 0.0,
        group=group,
        depth=len(labels) - 1 if len(key) > 2 else 0,
        path=" > ".join(labels) if len(key) > 2 else "",
    )
