"""Communication (NCCL) kernels against compute kernels, inside each range of each process."""

from __future__ import annotations

from collections.abc import Callable

from autonvtx.report.nsys.export import KERNEL, LaunchRow, NsysExport
from autonvtx.report.nsys.labels import Labels, read_labels
from autonvtx.report.nsys.schema import quote
from autonvtx.report.render.text import label
from autonvtx.report.views import range_naming

# Kernels of NCCL (ncclKernel_*, ncclDevKernel_*) and of NVSHMEM move data between GPUs; the rest
# compute. The same test Holistic Trace Analysis and Nsight Systems' recipes make, by name.
_COMMUNICATION = ("nccl", "nvshmem")

Interval = tuple[int, int]


def is_communication(kernel: str) -> bool:
    lowered = kernel.lower()
    return any(word in lowered for word in _COMMUNICATION)


def read_overlap(
    path: str, by: str | None, strip: bool, each: bool = False
) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(group, range) -> (communication ns, compute ns, overlapped ns), over the GPU time of the
    kernels launched inside the range's instances (push/pop ranges; by the launching call); ranges
    named as the report names them (--strip-ids, numbers as {n} unless --each)."""
    export = NsysExport(path)
    try:
        if not _has_communication(export):
            return {}  # nothing to overlap: spare the second pass over ranges and launches
        labels = read_labels(export)
        group_of = labels.grouping(by)
        intervals = _kernel_intervals(export, group_of, labels, range_naming(strip, each))
    finally:
        export.close()
    result = {}
    for key, (communication, compute) in intervals.items():
        comm = merge(communication)
        work = merge(compute)
        result[key] = (length(comm), length(work), length(intersect(comm, work)))
    return result


def _has_communication(export: NsysExport) -> bool:
    for work in export.work:
        if work.kind != KERNEL or work.name_column is None:
            continue
        names = export.connection.execute(
            f"SELECT DISTINCT {quote(work.name_column)} FROM {quote(work.table.name)}"
        ).fetchall()
        if any(is_communication(export.string(name)) for (name,) in names):
            return True
    return False


def _kernel_intervals(
    export: NsysExport, group_of: Callable[[int], str], labels: Labels, rename: Callable[[str], str] | None
) -> dict[tuple[str, str], tuple[list[Interval], list[Interval]]]:
    """Each kernel's GPU interval, under every distinct range name open on its launching thread."""
    stacks: dict[int, list[tuple[int, str]]] = {}  # globalTid -> open ranges (end, label)
    kinds: dict[object, bool] = {}  # kernel name id or text -> is communication
    found: dict[tuple[str, str], tuple[list[Interval], list[Interval]]] = {}
    groups: dict[int, str] = {}
    launches = iter(export.launches())
    launch = next(launches, None)

    def take(row: LaunchRow) -> None:
        global_tid, at, kind, gpu_start, gpu_end, kernel = row[0], row[1], row[2], row[3], row[4], row[6]
        if kind != KERNEL:
            return
        stack = stacks.get(global_tid)
        if not stack:
            return
        while stack and stack[-1][0] < at:
            stack.pop()
        communication = kinds.get(kernel)
        if communication is None:
            communication = kinds[kernel] = is_communication(export.string(kernel))
        group = groups.get(global_tid)
        if group is None:
            group = groups[global_tid] = group_of(global_tid)
        for name in {name for _end, name in stack}:
            lists = found.get((group, name))
            if lists is None:
                lists = found[(group, name)] = ([], [])
            lists[0 if communication else 1].append((gpu_start, gpu_end))

    domain_name = labels.domain
    for global_tid, start, end, start_end, domain, name in labels.ranges_of(export):
        while launch is not None and launch[1] < start:
            take(launch)
            launch = next(launches, None)
        if start_end:
            continue
        text = rename(name) if rename is not None and name else (name or "")
        stack = stacks.setdefault(global_tid, [])
        while stack and stack[-1][0] < start:
            stack.pop()
        stack.append((end, label(domain_name(domain), text)))
    while launch is not None:
        take(launch)
        launch = next(launches, None)
    return found


def merge(intervals: list[Interval]) -> list[Interval]:
    """The union of intervals as sorted, disjoint intervals."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def intersect(first: list[Interval], second: list[Interval]) -> list[Interval]:
    """Where two sorted, disjoint interval lists overlap."""
    out: list[Interval] = []
    i = j = 0
    while i < len(first) and j < len(second):
        start = max(first[i][0], second[j][0])
        end = min(first[i][1], second[j][1])
        if start < end:
            out.append((start, end))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return out


def length(intervals: list[Interval]) -> int:
    return sum(end - start for start, end in intervals)
