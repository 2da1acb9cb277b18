"""A fork while another thread holds one of our locks (the walk's, making the engine while it
imports the first target module) leaves the child a free lock, not one held for good: the
child's own imports of targets finish (forklocks.py). (importlib's per-module locks are
CPython's: a fork while another thread runs a package's own `__init__` hangs a child that
imports it under plain Python too.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO, make_file

FORKER = """
import os, sys, threading, time
import autonvtx
import pkg                           # the package itself: importlib's own lock of it is not ours
autonvtx.install(targets=["pkg.*"], engine="wrap")
threading.Thread(target=lambda: __import__("pkg.a")).start()
time.sleep(float(sys.argv[1]))       # fork somewhere inside the thread's first target import
pid = os.fork()
if pid == 0:
    import faulthandler
    faulthandler.dump_traceback_later(8, exit=True)  # where a hung child waits, in the report
    import pkg.b                     # a target: walked, under the walk's lock
    os._exit(0 if pkg.b.fb() == 2 else 1)
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("exit", os.waitstatus_to_exitcode(status))
        sys.exit(0)
    time.sleep(0.01)
os.kill(pid, 9)
os.waitpid(pid, 0)
print("hung")
"""


def test_a_fork_while_another_thread_imports_a_target_never_hangs_the_child(tmp_path: Path) -> None:
    make_file(tmp_path / "pkg" / "__init__.py", "")
    make_file(tmp_path / "pkg" / "a.py", "def fa():\n    return 1\n")
    make_file(tmp_path / "pkg" / "b.py", "def fb():\n    return 2\n")
    make_file(tmp_path / "forker.py", FORKER)
    outcomes = []
    # Forks spread over the thread's import (9 of 10 children hung before the locks were renewed).
    for i in range(1, 11):
        proc = subprocess.run(
            [sys.executable, "forker.py", str(i * 0.0005)],
            cwd=tmp_path,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        outcomes.append((proc.stdout.strip(), proc.stderr))
    assert [outcome for outcome, _ in outcomes] == ["exit 0"] * 10, outcomes
