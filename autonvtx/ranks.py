"""Which rank of a distributed job this process is, read from its launcher's environment."""

from __future__ import annotations

import os

from autonvtx.errors import UsageError
from autonvtx.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# (launcher, rank variable, world-size variable, local-rank variable), most specific first:
# torchrun sets RANK even when it runs inside a Slurm allocation, and an MPI launcher's own
# variables describe the process better than the Slurm step that started the launcher.
LAUNCHERS: tuple[tuple[str, str, str, str], ...] = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("PMIx", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"),
    ("MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
)


class RankInfo(Value):
    """This process's place in a distributed job; `launcher` is None outside one. A value class,
    not a dataclass: every instrumented process reads it as it starts (its threads' names)."""

    __slots__ = ("rank", "world_size", "local_rank", "launcher")
    rank: int
    world_size: int
    local_rank: int
    launcher: str | None

    def __init__(self, rank: int = 0, world_size: int = 1, local_rank: int = 0, launcher: str | None = None) -> None:
        self._set(rank, world_size, local_rank, launcher)

    @property
    def is_distributed(self) -> bool:
        return self.launcher is not None


def detect_rank(environ: Mapping[str, str] | None = None) -> RankInfo:
    """The rank the first launcher that set its variables gives this process."""
    env = os.environ if environ is None else environ
    for launcher, rank_var, size_var, local_var in LAUNCHERS:
        rank = _as_int(env.get(rank_var))
        if rank is None:
            continue
        size = _as_int(env.get(size_var))
        local = _as_int(env.get(local_var))
        return RankInfo(
            rank=rank,
            world_size=size if size is not None else rank + 1,
            local_rank=local if local is not None else 0,
            launcher=launcher,
        )
    return RankInfo()


def label_with_rank(label: str, info: RankInfo) -> str:
    """How a process of a distributed job is named in traces: "rank 1: python train.py"."""
    return f"rank {info.rank}: {label}" if info.is_distributed else label


def label_thread_with_rank(name: str, info: RankInfo) -> str:
    """How the main thread of a rank is named for NVTX tools, "rank 1: MainThread": a capture of a
    whole job (launcher and ranks under one nsys) then says which process is which rank."""
    return f"rank {info.rank}: {name}" if info.is_distributed else name


def _as_int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def parse_ranks(text: str) -> frozenset[int]:
    """`--ranks` syntax: comma-separated ranks and inclusive ranges, e.g. "0,3" or "0-3,8"."""
    ranks: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            if dash:
                first, last = int(low), int(high)
                if first > last:
                    raise ValueError
                ranks.update(range(first, last + 1))
            else:
                ranks.add(int(part))
        except ValueError:
            raise UsageError(
                f"--ranks: bad rank list {text!r} at {part!r}; expected ranks and ranges like '0,3' or '0-3,8'"
            ) from None
    if any(rank < 0 for rank in ranks):
        raise UsageError(f"--ranks: ranks are never negative, got {text!r}")
    return frozenset(ranks)


def expand_output_name(template: str, info: RankInfo, pid: int | None = None) -> str:
    """Fill `{rank}`, `{local_rank}`, `{world_size}` and `{pid}` in an output file name."""
    fields = {
        "rank": info.rank,
        "local_rank": info.local_rank,
        "world_size": info.world_size,
        "pid": os.getpid() if pid is None else pid,
    }
    try:
        return template.format_map(fields)
    except (KeyError, IndexError, ValueError) as error:
        allowed = ", ".join("{" + name + "}" for name in fields)
        raise UsageError(f"output name {template!r}: bad field {error}; expected only {allowed}") from None
