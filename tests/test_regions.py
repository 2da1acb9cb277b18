"""Regions inside functions, end to end through the recorder: a range per loop iteration (for,
while, async for; break, continue, return and exceptions out of the loop; generators inside
it), line spans, calls, capture windows; their config's messages; the refusal before 3.12."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import make_file, run_autonvtx

needs_312 = pytest.mark.skipif(sys.version_info < (3, 12), reason="regions need sys.monitoring (3.12+)")


def outline(events: list[dict[str, Any]], tid: Any = None) -> list[str]:
    """The complete events of one thread as an indented outline: a child under the range
    that contains it, siblings in time order."""
    if tid is None:
        tid = events[0]["tid"]
    spans = []
    for e in events:
        if e["tid"] == tid:
            start = round(e["ts"] * 1000)
            spans.append((start, -round(e["dur"] * 1000), e["name"]))
    lines: list[str] = []
    open_ends: list[int] = []
    for start, minus_duration, name in sorted(spans):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        lines.append("  " * len(open_ends) + name)
        open_ends.append(start - minus_duration)
    return lines


def record(
    tmp_path: Path,
    module: str,
    regions: str,
    main: str = "loops.main()\n",
    rules: str = "loops",
    extra: tuple[str, ...] = (),
) -> tuple[list[str], Any]:
    """Run `main` (after `import loops`, the module `module`) under `autonvtx run --trace`
    with rules selecting `rules` and the `regions` tables; the outline of its main thread."""
    make_file(tmp_path / "loops.py", module)
    make_file(tmp_path / "prog.py", "import loops\n" + main)
    rule = f'[[rules]]\nmodules = ["{rules}"]\n' if rules else ""
    make_file(tmp_path / "regions.toml", rule + regions)
    done = run_autonvtx("--config", "regions.toml", *extra, "prog.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    events = done.ranges()
    return (outline(events) if events else []), done


FOR_LOOP = """
    def work(i):
        return i

    def train(n):
        total = 0
        for i in range(n):
            total += work(i)
            if i == 1:
                continue
            total += 1
        done()
        return total

    def done():
        pass

    def main():
        train(3)
"""


@needs_312
def test_a_range_per_for_iteration_nests_in_the_function_and_around_its_calls(tmp_path: Path) -> None:
    lines, done = record(
        tmp_path, FOR_LOOP, '[[regions]]\nfunction = "loops:train"\nloop = "first"\nname = "step {i}"\n'
    )
    assert lines == [
        "main",
        "  train",
        "    step 0",
        "      work",
        "    step 1",  # continue: the next iteration begins at the body's first line again
        "      work",
        "    step 2",
        "      work",
        "    done",  # the loop ended: what follows it is outside every iteration
    ]
    payloads = [e["args"].get("payload") for e in done.ranges() if e["name"].startswith("step")]
    assert payloads == [0, 1, 2]


NESTED_LOOPS = """
    def work(i):
        return i

    def train(epochs):
        for epoch in range(epochs):
            for step in range(2):
                work(step)
            while False:
                pass
            work(epoch)

    def main():
        train(2)
"""


@needs_312
def test_an_outer_iteration_whose_body_starts_with_an_inner_loop_is_one_range(tmp_path: Path) -> None:
    # The body's first line is the inner loop's header, which runs at each inner step: each
    # outer iteration was restarted there (123 "epoch" ranges for 3 epochs in the example).
    regions = (
        '[[regions]]\nfunction = "loops:train"\nloop = "first"\nname = "epoch {i}"\n'
        '[[regions]]\nfunction = "loops:train"\nloop = 6\nname = "step {i}"\n'
    )
    lines, _ = record(tmp_path, NESTED_LOOPS, regions)
    assert lines == [
        "main",
        "  train",
        "    epoch 0",
        "      step 0",
        "        work",
        "      step 1",
        "        work",
        "      work",
        "    epoch 1",
        "      step 2",
        "        work",
        "      step 3",
        "        work",
        "      work",
    ]


@needs_312
def test_regions_work_beside_the_wrap_engine(tmp_path: Path) -> None:
    lines, _ = record(
        tmp_path,
        FOR_LOOP,
        '[[regions]]\nfunction = "loops:train"\nloop = 6\nname = "step {i}"\n',
        extra=("--engine", "wrap"),
    )
    assert lines == [
        "main",
        "  train",
        "    step 0",
        "      work",
        "    step 1",
        "      work",
        "    step 2",
        "      work",
        "    done",
    ]


WHILE_LOOP = """
    def work(i):
        return i

    def after():
        pass

    def spin(n):
        i = 0
        while True:
            i += 1
            if i % 2:
                continue
            work(i)
            if i >= n:
                break
        after()

    def main():
        spin(4)
"""


@needs_312
def test_while_loop_with_continue_and_break(tmp_path: Path) -> None:
    lines, _ = record(tmp_path, WHILE_LOOP, '[[regions]]\nfunction = "loops:spin"\nloop = 9\n')
    assert lines == [
        "main",
        "  spin",
        "    spin 0",
        "    spin 1",
        "      work",
        "    spin 2",
        "    spin 3",
        "      work",
        "    after",  # break: the iteration closed before the line after the loop
    ]


RETURN_AND_RAISE = """
    def work(i):
        if i == 2:
            raise ValueError(i)
        return i

    def find(n):
        for i in range(n):
            if work(i) == 1:
                return i
        return -1

    def fails(n):
        for i in range(n):
            work(i)

    def handles(n):
        try:
            for i in range(n):
                work(i)
        except ValueError:
            handled()

    def handled():
        pass

    def main():
        find(5)
        try:
            fails(5)
        except ValueError:
            pass
        handles(5)
        find(5)
"""


@needs_312
def test_return_and_exceptions_leave_the_loop(tmp_path: Path) -> None:
    regions = "".join(
        f'[[regions]]\nfunction = "loops:{name}"\nloop = "first"\nname = "{name} {{i}}"\n'
        for name in ("find", "fails", "handles")
    )
    lines, _ = record(tmp_path, RETURN_AND_RAISE, regions)
    assert lines == [
        "main",
        "  find",
        "    find 0",
        "      work",
        "    find 1",  # return from inside the loop closes the iteration
        "      work",
        "  fails",
        "    fails 0",
        "      work",
        "    fails 1",
        "      work",
        "    fails 2",  # the exception leaves the function: the iteration closes with it
        "      work",
        "  handles",
        "    handles 0",
        "      work",
        "    handles 1",
        "      work",
        "    handles 2",
        "      work",
        "    handled",  # caught outside the loop, in the same function: outside the iteration
        "  find",
        "    find 2",  # each process counts its iterations: the index goes on
        "      work",
        "    find 3",
        "      work",
    ]


GENERATORS = """
    def numbers(n):
        for i in range(n):
            yield i

    def use(x):
        return x

    def consume():
        for x in numbers(2):
            use(x)

    def main():
        consume()
"""


@needs_312
def test_generators_inside_loops_and_loops_inside_generators(tmp_path: Path) -> None:
    regions = (
        '[[regions]]\nfunction = "loops:consume"\nloop = "first"\nname = "outer {i}"\n'
        '[[regions]]\nfunction = "loops:numbers"\nloop = "first"\nname = "inner {i}"\n'
    )
    lines, _ = record(tmp_path, GENERATORS, regions)
    # The generator's range is per resumption (the code engine), and its own iteration closes
    # at each yield and reopens, with the same index, when it resumes: nothing stays open
    # across a suspension, so every range nests on the thread.
    assert lines == [
        "main",
        "  consume",
        "    numbers",  # the first item is fetched before iteration 0 begins
        "      inner 0",
        "    outer 0",
        "      use",
        "      numbers",  # fetching the next item belongs to the iteration before it
        "        inner 0",
        "        inner 1",
        "    outer 1",
        "      use",
        "      numbers",
        "        inner 1",
    ]


ASYNC_FOR = """
    import asyncio

    async def ticks(n):
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    async def handle(x):
        await asyncio.sleep(0)
        return x

    async def consume():
        async for x in ticks(3):
            await handle(x)
            await asyncio.sleep(0)

    def main():
        asyncio.run(consume())
"""


@needs_312
def test_async_for_iterations_reopen_after_each_await_inside_the_coroutine(tmp_path: Path) -> None:
    lines, done = record(
        tmp_path,
        ASYNC_FOR,
        '[[regions]]\nfunction = "loops:consume"\nloop = "first"\nname = "tick {i}"\n',
        rules="nothing_here",
    )
    events = done.ranges()
    ticks = [e for e in events if e["name"].startswith("tick")]
    # An await suspends the coroutine: the iteration closes there and reopens with the same
    # index when it resumes. Each index appears, in order, and never overlaps another.
    names = [e["name"] for e in ticks]
    assert sorted(set(names), key=names.index) == ["tick 0", "tick 1", "tick 2"]
    assert names == sorted(names)
    assert len(names) > 3
    ends = [(round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in ticks]
    assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))


SPAN = """
    def a():
        pass

    def b():
        pass

    def d():
        pass

    def f(fail):
        a()
        try:
            b()
            if fail:
                raise ValueError()
            b()
        except ValueError:
            d()
        a()

    def main():
        f(False)
        f(True)
"""


@needs_312
def test_a_line_span_is_left_by_an_exception(tmp_path: Path) -> None:
    lines, _ = record(tmp_path, SPAN, '[[regions]]\nfunction = "loops:f"\nlines = "13-16"\nname = "middle"\n')
    assert lines == [
        "main",
        "  f",
        "    a",
        "    middle",
        "      b",
        "      b",
        "    a",
        "  f",
        "    a",
        "    middle",  # the raise leaves the span: the handler runs outside it
        "      b",
        "    d",
        "    a",
    ]


CAPTURED = """
    def work(i):
        return i

    def train(n):
        for i in range(n):
            work(i)

    def main():
        train(10)
"""


@needs_312
def test_the_capture_window_keeps_exactly_the_windowed_iterations(tmp_path: Path) -> None:
    regions = '[[regions]]\nfunction = "loops:train"\nloop = "first"\nname = "step {i}"\ncapture = [3, 6]\n'
    lines, done = record(tmp_path, CAPTURED, regions, extra=("-v",))
    assert lines == ["step 3", "  work", "step 4", "  work", "step 5", "  work"]
    window = [e for e in done.trace["traceEvents"] if e.get("name") == "capture"]
    assert {e["ph"] for e in window} == {"b", "e"}
    assert "capture window opened at iteration 3 (no CUDA runtime loaded in this process" in done.stderr
    assert "capture window closed at iteration 6" in done.stderr
    assert "events outside its capture windows (capture@autonvtx) left out" in done.stderr


@needs_312
def test_the_capture_shortcut_counts_calls_of_a_function_without_loops(tmp_path: Path) -> None:
    module = "def step(i):\n    return i\n\ndef main():\n    for i in range(5):\n        step(i)\n"
    lines, done = record(tmp_path, module, "", extra=("--capture", "loops:step:1-3"))
    # Calls 1 and 2. A call region's window opens at PY_START, after the code engine pushed
    # that call's own range, and closes at call 3's PY_START, after call 3's range began: the
    # exporter keeps the events that begin inside the window.
    assert lines == ["step 1", "step", "  step 2", "step"]


@needs_312
def test_a_window_that_never_opens_is_reported_at_exit(tmp_path: Path) -> None:
    regions = '[[regions]]\nfunction = "loops:train"\nloop = "first"\ncapture = [50, 60]\n'
    _, done = record(tmp_path, CAPTURED, regions)
    assert "warning: loops:train: capture window [50, 60) never opened: 10 iterations ran in process" in done.stderr


@needs_312
def test_unplaceable_regions_name_file_and_key(tmp_path: Path) -> None:
    regions = (
        '[[regions]]\nfunction = "loops:train"\nloop = 3\n'
        '[[regions]]\nfunction = "loops:work"\nloop = "first"\n'
        '[[regions]]\nfunction = "loops:train"\nlines = "1-40"\n'
        '[[regions]]\nfunction = "loops:trian"\nloop = "first"\n'
    )
    _, done = record(tmp_path, CAPTURED, regions)
    err = done.stderr
    assert (
        "warning: regions.toml: regions[0].loop: loops:train: no loop starts on line 3 of train; expected one of its loops' lines (5)"
        in err
    )
    assert "warning: regions.toml: regions[1].loop: loops:work: no loop in work (lines 1-2)" in err
    assert (
        "warning: regions.toml: regions[2].lines: loops:train: lines 1-40 are not all inside the body of train; expected lines within 5-6"
        in err
    )
    assert "warning: regions.toml: regions[3].function: 'loops:trian' matched no function in this process" in err


def test_bad_region_tables_are_reported_together(tmp_path: Path) -> None:
    make_file(tmp_path / "prog.py", "pass\n")
    make_file(
        tmp_path / "bad.toml",
        """
        [[regions]]
        loop = "last"
        lines = "9-3"
        name = "{step}"
        capture = [5, 2]
        colr = "red"
    """,
    )
    done = run_autonvtx("--config", "bad.toml", "prog.py", cwd=tmp_path, trace=False)
    assert done.returncode == 2
    if sys.version_info < (3, 12):
        assert done.stderr == (
            "autonvtx: bad.toml: regions[0]: regions need Python 3.12 or later (sys.monitoring, PEP 669);"
            f" this is Python {sys.version_info[0]}.{sys.version_info[1]}\n"
        )
        return
    assert done.stderr.splitlines() == [
        "autonvtx: bad.toml: regions[0].colr: unknown key; did you mean 'color'?",
        "autonvtx: bad.toml: regions[0]: a region needs 'function' ('module:qualname', globs allowed)",
        "autonvtx: bad.toml: regions[0].loop: expected \"first\" or the line number a loop starts on, got string 'last'",
        'autonvtx: bad.toml: regions[0].lines: expected a line span "first-last" such as "120-134", got string \'9-3\'',
        "autonvtx: bad.toml: regions[0].name: unknown field {step} in '{step}'; expected {i}, {module}, {qualname},"
        " {name}, {class}, {file}, {line}",
        "autonvtx: bad.toml: regions[0].capture: expected [from, to], iterations from <= i < to (0 <= from < to),"
        " got list [5, 2]",
    ]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="before 3.12 only")
def test_regions_are_refused_before_312(tmp_path: Path) -> None:
    make_file(tmp_path / "prog.py", "pass\n")
    done = run_autonvtx("--capture", "__main__:f:1-2", "prog.py", cwd=tmp_path, trace=False)
    assert done.returncode == 2
    assert done.stderr == (
        "autonvtx: --capture: capture windows need Python 3.12 or later (sys.monitoring, PEP 669);"
        f" this is Python {sys.version_info[0]}.{sys.version_info[1]}\n"
    )


@needs_312
def test_regions_survive_the_config_json_round_trip_into_children(tmp_path: Path) -> None:
    main = (
        "import subprocess, sys\n"
        "if sys.argv[1:] == ['child']:\n    loops.main()\n"
        "else:\n    subprocess.run([sys.executable, __file__, 'child'], check=True)\n"
    )
    regions = '[[regions]]\nfunction = "loops:train"\nloop = "first"\nname = "step {i}"\n'
    _, done = record(tmp_path, CAPTURED, regions, main=main)
    by_pid: dict[int, list[str]] = {}
    for e in done.ranges():
        by_pid.setdefault(e["pid"], []).append(e["name"])
    [child] = [names for names in by_pid.values() if "train" in names]
    assert [n for n in child if n.startswith("step")] == [f"step {i}" for i in range(10)]


@needs_312
def test_list_shows_where_each_region_was_placed(tmp_path: Path) -> None:
    make_file(tmp_path / "loops.py", CAPTURED)
    make_file(tmp_path / "regions.toml", '[[regions]]\nfunction = "loops:train"\nloop = "first"\n')
    import subprocess

    from conftest import autonvtx_env

    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "list", "--config", "regions.toml", "loops"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=autonvtx_env(PYTHONPATH=str(tmp_path)),
    )
    assert done.returncode == 0, done.stderr
    assert (
        "region loops:train (loops.py:4): first loop: for loop on line 5 (lines 5-6), iterations begin at line 6"
        in done.stdout
    )


def test_regions_config_round_trip_as_json() -> None:
    from autonvtx.config import Config, Region

    config = Config(regions=(Region("m:f", loop="first", capture=(1, 4), name="s {i}", origin="x"),))
    assert Config.from_json(config.to_json()) == config
    assert json.loads(config.to_json())["regions"][0]["capture"] == [1, 4]


@needs_312
def test_the_training_loop_example_profiles_steps_20_to_29(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "training_loop"
    import shutil

    for name in ("train.py", "autonvtx.toml"):
        shutil.copy(example / name, tmp_path / name)
    done = run_autonvtx("train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    steps = [name for name in done.range_names() if name.startswith("step")]
    assert sorted(steps, key=lambda s: int(s.split()[1])) == [f"step {i}" for i in range(20, 30)]
    assert "epoch 2: loss" in done.stdout


@needs_312
def test_the_window_calls_the_cuda_profiler_api_of_the_runtime_already_loaded(tmp_path: Path) -> None:
    import glob

    runtimes = sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so*"))
    if not runtimes:
        pytest.skip("no CUDA runtime library on this machine")
    make_file(
        tmp_path / "prog.py",
        f"""
        import ctypes
        ctypes.CDLL({runtimes[0]!r})  # as PyTorch or CuPy would have loaded it

        def train(n):
            for i in range(n):
                pass

        train(4)
    """,
    )
    done = run_autonvtx("-v", "--capture", "__main__:train:1-3", "prog.py", cwd=tmp_path, trace=False)
    assert done.returncode == 0, done.stderr
    # Without a GPU the call returns an error status; what matters is that it was made.
    assert "capture window opened at iteration 1 (cudaProfilerStart() returned " in done.stderr
    assert "capture window closed at iteration 3 (cudaProfilerStop() returned " in done.stderr


@needs_312
@pytest.mark.parametrize(
    "name, text",
    [
        (
            "pyproject.toml",
            '[tool.autonvtx]\n[[tool.autonvtx.regions]]\nfunction = "m:f"\nloop = 7\ncapture = [1, 2]\n',
        ),
        ("regions.yaml", 'regions:\n  - function: "m:f"\n    loop: 7\n    capture: [1, 2]\n'),
        ("regions.toml", '[[regions]]\nfunction = "m:f"\nloop = 7\ncapture = [1, 2]\n'),
    ],
)
def test_regions_are_read_from_every_config_format(tmp_path: Path, name: str, text: str) -> None:
    from autonvtx.config import Region
    from autonvtx.configfile import load_config

    make_file(tmp_path / name, text)
    config = load_config([name], cwd=str(tmp_path))
    where = "tool.autonvtx.regions[0]" if name == "pyproject.toml" else "regions[0]"
    assert config.regions == (Region("m:f", loop=7, capture=(1, 2), origin=f"{name}: {where}"),)


THREADS = """
    import threading

    def work(i):
        return i

    def train(n):
        for i in range(n):
            work(i)

    def main():
        threads = [threading.Thread(target=train, args=(3,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
"""


@needs_312
def test_each_thread_nests_its_own_iterations(tmp_path: Path) -> None:
    _, done = record(tmp_path, THREADS, '[[regions]]\nfunction = "loops:train"\nloop = "first"\nname = "step"\n')
    events = done.ranges()
    tids = sorted({e["tid"] for e in events if e["name"] == "train"})
    assert len(tids) == 2
    for tid in tids:
        assert outline(events, tid) == ["train", "  step", "    work", "  step", "    work", "  step", "    work"]
