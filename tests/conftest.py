"""Helpers shared by the test modules: writing files and running autonvtx as a user would."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

# Test files whose tests share one pytest-xdist worker when .ci/run spreads the suite over two
# (`pytest -n 2`): the real Nsight Systems captures run one at a time, and the third-party
# suites' environment is a module-scoped fixture built once rather than once per worker. Each
# group is one unit of work; every other test is a unit of its own.
XDIST_GROUPS = {
    "test_nsys_capture.py": "nsys",
    "test_nsys_torch.py": "nsys",
    "test_nsys_window.py": "nsys",
    "test_thirdparty.py": "thirdparty",
}


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown where xdist is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Load scheduling that keeps each XDIST_GROUPS group on one worker.

    xdist's own `--dist loadgroup` cannot be used: it marks a group by appending "@group" to
    `item._nodeid`, which pytest 9 no longer reads (Node.nodeid comes from `_id`), so every test
    would be its own unit and the captures would overlap. LoadScopeScheduling hands out the
    largest units first, so the groups start at once and the single tests fill in around them.
    """
    if config.getoption("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            name = nodeid.split("::", 1)[0].rpartition("/")[2]
            # Every file of real Nsight Systems captures shares the one nsys worker.
            return XDIST_GROUPS.get(name, "nsys" if name.startswith("test_nsys_") else nodeid)

    return GroupScheduling(config, log)


def skip_without(name: str) -> None:
    """Skip the calling test module where the top-level package `name` is not installed. Unlike
    pytest.importorskip it does not import the package: collection would otherwise import every
    framework (TensorFlow alone takes seconds) in each pytest-xdist worker, while the tests only
    ever import them in the subprocesses they run."""
    # Hidden from the traceback, as in importorskip: the skip is reported at the test module's
    # line, one per module (xdist drops a second report of the same place and reason).
    __tracebackhide__ = True
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"could not import {name!r}: No module named {name!r}", allow_module_level=True)


def take_view(options: dict[str, Any]) -> Any:
    """The view options among a request's keyword arguments (ViewOptions' fields), taken out of
    `options` into the one carrier a request holds."""
    import dataclasses

    from autonvtx.stats.model import ViewOptions

    names = {field.name for field in dataclasses.fields(ViewOptions)}
    return ViewOptions(**{name: options.pop(name) for name in list(options) if name in names})


def make_file(path: Path, text: str) -> Path:
    """Write dedented `text` to `path` (parents created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@dataclass
class Completed:
    """One finished `autonvtx` command: its status, output, and the trace it wrote, if any."""

    returncode: int
    stdout: str
    stderr: str
    trace_path: Path | None = None

    @property
    def trace(self) -> dict[str, Any]:
        assert self.trace_path is not None and self.trace_path.exists(), self.stderr
        return json.loads(self.trace_path.read_text())

    def ranges(self) -> list[dict[str, Any]]:
        """The trace's complete ("X") events, in file order."""
        return [e for e in self.trace["traceEvents"] if e.get("ph") == "X"]

    def range_names(self) -> list[str]:
        return [e["name"] for e in self.ranges()]


def default_verb() -> str:
    """What -v says a run's default engine did to a selected function: "monitored" by the
    code engine (3.12+ with the native client), else "wrapped"."""
    from autonvtx.engines.kinds import choose_engine

    return choose_engine("auto")[0].verb


def autonvtx_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell would give autonvtx: no NVTX tool attached yet."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTONVTX_", "NVTX_"))}
    env.update(extra)
    return env


def autonvtx_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m autonvtx ARGS...` in `cwd`, as a user's shell runs it, its output read as UTF-8
    (a lone surrogate in a hostile name comes back as U+FFFD rather than failing the test)."""
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        errors="replace",
        env=autonvtx_env(PYTHONIOENCODING="utf-8"),
        timeout=timeout,
    )


def another_nvtx_tool(directory: Path) -> dict[str, str]:
    """The environment of a program run under an NVTX tool that is not autonvtx's recorder: a
    copy of the recorder's library under another path, which autonvtx takes for a foreign tool."""
    import shutil

    from autonvtx.recorder import native

    library = native.library_path()
    assert library is not None
    copy = directory / "tool" / "libothertool.so"
    copy.parent.mkdir()
    shutil.copyfile(library, copy)
    return autonvtx_env(NVTX_INJECTION64_PATH=str(copy))


def run_autonvtx(
    *args: str,
    cwd: Path,
    trace: bool = True,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> Completed:
    """`python -m autonvtx run [--trace cwd/trace.json] ARGS...` in `cwd`. `timeout` only stops a
    hung run: CI runs two tests at once on two cores, where a whole test suite under autonvtx
    took 144 s."""
    trace_path = cwd / "trace.json" if trace else None
    command = [sys.executable, "-m", "autonvtx", "run"]
    if trace_path is not None:
        command += ["--trace", str(trace_path)]
    completed = subprocess.run(
        [*command, *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=env if env is not None else autonvtx_env(),
        timeout=timeout,
    )
    return Completed(completed.returncode, completed.stdout, completed.stderr, trace_path)


def run_under_recorder(
    tmp_path: Path, source: str, *, env: dict[str, str] | None = None, stderr: list[str] | None = None
) -> tuple[list[Any], str]:
    """Run the program `source` with the native recorder attached (as `autonvtx run --trace`
    would attach it); every process's recording, and the program's stdout. `env` is added to
    the environment; the program's stderr is appended to `stderr` when given."""
    from autonvtx import environment
    from autonvtx.recorder import native
    from autonvtx.recorder.recording import read_directory

    library = native.library_path()
    if library is None:
        pytest.skip("the native recorder is not built in this checkout")
    program = make_file(tmp_path / "prog.py", source)
    out = tmp_path / "rec"
    out.mkdir()
    extra = env or {}
    env = dict(os.environ)
    env.pop(environment.RECORDER_MODE, None)
    env[environment.NVTX_INJECTION64_PATH] = library
    env[environment.RECORD_DIR] = str(out)
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    proc = subprocess.run(
        [sys.executable, str(program)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    if stderr is not None:
        stderr.append(proc.stderr)
    return read_directory(out), proc.stdout


def fixture_modules() -> set[str]:
    """The test fixture packages (tests/modules/inst_*) currently imported."""
    return {name for name in sys.modules if name.partition(".")[0].startswith("inst_")}


@pytest.fixture
def import_state_is_left_clean() -> Iterator[None]:
    """Fails the test that leaves a finder installed or a fixture module in sys.modules."""
    meta_path = list(sys.meta_path)
    before = fixture_modules()
    yield
    assert sys.meta_path == meta_path, "a finder was left on sys.meta_path"
    assert fixture_modules() == before, "fixture modules were left in sys.modules"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A scratch directory to run programs in."""
    directory = tmp_path / "work"
    directory.mkdir()
    return directory
