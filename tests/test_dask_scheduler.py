"""Reading files on a Dask cluster (--scheduler) ends with a message when the scheduler has no
worker (it waited silently forever), and sends the workers paths they can open (relative ones
are resolved here first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autonvtx.errors import UsageError
from autonvtx.report.compare import gather
from autonvtx.report.compare.diffrun import DiffRequest, produce_diff

TRACE = {"traceEvents": [{"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 100}]}


def test_a_scheduler_without_workers_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed", reason="dask.distributed not installed")
    path = tmp_path / "a.json"
    path.write_text(json.dumps(TRACE), encoding="utf-8")
    monkeypatch.setattr(gather, "WORKER_WAIT_SECONDS", 1.0)
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        with pytest.raises(UsageError, match="the scheduler has no worker"):
            produce_diff(DiffRequest((str(path),), (str(path),), fmt="json", scheduler=cluster.scheduler_address))


def test_relative_paths_reach_the_workers_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed", reason="dask.distributed not installed")
    (tmp_path / "a.json").write_text(json.dumps(TRACE), encoding="utf-8")
    # The worker process starts in another directory than the one the paths are given in.
    monkeypatch.chdir("/")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        monkeypatch.chdir(tmp_path)
        done = produce_diff(DiffRequest(("a.json",), ("a.json",), fmt="json", scheduler=cluster.scheduler_address))
    assert "step" in (done.text or "")
