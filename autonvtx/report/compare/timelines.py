"""Each rank's ranges as the straggler reads them: per name, when each instance started, when its
rank reached the end of its own work in it (its last child range's end), when it ended; self times."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autonvtx.report.nsys.export import RangeRow
    from autonvtx.report.nsys.labels import Labels

# A range with more instances than this on a rank is not compared instance by instance (an op
# called a million times is not where ranks meet; its time still counts in the busy times).
INSTANCE_LIMIT = 100_000

Flat = tuple[int, int, int, str]  # (thread, start ns, end ns, name) of one push/pop range


@dataclass
class Timeline:
    """One rank's ranges, reduced to what the straggler needs: per name, each instance's
    (start, reached, end), and the name's self time (exclusive of child ranges on its thread)."""

    instances: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    self_ns: Counter[str] = field(default_factory=Counter)

    def merge(self, other: Timeline) -> None:
        for name, found in other.instances.items():
            self.instances.setdefault(name, []).extend(found)
            self.instances[name].sort()
        self.self_ns.update(other.self_ns)


def build_timeline(ranges: Iterable[Flat]) -> Timeline:
    """Nest each thread's ranges (sorted by start, the longer first on ties) and measure them."""
    timeline = Timeline()
    per_thread: dict[int, list[tuple[int, int, str]]] = {}
    for tid, start, end, name in ranges:
        per_thread.setdefault(tid, []).append((start, end, name))
    for found in per_thread.values():
        found.sort(key=lambda r: (r[0], -r[1]))
        names: list[str] = []  # the open ranges' names, and beside them
        stack: list[list[int]] = []  # [start, end, children's time, last child's end]
        for start, end, name in found:
            while stack and stack[-1][1] <= start:
                _close(timeline, names, stack)
            names.append(name)
            stack.append([start, end, 0, start])
        while stack:
            _close(timeline, names, stack)
    for listed in timeline.instances.values():
        listed.sort()
    return timeline


def _close(timeline: Timeline, names: list[str], stack: list[list[int]]) -> None:
    name = names.pop()
    start, end, inside, last = stack.pop()
    timeline.self_ns[name] += max(0, end - start - inside)
    timeline.instances.setdefault(name, []).append((start, max(start, last), end))
    if stack:
        parent = stack[-1]
        parent[2] += end - start
        parent[3] = max(parent[3], end)


def read_timelines(report: Any, path: str, strip_ids: bool = False, each: bool = False) -> dict[str, Timeline]:
    """A file's timelines per rank (`report`: what read_profile made of `path`), labelled as
    `--by rank` labels its groups; ranges named as the report names them (--strip-ids, numbers as
    {n} unless --each). Push/pop ranges only: a start/end range does not nest on its thread."""
    from autonvtx.report.views import range_naming

    if report.kind == "nsys" and report.flat_ranges is not None:
        flat = report.flat_ranges  # kept from the sweep's read (ReportOptions.flat_ranges)
    elif report.kind == "nsys":
        flat = _export_ranges(path, range_naming(strip_ids, each))
    else:  # a recording's ranges were read (and stripped of ids) with the report
        flat = _recording_ranges(report.recordings or [], range_naming(False, each))
    return {group: build_timeline(ranges) for group, ranges in flat.items()}


def _recording_ranges(recordings: list[Any], rename: Callable[[str], str] | None) -> dict[str, list[Flat]]:
    from autonvtx.report.render.text import label
    from autonvtx.stats.model import group_title

    found: dict[str, list[Flat]] = {}
    for recording in recordings:
        into = found.setdefault(group_title("rank", recording), [])
        for r in recording.ranges:
            if r.kind != "push" or r.is_open:
                continue
            name = rename(r.name) if rename is not None and r.name else r.name
            into.append((r.tid, r.start_ns, r.end_ns, label(r.domain, name)))
    return found


def _export_ranges(path: str, rename: Callable[[str], str] | None) -> dict[str, list[Flat]]:
    from autonvtx.report.nsys.export import NsysExport
    from autonvtx.report.nsys.labels import read_labels
    from autonvtx.report.nsys.nsysrep import ensure_export, is_report

    export = NsysExport(ensure_export(path) if is_report(path) else path)  # read_profile exported it already
    try:
        labels = read_labels(export)
        found: dict[str, list[Flat]] = {}
        for _ in keeping_flat(labels.ranges_of(export), labels, rename, found):
            pass
        return found
    finally:
        export.close()


def keeping_flat(
    ranges: Iterator[RangeRow], labels: Labels, rename: Callable[[str], str] | None, flat: dict[str, list[Flat]]
) -> Iterator[RangeRow]:
    """An export's `ranges` as they are, each push/pop range also put in `flat` under its rank,
    named as the report names it: read_profile keeps them from its sweep's own read this way."""
    from autonvtx.report.render.text import label

    groups: dict[int, list[Flat]] = {}
    for row in ranges:
        global_tid, start, end, start_end, domain, name = row
        if not start_end and end is not None:
            into = groups.get(global_tid)
            if into is None:
                into = groups[global_tid] = flat.setdefault(labels.rank(global_tid), [])
            text = rename(name) if rename is not None and name else (name or "")
            into.append((global_tid, start, end, label(labels.domain(domain), text)))
        yield row
