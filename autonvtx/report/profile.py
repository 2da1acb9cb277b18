"""Read a PROFILE (nsys export, .nsys-rep, or autonvtx trace) into a Report: the entry point.

`read_profile(path, ReportOptions) -> Report` reads anything `report`, `summary` and `diff`
take: an Nsight Systems export (GPU work attributed to ranges by the sweep) or a trace autonvtx
wrote (.json, .json.gz, .pftrace), whose figures are the statistics model's
(`stats.python_twin.summarize`, the same rows `summary` prints).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter

from autonvtx.recorder.model import ProcessRecording
from autonvtx.report.figures import Report, Row, Totals, TreeNode, Work
from autonvtx.report.nsys import workers
from autonvtx.report.nsys.export import KERNEL, MEMCPY, MEMSET, NsysExport, ReportError
from autonvtx.report.nsys.flightmarks import flight_notes
from autonvtx.report.nsys.labels import Labels, read_labels
from autonvtx.report.nsys.nsysrep import ensure_export, is_report
from autonvtx.report.nsys.sweep import Sweep, Tally, sweep_export
from autonvtx.report.nsys.workers import Part, split_threads, sweep_parallel
from autonvtx.report.views import build_rows, build_tree, has_ids, range_naming, strip_ids
from autonvtx.stats.model import RangeStats, ViewOptions

_SQLITE_MAGIC = b"SQLite format 3\x00"
_GZIP_MAGIC = b"\x1f\x8b"
_PROTOBUF_PACKET = b"\x0a"  # a Perfetto trace starts with field 1 (a TracePacket), length-delimited
BY_CHOICES = ("process", "rank", "thread", "gpu")


@dataclass(frozen=True)
class ReportOptions:
    """How to read a profile: the view options that shape the reading (--by, --each, --group,
    --skip-first; the others arrange what was read, later), --strip-ids, and what to keep."""

    view: ViewOptions = ViewOptions()
    strip_ids: bool = False
    with_tree: bool = True  # an export's tree of nested ranges (False: rows only, when nothing shows the tree)
    flat_ranges: bool = False  # keep an export's push/pop ranges per rank (Report.flat_ranges)


def read_profile(path: str, options: ReportOptions = ReportOptions()) -> Report:
    if is_report(path):
        return _from_export(ensure_export(path), options)
    head = _head(path)
    if head.startswith(_SQLITE_MAGIC):
        return _from_export(path, options)
    if head.startswith(_GZIP_MAGIC) or head.lstrip()[:1] in (b"{", b"[") or head[:1] == _PROTOBUF_PACKET:
        return _from_recording(path, options)
    raise ReportError(
        f"{path}: neither an SQLite file nor a JSON trace (nor a Perfetto one); expected an Nsight Systems export "
        "(nsys export --type sqlite), a .nsys-rep, or an autonvtx trace (.json, .json.gz, .pftrace)"
    )


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(64)
    except FileNotFoundError:
        raise ReportError(
            f"{path}: no such file; expected an Nsight Systems export (.sqlite or .nsys-rep) or an autonvtx trace (.json)"
        ) from None
    except IsADirectoryError:
        raise ReportError(f"{path}: is a directory; expected an Nsight Systems export or an autonvtx trace") from None
    except OSError as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _rename(options: ReportOptions) -> Callable[[str], str] | None:
    return range_naming(options.strip_ids, options.view.each)


def _from_export(path: str, options: ReportOptions) -> Report:
    export = NsysExport(path)
    try:
        labels = read_labels(export)
        notes = _export_notes(export, labels)
        notes.extend(flight_notes(export))  # which slow instance each --flight window followed
        flat: dict[str, list[tuple[int, int, int, str]]] | None = {} if options.flat_ranges else None
        tallies = _sweeps(export, labels, options, flat)
        totals = Totals(capture=_capture_work(export))
        launched = Work()
        rows, tree = [], []
        for tally in tallies:
            rows.extend(build_rows(tally, labels.domain, export.names_of) if tally.rows is None else tally.rows)
            if options.with_tree:
                tree.extend(build_tree(tally, labels.domain))
            launched.add(Work(*tally.launched))
            for outside in tally.outside.values():
                totals.outside.add(Work(*outside))
        totals.unmatched = _difference(totals.capture, launched)
        notes.extend(_work_notes(totals, tallies))
        notes.extend(_id_notes(rows, options))
        if options.view.by == "gpu":
            notes.append(
                "--by gpu: a range shows under each GPU it launched work on, counting the instances that did; "
                "ranges that launched nothing are left out"
            )
        if options.view.by == "rank" and not labels.ranks:
            notes.append(
                "--by rank: no process of this export names its rank (as MPI's 'MPI Rank N' thread names or a "
                "'rank N' process name do): each process is shown by its pid"
            )
        # The keys' domains gathered in C (map, set): a per-name report has tens of thousands of keys.
        domains = set().union(*(map(itemgetter(0), tally.keys) for tally in tallies))
        unnamed = sorted(domain for domain in domains if domain and domain not in labels.domains)
        if unnamed:
            shown = ", ".join(str(d) for d in unnamed)
            notes.append(
                f"NVTX domain{'s' if len(unnamed) > 1 else ''} {shown} {'have' if len(unnamed) > 1 else 'has'} no name "
                "in this export (the capture does not hold the domain's creation): shown as 'domain N'"
            )
        version = export.version
        description = f"Nsight Systems {version} export" if version else "Nsight Systems export"
        return Report(
            os.path.basename(path),
            "nsys",
            description,
            bool(export.work),
            options.view.by,
            rows,
            tree,
            totals,
            notes,
            _outside_by_group(tallies),
            flat_ranges=flat or None,
        )
    finally:
        export.close()


def _sweeps(
    export: NsysExport, labels: Labels, options: ReportOptions, flat: dict[str, list[tuple[int, int, int, str]]] | None
) -> list[Tally]:
    """The sweeps of the export's ranges and work; `flat`, where given, gets the push/pop ranges
    per rank as the single sweep reads them (left empty where the sweep runs elsewhere)."""
    rename = _rename(options)
    # A large export's threads are swept in as many processes as there are CPUs to run them.
    shares = split_threads(export, workers.available_cpus())
    devices: list[int | None] = list(export.devices()) if options.view.by == "gpu" else [None]
    if len(shares) > 1:
        return [
            sweep_parallel(
                [
                    Part(export.path, options.view.by, options.strip_ids, device, threads, options.view.each)
                    for threads in shares
                ]
            )
            for device in devices
        ]
    if options.view.by != "gpu":
        if flat is not None:  # the ranges kept as read: the Python sweep, which sees each row
            from autonvtx.report.compare.timelines import keeping_flat

            ranges = keeping_flat(labels.ranges_of(export), labels, rename, flat)
            return [Sweep(labels.grouping(options.view.by), rename).run(ranges, export.launches())]
        return [
            sweep_export(
                export, labels, labels.grouping(options.view.by), rename, rows=True, rows_only=not options.with_tree
            )
        ]
    # Per GPU: one pass per device over its work only; a range shows under each GPU it used.
    return [
        sweep_export(
            export,
            labels,
            _constant(f"GPU {device}"),
            rename,
            only_with_work=True,
            device=device,
            rows=True,
            rows_only=not options.with_tree,
        )
        for device in export.devices()
    ]


def _constant(label: str) -> Callable[[int], str]:
    return lambda _tid: label


def _capture_work(export: NsysExport) -> Work:
    totals = export.work_totals()
    kernels = totals.get(KERNEL, (0, 0, 0))
    memcpy = totals.get(MEMCPY, (0, 0, 0))
    memset = totals.get(MEMSET, (0, 0, 0))
    return Work(kernels[0], kernels[1], memcpy[0], memcpy[2], memcpy[1], memset[0], memset[2], memset[1])


def _difference(whole: Work, part: Work) -> Work:
    return Work(
        whole.kernels - part.kernels,
        whole.kernel_ns - part.kernel_ns,
        whole.memcpy - part.memcpy,
        whole.memcpy_bytes - part.memcpy_bytes,
        whole.memcpy_ns - part.memcpy_ns,
        whole.memset - part.memset,
        whole.memset_bytes - part.memset_bytes,
        whole.memset_ns - part.memset_ns,
    )


def _id_notes(rows: list[Row], options: ReportOptions) -> list[str]:
    """A hint when names carry per-call ids: one row per call is rarely what was wanted."""
    if options.strip_ids or len(rows) < 1000:
        return []
    sample = rows[:1000]
    with_ids = sum(1 for row in sample if has_ids(row.name))
    if with_ids * 2 < len(sample):
        return []
    return [
        f"{len(rows):,} range names, most with per-call ids (such as ', op_id = 990760'): "
        "--strip-ids folds them into one row per operation"
    ]


def _outside_by_group(tallies: list[Tally]) -> dict[str, Work]:
    outside: dict[str, Work] = {}
    for tally in tallies:
        for group, work in tally.outside.items():
            outside.setdefault(group, Work()).add(Work(*work))
    return outside


def _export_notes(export: NsysExport, labels: Labels) -> list[str]:
    notes = []
    if export.nvtx is None:
        notes.append(
            "no NVTX events in this capture (no NVTX_EVENTS table): nothing to attribute GPU work to; "
            "capture with `autonvtx profile` (or nsys itself with --trace=cuda,nvtx)"
        )
    if not export.work:
        notes.append(
            "no CUDA GPU activity in this capture (no CUPTI_ACTIVITY_KIND_KERNEL/MEMCPY/MEMSET tables): "
            "CPU time only; for GPU time, capture on a machine with a CUDA GPU (`autonvtx profile` traces CUDA there; "
            "nsys itself needs --trace=cuda,nvtx)"
        )
    elif export.runtime is None:
        notes.append(
            "no CUDA runtime calls in this capture (no CUPTI_ACTIVITY_KIND_RUNTIME table): "
            "GPU work cannot be tied to the ranges that launched it"
        )
    open_ranges = export.count_open_ranges()
    if open_ranges:
        notes.append(f"{open_ranges} range(s) never ended in the capture: counted to its last event")
    return notes


def _work_notes(totals: Totals, tallies: list[Tally]) -> list[str]:
    notes = []
    ranges_seen = any(tally.keys for tally in tallies)  # a key per range name (a tally with rows only has no nodes)
    if totals.capture.operations and not ranges_seen:
        notes.append("no NVTX ranges in this capture: all GPU work is outside ranges")
    if totals.unmatched.operations:
        notes.append(
            f"{totals.unmatched.operations} GPU operation(s) have no CUDA runtime call with their correlationId "
            "in the capture (launched before it started, or by a driver call nsys did not trace)"
        )
    misnested = sum(tally.misnested for tally in tallies)
    if misnested:
        notes.append(
            f"{misnested} push/pop range(s) outlived the range enclosing them; their GPU work is counted under it"
        )
    return notes


def _from_recording(path: str, options: ReportOptions) -> Report:
    from autonvtx.recorder.perfetto import read_trace
    from autonvtx.stats.model import summary_notes

    recordings = read_trace(path)
    if options.strip_ids:
        recordings = [_renamed(recording, strip_ids) for recording in recordings]
    by = None if options.view.by == "gpu" else options.view.by
    notes = [
        "an autonvtx recording holds NVTX ranges only (the recorder sees no CUDA activity): CPU time per "
        "range, no GPU time; for GPU time per range run the program under Nsight Systems (`autonvtx profile "
        "[rule options] SCRIPT`, on a machine with a CUDA GPU) and report on its export"
    ]
    if options.view.by == "gpu":
        notes.append("--by gpu: the recording holds no GPU data; ranges shown without grouping")
    notes.extend(summary_notes(recordings))
    # Every row, unarranged: what reading a recording gives (the view's other options arrange it later).
    view = ViewOptions(group=options.view.group, skip_first=options.view.skip_first, by=by, each=options.view.each)
    rows = [row_of(s) for s in recording_stats(recordings, view)]
    count = len(recordings)
    description = f"autonvtx recording ({count} process{'es' if count != 1 else ''})"
    return Report(
        os.path.basename(path), "autonvtx", description, False, by, rows, [], Totals(), notes, recordings=recordings
    )


def recording_stats(recordings: list[ProcessRecording], view: ViewOptions) -> list[RangeStats]:
    """A recording's statistics arranged as `view` says: what `summary` prints, row for row."""
    from autonvtx.stats.python_twin import summarize

    return summarize(recordings, view)


def row_of(stats: RangeStats) -> Row:
    """A report row holding a recording's statistics row (count and total as instances and CPU time)."""
    return Row(stats.group, stats.domain, stats.name, stats.count, stats.total_ns, 0, Work(), [], stats)


def tree_of(stats: list[RangeStats]) -> list[TreeNode]:
    """Tree statistics rows (depth first, as `arrange` orders them) as one root per group."""
    roots: dict[str, TreeNode] = {}
    stack: list[TreeNode] = []
    for s in stats:
        root = roots.get(s.group)
        if root is None:
            root = roots[s.group] = TreeNode(s.group, "", s.group)
        node = TreeNode(s.group, s.domain, s.name, s.count, s.total_ns, 0, Work(), stats=s)
        del stack[s.depth :]
        (stack[-1] if stack else root).children.append(node)
        stack.append(node)
        if s.depth == 0:
            root.instances += s.count
            root.cpu_ns += s.total_ns
    return list(roots.values()) or [TreeNode("", "", "")]


def _renamed(recording: ProcessRecording, rename: Callable[[str], str]) -> ProcessRecording:
    import dataclasses

    return dataclasses.replace(
        recording, ranges=[dataclasses.replace(r, name=rename(r.name)) for r in recording.ranges]
    )
