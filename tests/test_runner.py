"""The runner runs a target as ``python`` would: proved by running both and comparing."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import re
import shutil
import subprocess
import sys
import textwrap
import traceback
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import make_file

import autonvtx
from autonvtx import runner, tracebacks

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "modules" / "runner"
PACKAGE_DIR = str(Path(autonvtx.__file__).resolve().parent)
CONSOLE_SCRIPT = Path(sys.executable).parent / "autonvtx"

# Stands in for `autonvtx run` until the CLI exists: parse a target, resolve, execute.
# `--statements` runs __main__ statement by statement; RUNNER_STATEMENT_LOG, if set,
# names a file the callback appends the module's public names to after each statement.
STANDIN = textwrap.dedent(
    """
    import os, sys
    from autonvtx.errors import AutonvtxError
    from autonvtx.runner import Target, execute, resolve
    args = sys.argv[1:]
    statements = args[0] == "--statements"
    if statements:
        del args[0]
    if args[0] in ("-m", "-c"):
        kind, value, rest = {"-m": "module", "-c": "code"}[args[0]], args[1], args[2:]
    else:
        kind, value, rest = "script", args[0], args[1:]
    try:
        resolved = resolve(Target(kind, value, tuple(rest)))
    except AutonvtxError as exc:
        sys.stderr.write(f"autonvtx: {exc}\\n")
        sys.exit(exc.exit_status)
    log = os.environ.get("RUNNER_STATEMENT_LOG")
    def on_main_statement(module):
        if log:
            with open(log, "a") as file:
                print(sorted(k for k in vars(module) if not k.startswith("__")), file=file)
    execute(resolved, on_main_statement=on_main_statement if statements else None)
    """
)

# How each launcher starts `autonvtx run`.
LAUNCHERS = {
    "standin": [sys.executable, "-c", STANDIN],
    "standin-statements": [sys.executable, "-c", STANDIN, "--statements"],
    "python-m": [sys.executable, "-m", "autonvtx", "run"],
    "console-script": [str(CONSOLE_SCRIPT), "run"],
}


def _launcher_skip(name: str) -> str | None:
    if name == "console-script" and not CONSOLE_SCRIPT.exists():
        return f"no console script at {CONSOLE_SCRIPT}"
    return None


@pytest.fixture(params=list(LAUNCHERS))
def launcher(request: pytest.FixtureRequest) -> str:
    reason = _launcher_skip(request.param)
    if reason:
        pytest.skip(reason)
    return str(request.param)


class Outcome(NamedTuple):
    status: int
    stdout: str
    stderr: str


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # autonvtx importable without installing it; python gets the same sys.path.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("RUNNER_STATEMENT_LOG", None)
    env.update(extra or {})
    return env


def _run(command: list[str], cwd: Path, stdin: str | None, env: dict[str, str] | None) -> Outcome:
    done = subprocess.run(command, cwd=cwd, input=stdin, capture_output=True, text=True, env=_env(env), timeout=120)
    # A process killed by signal N is what a shell reports as 128 + N (Ctrl-C: 130).
    status = 128 - done.returncode if done.returncode < 0 else done.returncode
    return Outcome(status, done.stdout, done.stderr)


def run_python(args: list[str], cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None) -> Outcome:
    return _run([sys.executable, *args], cwd, stdin, env)


# `autonvtx run` with no rules says so first, on stderr; the rest must be python's.
NO_RULES_NOTE = re.compile(r"\Aautonvtx: run: no rules found: [^\n]*\n")


def run_ours(
    launcher: str, args: list[str], cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> Outcome:
    outcome = _run([*LAUNCHERS[launcher], *args], cwd, stdin, env)
    if launcher in ("python-m", "console-script"):
        stderr, noted = NO_RULES_NOTE.subn("", outcome.stderr)
        assert noted == 1 or outcome.status == 2, outcome.stderr  # said once, unless refused
        outcome = outcome._replace(stderr=stderr)
    return outcome


def assert_same_as_python(
    launcher: str, args: list[str], cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> Outcome:
    expected = run_python(args, cwd, stdin, env)
    actual = run_ours(launcher, args, cwd, stdin, env)
    assert actual == expected
    return actual


def copy_probe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "probe.py", path)
    return path


# -- how the target is named ---------------------------------------------------------


@pytest.mark.parametrize(
    "cwd, script",
    [
        ("work", "probe.py"),
        ("work", "./probe.py"),
        ("work/deep/er", "../../probe.py"),
        ("", "work/probe.py"),
        ("elsewhere", "../work/probe.py"),
        ("", "ABSOLUTE"),
        ("", "link.py"),
    ],
)
def test_script_paths(launcher: str, tmp_path: Path, cwd: str, script: str) -> None:
    copy_probe(tmp_path / "work" / "probe.py")
    (tmp_path / "work" / "deep" / "er").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link.py").symlink_to(tmp_path / "work" / "probe.py")
    if script == "ABSOLUTE":
        script = str(tmp_path / "work" / "probe.py")
    out = assert_same_as_python(launcher, [script, "a", "--flag", "-m"], tmp_path / cwd)
    assert "main block ran" in out.stdout
    assert f"path {[str(tmp_path / 'work')]}"[:-1] in out.stdout  # realpath of its directory


def test_module(launcher: str, tmp_path: Path) -> None:
    copy_probe(tmp_path / "pkg" / "probe.py")
    make_file(tmp_path / "pkg" / "__init__.py", "print('parent package imported')")
    out = assert_same_as_python(launcher, ["-m", "pkg.probe", "x", "-c"], tmp_path)
    assert "spec pkg.probe" in out.stdout


def test_package(launcher: str, tmp_path: Path) -> None:
    copy_probe(tmp_path / "pkg" / "__main__.py")
    make_file(tmp_path / "pkg" / "__init__.py", "")
    out = assert_same_as_python(launcher, ["-m", "pkg", "y"], tmp_path)
    assert "spec pkg.__main__" in out.stdout


def test_code(launcher: str, tmp_path: Path) -> None:
    code = (FIXTURES / "probe.py").read_text()
    out = assert_same_as_python(launcher, ["-c", code, "z"], tmp_path)
    assert "file <absent>" in out.stdout


@pytest.mark.parametrize("name", ["app", "./app/"])
def test_directory_with_main(launcher: str, tmp_path: Path, name: str) -> None:
    copy_probe(tmp_path / "app" / "__main__.py")
    assert_same_as_python(launcher, [name, "arg"], tmp_path)


def test_zip_with_main(launcher: str, tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "app.zip", "w") as archive:
        archive.write(FIXTURES / "probe.py", "__main__.py")
    assert_same_as_python(launcher, ["app.zip", "arg"], tmp_path)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is new in 3.11")
@pytest.mark.parametrize("args", [["work/probe.py"], ["-m", "probe"], ["-c", "import sys; print(sys.path)"]])
def test_safe_path_leaves_sys_path_alone(launcher: str, tmp_path: Path, args: list[str]) -> None:
    copy_probe(tmp_path / "work" / "probe.py")
    copy_probe(tmp_path / "lib" / "probe.py")
    path = os.pathsep.join([str(REPO), str(tmp_path / "lib")])
    assert_same_as_python(launcher, args, tmp_path, env={"PYTHONSAFEPATH": "1", "PYTHONPATH": path})


# -- what the program sees while it runs ----------------------------------------------


def test_stdin_passes_through(launcher: str, tmp_path: Path) -> None:
    make_file(tmp_path / "upper.py", "import sys\nprint(sys.stdin.read().upper(), end='')\n")
    out = assert_same_as_python(launcher, ["upper.py"], tmp_path, stdin="hello\nworld\n")
    assert out.stdout == "HELLO\nWORLD\n"


def test_atexit_sees_main_as_python_leaves_it(launcher: str, tmp_path: Path) -> None:
    make_file(
        tmp_path / "late.py",
        """
        import atexit, sys
        import __main__
        atexit.register(lambda: print(sys.modules["__main__"] is __main__, hasattr(__main__, "__file__")))
        """,
    )
    out = assert_same_as_python(launcher, ["late.py"], tmp_path)
    assert out.stdout == "True False\n"


CLICK_APP = """
import click
from click.globals import _local

print("outside any command:", click.get_current_context(silent=True))


def chain(ctx):
    names = []
    while ctx is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return names


@click.group()
@click.option("--name", default="world")
@click.pass_context
def app(ctx, name):
    print("group sees:", chain(ctx), "stack depth", len(getattr(_local, "stack", [])))
    ctx.obj = name


@app.command()
@click.pass_context
def hello(ctx):
    print("command sees:", chain(ctx), "root", ctx.find_root().info_name, "obj", ctx.obj)
    print("stack depth", len(_local.stack), "current is mine", click.get_current_context() is ctx)


@app.command()
def fail():
    raise click.UsageError("no such thing")


if __name__ == "__main__":
    app()
"""


@pytest.mark.parametrize("args", [["--name", "you", "hello"], ["fail"], ["--help"], []])
def test_click_program_sees_no_click_state_of_ours(launcher: str, tmp_path: Path, args: list[str]) -> None:
    # Issue 11, 1: autonvtx is a click program itself; the target must not find our contexts.
    make_file(tmp_path / "app.py", CLICK_APP)
    out = assert_same_as_python(launcher, ["app.py", *args], tmp_path)
    assert out.stdout.startswith("outside any command: None\n")


def test_click_program_under_rules_sees_no_click_state_of_ours(tmp_path: Path) -> None:
    # With rules selecting __main__ the script runs statement by statement, and is recorded.
    make_file(tmp_path / "app.py", CLICK_APP)
    expected = run_python(["app.py", "hello"], tmp_path)
    ours = _run(
        [sys.executable, "-m", "autonvtx", "run", "-t", "__main__", "--trace", "t.json", "app.py", "hello"],
        tmp_path,
        None,
        None,
    )
    assert (ours.status, ours.stdout) == (expected.status, expected.stdout)
    assert ours.stdout.startswith("outside any command: None\n")


@pytest.mark.parametrize("how", ["script", "module"])
def test_main_objects_pickle_and_reach_spawned_workers(launcher: str, tmp_path: Path, how: str) -> None:
    shutil.copy(FIXTURES / "spawn_pool.py", tmp_path / "spawn_pool.py")
    args = ["spawn_pool.py"] if how == "script" else ["-m", "spawn_pool"]
    out = assert_same_as_python(launcher, args, tmp_path)
    assert out.stdout.splitlines()[1:] == ["3", "[0, 1, 4, 9, 16]"]


# -- how it ends ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, status",
    [
        ("print('done')", 0),
        ("raise SystemExit(3)", 3),
        ("import sys; sys.exit(None)", 0),
        ("import sys; sys.exit('goodbye')", 1),
        ("def f():\n    raise ValueError('boom')\nf()", 1),
        ("raise KeyboardInterrupt", 130),
        ("class Interrupt(KeyboardInterrupt): pass\nraise Interrupt", 1),
        ("print('partial', end='')\n1 / 0", 1),
    ],
)
def test_exit_status(launcher: str, tmp_path: Path, body: str, status: int) -> None:
    make_file(tmp_path / "ending.py", body + "\n")
    out = assert_same_as_python(launcher, ["ending.py"], tmp_path)
    assert out.status == status


def test_traceback_has_no_frames_of_ours(launcher: str, tmp_path: Path) -> None:
    make_file(
        tmp_path / "chained.py",
        """
        def inner():
            raise KeyError("inner")

        def outer():
            try:
                inner()
            except KeyError as exc:
                raise ValueError("outer") from exc

        try:
            outer()
        finally:
            print("cleanup")
        """,
    )
    out = assert_same_as_python(launcher, ["chained.py"], tmp_path)
    assert out.stderr.startswith("Traceback (most recent call last):")
    assert "autonvtx" not in out.stderr
    assert PACKAGE_DIR not in out.stderr


@pytest.mark.parametrize(
    "hook",
    [
        "def hook(kind, value, tb):\n    print('hooked', kind.__name__, value, file=sys.stderr)",
        "def hook(kind, value, tb):\n    raise RuntimeError('the hook failed')",
    ],
)
def test_user_excepthook_is_respected(launcher: str, tmp_path: Path, hook: str) -> None:
    make_file(tmp_path / "hooked.py", f"import sys\n{hook}\nsys.excepthook = hook\nraise ValueError('boom')\n")
    out = assert_same_as_python(launcher, ["hooked.py"], tmp_path)
    assert out.status == 1
    assert "autonvtx" not in out.stderr


@pytest.mark.parametrize(
    "source",
    [
        "x = 1\ny = (\n",
        "x = 1\nfrom __future__ import annotations\n",
        "x = 1\nglobal x\n",
        "print('never printed')\ndef f(:\n    pass\n",
    ],
)
def test_syntax_error(launcher: str, tmp_path: Path, source: str) -> None:
    make_file(tmp_path / "broken.py", source)
    out = assert_same_as_python(launcher, ["broken.py"], tmp_path)
    assert out.status == 1
    assert "SyntaxError" in out.stderr and "Traceback" not in out.stderr
    assert_same_as_python(launcher, ["-c", source], tmp_path)


# -- targets that are not there -------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["missing.py"],
        ["nowhere/missing.py"],
        ["-m", "nope"],
        ["-m", "pkg.nope"],
        ["-m", "pkg"],
        ["-m", "probe.py"],
        ["emptydir"],
    ],
)
def test_missing_target(launcher: str, tmp_path: Path, args: list[str]) -> None:
    make_file(tmp_path / "pkg" / "__init__.py", "")
    copy_probe(tmp_path / "probe.py")
    (tmp_path / "emptydir").mkdir()
    python = run_python(args, tmp_path)
    ours = run_ours(launcher, args, tmp_path)
    # Python prefixes its own path where we print "autonvtx"; the message is Python's.
    python_message = python.stderr.split(": ", 1)[1]
    assert ours.stderr == f"autonvtx: {python_message}"
    assert ours.status == 2
    assert "main block ran" not in ours.stdout


def test_failing_parent_package_is_a_traceback(launcher: str, tmp_path: Path) -> None:
    make_file(tmp_path / "pkg" / "__init__.py", "raise ValueError('broken package')\n")
    make_file(tmp_path / "pkg" / "mod.py", "")
    python = run_python(["-m", "pkg.mod"], tmp_path)
    ours = run_ours(launcher, ["-m", "pkg.mod"], tmp_path)
    # Python's traceback also shows two runpy frames, which we do not run: `<frozen runpy>`
    # lines (3.11+), or runpy.py lines each followed by its source line (3.10).
    kept, skip_source = [], False
    for line in python.stderr.splitlines(keepends=True):
        if skip_source and line.startswith("    ") and not line.lstrip().startswith("File "):
            skip_source = False
            continue
        skip_source = "<frozen runpy>" in line or re.search(r'File ".*runpy\.py", line', line)
        if not skip_source:
            kept.append(line)
    assert ours == Outcome(1, python.stdout, "".join(kept))


# -- statement by statement -----------------------------------------------------------


def test_callback_runs_after_each_statement(tmp_path: Path) -> None:
    make_file(
        tmp_path / "steps.py",
        '''
        """Doc."""
        a = 1
        def f():
            return g()
        "not a docstring"
        def g():
            return a
        print(f(), __doc__)
        ''',
    )
    log = tmp_path / "log.txt"
    out = run_ours("standin-statements", ["steps.py"], tmp_path, env={"RUNNER_STATEMENT_LOG": str(log)})
    assert out == Outcome(0, "1 Doc.\n", "")
    assert log.read_text().splitlines() == [
        "[]",
        "['a']",
        "['a', 'f']",
        "['a', 'f']",
        "['a', 'f', 'g']",
        "['a', 'f', 'g']",
    ]


def test_future_import_applies_to_later_statements(launcher: str, tmp_path: Path) -> None:
    make_file(
        tmp_path / "future.py",
        '''
        """Doc."""
        from __future__ import annotations
        count: int = 0
        def f(x: NotDefinedAnywhere) -> list[Nope]:
            return x
        print(f.__annotations__, __annotations__, __doc__)
        ''',
    )
    out = assert_same_as_python(launcher, ["future.py"], tmp_path)
    assert out.stdout.startswith("{'x': 'NotDefinedAnywhere', 'return': 'list[Nope]'}")


def test_statement_callback_errors_are_not_the_programs() -> None:
    def failing(module: object) -> None:
        raise LookupError("callback bug")

    resolved = runner.ResolvedTarget(runner.Target("code", "x = 1"), "-c", "<string>", {}, source="x = 1\n")
    saved = sys.argv[:], sys.modules["__main__"]
    try:
        with pytest.raises(LookupError, match="callback bug"):
            runner.execute(resolved, on_main_statement=failing)
    finally:
        sys.argv[:] = saved[0]
        sys.modules["__main__"] = saved[1]


# -- trimming our frames, in process --------------------------------------------------


def _own_code(source: str) -> dict[str, object]:
    """Functions whose frames count as ours: compiled under the package's directory."""
    namespace: dict[str, object] = {}
    exec(compile(textwrap.dedent(source), os.path.join(PACKAGE_DIR, "fake_wrapper.py"), "exec"), namespace)
    return namespace


def test_own_frames_removed_from_middle_and_from_chained_exceptions() -> None:
    wrap = _own_code("def call(fn):\n    return fn()\n")["call"]

    def user_inner() -> None:
        raise KeyError("inner")

    def user_outer() -> None:
        try:
            wrap(user_inner)  # type: ignore[operator]
        except KeyError as exc:
            raise ValueError("outer") from exc

    groups = [BaseExceptionGroup] if sys.version_info >= (3, 11) else []  # noqa: F821 - 3.11+
    try:
        try:
            wrap(user_outer)  # type: ignore[operator]
        except ValueError as exc:
            if groups:
                raise ExceptionGroup("group", [exc])  # noqa: F821 - 3.11+
            raise
    except Exception as caught:  # noqa: BLE001
        error = caught
    tracebacks.remove_own_frames(error)
    text = "".join(traceback.format_exception(error))
    assert "fake_wrapper" not in text
    assert "user_inner" in text and "user_outer" in text


def test_loader_of_ours_leaves_import_frames_as_python_trims_them(tmp_path: Path) -> None:
    make_file(tmp_path / "plain_failing.py", "raise ValueError('at import')\n")
    make_file(tmp_path / "hooked_failing.py", "raise ValueError('at import')\n")
    loader_class = _own_code(
        """
        class WrappingLoader:
            def __init__(self, real):
                self.real = real
            def create_module(self, spec):
                return self.real.create_module(spec)
            def exec_module(self, module):
                return self.real.exec_module(module)
        """
    )["WrappingLoader"]

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
            if name != "hooked_failing":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, [str(tmp_path)])
            assert spec is not None
            spec.loader = loader_class(spec.loader)  # type: ignore[operator]
            return spec

    def frame_names(name: str) -> list[str]:
        try:
            __import__(name)
        except ValueError as exc:
            tracebacks.remove_own_frames(exc)
            return [frame.name for frame in traceback.extract_tb(exc.__traceback__)]
        raise AssertionError("no error")

    finder = Finder()
    sys.path.insert(0, str(tmp_path))
    sys.meta_path.insert(0, finder)
    try:
        assert frame_names("hooked_failing") == frame_names("plain_failing") == ["frame_names", "<module>"]
    finally:
        sys.meta_path.remove(finder)
        sys.path.remove(str(tmp_path))
        sys.modules.pop("hooked_failing", None)
        sys.modules.pop("plain_failing", None)
