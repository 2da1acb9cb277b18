"""The wrap engine's coroutine and async generator functions on Python 3.12+: ranged through
their code objects (the code engine's sys.monitoring callbacks), not replaced; everything else
it selects keeps its wrapper; 3.10 and 3.11 wrap them as before (engines/coroutines.py)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import make_file, run_autonvtx, run_under_recorder

from autonvtx import ranges

needs_native = pytest.mark.skipif(ranges._client is None, reason="autonvtx._nvtxclient is not built in this checkout")
MONITORED = sys.version_info >= (3, 12)

SERVICE = """
import asyncio, functools

def plain(x):
    return x

async def leaf(tag, steps):
    for _ in range(steps):
        await asyncio.sleep(0)
    return plain(tag)

async def outer(tag):
    await asyncio.sleep(0)
    return await leaf(tag, 2)

async def fails():
    await asyncio.sleep(0)
    raise ValueError("boom")

async def blocked(event):
    await event.wait()

async def ticks(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield plain(i)

def logged(func):
    @functools.wraps(func)
    async def logging(*args):
        return await func(*args)
    return logging

@logged
async def first():
    return 1

@logged
async def second():
    return 2

class Client:
    async def fetch(self, x):
        await asyncio.sleep(0)
        return x
"""

# Everything the program can see of the functions, then the asyncio workloads.
PROGRAM = """
import asyncio, sys, threading
import autonvtx
sys.path.insert(0, ".")
import service as s
before = {name: getattr(s, name) for name in ("leaf", "outer", "fails", "blocked", "ticks", "first", "plain")}
before_fetch = vars(s.Client)["fetch"]
installation = autonvtx.install(targets=["service"], include=INCLUDE, engine="wrap")
kept = [name for name, f in before.items() if getattr(s, name) is f]
print("kept", kept, vars(s.Client)["fetch"] is before_fetch)
print("wrapped", [n for n in ("leaf", "ticks", "first", "plain") if hasattr(getattr(s, n), "__wrapped__")])
print("instrumented", [autonvtx.is_instrumented(f) for f in (s.leaf, s.outer, s.ticks, s.Client().fetch, s.first, s.plain)])

async def cancelled():
    task = asyncio.create_task(s.blocked(asyncio.Event()))
    await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled"

async def main():
    print(await asyncio.gather(s.outer("a"), s.outer("b")))
    try:
        await s.fails()
    except ValueError as exc:
        print("raised", exc)
    print(await cancelled())
    print([x async for x in s.ticks(2)], await s.first(), await s.second(), await s.Client().fetch(7))

asyncio.run(main())
threads = [threading.Thread(target=asyncio.run, args=(s.outer(t),)) for t in ("t1", "t2")]
for t in threads:
    t.start()
for t in threads:
    t.join()
tool = autonvtx.ranges.CodeMonitor.active
tool_id = tool.tool_id if tool is not None else None
installation.uninstall()
print("after", autonvtx.is_instrumented(s.leaf), autonvtx.ranges.CodeMonitor.active,
      tool_id is None or sys.monitoring.get_tool(tool_id) is None,
      tool_id is None or sys.monitoring.get_local_events(tool_id, s.leaf.__code__) == 0)
asyncio.run(s.leaf("untraced", 1))
"""


def inside(inner: Any, outer: Any) -> bool:
    return inner.tid == outer.tid and outer.start_ns <= inner.start_ns and inner.end_ns <= outer.end_ns


def disjoint(ranges_: list[Any]) -> bool:
    by_start = sorted(ranges_, key=lambda r: (r.tid, r.start_ns))
    return all(a.tid != b.tid or a.end_ns <= b.start_ns for a, b in zip(by_start, by_start[1:]))


@needs_native
@pytest.mark.parametrize("include", ["*", "[A-Za-z]*"], ids=["native-walk", "python-walk"])
def test_coroutines_keep_identity_and_nest_correctly(tmp_path: Path, include: str) -> None:
    # ["*"]: one rule selects the module whole (the native walk, uniform.c); a bracketed glob
    # cannot be told apart by name alone: the Python walk. Both must decide alike.
    make_file(tmp_path / "service.py", SERVICE)
    source = PROGRAM.replace("INCLUDE", repr([include]))
    (rec,), out = run_under_recorder(tmp_path, f"import os\nos.chdir({str(tmp_path)!r})\n" + source)
    lines = out.splitlines()
    if MONITORED:
        # Coroutine and async generator functions stay themselves; a decorator's wrapper
        # (its code serves `first` and `second` alike) and plain functions are wrapped.
        assert lines[:3] == [
            f"kept {['leaf', 'outer', 'fails', 'blocked', 'ticks']} True",
            "wrapped ['first', 'plain']",
            "instrumented [True, True, True, True, True, True]",
        ]
    else:
        assert lines[:3] == [
            "kept [] False",
            f"wrapped {['leaf', 'ticks', 'first', 'plain']}",
            "instrumented [True, True, True, True, True, True]",
        ]
    assert lines[3:] == ["['a', 'b']", "raised boom", "cancelled", "[0, 1] 1 2 7", "after False None True True"]
    assert rec.unmatched_pops == 0 and not [r for r in rec.ranges if r.is_open]
    # One start/end range per coroutine call (the default, `coroutine = "call"`), a range per
    # resumption of an async generator, as the wrapper gives on 3.11: the same counts on every
    # version. outer and leaf: four calls each (two tasks, two threads); fails raises, blocked
    # is cancelled: one each, closed; ticks: two sleeps, two yields, the end; first/second:
    # each wrapper named after its own function.
    assert Counter(r.name for r in rec.ranges) == {
        "outer": 4,
        "leaf": 4,
        "plain": 4 + 2,
        "fails": 1,
        "blocked": 1,
        "ticks": 5,
        "first": 1,
        "second": 1,
        "Client.fetch": 1,
    }
    calls = {"outer", "leaf", "fails", "blocked", "first", "second", "Client.fetch"}
    assert {r.kind for r in rec.ranges if r.name in calls} == {"startend"}
    assert {r.kind for r in rec.ranges if r.name not in calls} == {"push"}
    by_name = {n: [r for r in rec.ranges if r.name == n] for n in ("outer", "leaf", "plain", "ticks")}
    # The gathered outer calls overlap on one thread (start/end ranges need not nest); each
    # leaf call runs inside an outer call, each plain inside a leaf call or a step of ticks.
    assert not disjoint(by_name["outer"]) and disjoint(by_name["ticks"])
    assert all(any(inside(leaf, o) for o in by_name["outer"]) for leaf in by_name["leaf"])
    assert all(any(inside(p, r) for r in by_name["leaf"] + by_name["ticks"]) for p in by_name["plain"])
    assert len({r.tid for r in by_name["outer"]}) == 3  # the main thread and two threads


@needs_native
@pytest.mark.skipif(not MONITORED, reason="sys.monitoring is 3.12+")
def test_without_a_free_tool_id_coroutines_are_wrapped_as_before(tmp_path: Path) -> None:
    make_file(tmp_path / "service.py", SERVICE)
    (rec,), out = run_under_recorder(
        tmp_path,
        f"""
import asyncio, sys
sys.path.insert(0, {str(tmp_path)!r})
for tool_id in range(6):
    sys.monitoring.use_tool_id(tool_id, "someone else")
import autonvtx
import service as s
leaf = s.leaf
autonvtx.install(targets=["service"], engine="wrap")
print(s.leaf is leaf, s.leaf.__wrapped__ is leaf, autonvtx.is_instrumented(s.leaf))
print(asyncio.run(s.outer("a")))
""",
    )
    assert out.splitlines() == ["False True True", "a"]
    assert [r.name for r in rec.ranges if r.kind == "startend"].count("leaf") == 1


@needs_native
@pytest.mark.skipif(not MONITORED, reason="sys.monitoring is 3.12+")
def test_no_tool_id_is_claimed_until_a_coroutine_function_is_selected(tmp_path: Path) -> None:
    make_file(tmp_path / "plainly.py", "def plain(x):\n    return x\nasync def left_out():\n    return 0\n")
    make_file(tmp_path / "later.py", "async def later():\n    return 1\n")
    make_file(
        tmp_path / "prog.py",
        """
import sys
import plainly
held = lambda: [i for i in range(6) if sys.monitoring.get_tool(i) == "autonvtx"]
print(plainly.plain(1), held(), "autonvtx.engines.coroutines" in sys.modules)
import later
print(held(), hasattr(later.later, "__wrapped__"))
""",
    )
    done = run_autonvtx(
        "--engine", "wrap", "-t", "plainly", "-t", "later", "--exclude", "left_out", "-v", "prog.py", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    # plainly: a plain function wrapped, its coroutine function left out (nothing of the code
    # ranging loaded yet); later's claims the id.
    assert done.stdout.splitlines() == ["1 [] False", "[4] False"]
    assert "wrapped 2 functions in 2 modules (1 skipped)" in done.stderr


@needs_native
@pytest.mark.skipif(not MONITORED, reason="sys.monitoring is 3.12+")
def test_regions_in_a_monitored_coroutine_nest_inside_its_ranges(tmp_path: Path) -> None:
    make_file(
        tmp_path / "loops.py",
        """
import asyncio

async def consume(n):
    for i in range(n):
        await asyncio.sleep(0)

def main():
    asyncio.run(consume(2))
    print(consume.__module__, hasattr(consume, "__wrapped__"))
""",
    )
    make_file(tmp_path / "prog.py", "import loops\nloops.main()\n")
    make_file(
        tmp_path / "rules.toml",
        '[[rules]]\nmodules = ["loops"]\ninclude = ["consume"]\ncoroutine = "resumptions"\n'
        '[[regions]]\nfunction = "loops:consume"\nloop = "first"\nname = "step {i}"\n',
    )
    done = run_autonvtx("--config", "rules.toml", "--engine", "wrap", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["loops False"]
    events = done.ranges()
    consumes = [e for e in events if e["name"] == "consume"]
    steps = [e for e in events if e["name"].startswith("step")]
    assert len(consumes) == 3 and steps
    for step in steps:
        assert any(c["ts"] <= step["ts"] and step["ts"] + step["dur"] <= c["ts"] + c["dur"] for c in consumes)


@needs_native
def test_a_child_process_ranges_coroutines_as_its_parent(tmp_path: Path) -> None:
    make_file(tmp_path / "later.py", "async def later():\n    return 1\n")
    make_file(
        tmp_path / "prog.py",
        """
import subprocess, sys
code = "import asyncio, later; print(hasattr(later.later, '__wrapped__'), asyncio.run(later.later()))"
print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip())
""",
    )
    done = run_autonvtx("--engine", "wrap", "-t", "later", "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{not MONITORED} 1"]
    # The call's one start/end range ("b" and "e" events in the trace).
    assert [e["name"] for e in done.trace["traceEvents"] if e.get("ph") == "b"] == ["later"]
