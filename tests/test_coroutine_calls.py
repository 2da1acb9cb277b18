"""A coroutine call is one range over its whole await (`coroutine = "call"`, the default), an
NVTX start/end range from its first resumption to its end however it ends; `coroutine =
"resumptions"` keeps a range per resumption. Both engines, seen through the recorder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, make_file, run_under_recorder

from autonvtx import environment, ranges

needs_native = pytest.mark.skipif(ranges._client is None, reason="autonvtx._nvtxclient is not built in this checkout")
# The wrap engine on the pure-Python path too (AUTONVTX_PURE_PYTHON: the `nvtx` package's
# start_range/end_range, a driver coroutine of ours).
ENGINES = ["wrap", "wrap-pure"] + (["code"] if sys.version_info >= (3, 12) else [])

MODULE = """
import asyncio, types

@types.coroutine
def pause():
    yield

async def fetch(delay):
    await asyncio.sleep(delay)
    return delay

async def boom():
    await asyncio.sleep(0.001)
    raise ValueError("boom")

async def stuck():
    await asyncio.sleep(30)

async def held():
    try:
        await pause()
    finally:
        pass

async def never():
    return 1

def steps(n):
    for i in range(n):
        yield i
"""

PROGRAM = """
import asyncio, gc, sys
import autonvtx
autonvtx.install("rules.toml", engine=sys.argv[1])
import coromod

async def main():
    for _ in range(10):
        await coromod.fetch(0.01)
    print("gathered", await asyncio.gather(*(coromod.fetch(0.02) for _ in range(5))))
    try:
        await coromod.boom()
    except ValueError:
        print("raised")
    task = asyncio.ensure_future(coromod.stuck())
    await asyncio.sleep(0.005)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        print("cancelled")

asyncio.run(main())
c = coromod.never()
c.close()                      # never awaited: no range
d = coromod.held()
d.send(None)                   # suspended, then dropped: its range ends when it is freed
del d
gc.collect()
print(list(coromod.steps(3)))
"""


def run(tmp_path: Path, engine: str, rule: str = "") -> list:
    make_file(tmp_path / "coromod.py", MODULE)
    make_file(tmp_path / "rules.toml", f'[[rules]]\nmodules = ["coromod"]\n{rule}\n')
    env = {environment.PURE_PYTHON: "1" if engine.endswith("-pure") else "0"}
    program = PROGRAM.replace("sys.argv[1]", repr(engine.removesuffix("-pure")))
    (rec,), out = run_under_recorder(tmp_path, program, env=env)
    assert out.splitlines() == ["gathered [0.02, 0.02, 0.02, 0.02, 0.02]", "raised", "cancelled", "[0, 1, 2]"]
    return rec.ranges


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
def test_a_coroutine_call_is_one_range_over_its_await(tmp_path: Path, engine: str) -> None:
    got = run(tmp_path, engine)
    assert not [r for r in got if r.is_open]
    fetches = [r for r in got if r.name == "fetch"]
    # 10 awaited one after the other, 5 at once: one range each, never one per resumption.
    assert len(fetches) == 15
    assert {r.kind for r in fetches} == {"startend"}
    sequential, gathered = fetches[:10], sorted(fetches[10:], key=lambda r: r.start_ns)
    assert all(r.duration_ns >= 9_000_000 for r in sequential)
    assert all(r.duration_ns >= 19_000_000 for r in gathered)
    # The gathered ones overlap on one thread: start/end ranges, which need not nest.
    assert gathered[-1].start_ns < gathered[0].end_ns
    assert len({r.tid for r in gathered}) == 1
    # An exception, a cancellation and a coroutine dropped while suspended end theirs.
    assert [r.kind for r in got if r.name == "boom"] == ["startend"]
    stuck = [r for r in got if r.name == "stuck"]
    assert len(stuck) == 1 and stuck[0].duration_ns < 1_000_000_000
    assert len([r for r in got if r.name == "held"]) == 1
    # A coroutine never awaited ran nothing: no range.
    assert not [r for r in got if r.name == "never"]
    # Generators keep a range per resumption: 3 values and the StopIteration.
    assert [r.kind for r in got if r.name == "steps"] == ["push"] * 4


@needs_native
@pytest.mark.parametrize("engine", ENGINES)
def test_coroutine_resumptions_keeps_a_range_per_resumption(tmp_path: Path, engine: str) -> None:
    got = run(tmp_path, engine, 'coroutine = "resumptions"')
    assert not [r for r in got if r.is_open]
    fetches = [r for r in got if r.name == "fetch"]
    # Each call resumes twice (its start, and after the sleep), each a short pushed range.
    assert len(fetches) == 30
    assert {r.kind for r in fetches} == {"push"}
    assert all(r.duration_ns < 9_000_000 for r in fetches)


def test_a_rule_s_coroutine_mode_is_checked(tmp_path: Path) -> None:
    make_file(tmp_path / "autonvtx.toml", '[[rules]]\nmodules = ["x"]\ncoroutine = "calls"\n')
    make_file(tmp_path / "prog.py", "pass\n")
    proc = subprocess.run(
        [sys.executable, "-m", "autonvtx", "run", "prog.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert 'rules[0].coroutine: expected "call" or "resumptions", got' in proc.stderr
    assert "Traceback" not in proc.stderr
