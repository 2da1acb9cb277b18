"""Read many profiles into small per-file summaries: in this process, worker processes, or a Dask cluster."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import IO, TYPE_CHECKING, Any

from autonvtx.report.profile import ReportOptions, read_profile
from autonvtx.report.render.text import label  # how every view names a range: domain:name

if TYPE_CHECKING:
    from autonvtx.report.compare.timelines import Timeline

# Per range (or per path of ranges): instances, CPU ns, GPU ns, kernels, memory operations.
Measures = tuple[int, int, int, int, int]
INSTANCES, CPU, GPU, KERNELS, MEMOPS = range(5)
# Per range: communication (NCCL) kernel ns, compute kernel ns, the ns they overlapped.
Overlap = tuple[int, int, int]


@dataclass(frozen=True)
class Job:
    """What to read from one file: how (`ReportOptions`: the view options that shape the reading,
    --strip-ids, whether to keep the tree of paths and, for the straggler, each rank's timeline)
    and whether to measure NCCL overlap."""

    path: str
    options: ReportOptions = ReportOptions(with_tree=False)
    overlap: bool = False


@dataclass
class Summary:
    """One file, reduced to what diff and the across-ranks view compare: a few numbers per range.

    Keys are tuples: (group, range) for ranges, (group, outer, ..., range) for tree paths; group
    is "" without --by.
    """

    path: str
    kind: str
    description: str
    has_gpu: bool
    ranges: dict[tuple[str, ...], Measures] = field(default_factory=dict)
    paths: dict[tuple[str, ...], Measures] = field(default_factory=dict)
    overlap: dict[tuple[str, str], Overlap] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timelines: dict[str, Timeline] = field(default_factory=dict)  # per group as read with --by rank


def summarize(job: Job) -> Summary:
    """Read one file (in whichever process runs this) and keep only its summary."""
    options = job.options
    view = options.view
    report = read_profile(job.path, options)
    summary = Summary(job.path, report.kind, report.description, report.has_gpu, notes=list(report.notes))
    for row in report.rows:
        key = (row.group, label(row.domain, row.name))
        summary.ranges[key] = _add(summary.ranges.get(key), _measures(row.instances, row.cpu_ns, row.work))
    if options.with_tree:
        for root in report.tree or _recording_tree(report, job):
            _add_paths(summary.paths, root.children, (root.group,))
    if job.overlap and report.kind == "nsys" and report.has_gpu:
        from autonvtx.report.nsys.nsysrep import ensure_export, is_report
        from autonvtx.report.nsys.overlap import read_overlap

        export = ensure_export(job.path) if is_report(job.path) else job.path  # read_profile exported it already
        summary.overlap = read_overlap(export, view.by, options.strip_ids, view.each)
    if options.flat_ranges:
        from autonvtx.report.compare.timelines import read_timelines

        summary.timelines = read_timelines(report, job.path, options.strip_ids, view.each)
    return summary


def name_matches(shown: str, pattern: str) -> bool:
    """--filter as every view reads it: the range's name, with or without its domain (`domain:name`)."""
    if fnmatchcase(shown, pattern):
        return True
    domain, colon, name = shown.partition(":")
    return bool(colon) and bool(domain) and not name.startswith(":") and fnmatchcase(name, pattern)


def _recording_tree(report: Any, job: Job) -> list[Any]:
    """A recording's tree, from the statistics model (its Report holds rows only)."""
    if not report.recordings:
        return []
    from autonvtx.report.profile import recording_stats, tree_of
    from autonvtx.stats.model import ViewOptions

    asked = job.options.view
    by = None if asked.by == "gpu" else asked.by
    view = ViewOptions(tree=True, group=asked.group, skip_first=asked.skip_first, by=by, each=asked.each)
    return tree_of(recording_stats(report.recordings, view))


def _measures(instances: int, cpu_ns: int, work: Any) -> Measures:
    gpu_ns = work.gpu_ns
    operations = work.operations
    kernels = work.kernels
    return (instances, cpu_ns, gpu_ns, kernels, operations - kernels)


def _add(seen: Measures | None, more: Measures) -> Measures:
    if seen is None:
        return more
    return (seen[0] + more[0], seen[1] + more[1], seen[2] + more[2], seen[3] + more[3], seen[4] + more[4])


def _add_paths(into: dict[tuple[str, ...], Measures], nodes: Sequence[Any], prefix: tuple[str, ...]) -> None:
    # Iterative: a recursion thousands of ranges deep is a tree that deep.
    pending = [(prefix, node) for node in reversed(nodes)]
    while pending:
        above, node = pending.pop()
        path = above + (label(node.domain, node.name),)
        into[path] = _add(into.get(path), _measures(node.instances, node.cpu_ns, node.work))
        pending.extend((path, child) for child in reversed(node.children))


class Progress:
    """A one-line count of files read, on stderr; drawn only when asked (a terminal, or --progress)."""

    def __init__(self, total: int, what: str, enabled: bool, stream: IO[str] | None = None) -> None:
        self.total = total
        self.what = what
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 1
        self.started = time.monotonic()

    def step(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = width * self.done // self.total
        elapsed = time.monotonic() - self.started
        self.stream.write(
            f"\r{self.what} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} files, {elapsed:.1f} s"
        )
        if self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def show_progress(option: bool | None) -> bool:
    """--progress/--no-progress, else only when stderr is a terminal (never into a log or a pipe)."""
    if option is not None:
        return option
    return sys.stderr.isatty()


def gather(
    jobs: Sequence[Job], *, workers: int | None = None, scheduler: str | None = None, progress: Progress | None = None
) -> list[Summary]:
    """Every job's summary, in the order of the jobs."""
    if scheduler is not None:
        source: Iterator[tuple[int, Summary]] = _on_dask(jobs, scheduler)
    else:
        count = min(len(jobs), workers or available_cpus())
        source = _in_processes(jobs, count) if count > 1 else ((i, summarize(job)) for i, job in enumerate(jobs))
    found: list[Summary | None] = [None] * len(jobs)
    for index, summary in source:
        found[index] = summary
        if progress is not None:
            progress.step()
    return [summary for summary in found if summary is not None]


def available_cpus() -> int:
    from autonvtx.report.nsys.workers import available_cpus as cpus

    return cpus()


def _in_processes(jobs: Sequence[Job], count: int) -> Iterator[tuple[int, Summary]]:
    # One file per task: a worker holds one file's reading at a time and hands back only its
    # summary, so memory per worker is bounded by the largest file, not by how many there are.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # forkserver, not fork: the parent may hold threads (a test runner, a notebook); its server
    # starts once and forks each worker from a clean interpreter.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context(method)) as pool:
        futures = {pool.submit(summarize, job): index for index, job in enumerate(jobs)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _on_dask(jobs: Sequence[Job], address: str) -> Iterator[tuple[int, Summary]]:
    try:
        # Imported here: dask is an optional extra (autonvtx[dask]), needed only with --scheduler.
        from distributed import Client, as_completed
    except ImportError:
        from autonvtx.errors import UsageError

        raise UsageError(
            "--scheduler: dask.distributed is not installed; expected `pip install 'autonvtx[dask]'`"
        ) from None
    # The workers run elsewhere (another directory, another host): paths as this process means them.
    jobs = [dataclasses.replace(job, path=os.path.abspath(job.path)) for job in jobs]
    with _connect(Client, address) as client:
        _wait_for_workers(client, address)
        futures = client.map(summarize, list(jobs), pure=False)
        index = {future.key: i for i, future in enumerate(futures)}
        for future in as_completed(futures):  # type: ignore[no-untyped-call, unused-ignore]
            yield index[future.key], future.result()


def _connect(client: Callable[..., Any], address: str) -> Any:
    from autonvtx.errors import UsageError

    try:
        return client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(
            f"--scheduler '{address}': cannot reach a Dask scheduler ({exc}); "
            "expected the address of a running one, such as tcp://host:8786"
        ) from None


# How long a scheduler may have no worker before the read is given up: a cluster starting up
# gets its first worker within seconds; one with none would hold the files' reading forever.
WORKER_WAIT_SECONDS = 30.0


def _wait_for_workers(client: Any, address: str) -> None:
    from autonvtx.errors import UsageError

    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT_SECONDS)
    except (TimeoutError, OSError) as exc:
        raise UsageError(
            f"--scheduler '{address}': the scheduler has no worker (waited {WORKER_WAIT_SECONDS:.0f} s: {exc}); "
            f"expected a cluster with workers (start one with `dask worker {address}`)"
        ) from None


def describe(paths: Sequence[str]) -> str:
    names = [os.path.basename(path) for path in paths]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}, {names[1]}, ... {names[-1]} ({len(names)} files)"
