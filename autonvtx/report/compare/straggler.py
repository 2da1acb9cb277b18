"""Who the other ranks wait for: the straggler rank, its function and why, from when ranks reach the ranges that end together.

A synchronising call (an all-reduce, a barrier, a blocking receive) ends at the same moment on
every rank, whenever each rank reached it: the ranks that came early wait inside it, and the one
that came last is the one they waited for. Totals alone cannot tell the two apart (with two
ranks, "rank 1 loads 20 ms longer, rank 0 waits 20 ms in backward" and "rank 0 computes 20 ms
longer in backward, rank 1 waits 20 ms in load_batch" give the same per-range totals); the time
each rank reaches a range, against the time it leaves it, can.

- A rank *reaches* an instance of a range at its start, or at the end of its last child range
  (the work it did inside before it could go no further).
- An instance *synchronises* when the ranks leave it closer together than they reached it: the
  difference between the two spreads is time the early ranks spent waiting in it.
- The straggler is the rank that reached the synchronising instances last, weighted by the time
  the others waited for it. Its function is the range whose busy time (self time, exclusive of
  child ranges, less the waits found in it) exceeds the other ranks' median most.

The ranks' clocks must agree to better than the waits: ranks of one host, or one Nsight Systems
capture of the job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from statistics import median

from autonvtx.report.compare.timelines import INSTANCE_LIMIT, Timeline
from autonvtx.report.views import group_order

# Ranks that leave a range less than this apart from how they reached it did not wait there:
# thread wake-ups and clock reads scatter by microseconds.
SMALLEST_WAIT = 50_000

PerRank = Mapping[str, float]  # rank -> a range's time on it


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for, its function, and why."""

    rank: str
    function: str | None  # None: no range on it is busier than on the others
    why: str
    waited_ns: int  # time the other ranks waited for it (at synchronising ranges), or its busy excess
    late_in: int  # synchronising instances it reached last
    synchronising: int  # synchronising instances found
    sync_range: str | None  # where the others waited for it most
    function_excess_ns: int  # the function's busy time beyond the other ranks' median
    method: str  # "arrival": synchronising ranges; "communication": NCCL kernels; "self time": neither


def find_straggler(
    timelines: Mapping[str, Timeline], skip: Callable[[str], bool] = lambda _name: False
) -> Straggler | None:
    """The straggler of these ranks' timelines; `skip` names ranges left out of the function's choice
    (communication ranges: a rank's time there is waiting, not work)."""
    ranks = sorted(timelines, key=group_order)
    if len(ranks) < 2:
        return None
    waited: dict[str, Counter[str]] = {rank: Counter() for rank in ranks}  # rank -> name -> ns waited there
    found: list[tuple[str, str, int]] = []  # (range, the rank that reached it last, ns the others waited)
    names = set.intersection(*(set(timelines[rank].instances) for rank in ranks))
    for name in sorted(names):
        lists = [timelines[rank].instances[name] for rank in ranks]
        count = len(lists[0])
        if count > INSTANCE_LIMIT or any(len(listed) != count for listed in lists):
            continue  # no instance-by-instance correspondence
        for k in range(count):
            reached = [listed[k][1] for listed in lists]
            left = [listed[k][2] for listed in lists]
            arrival_spread = max(reached) - min(reached)
            absorbed = arrival_spread - (max(left) - min(left))
            if absorbed < SMALLEST_WAIT or 2 * absorbed < arrival_spread:
                continue  # the ranks left it (about) as they reached it: nobody waited here
            latest = max(reached)
            found.append((name, ranks[reached.index(latest)], absorbed))  # natural order: the first on ties
            for index, rank in enumerate(ranks):
                waited[rank][name] += latest - reached[index]
    # A rendezvous met once (start-up, a process group's creation) says who started late; where
    # ranges synchronise step after step, those say who the steps wait for.
    repeated = Counter(name for name, _rank, _ns in found)
    stepwise = any(n > 1 for n in repeated.values())
    if stepwise:
        found = [entry for entry in found if repeated[entry[0]] > 1]
    synchronising = len(found)
    caused: Counter[str] = Counter()  # rank -> ns the others waited for it
    last_in: Counter[str] = Counter()
    at: dict[str, Counter[str]] = {rank: Counter() for rank in ranks}  # rank -> sync range -> ns waited for it
    for name, rank, absorbed in found:
        caused[rank] += absorbed
        last_in[rank] += 1
        at[rank][name] += absorbed
    busy = {rank: Counter(timelines[rank].self_ns) for rank in ranks}
    for rank in ranks:
        busy[rank].subtract(waited[rank])
    if caused:
        most = max(caused.values())
        rank = min((r for r, ns in caused.items() if ns == most), key=group_order)
        # Steps that wait step after step are slowed by work done step after step: a range met
        # once (`main`, start-up) holds one-off waits of its own that no range marks.
        once = {name for name, listed in timelines[rank].instances.items() if len(listed) < 2}
        function, excess = _busiest(rank, ranks, busy, (lambda name: skip(name) or name in once) if stepwise else skip)
        sync_range = at[rank].most_common(1)[0][0]
        why = (
            f"reached the ranges that end together (most: `{sync_range}`) last in {last_in[rank]} of "
            f"{synchronising} instances; the others waited {_ms(most)} for it"
        )
        if function is not None:
            why += f"; its `{function}` is busy {_ms(excess)} longer than the other ranks' median"
        return Straggler(rank, function, why, most, last_in[rank], synchronising, sync_range, excess, "arrival")
    # No range ends together: the rank whose busiest range exceeds the others' the most.
    best: tuple[int, str, str] | None = None
    for rank in ranks:
        function, excess = _busiest(rank, ranks, busy, skip)
        if function is not None and (best is None or excess > best[0]):
            best = (excess, rank, function)
    if best is None:
        return None
    excess, rank, function = best
    why = (
        f"no range ends together across ranks (no synchronisation seen); its `{function}` is busy "
        f"{_ms(excess)} longer than the other ranks' median"
    )
    return Straggler(rank, function, why, excess, 0, 0, None, excess, "self time")


def _busiest(
    rank: str, ranks: list[str], busy: Mapping[str, Counter[str]], skip: Callable[[str], bool]
) -> tuple[str | None, int]:
    """The range on `rank` whose busy time exceeds the other ranks' median most, and by how much."""
    others = [r for r in ranks if r != rank]
    best: tuple[int, str] | None = None
    for name, ns in busy[rank].items():
        if skip(name):
            continue
        excess = int(ns - median(busy[r].get(name, 0) for r in others))
        if excess > 0 and (best is None or excess > best[0] or (excess == best[0] and name < best[1])):
            best = (excess, name)
    return (None, 0) if best is None else (best[1], best[0])


def _ms(ns: int) -> str:
    from autonvtx.report.render.text import format_duration

    return format_duration(int(ns))


def from_communication(
    communication: Mapping[str, PerRank], work: Mapping[str, PerRank], ranks: list[str]
) -> Straggler | None:
    """With GPU communication (NCCL kernels), the ranks wait inside it on the GPU, not in CPU ranges:
    at each communication range the fastest rank is the one the others waited for (they spent the
    difference in it). Its function: the other range it spends the most time in beyond the others' median."""
    caused: Counter[str] = Counter()
    fastest_in: Counter[str] = Counter()
    where: dict[str, Counter[str]] = {rank: Counter() for rank in ranks}
    for name, per_rank in sorted(communication.items()):  # sorted: ties go to the first name
        if len(per_rank) < 2:
            continue
        low = min(per_rank.values())
        fastest = min((r for r, ns in per_rank.items() if ns == low), key=group_order)
        waited = int(sum(ns - low for ns in per_rank.values()))
        if waited <= 0:
            continue
        caused[fastest] += waited
        fastest_in[fastest] += 1
        where[fastest][name] += waited
    if not caused:
        return None
    most = max(caused.values())
    rank = min((r for r, ns in caused.items() if ns == most), key=group_order)
    best: tuple[float, str] | None = None
    for name, per_rank in work.items():
        if rank not in per_rank or len(per_rank) < 2:
            continue
        excess = per_rank[rank] - median(ns for r, ns in per_rank.items() if r != rank)
        if excess > 0 and (best is None or excess > best[0] or (excess == best[0] and name < best[1])):
            best = (excess, name)
    # Communication ranges nest (a collective inside the framework's call of it): the largest one's
    # wait is the figure, not their sum.
    sync_range, waited_most = where[rank].most_common(1)[0]
    why = (
        f"fastest in {fastest_in[rank]} of {len(communication)} communication ranges: the others waited "
        f"{_ms(waited_most)} for it in `{sync_range}`"
    )
    function, excess_ns = (None, 0) if best is None else (best[1], int(best[0]))
    if function is not None:
        why += f"; its `{function}` takes {_ms(excess_ns)} longer than the other ranks' median"
    total = len(communication)
    return Straggler(rank, function, why, waited_most, fastest_in[rank], total, sync_range, excess_ns, "communication")
