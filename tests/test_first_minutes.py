"""A newcomer's first minutes: mistakes refused before anything changes or starts, and the
commands that said too little or too much."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, make_file, run_under_recorder


def autonvtx(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = autonvtx_env() if env is None else env
    environment["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=120
    )


def range_names(recordings: list) -> list[str]:  # type: ignore[type-arg]
    return [r.name for rec in recordings for r in sorted(rec.ranges, key=lambda r: r.start_ns)]


# ---- `profile -m` finds the module before nsys starts (33.8) ----


@pytest.mark.parametrize("module", ["no_such_module", "json.no_such_submodule"])
def test_profile_of_a_module_that_is_not_there_stops_before_nsys(tmp_path: Path, module: str) -> None:
    # It ran nsys anyway: .nsys-rep and .sqlite files, an empty table, the error second of four lines.
    done = autonvtx("profile", "-m", module, cwd=tmp_path, env=autonvtx_env(NSYS=str(tmp_path / "no-nsys")))
    assert done.returncode == 2
    assert done.stderr == (
        f"autonvtx: profile: -m {module}: No module named {module}; expected a module Python can import from here\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_profile_finds_a_module_of_the_working_directory_and_a_submodule(tmp_path: Path) -> None:
    # Found as `python -m` finds it (the working directory first): then nsys is looked for.
    make_file(tmp_path / "mine" / "__init__.py", "")
    make_file(tmp_path / "mine" / "app.py", "print('ran')\n")
    for module in ("mine.app", "json.tool"):
        done = autonvtx("profile", "-m", module, cwd=tmp_path, env=autonvtx_env(NSYS=str(tmp_path / "no-nsys")))
        assert done.returncode == 2
        assert "$NSYS" in done.stderr and "No module named" not in done.stderr, done.stderr


# ---- Unknown keys in a plugin's table are errors (33.9) ----


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "layer_pathz = true",
            "autonvtx.plugin.torch.layer_pathz: unknown option; expected one of backward, backward_modules,"
            " dataloader, domain, layer_paths, memory, modules, optimizer, shapes; did you mean 'layer_paths'?",
        ),
        ("layer_paths = 1", "autonvtx.plugin.torch.layer_paths: expected true or false, got 1"),
    ],
)
def test_a_plugin_option_it_does_not_declare_is_an_error_naming_the_file(
    tmp_path: Path, table: str, message: str
) -> None:
    # `layer_pathz = true` ran without a word, although every other unknown key is an error.
    make_file(tmp_path / "autonvtx.toml", f'[autonvtx]\nplugins = ["torch"]\n\n[autonvtx.plugin.torch]\n{table}\n')
    make_file(tmp_path / "app.py", "print('ran')\n")
    done = autonvtx("run", "--config", "autonvtx.toml", "app.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"autonvtx: autonvtx.toml: {message}\n"


def test_declared_plugin_options_pass(tmp_path: Path) -> None:
    make_file(
        tmp_path / "autonvtx.toml", '[autonvtx]\nplugins = ["torch"]\n\n[autonvtx.plugin.torch]\nlayer_paths = false\n'
    )
    make_file(tmp_path / "app.py", "print('ran')\n")
    done = autonvtx("run", "--config", "autonvtx.toml", "app.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran\n"


# ---- A refused %autonvtx changes nothing (33.7) ----


def test_a_refused_magic_keeps_what_was_installed(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    ipython = shutil.which("ipython", path=os.path.dirname(sys.executable))
    if ipython is None:
        pytest.skip("no ipython command beside this Python")
    session = "\n".join(
        [
            "ip = get_ipython()",
            "ip.run_line_magic('load_ext', 'autonvtx')",
            "ip.run_line_magic('autonvtx', '-t __main__')",
            "ip.run_cell('def cell_fn():\\n    return 1\\ncell_fn()')",
            # A mistyped glob: refused, and the working installation stays.
            "ip.run_line_magic('autonvtx', \"-t 'nosuch['\")",
            "ip.run_line_magic('autonvtx', '')",
            "ip.run_cell('cell_fn()')",
            # Rules that load but find nothing to install: the previous ones are put back.
            "ip.run_line_magic('autonvtx', '--engine wrap')",
            "ip.run_cell('cell_fn()')",
        ]
    )
    errors: list[str] = []
    recordings, out = run_under_recorder(
        tmp_path,
        f"""
        import subprocess, sys
        done = subprocess.run([{ipython!r}, "--quick", "--no-banner", "-c", {session!r}],
                              capture_output=True, text=True)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        """,
        env={"IPYTHONDIR": str(tmp_path / "ipython")},
        stderr=errors,
    )
    assert "autonvtx: --target: bad glob 'nosuch[': unbalanced '['" in errors[0]
    assert "nothing is installed" not in out, out
    assert "autonvtx: 1 function" in out or "functions in 1 module" in out, out
    assert sorted(range_names(recordings)) == ["cell_fn", "cell_fn", "cell_fn"], errors[0]


# ---- `kernel install` touches nothing but its own kernel's directory (37.7, 37.12) ----


def kernel_env(tmp_path: Path) -> dict[str, str]:
    return autonvtx_env(JUPYTER_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path / "home"))


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "../escape", "", "spaced name", "caf\u00e9"])
def test_kernel_install_refuses_a_name_that_is_not_a_kernelspec_name(tmp_path: Path, name: str) -> None:
    # `--name ..` deleted ~/.local/share/jupyter; `--name .` every user kernelspec.
    pytest.importorskip("jupyter_client")
    kernels = tmp_path / "data" / "kernels"
    make_file(kernels / "python3" / "kernel.json", '{"argv": ["python3"], "display_name": "Python 3"}\n')
    make_file(tmp_path / "data" / "nbsignatures.db", "kept\n")
    done = autonvtx("kernel", "install", "--name", name, "-t", "__main__", cwd=tmp_path, env=kernel_env(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith(f"autonvtx: kernel install: --name {name!r}: expected a kernelspec name"), done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["kernels", "nbsignatures.db"]
    assert sorted(p.name for p in kernels.iterdir()) == ["python3"]


def test_kernel_install_never_replaces_a_kernel_it_did_not_write(tmp_path: Path) -> None:
    pytest.importorskip("jupyter_client")
    theirs = make_file(tmp_path / "data" / "kernels" / "python3" / "kernel.json", '{"argv": ["python3"]}\n')
    done = autonvtx("kernel", "install", "--name", "python3", "-t", "x", cwd=tmp_path, env=kernel_env(tmp_path))
    assert done.returncode == 2
    assert "holds a kernel autonvtx did not write; expected another --name (nothing was changed)" in done.stderr
    assert theirs.read_text() == '{"argv": ["python3"]}\n'
    # Its own kernel it replaces: installing twice works.
    for _ in range(2):
        done = autonvtx("kernel", "install", "--name", "mine", "-t", "x", cwd=tmp_path, env=kernel_env(tmp_path))
        assert done.returncode == 0, done.stderr


def test_kernel_install_names_the_kernel_in_its_display_name_and_is_readable_under_a_prefix(tmp_path: Path) -> None:
    # `--name X` kept "Python (autonvtx)": two kernels looked the same. Under --sys-prefix the
    # directory was 0700 (a temporary directory's mode), unreadable for the environment's other users.
    pytest.importorskip("jupyter_client")
    import json

    done = autonvtx("kernel", "install", "--name", "train", "-t", "x", "--prefix", "env", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    directory = tmp_path / "env" / "share" / "jupyter" / "kernels" / "train"
    assert json.loads((directory / "kernel.json").read_text())["display_name"] == "Python (autonvtx: train)"
    umask = os.umask(0)
    os.umask(umask)
    assert directory.stat().st_mode & 0o777 == 0o777 & ~umask
    assert (directory / "kernel.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_kernel_alone_shows_what_it_offers_not_an_error(tmp_path: Path) -> None:
    done = autonvtx("kernel", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stderr == ""
    assert done.stdout.startswith("Usage: autonvtx kernel [OPTIONS]") and "\nCommands:\n  install " in done.stdout


# ---- The rest of the friction list (33.10) ----


def test_the_run_pages_command_table_lists_every_command() -> None:
    # docs/run.md's "Every command" lacked profile and diff.
    from autonvtx.cli.group import COMMAND_MODULES

    page = (REPO / "docs" / "run.md").read_text(encoding="utf-8")
    table = page[page.index("## Every command") :]
    listed = [name for name in sorted(COMMAND_MODULES) if re.search(rf"^\| `autonvtx {name}[ `]", table, re.M)]
    assert listed == sorted(COMMAND_MODULES)


def test_diff_without_against_shows_the_synopsis(tmp_path: Path) -> None:
    # It said only "Missing option '--against'".
    done = autonvtx("diff", "a.json", "b.json", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "autonvtx: diff: missing --against NEW...; usage: autonvtx diff BASE... --against NEW... [OPTIONS],"
        " e.g. autonvtx diff base_*.json --against new_*.json (see 'autonvtx diff --help')\n"
    )


def test_profile_given_runs_recorder_options_says_what_profile_writes(tmp_path: Path) -> None:
    # It suggested '--force', '--target', '--tree'.
    done = autonvtx("profile", "--trace", "t.json", "app.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "autonvtx: profile: --trace is `autonvtx run`'s (autonvtx's own recorder); profile records with Nsight"
        " Systems and writes OUT.nsys-rep and OUT.sqlite (-o OUT, default autonvtx-profile), then prints their table\n"
    )


def test_a_module_not_found_is_the_only_line(tmp_path: Path) -> None:
    # A warning that the target pattern matched no module followed "No module named nosuch".
    done = autonvtx("run", "-t", "nosuch.*", "--trace", "t.json", "-m", "nosuch", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "autonvtx: No module named nosuch\n"


def test_the_hand_annotated_example_gets_only_its_own_ranges(tmp_path: Path) -> None:
    # Its command discovered the quick start's autonvtx.toml beside it: every range twice.
    example = REPO / "examples" / "annotated" / "annotated.py"
    command = next(line.split() for line in example.read_text().splitlines() if "autonvtx run" in line)
    assert command[:4] == ["autonvtx", "run", "--trace", "annotated.json"]
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    done = autonvtx(*command[1:3], str(tmp_path / "annotated.json"), *command[4:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    import json

    events = json.loads((tmp_path / "annotated.json").read_text())["traceEvents"]
    assert sorted(e["name"] for e in events if e.get("ph") == "X") == ["f()"] + ["loop"] * 5


def test_what_the_readmes_tasks_write_is_ignored_by_git() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("needs the git checkout")
    written = [
        "quickstart.json",
        "run.nsys-rep",
        "run.sqlite",
        "run.json",
        "examples/minitrain/train.json",
        "base_1.json",
        "new_5.json",
        "page.html",
        "annotated.json",
    ]
    done = subprocess.run(["git", "-C", str(REPO), "check-ignore", *written], capture_output=True, text=True)
    assert sorted(done.stdout.split()) == sorted(written)
