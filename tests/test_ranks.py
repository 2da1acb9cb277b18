"""Rank detection from launcher environments, --ranks parsing, output-name templates."""

from __future__ import annotations

import pytest

from autonvtx.errors import UsageError
from autonvtx.ranks import RankInfo, detect_rank, expand_output_name, parse_ranks


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, RankInfo()),
        ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, RankInfo(1, 2, 1, "torchrun")),
        (
            {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1"},
            RankInfo(3, 4, 1, "Open MPI"),
        ),
        ({"PMI_RANK": "2", "PMI_SIZE": "8", "MPI_LOCALRANKID": "2"}, RankInfo(2, 8, 2, "MPICH/PMI")),
        ({"PMIX_RANK": "5", "PMIX_SIZE": "6"}, RankInfo(5, 6, 0, "PMIx")),
        ({"SLURM_PROCID": "7", "SLURM_NTASKS": "8", "SLURM_LOCALID": "3"}, RankInfo(7, 8, 3, "Slurm")),
        # torchrun inside a Slurm allocation: torchrun's own numbering describes the process.
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "RANK": "3", "WORLD_SIZE": "4"}, RankInfo(3, 4, 0, "torchrun")),
        # A garbled variable is ignored rather than guessed at.
        ({"RANK": "x", "SLURM_PROCID": "2", "SLURM_NTASKS": "4"}, RankInfo(2, 4, 0, "Slurm")),
        ({"PMI_RANK": "1"}, RankInfo(1, 2, 0, "MPICH/PMI")),
    ],
)
def test_detect_rank(environ: dict[str, str], expected: RankInfo) -> None:
    assert detect_rank(environ) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", {0}), ("0,3", {0, 3}), ("0-3", {0, 1, 2, 3}), (" 1 , 4-5 ", {1, 4, 5}), ("2-2", {2})],
)
def test_parse_ranks(text: str, expected: set[int]) -> None:
    assert parse_ranks(text) == expected


@pytest.mark.parametrize(("text", "message"), [("a", "'a'"), ("3-1", "'3-1'"), ("0,,1", "''"), ("-1", "")])
def test_parse_ranks_rejects(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=rf"--ranks: .*{message}"):
        parse_ranks(text)


def test_expand_output_name() -> None:
    info = RankInfo(rank=3, world_size=4, local_rank=1, launcher="torchrun")
    assert expand_output_name("t.{rank}-of-{world_size}.{local_rank}.json", info) == "t.3-of-4.1.json"
    assert expand_output_name("t.{pid}.json", info, pid=42) == "t.42.json"
    assert expand_output_name("plain.json", info) == "plain.json"


def test_expand_output_name_rejects_unknown_fields() -> None:
    with pytest.raises(UsageError, match=r"output name 't\.\{node\}\.json': bad field 'node'"):
        expand_output_name("t.{node}.json", RankInfo())
