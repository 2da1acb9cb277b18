"""What users install: the source archive holds every file of the package, the version is
written once, and a native part that is missing is named with its reason by `--version` and
`run -v` (the wheel and the installs from both archives are checked by .ci/check_dist.py)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, make_file

import autonvtx
from autonvtx import nativeparts

# A process where the native client cannot be imported, as in an installation built without it.
WITHOUT_CLIENT = "import sys; sys.modules['autonvtx._nvtxclient'] = None; from autonvtx.cli import main; main()"


def tracked(*paths: str) -> set[str]:
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", *paths], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_sdist_holds_every_tracked_file_of_the_package(tmp_path: Path) -> None:
    # The sdist left out autonvtx/_native/arguments.h: its install built no native client, silently.
    if importlib.util.find_spec("build") is None:
        pytest.skip("needs PyPA's build (pip install build)")
    if not (REPO / ".git").exists():
        pytest.skip("needs the git checkout (git ls-files)")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (sdist,) = tmp_path.glob("autonvtx-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    expected = (tracked("autonvtx", "configs") - {"autonvtx/configs"}) | {
        "setup.py",
        "pyproject.toml",
        "autonvtx-autostart.pth",
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
    }
    assert sorted(expected - names) == []
    assert sdist.name == f"autonvtx-{autonvtx.__version__}.tar.gz"
    assert not [name for name in names if name.endswith((".so", ".pyc", "native-build-failures.txt"))]


def test_the_version_is_written_once() -> None:
    # pyproject.toml and __init__.py both held it; now the metadata takes it from the package.
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    from importlib.metadata import version

    assert version("autonvtx") == autonvtx.__version__


def test_version_names_each_native_part() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "--version"], capture_output=True, text=True, env=autonvtx_env()
    )
    assert done.returncode == 0, done.stderr
    first, *parts = done.stdout.splitlines()
    assert first.startswith(f"autonvtx {autonvtx.__version__} (Python ")
    assert [line.strip().split(":")[0] for line in parts] == [
        "native recorder",
        "native client",
        "script compiler",
        "report table writer",
        "native report sweep",
    ]
    assert "MISSING" not in done.stdout  # this installation built every part


def test_a_missing_native_client_is_named_with_why_and_what_is_lost(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_CLIENT, "--version"], capture_output=True, text=True, env=autonvtx_env()
    )
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "MISSING" in line]
    assert "native client: MISSING (autonvtx._nvtxclient)" in line
    assert "no regions or capture windows" in line
    # run -v says it too, at the end of what it instrumented.
    make_file(tmp_path / "prog.py", "def f():\n    return 1\n\nprint(f())\n")
    ran = subprocess.run(
        [sys.executable, "-c", WITHOUT_CLIENT, "run", "-v", "-t", "__main__", "--trace", "t.json", "prog.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "1\n"
    assert "autonvtx: native client: MISSING (autonvtx._nvtxclient)" in ran.stderr


def test_the_build_record_gives_the_reason(tmp_path: Path) -> None:
    # setup.py writes why an optional part did not build; it is shown long after the build output is gone.
    make_file(
        tmp_path / nativeparts.BUILD_RECORD, "autonvtx._no_such_part: arguments.h not found in this source tree\n"
    )
    why = nativeparts.missing_reason("autonvtx._no_such_part", str(tmp_path))
    assert why == "its build failed: arguments.h not found in this source tree"
    assert nativeparts.missing_reason("autonvtx._no_such_part", str(tmp_path / "elsewhere")) == (
        "not built in this installation (no build record: installed without building it?)"
    )
    assert nativeparts.missing_reason("autonvtx.errors") is None


def test_a_source_file_missing_from_the_tree_is_named_and_recorded_without_compiling(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # An incomplete sdist built the optional client's compile into an error nobody saw: the build
    # names the missing header first, says so in a framed warning, and records it for --version.
    import os
    import runpy

    setuptools = pytest.importorskip("setuptools", reason="venvs of Python 3.12+ come without setuptools")
    from setuptools import Distribution, Extension

    saved, cwd = setuptools.setup, os.getcwd()
    setuptools.setup = lambda **_: None  # setup.py's definitions, without running a build
    try:
        os.chdir(REPO)
        build = runpy.run_path(str(REPO / "setup.py"))
    finally:
        setuptools.setup = saved
        os.chdir(cwd)
    source = make_file(tmp_path / "src" / "client.c", '#include "client.h"\n#include "gone.h"\n')
    make_file(tmp_path / "src" / "client.h", '#include "also_gone.h"\n')
    extension = Extension("autonvtx._nvtxclient", [str(source)], optional=True)
    missing = f"{tmp_path / 'src' / 'also_gone.h'}, {tmp_path / 'src' / 'gone.h'}"
    assert build["missing_headers"](extension) == missing
    command = build["BuildPlainLibrary"](Distribution())
    command.build_lib, command.inplace = str(tmp_path / "lib"), False
    command.build_extension(extension)
    record = tmp_path / "lib" / "autonvtx" / nativeparts.BUILD_RECORD
    reason = f"{missing} not found in this source tree (an incomplete source archive?)"
    assert record.read_text() == f"autonvtx._nvtxclient: {reason}\n"
    assert f"WARNING: autonvtx: the optional native part autonvtx._nvtxclient was NOT built: {reason}" in (
        capfd.readouterr().err
    )
    assert nativeparts.build_failures(str(tmp_path / "lib" / "autonvtx")) == {"autonvtx._nvtxclient": reason}
    with pytest.raises(SystemExit, match="cannot build autonvtx.recorder.libautonvtx_recorder"):
        command.build_extension(Extension("autonvtx.recorder.libautonvtx_recorder", [str(source)]))


def test_setup_py_says_what_a_missing_part_loses_in_nativeparts_words() -> None:
    tree = ast.parse((REPO / "setup.py").read_text())
    [table] = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["OPTIONAL_LOSS"]
    ]
    assert isinstance(table, ast.Dict)
    losses = sorted(ast.literal_eval(value) for value in table.values)
    assert losses == sorted(loss for _, _, loss in nativeparts.OPTIONAL_PARTS)
