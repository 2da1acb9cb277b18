"""What the tests that run the real Nsight Systems share: finding nsys (skip where it is absent,
fail in CI), running `autonvtx profile` under a timeout, and reading the SQLite export."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, autonvtx_env

# Each capture under this limit: a capture that hangs fails its test instead of the suite.
CAPTURE_TIMEOUT_S = 300
# One capture at a time on this machine, whichever pytest-xdist worker runs it: two nsys sessions
# at once fail ("Connection reset by peer", seen with `-n 2` where two files' captures met).
CAPTURE_LOCK = Path(tempfile.gettempdir()) / "autonvtx-tests-nsys.lock"


@contextlib.contextmanager
def one_capture() -> Iterator[None]:
    """Hold the machine's capture lock (waiting for it is not counted in a capture's timeout)."""
    with open(CAPTURE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def nsys_or_skip() -> str:
    """The nsys these tests run: skipped, with the reason, where there is none; in CI
    (CI=true) an absent nsys fails the run, since the captures are what these tests are for."""
    from autonvtx.nsight import NsysError, find_nsys

    try:
        return find_nsys().path
    except NsysError as error:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but Nsight Systems is missing: {error}")
        pytest.skip(f"Nsight Systems is not installed here: {error}")


@dataclass
class Profiled:
    returncode: int
    stdout: str
    stderr: str


def run_profile(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Profiled:
    """`python -m autonvtx profile ARGS...` in `cwd`, killed (with everything it started) past
    CAPTURE_TIMEOUT_S."""
    environment = autonvtx_env() if env is None else env
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")]))
    with one_capture():
        return _run_profile(args, cwd, environment)


def _run_profile(args: tuple[str, ...], cwd: Path, environment: dict[str, str]) -> Profiled:
    process = subprocess.Popen(
        [sys.executable, "-m", "autonvtx", "profile", *args],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=CAPTURE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"autonvtx profile did not finish in {CAPTURE_TIMEOUT_S} s:\n{stdout}\n{stderr}")
    return Profiled(process.returncode, stdout, stderr)


@dataclass(frozen=True)
class NvtxRange:
    """One push/pop or start/end range of the export, with what nsys kept of its attributes."""

    name: str
    domain: str
    pid: int
    tid: int
    color: int | None
    category: int | None
    registered: bool  # the message came as a registered string (textId), not inline text
    payload: int | None


class Export:
    """A SQLite export of a capture, read for what the tests check."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def close(self) -> None:
        self.connection.close()

    def strings(self) -> dict[int, str]:
        return dict(self.connection.execute("SELECT id, value FROM StringIds"))

    def domains(self) -> dict[tuple[int, int], str]:
        """(pid, domainId) -> name: nsys numbers domains per process."""
        return {
            (pid, domain): name
            for pid, domain, name in self.connection.execute(
                "SELECT (globalTid >> 24) & 16777215, domainId, text FROM NVTX_EVENTS WHERE eventType = 75"
            )
        }

    def ranges(self) -> list[NvtxRange]:
        strings, domains = self.strings(), self.domains()
        rows = self.connection.execute(
            "SELECT (globalTid >> 24) & 16777215, globalTid & 16777215, domainId, text, textId, color, category,"
            " int64Value FROM NVTX_EVENTS WHERE eventType IN (59, 60)"
        )
        found = []
        for pid, tid, domain, text, text_id, color, category, payload in rows:
            name = text if text is not None else strings.get(text_id, "")
            found.append(
                NvtxRange(
                    name,
                    domains.get((pid, domain), "" if not domain else f"domain {domain}"),
                    pid,
                    tid,
                    None if color is None else color & 0xFFFFFFFF,
                    category,
                    text is None and text_id is not None,
                    payload,
                )
            )
        return found

    def thread_names(self) -> dict[tuple[int, int], str]:
        """(pid, tid) -> the name NVTX gave the thread (nvtxNameOsThread), as nsys shows it."""
        return {
            (pid, tid): name
            for pid, tid, name in self.connection.execute(
                "SELECT (globalTid >> 24) & 16777215, globalTid & 16777215, text FROM NVTX_EVENTS WHERE eventType = 39"
            )
        }

    def categories(self) -> dict[tuple[int, int, int], str]:
        """(pid, domainId, category id) -> name."""
        return {
            (pid, domain, category): name
            for pid, domain, category, name in self.connection.execute(
                "SELECT (globalTid >> 24) & 16777215, domainId, category, text FROM NVTX_EVENTS WHERE eventType = 33"
            )
        }


def counts(ranges: list[NvtxRange], domain: str) -> Counter[str]:
    return Counter(r.name for r in ranges if r.domain == domain)


def report_counts(path: Path, cwd: Path) -> dict[str, int]:
    """`autonvtx report PATH --format json`: instances per name."""
    result = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", str(path), "--format", "json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=CAPTURE_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return {row["name"]: row["instances"] for row in document["ranges"]}
