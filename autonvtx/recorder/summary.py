"""Range statistics per (domain, name), like ``nsys stats -r nvtx_sum``: rows, options, notes.

The same options shape the rows whether they come from a saved trace (computed here) or from
the native exporter at the end of a run (`results.stats_from_rows`): grouping by process, rank
or thread, folding per-instance names into their class, a call tree with self times, leaving
out each name's first instances (warm-up), then sorting, filtering and cutting. Rendering
lives in `table`.
"""
from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from autonvtx.recorder.model import ProcessRecording, Range

GROUPINGS = ("name", "class")
BY = ("process", "rank", "thread")
SORTS = ("total", "self", "count", "mean", "max")
_CLASS = re.compile(r" \(([^()]+)\)$")
_RANK = re.compile(r"\brank (\d+)\b")


@dataclass(frozen=True)
class RangeStats:
    """Statistics of every range sharing one domain and name, times in nanoseconds."""

    domain: str
    name: str
    count: int
    total_ns: int
    self_ns: int  # total minus the time spent in ranges nested directly inside
    mean_ns: float
    median_ns: float
    min_ns: int
    max_ns: int
    stddev_ns: float  # sample standard deviation (n - 1), as nsys reports it; 0 for one instance
    percent: float  # share of the sum of all totals (nsys's Time %: nested ranges count twice)
    open_count: int  # instances still open when the process exited
    wall_percent: float = 0.0  # share of the recorded wall time (first range start to last end)
    group: str = ""  # with --by: the process, rank or thread the row belongs to
    depth: int = 0  # with --tree: nesting level (0 for the outermost ranges)
    path: str = ""  # with --tree: the labels from the outermost range down, joined by " > "

    @property
    def label(self) -> str:
        """How the table names the range: ``domain:name``, or the bare name in the default domain."""
        return f"{self.domain}:{self.name}" if self.domain else self.name


@dataclass(frozen=True)
class SummaryOptions:
    """What `--tree`, `--group`, `--skip-first`, `--by`, `--sort`, `--top`, `--filter` asked for."""

    tree: bool = False
    group: str = "name"
    skip_first: int = 0
    by: str | None = None
    sort: str = "total"
    top: int | None = None
    filter: str | None = None


def class_name(name: str) -> str:
    """``encoder.layers.3.attn (MultiheadAttention)`` -> ``MultiheadAttention``; others unchanged."""
    match = _CLASS.search(name)
    return match.group(1) if match else name


def group_title(by: str | None, rec: ProcessRecording, tid: int = 0) -> str:
    """How a --by group is headed: ``process 42 (python train.py)``, ``rank 3``, ``thread ...``."""
    if by == "rank":
        match = _RANK.search(rec.display_name)
        return f"rank {match.group(1)}" if match else f"process {rec.pid} (no rank)"
    if by == "thread":
        return f"thread {tid} ({rec.thread_names.get(tid, '?')}) of process {rec.pid}"
    return f"process {rec.pid} ({rec.display_name})" if by == "process" else ""


_Key = tuple[str, ...]  # (domain, name) per level: a flat row has one level, a tree row its path


def summarize(recordings: Iterable[ProcessRecording], options: SummaryOptions = SummaryOptions()) -> list[RangeStats]:
    """Statistics over all ranges, per group, arranged as `options` say (largest total first).

    Self time subtracts the time of the push/pop ranges nested directly inside a push/pop
    range on the same thread, whatever their domain. Start/end ranges may overlap anything
    and cross threads, so they neither have children nor count as one.
    """
    fold = class_name if options.group == "class" else (lambda name: name)
    groups: dict[str, list[tuple[_Key, Range, int]]] = {}
    spans: dict[str, tuple[int, int]] = {}  # the time each group's counted instances span (no warm-up)
    for rec in recordings:
        for r, self_ns, key, kept in _skip_first(_instances(rec.ranges, fold, options.tree), options.skip_first):
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


def _skip_first(instances: list[tuple[Range, int, _Key]], count: int) -> list[tuple[Range, int, _Key, bool]]:
    """Each instance, and whether it counts: each range's first `count` instances on each thread
    under its parent row (its warm-up, by start) do not; by range name, not by the class row
    that --group class folds it into, as the native exporter counts them."""
    seen: dict[tuple[int, _Key, str, str], int] = {}
    marked = []
    for r, self_ns, key in sorted(instances, key=lambda item: item[0].start_ns) if count else instances:
        which = (r.tid, key[:-2], r.domain, r.name)
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
        domain=key[-2], name=key[-1], count=count, total_ns=total, self_ns=sum(s for _, s in instances),
        mean_ns=total / count, median_ns=median, min_ns=durations[0], max_ns=durations[-1], stddev_ns=stddev,
        percent=100.0 * total / grand_total if grand_total else 0.0,
        open_count=sum(1 for r, _ in instances if r.is_open),
        wall_percent=100.0 * total / wall if wall > 0 else 0.0, group=group,
        depth=len(labels) - 1 if len(key) > 2 else 0, path=" > ".join(labels) if len(key) > 2 else "")


_SORT_KEYS: dict[str, Callable[[RangeStats], float]] = {
    "total": lambda s: s.total_ns, "self": lambda s: s.self_ns, "count": lambda s: s.count,
    "mean": lambda s: s.mean_ns, "max": lambda s: s.max_ns,
}


def arrange(rows: Sequence[RangeStats], options: SummaryOptions) -> list[RangeStats]:
    """Rows per group (groups in natural order of their titles: rank 2 before rank 10), each
    group sorted, filtered and cut; in a tree, children follow their parent, siblings sorted
    the same way."""
    sort_key = _SORT_KEYS[options.sort]
    ordered: list[RangeStats] = []
    groups: dict[str, list[RangeStats]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    for _, members in sorted(groups.items(), key=lambda item: _natural(item[0])):
        if options.tree:
            members = [replace(s, path=s.path or s.label) for s in members]
            members = _tree_order(members, sort_key)
        else:
            members.sort(key=lambda s: (-sort_key(s), s.domain, s.name))
        if options.filter is not None:
            members = [s for s in members if _matches(s, options.filter)]
        if options.top is not None:
            roots = 0
            kept = []
            for s in members:
                roots += s.depth == 0
                if roots > options.top:
                    break
                kept.append(s)
            members = kept
        ordered.extend(members)
    return ordered


def _natural(text: str) -> list[object]:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)]


def _tree_order(rows: list[RangeStats], sort_key: Callable[[RangeStats], float]) -> list[RangeStats]:
    children: dict[str, list[RangeStats]] = {}
    for row in rows:
        parent = row.path.rpartition(" > ")[0] if row.depth else ""
        children.setdefault(parent, []).append(row)
    ordered: list[RangeStats] = []

    def visit(path: str) -> None:
        for row in sorted(children.get(path, []), key=lambda s: (-sort_key(s), s.domain, s.name)):
            ordered.append(row)
            visit(row.path)

    visit("")
    return ordered


def _matches(stats: RangeStats, pattern: str) -> bool:
    texts = (stats.name, stats.label, stats.path)
    return any(fnmatch.fnmatchcase(text, pattern) for text in texts if text) or \
        any(fnmatch.fnmatchcase(part, pattern) for part in stats.path.split(" > ") if part)


def summary_notes(recordings: Iterable[ProcessRecording]) -> list[str]:
    """Lines telling the reader what the numbers may miss: lost events, open ranges, stray pops."""
    recordings = list(recordings)
    notes: list[str] = []
    dropped = sum(r.dropped_events for r in recordings)
    if dropped:
        notes.append(
            f"{count_text(dropped, 'event was', 'events were')} dropped when the recorder's memory bound was hit; "
            "the counts are low (raise AUTONVTX_RECORD_LIMIT_MB)"
        )
    still_open = sum(1 for rec in recordings for r in rec.ranges if r.is_open)
    if still_open:
        notes.append(f"{count_text(still_open, 'range was', 'ranges were')} still open at exit (timed up to the moment the recording was written)")
    unmatched = sum(r.unmatched_pops for r in recordings)
    if unmatched:
        notes.append(f"{count_text(unmatched, 'pop or range end', 'pops or range ends')} had no open range to close (ignored)")
    return notes


def count_text(number: int, singular: str, plural: str) -> str:
    return f"{number:,} {singular if number == 1 else plural}"
