"""The code engine's layer (ranges.CodeMonitor, Python 3.12+): ranges on code objects through
sys.monitoring, observed through the recorder."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, make_file, run_under_recorder

from autonvtx import ranges
from autonvtx.config import RangeStyle
from autonvtx.recorder.model import ProcessRecording

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 12) or ranges.monitoring_available() is not None,
    reason=f"the code engine cannot run here: {ranges.monitoring_available()}",
)

# Every program starts with this: a CodeMonitor installed, and watch(f) monitoring f's code.
PRELUDE = """
import sys
from autonvtx import ranges
from autonvtx.config import RangeStyle

monitor = ranges.CodeMonitor()
assert monitor.install() is None

def watch(func_or_code, coroutine="call"):
    code = getattr(func_or_code, "__code__", func_or_code)
    style = RangeStyle("autonvtx", "{qualname}", 0xFF00FF00, None, coroutine)
    monitor.monitor(code, ranges.emitter_with_message(style, code.co_qualname))
"""


def record(tmp_path: Path, body: str) -> tuple[ProcessRecording, str]:
    (recording,), stdout = run_under_recorder(tmp_path, PRELUDE + textwrap.dedent(body))
    return recording, stdout


def nested(rec: ProcessRecording) -> list[str]:
    """Each range as its name indented by its nesting depth on its thread, in start order;
    fails on a range left open or a pop that closed nothing."""
    assert rec.unmatched_pops == 0 and not [r for r in rec.ranges if r.is_open]

    def depth(inner: Any) -> int:
        return sum(
            1
            for r in rec.ranges
            if r is not inner and r.tid == inner.tid and r.start_ns <= inner.start_ns and inner.end_ns <= r.end_ns
        )

    return ["  " * depth(r) + r.name for r in rec.ranges]


def test_functions_methods_and_recursion_get_one_range_per_call(tmp_path: Path) -> None:
    rec, _ = record(
        tmp_path,
        """
        def fact(n):
            return 1 if n <= 1 else n * fact(n - 1)

        class Model:
            def forward(self, *args, **kwargs):
                return fact(len(args) + len(kwargs))

        def untargeted():
            return Model().forward(1, k=2)

        for f in (fact, Model.forward):
            watch(f)
        untargeted()
        fact(1)
        """,
    )
    assert nested(rec) == ["Model.forward", "  fact", "    fact", "fact"]


def test_exceptions_pop_every_frame_they_leave(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        def fails():
            raise ValueError("x")

        def passes_it_on():
            return fails()

        def catches():
            try:
                passes_it_on()
            except ValueError:
                return "caught"

        for f in (fails, passes_it_on, catches):
            watch(f)
        print(catches())
        try:
            passes_it_on()
        except ValueError:
            pass
        """,
    )
    assert out.split() == ["caught"]
    assert nested(rec) == [
        "catches",
        "  passes_it_on",
        "    fails",
        "passes_it_on",
        "  fails",
    ]


def test_exceptions_pop_while_another_thread_opens_and_closes_ranges(tmp_path: Path) -> None:
    # PY_UNWIND is on only while some thread has a range open: one thread's ranges closing
    # must not turn it off under another thread's open frame.
    rec, out = record(
        tmp_path,
        """
        import threading

        holding, release = threading.Event(), threading.Event()

        def fails():
            raise ValueError("x")

        def holder():
            holding.set()
            release.wait()
            fails()

        def quiet():
            try:
                raise KeyError("untargeted")
            except KeyError:
                return 0

        def run():
            try:
                holder()
            except ValueError:
                print("holder unwound")

        watch(fails)
        watch(holder)
        thread = threading.Thread(target=run)
        thread.start()
        holding.wait()
        for _ in range(3):
            try:
                fails()
            except ValueError:
                pass
        quiet()
        release.set()
        thread.join()
        try:
            fails()
        except ValueError:
            print("unwound with no range open elsewhere")
        """,
    )
    assert out.splitlines() == ["holder unwound", "unwound with no range open elsewhere"]
    by_thread: dict[int, list[str]] = {}
    for r, name in zip(rec.ranges, nested(rec)):
        by_thread.setdefault(r.tid, []).append(name)
    assert sorted(by_thread.values(), key=len) == [["holder", "  fails"], ["fails"] * 4]


def test_where_the_table_of_global_events_is_unknown_unwind_stays_on(tmp_path: Path) -> None:
    # The fallback: no table to switch PY_UNWIND in, so it is on for good, and exceptions
    # still pop every monitored frame they leave.
    (recording,), out = run_under_recorder(
        tmp_path,
        textwrap.dedent("""
            import sys
            from autonvtx import ranges
            from autonvtx.config import RangeStyle

            ranges._native.global_events = lambda: None  # as where globalevents.c found none
            monitor = ranges.CodeMonitor()
            assert monitor.install() is None
            events = sys.monitoring.events
            print(sys.monitoring.get_events(monitor.tool_id) == events.PY_UNWIND | events.PY_THROW)

            def fails():
                raise ValueError("x")

            def passes_it_on():
                return fails()

            for f in (fails, passes_it_on):
                monitor.monitor(f.__code__, ranges.emitter_with_message(
                    RangeStyle("autonvtx", "{qualname}", 0, None), f.__qualname__))
            try:
                passes_it_on()
            except ValueError:
                print("unwound")
        """),
    )
    assert out.split() == ["True", "unwound"]
    assert nested(recording) == ["passes_it_on", "  fails"]


def test_a_generator_gets_a_range_per_resumption_and_each_exit_pops(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        def gen():
            received = yield 1
            try:
                yield received
            except KeyError:
                yield "handled"
            yield "last"

        watch(gen)
        g = gen()
        print(next(g), g.send(2), g.throw(KeyError()))  # three resumptions
        g.close()                                          # a fourth: GeneratorExit unwinds it
        g = gen()
        next(g)
        try:
            g.throw(ValueError())                          # not handled: unwinds it
        except ValueError:
            print("raised")
        gen().close()                                      # never started: nothing runs
        print(list(gen()) == [1, None, "last"])            # three values, then the return
        """,
    )
    assert out.split() == ["1", "2", "handled", "raised", "True"]
    assert nested(rec) == ["gen"] * (4 + 2 + 4)


def test_interleaved_asyncio_tasks_and_async_generators_never_misnest(tmp_path: Path) -> None:
    # coroutine = "resumptions": pushed ranges (test_coroutine_calls.py has the default).
    rec, out = record(
        tmp_path,
        """
        import asyncio

        async def leaf(tag):
            await asyncio.sleep(0)
            return tag

        async def task(tag):
            first = await leaf(tag)
            await asyncio.sleep(0)
            return first + tag

        async def ticks():
            for i in range(2):
                await asyncio.sleep(0)
                yield i

        async def main():
            results = await asyncio.gather(task("a"), task("b"))
            print(*results, [i async for i in ticks()])
            closed = leaf("never awaited")
            closed.close()

        for f in (leaf, task, ticks):
            watch(f, "resumptions")
        asyncio.run(main())
        """,
    )
    assert out.split() == ["aa", "bb", "[0,", "1]"]
    # Each task runs three times: leaf starts (and suspends) in the first, resumes and returns
    # in the second; the two tasks alternate and neither's range ever holds the other's.
    # ticks: 2 sleeps, 2 values, 1 finishing resumption. The closed coroutine never ran.
    assert nested(rec) == ["task", "  leaf"] * 4 + ["task"] * 2 + ["ticks"] * 5


def test_threads_keep_their_own_ranges(tmp_path: Path) -> None:
    rec, _ = record(
        tmp_path,
        """
        import threading

        def leaf(i):
            return i

        def work(n):
            return sum([leaf(i) for i in range(n)])

        def numbers():
            yield leaf(1)
            yield leaf(2)

        watch(leaf)
        watch(work)
        watch(numbers)
        shared = numbers()
        next(shared)                      # started here, finished on another thread
        barrier = threading.Barrier(2)

        def run(finish):
            barrier.wait()                # both threads run at once
            for _ in range(200):
                work(3)
            if finish:
                for _ in shared:          # resumed twice: the second yield, then the end
                    pass

        threads = [threading.Thread(target=run, args=(i == 0,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        """,
    )
    by_thread: dict[int, list[str]] = {}
    for r, name in zip(rec.ranges, nested(rec)):
        by_thread.setdefault(r.tid, []).append(name)
    assert sorted(by_thread.values(), key=len) == [
        ["numbers", "  leaf"],
        ["work", "  leaf", "  leaf", "  leaf"] * 200,
        ["work", "  leaf", "  leaf", "  leaf"] * 200 + ["numbers", "  leaf", "numbers"],
    ]


def test_a_nested_closure_is_monitored_through_its_code_object(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        import pickle

        def make_step(scale):
            def step(x):
                caller = sys._getframe(1).f_code.co_name
                return x * scale, caller
            return step

        early = make_step(2)                  # made before monitoring, as a registry would
        registry = {"step": early}
        identity, pickled = id(make_step), pickle.dumps(make_step)
        step_code = next(c for c in make_step.__code__.co_consts
                         if isinstance(c, type(make_step.__code__)))
        watch(step_code)
        late = make_step(3)

        def run():
            return early(1), late(1), registry["step"](2)

        print(step_code.co_qualname, run())
        print(id(make_step) == identity, pickle.dumps(make_step) == pickled,
              pickle.loads(pickled) is make_step, registry["step"] is early,
              early.__code__ is late.__code__ is step_code)
        """,
    )
    lines = out.splitlines()
    assert lines[0] == "make_step.<locals>.step ((2, 'run'), (3, 'run'), (4, 'run'))"
    assert lines[1].split() == ["True"] * 5
    assert nested(rec) == ["make_step.<locals>.step"] * 3


def test_a_frame_running_when_its_code_gets_monitored_pops_nothing(tmp_path: Path) -> None:
    rec, _ = record(
        tmp_path,
        """
        import nvtx

        def leaf():
            return 1

        def running():
            watch(running)        # this frame pushed nothing: its return must pop nothing
            leaf()
            return 2

        def recursing(n):
            if n == 0:
                watch(recursing)  # the frames below pushed nothing either
                return recursing(-1)
            return 0 if n < 0 else recursing(n - 1)

        watch(leaf)
        with nvtx.annotate("user", domain="autonvtx"):  # the program's own range, same domain
            running()
            recursing(2)
        running()
        """,
    )
    assert nested(rec) == ["user", "  leaf", "  recursing", "running", "  leaf"]


def test_uninstall_stops_the_ranges_and_leaves_no_trace(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        """
        def f():
            return 1

        watch(f)
        f()
        tool_id = monitor.tool_id
        monitor.uninstall()
        f()
        events = sys.monitoring.events
        print(sys.monitoring.get_tool(tool_id), monitor.tool_id, monitor.monitored(),
              ranges._client.attached(f.__code__))
        # The freed id can be claimed again, and no events of ours come with it.
        sys.monitoring.use_tool_id(tool_id, "next")
        print(sys.monitoring.get_events(tool_id), sys.monitoring.get_local_events(tool_id, f.__code__))
        # A monitor can be installed again after that.
        sys.monitoring.free_tool_id(tool_id)
        again = ranges.CodeMonitor()
        print(again.install(), ranges.monitoring_available() is not None)
        again.uninstall()
        """,
    )
    assert out.splitlines() == ["None None 0 None", "0 0", "None True"]
    assert nested(rec) == ["f"]


def test_the_range_is_released_with_the_code_or_when_detached() -> None:
    monitor = ranges.CodeMonitor()
    assert monitor.install() is None
    try:
        emitter = ranges.emitter_with_message(RangeStyle("autonvtx", "m", 0, None), "m")
        native = emitter.native
        # Counted into plain locals: pytest's rewritten asserts keep what they compare alive.
        counts = [sys.getrefcount(native)]

        def f() -> None:
            pass

        monitor.monitor(f.__code__, emitter)
        attached = ranges._client.attached(f.__code__) is native
        counts.append(sys.getrefcount(native))
        assert attached and monitor.is_monitored(f.__code__) and monitor.monitored() == 1
        # Monitored again: the new range replaces the first, which is released.
        monitor.monitor(f.__code__, ranges.prepared_range("autonvtx", "again", 0, 0))
        counts.append(sys.getrefcount(native))
        assert ranges._client.attached(f.__code__).message == "again"
        assert monitor.monitored() == 1
        monitor.unmonitor(f.__code__)
        counts.append(sys.getrefcount(native))
        assert not monitor.is_monitored(f.__code__) and ranges._client.attached(f.__code__) is None
        assert sys.monitoring.get_local_events(monitor.tool_id, f.__code__) == 0
        # A code object that dies releases the range it held (the code extra's free function).
        code = compile("def g(): pass", "<m>", "exec").co_consts[0]
        ranges._client.attach(code, native)
        counts.append(sys.getrefcount(native))
        del code
        counts.append(sys.getrefcount(native))
        held = counts[0]
        assert counts == [held, held + 1, held, held, held + 1, held]
    finally:
        monitor.uninstall()


@pytest.fixture
def all_tool_ids_taken() -> Iterator[list[int]]:
    taken = [i for i in range(6) if sys.monitoring.get_tool(i) is None]
    for i in taken:
        sys.monitoring.use_tool_id(i, f"test-{i}")
    yield taken
    for i in taken:
        sys.monitoring.free_tool_id(i)


def test_no_free_tool_id_is_a_reason_not_an_error(all_tool_ids_taken: list[int]) -> None:
    reason = ranges.monitoring_available()
    assert reason is not None and reason.startswith("no free sys.monitoring tool id")
    assert "'test-4'" in reason and "\n" not in reason
    monitor = ranges.CodeMonitor()
    assert monitor.install() == reason and monitor.tool_id is None
    assert [sys.monitoring.get_tool(i) for i in all_tool_ids_taken] == [f"test-{i}" for i in all_tool_ids_taken]


def test_other_reasons_and_misuse(monkeypatch: pytest.MonkeyPatch) -> None:
    first = ranges.CodeMonitor()
    assert first.install() is None
    try:
        assert first.tool_id == 4 or sys.monitoring.get_tool(4) is not None
        assert sys.monitoring.get_tool(first.tool_id) == "autonvtx"
        second = ranges.CodeMonitor()
        assert "already monitors code" in (second.install() or "")
        with pytest.raises(RuntimeError, match="not installed"):
            second.monitor(test_other_reasons_and_misuse.__code__, None)
        pure = ranges.Emitter("m", "autonvtx", lambda: None, lambda: None)
        with pytest.raises(ValueError, match="no native range"):
            first.monitor(test_other_reasons_and_misuse.__code__, pure)
        with pytest.raises(TypeError, match="code object"):
            first.monitor(len, ranges._client.Range("autonvtx", "m"))  # type: ignore[arg-type]
    finally:
        first.uninstall()
    monkeypatch.setattr(ranges, "_native", None)
    assert ranges.monitoring_available() == "AUTONVTX_PURE_PYTHON is set"
    monkeypatch.setattr(ranges, "_client", None)
    assert "not built" in (ranges.monitoring_available() or "")


TOOL_PROGRAM = """
def work(n):
    return sum(helper(i) for i in range(n))

def helper(i):
    return i * 2

watch(work)
watch(helper)
"""


def run_recorded(tmp_path: Path, command: list[str], **env: str) -> tuple[ProcessRecording, str]:
    """`command` (in tmp_path) with the recorder attached; its one process's recording."""
    from autonvtx import environment
    from autonvtx.recorder import native
    from autonvtx.recorder.recording import read_directory

    library = native.library_path()
    if library is None:
        pytest.skip("the native recorder is not built in this checkout")
    out = tmp_path / "rec"
    out.mkdir()
    full = dict(os.environ, PYTHONPATH=str(REPO), **env)
    full.pop(environment.RECORDER_MODE, None)
    full[environment.NVTX_INJECTION64_PATH] = library
    full[environment.RECORD_DIR] = str(out)
    proc = subprocess.run(command, cwd=tmp_path, env=full, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (recording,) = read_directory(out)
    return recording, proc.stdout


@pytest.mark.parametrize("core", ["sysmon", "ctrace"])
def test_ranges_and_coverage_both_work_under_coverage_run(tmp_path: Path, core: str) -> None:
    pytest.importorskip("coverage")
    make_file(tmp_path / "prog.py", PRELUDE + TOOL_PROGRAM + "print(work(3), monitor.tool_id)\n")
    rec, out = run_recorded(tmp_path, [sys.executable, "-m", "coverage", "run", "prog.py"], COVERAGE_CORE=core)
    assert out.split()[0] == "6" and out.split()[1] != "1"  # coverage.py's id is left to it
    assert nested(rec) == ["work", "  helper", "  helper", "  helper"]
    report = subprocess.run(
        [sys.executable, "-m", "coverage", "report", "--show-missing", "--include=prog.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert report.returncode == 0, report.stderr
    # Every line of prog.py ran, so coverage must have seen each one (100%, nothing missing).
    assert report.stdout.splitlines()[-1].split()[-1] == "100%", report.stdout


def test_ranges_and_cprofile_both_work(tmp_path: Path) -> None:
    rec, out = record(
        tmp_path,
        TOOL_PROGRAM
        + """
import cProfile, pstats, io
profile = cProfile.Profile()
profile.enable()
work(2)
profile.disable()
stats = io.StringIO()
pstats.Stats(profile, stream=stats).print_stats("helper")
print(work(1), [line.split()[0] for line in stats.getvalue().splitlines() if "(helper)" in line])
""",
    )
    assert out.strip() == "0 ['2']"  # cProfile counted helper's two calls
    assert nested(rec) == ["work", "  helper", "  helper", "work", "  helper"]


def test_functions_of_untargeted_code_are_left_alone() -> None:
    monitor = ranges.CodeMonitor()
    assert monitor.install() is None
    try:

        def targeted() -> int:
            return sys.monitoring.get_events(monitor.tool_id)

        def untargeted() -> int:
            return 2

        monitor.monitor(targeted.__code__, ranges._client.Range("autonvtx", "targeted"))
        tool = monitor.tool_id
        assert sys.monitoring.get_local_events(tool, untargeted.__code__) == 0
        assert sys.monitoring.get_local_events(tool, targeted.__code__) != 0
        assert isinstance(targeted, types.FunctionType)
        # PY_UNWIND, global by nature, is on only while a range is open (where the
        # interpreter's table of global events could be checked).
        events = sys.monitoring.events
        assert targeted() == events.PY_UNWIND | events.PY_THROW
        assert sys.monitoring.get_events(tool) in (events.PY_THROW, events.PY_UNWIND | events.PY_THROW)
        if ranges._client.global_events() is not None:
            assert sys.monitoring.get_events(tool) == events.PY_THROW
    finally:
        monitor.uninstall()


MANY = "\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(400))


def test_a_wholesale_walk_keeps_little_per_function_and_uninstall_leaves_nothing(tmp_path: Path) -> None:
    # What a monitored function keeps after a wholesale walk (tracemalloc, 400 functions over
    # one): CPython's monitoring data (72 bytes on 3.12, in an 80-byte block whose last 8 hold
    # the module's pending style; 64 on 3.13, the style's number in the 4 spare bytes between
    # its event tables: no code extra either way) and one list entry, the code itself, which is
    # the report's name (read as its co_qualname) and what uninstall() reads. Called or not,
    # every code has its range; uninstall() takes back every event and range and leaves the
    # report as it read, holding names, not code objects.
    make_file(tmp_path / "many_mod.py", MANY)
    make_file(tmp_path / "one_mod.py", "def only(x):\n    return x\n")
    probe = f"""
        import gc, sys, tracemalloc, types
        sys.path.insert(0, {str(tmp_path)!r})
        import many_mod, one_mod
        from autonvtx.api import install
        from autonvtx import ranges
        install(targets=["colorsys"], engine="code").uninstall()  # the machinery, imported
        gc.disable()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        installed = install(targets=[sys.argv[1]], engine="code")
        print(tracemalloc.get_traced_memory()[0] - before)
        tracemalloc.stop()
        if sys.argv[1] == "many_mod":
            monitor, client = ranges.CodeMonitor.active, ranges._client
            report = installed._instrumentation.walker.reports["many_mod"]
            codes = [getattr(many_mod, f"f{{i}}").__code__ for i in range(400)]
            many_mod.f3(1)
            print(all(monitor.is_monitored(c) for c in codes), monitor.monitored(),
                  client.attached(codes[7]).message, client.attached(codes[3]).message)
            lines = report.lines()
            print(len(lines), sum(isinstance(entry, types.CodeType) for entry in report._names))
            tool = monitor.tool_id
            installed.uninstall()
            print(any(client.has_range(c) or client.attached(c) is not None for c in codes),
                  {{sys.monitoring.get_local_events(tool, c) for c in codes}},
                  report.lines() == lines, [e for e in report._names if not isinstance(e, str)])
    """
    script = make_file(tmp_path / "probe.py", probe)
    env = noop_tool_env()
    sizes, lines = {}, {}
    for target in ("many_mod", "one_mod"):
        done = subprocess.run(
            [sys.executable, str(script), target], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        first, *rest = done.stdout.splitlines()
        sizes[target], lines[target] = int(first), rest
    # The 400 codes, folded into the report's lines, stay in its list for uninstall.
    assert lines["many_mod"] == ["True 400 f7 f3", "400 400", "False {0} True []"]
    per_function = (sizes["many_mod"] - sizes["one_mod"]) / 399
    # 80 + 8 (3.12) and 64 + 8 (3.13), with the list's growth: a code extra (16) or a second
    # list entry (8) would not fit.
    assert per_function <= (92 if sys.version_info < (3, 13) else 76), per_function


def test_unmonitoring_a_walked_code_keeps_its_name_in_the_report(tmp_path: Path) -> None:
    # The native walk keeps a monitored code in the report's list, in its name's place: taken
    # off one code, the monitor forgets it there and the report keeps the name.
    make_file(tmp_path / "many_mod.py", MANY)
    probe = f"""
        import sys, types
        sys.path.insert(0, {str(tmp_path)!r})
        import many_mod
        from autonvtx.api import install
        from autonvtx import ranges
        installed = install(targets=["many_mod"], engine="code")
        monitor, client = ranges.CodeMonitor.active, ranges._client
        report = installed._instrumentation.walker.reports["many_mod"]
        codes = [getattr(many_mod, f"f{{i}}").__code__ for i in range(400)]
        lines = report.lines()
        monitor.unmonitor(codes[5])
        tool = monitor.tool_id
        print(monitor.monitored(), monitor.is_monitored(codes[5]), sys.monitoring.get_local_events(tool, codes[5]),
              sum(isinstance(e, types.CodeType) for e in report._names), report.lines() == lines)
        many_mod.f5(1)
        print(client.attached(codes[5]), client.attached(codes[6]).message)
        installed.uninstall()
        print({{sys.monitoring.get_local_events(tool, c) for c in codes}}, report.lines() == lines)
    """
    script = make_file(tmp_path / "probe.py", probe)
    env = noop_tool_env()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["399 False 0 399 True", "None f6", "{0} True"]


def test_the_spare_bytes_of_the_monitoring_data_are_probed_on_a_code_of_their_own() -> None:
    # 3.13: the walk keeps a pending style in the monitoring data's spare bytes only after a
    # probe code's mark came through its first run; a code with data already is refused.
    client = ranges._client
    probe = getattr(client, "gap_probe", None)
    if probe is None:
        pytest.skip("no native client")

    def fresh() -> int:
        return 2

    import sysconfig

    if sys.version_info[:2] == (3, 13) and not sysconfig.get_config_var("Py_GIL_DISABLED"):
        assert probe(fresh.__code__, 0) is True
        assert fresh() == 2  # instrumented at its first run, as a walked code
        assert probe(fresh.__code__, 1) is True
        assert probe(fresh.__code__, 0) is False  # its data is there now
    else:
        assert probe(fresh.__code__, 0) is True and probe(fresh.__code__, 1) is True  # nothing to probe


def noop_tool_env() -> dict[str, str]:
    """This environment with the native recorder attached as a no-op NVTX tool; skips the test
    where it is not built."""
    from autonvtx.recorder import native

    library = native.library_path()
    if library is None:
        pytest.skip("the native recorder is not built in this checkout")
    return {**os.environ, "NVTX_INJECTION64_PATH": library, "AUTONVTX_RECORDER_MODE": "noop", "PYTHONPATH": str(REPO)}
