"""Names for what an export identifies by number: processes, threads, ranks, NVTX domains, GPUs."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from autonvtx.report.nsys.export import DOMAIN_CREATE_TYPE, THREAD_NAME_TYPE, NsysExport, RangeRow, ThreadFilter
from autonvtx.report.nsys.schema import quote

# globalTid packs the thread id in its low 24 bits and the process id in the next 24; the bits
# above hold the VM/host id (the same decoding Nsight Systems' own report scripts use).
_ID_MASK = 0xFFFFFF
_RANK = re.compile(r"\brank\s*[#:=]?\s*(\d+)", re.IGNORECASE)
# Domain keys given to a name that one domainId carries in some processes while another name
# carries it in others: above any id nsys hands out.
_RENUMBERED = 1 << 40


def pid_of(global_tid: int) -> int:
    return (global_tid >> 24) & _ID_MASK


def tid_of(global_tid: int) -> int:
    return global_tid & _ID_MASK


def process_key(global_tid: int) -> int:
    """globalTid with the thread bits cleared: the globalPid of its process."""
    return global_tid & ~_ID_MASK


class Labels:
    """How the report names a thread's process, rank and thread, and an NVTX domain."""

    def __init__(
        self,
        processes: dict[int, str],
        threads: dict[int, str],
        ranks: dict[int, int],
        domains: dict[int, str],
        renumbered: dict[tuple[int, int], int] | None = None,
    ) -> None:
        self.processes = processes  # globalPid -> process name
        self.threads = threads  # globalTid -> thread name
        self.ranks = ranks  # globalPid -> rank
        self.domains = domains  # domain key (the domainId, unless renumbered) -> name
        # nsys numbers NVTX domains per process: (globalPid, domainId) -> the domain key, for the
        # ids that name different domains in different processes (a parent's "autonvtx" and a
        # child's "data" can both be domain 1). Empty in the usual case: ranges pass as read.
        self.renumbered = renumbered or {}

    def ranges_of(self, export: NsysExport, threads: ThreadFilter = None) -> Iterator[RangeRow]:
        """The export's ranges with each domainId made a domain key (see `renumbered`)."""
        rows = export.ranges(threads)
        if not self.renumbered:
            return iter(rows)
        keys = self.renumbered
        return (
            (tid, start, end, start_end, keys.get((tid & ~_ID_MASK, domain), domain), name)
            for tid, start, end, start_end, domain, name in rows
        )

    def process(self, global_tid: int) -> str:
        pid = pid_of(global_tid)
        name = self.processes.get(process_key(global_tid))
        return f"{name} (pid {pid})" if name else f"pid {pid}"

    def rank(self, global_tid: int) -> str:
        rank = self.ranks.get(process_key(global_tid))
        return f"rank {rank}" if rank is not None else f"pid {pid_of(global_tid)}"

    def thread(self, global_tid: int) -> str:
        name = self.threads.get(global_tid)
        tid = tid_of(global_tid)
        where = f"pid {pid_of(global_tid)}"
        return f"{where}, {name} (tid {tid})" if name else f"{where}, tid {tid}"

    def domain(self, domain_id: int) -> str:
        if not domain_id:
            return ""
        return self.domains.get(domain_id, f"domain {domain_id}")

    def grouping(self, by: str | None) -> Callable[[int], str]:
        """globalTid -> group label for --by process|rank|thread ("" for no grouping)."""
        if by == "process":
            return self.process
        if by == "rank":
            return self.rank
        if by == "thread":
            return self.thread
        return lambda _tid: ""


def read_labels(export: NsysExport) -> Labels:
    processes = _processes(export)
    threads = _thread_names(export)
    nvtx_threads, domains = _nvtx_names(export)
    ranks: dict[int, int] = {}
    # A rank named anywhere in a process: an NVTX thread name ("MPI Rank 0", set by nsys' MPI
    # wrappers), an OS thread name, or the process name.
    for source in (nvtx_threads, threads):
        for global_tid, name in source.items():
            match = _RANK.search(name)
            if match and process_key(global_tid) not in ranks:
                ranks[process_key(global_tid)] = int(match.group(1))
    for global_pid, name in processes.items():
        match = _RANK.search(name)
        if match and global_pid not in ranks:
            ranks[global_pid] = int(match.group(1))
    merged_threads = {**threads, **nvtx_threads}
    named, renumbered = _domain_keys(domains)
    return Labels(processes, merged_threads, ranks, named, renumbered)


def _domain_keys(names: dict[tuple[int, int], str]) -> tuple[dict[int, str], dict[tuple[int, int], int]]:
    """(name per domain key, key per (globalPid, domainId) where the id is not one domain): a
    domainId every process that names it names alike is its own key (also in processes whose
    capture missed its creation); one named differently by different processes gets a key per
    name, shared by the processes that give it that name."""
    by_id: dict[int, dict[int, str]] = {}
    for (global_pid, domain_id), name in names.items():
        by_id.setdefault(domain_id, {})[global_pid] = name
    domains: dict[int, str] = {}
    renumbered: dict[tuple[int, int], int] = {}
    keys: dict[str, int] = {}
    for domain_id, per_process in sorted(by_id.items()):
        if len(set(per_process.values())) == 1:
            domains[domain_id] = next(iter(per_process.values()))
            continue
        for global_pid, name in per_process.items():
            key = keys.get(name)
            if key is None:
                key = keys[name] = _RENUMBERED + len(keys)
                domains[key] = name
            renumbered[(global_pid, domain_id)] = key
    return domains, renumbered


def _processes(export: NsysExport) -> dict[int, str]:
    table = export.schema.table("PROCESSES")
    if table is None or not table.has("globalPid", "name"):
        return {}
    return {
        gpid: str(name)
        for gpid, name in export.connection.execute(
            f"SELECT globalPid, name FROM {quote(table.name)} WHERE name IS NOT NULL"
        )
        if isinstance(gpid, int)
    }


def _thread_names(export: NsysExport) -> dict[int, str]:
    table = export.schema.table("ThreadNames")
    if table is None or not table.has("globalTid", "nameId"):
        return {}
    name, join = export.text_sql(None, "t.nameId", "s")
    # Several names per thread happen (renames); the highest priority one is the one shown.
    rows = export.connection.execute(
        f"SELECT t.globalTid, {name} FROM {quote(table.name)} t{join}"
        + (" ORDER BY t.priority" if table.has("priority") else "")
    )
    # A label row damaged past reading (an id that is not an integer) only loses its label.
    return {gtid: str(value) for gtid, value in rows if value and isinstance(gtid, int)}


def _nvtx_names(export: NsysExport) -> tuple[dict[int, str], dict[tuple[int, int], str]]:
    """(NVTX thread names by globalTid, NVTX domain names by (globalPid, domainId))."""
    table = export.nvtx
    if table is None:
        return {}, {}
    text = table.column("text")
    text_id = table.column("textId")
    name, join = export.text_sql(f"n.{quote(text)}" if text else None, f"n.{quote(text_id)}" if text_id else None, "s")
    domain = "n.domainId" if table.has("domainId") else "0"
    threads: dict[int, str] = {}
    domains: dict[tuple[int, int], str] = {}
    for kind, gtid, domain_id, value in export.connection.execute(
        f"SELECT n.eventType, n.globalTid, {domain}, {name} FROM {quote(table.name)} n{join} "
        f"WHERE n.eventType IN ({THREAD_NAME_TYPE}, {DOMAIN_CREATE_TYPE})"
    ):
        if not value:
            continue
        if kind == THREAD_NAME_TYPE and isinstance(gtid, int):
            threads[gtid] = str(value)
        elif kind == DOMAIN_CREATE_TYPE and isinstance(domain_id, int) and isinstance(gtid, int):
            domains[(process_key(gtid), domain_id)] = str(value)
    return threads, domains
