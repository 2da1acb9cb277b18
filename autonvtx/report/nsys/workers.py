"""Sweep a large export's threads in several processes and merge what they found."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import dataclass

from autonvtx.report.nsys.export import NsysExport, ReportError, ThreadFilter
from autonvtx.report.nsys.labels import read_labels
from autonvtx.report.nsys.sweep import Sweep, Tally
from autonvtx.report.views import range_naming

# Below this many NVTX events a second process costs more (its start, a second scan of the
# tables) than it saves.
PARALLEL_FROM = 300_000


@dataclass(frozen=True)
class Part:
    """One process's share: the export, how to group and name, and which threads."""

    path: str
    by: str | None
    strip: bool
    device: int | None
    threads: ThreadFilter
    each: bool = False  # --each: a row per recorded name, numbers not folded


def sweep_part(part: Part) -> Tally:
    export = NsysExport(part.path)
    try:
        labels = read_labels(export)
        rename = range_naming(part.strip, part.each)
        if part.device is not None:
            group = f"GPU {part.device}"
            sweep = Sweep(lambda _tid: group, rename, only_with_work=True)
        else:
            sweep = Sweep(labels.grouping(part.by), rename)
        return sweep.run(labels.ranges_of(export, part.threads), export.launches(part.device, part.threads))
    finally:
        export.close()


def split_threads(export: NsysExport, processes: int) -> list[ThreadFilter]:
    """Thread sets of about equal NVTX load; the first also takes every thread not listed."""
    if processes < 2 or export.size_hint() < PARALLEL_FROM:
        return [None]
    loads = export.thread_loads()
    if len(loads) < 2:
        return [None]
    buckets: list[list[int]] = [[] for _ in range(min(processes, len(loads)))]
    weights = [0] * len(buckets)
    for gtid, count in sorted(loads.items(), key=lambda item: -item[1]):
        lightest = weights.index(min(weights))
        buckets[lightest].append(gtid)
        weights[lightest] += count
    others = tuple(gtid for bucket in buckets[1:] for gtid in bucket)
    shares: list[ThreadFilter] = [(False, others)]
    shares.extend((True, tuple(bucket)) for bucket in buckets[1:])
    return shares


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def sweep_parallel(parts: list[Part]) -> Tally:
    """The first part here, the others in child interpreters at the same time; one merged tally."""
    children = [_start(part) for part in parts[1:]]
    try:
        tally = sweep_part(parts[0])
        for child in children:
            output, errors = child.communicate(timeout=None)
            if child.returncode != 0:
                detail = errors.decode("utf-8", "replace").strip().splitlines()
                raise ReportError(
                    f"{parts[0].path}: a report worker failed: {detail[-1] if detail else child.returncode}"
                )
            tally.merge(pickle.loads(output))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return tally


def _start(part: Part) -> subprocess.Popen[bytes]:
    # A plain child interpreter rather than multiprocessing: the parent may be `python -m
    # autonvtx`, whose __main__ spawn would re-run, or a threaded program fork would endanger.
    import autonvtx

    env = dict(os.environ)
    home = os.path.dirname(os.path.dirname(os.path.abspath(autonvtx.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (home, env.get("PYTHONPATH")) if p)
    child = subprocess.Popen(
        [sys.executable, "-c", "from autonvtx.report.nsys.workers import child_main; child_main()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdin is not None
    child.stdin.write(pickle.dumps(part))
    child.stdin.close()
    child.stdin = None  # written and closed: communicate() must not touch it again
    return child


def child_main() -> None:
    import gc

    gc.disable()  # a sweep allocates no cycles; the collector only re-walked its lists (as in output.produce)
    part = pickle.loads(sys.stdin.buffer.read())
    sys.stdout.buffer.write(pickle.dumps(sweep_part(part), protocol=pickle.HIGHEST_PROTOCOL))
