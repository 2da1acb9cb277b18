"""`autonvtx kernel install`: the kernelspec it writes, and real Jupyter kernels started from it
(nbclient runs notebooks), whose sessions are recorded with the cells' functions and the
target package's ranged; and the no-tool line `%autonvtx` prints in a plain kernel."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import autonvtx_env, make_file

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


def autonvtx(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env or autonvtx_env(),
        timeout=120,
    )


def kernel_json(prefix: Path, name: str = "autonvtx") -> dict[str, Any]:
    return json.loads((prefix / "share" / "jupyter" / "kernels" / name / "kernel.json").read_text())


def run_notebook(cells: list[str], *, kernel: str, cwd: Path, jupyter_path: Path | None = None) -> list[Any]:
    """Execute a notebook of `cells` in a fresh session of `kernel`, as Jupyter would (the
    kernel's working directory is the notebook's); each cell's outputs."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    env = autonvtx_env()
    if jupyter_path is not None:
        env["JUPYTER_PATH"] = str(jupyter_path)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel manager starts the kernel with this process's environment
    try:
        client = nbclient.NotebookClient(
            notebook, kernel_name=kernel, timeout=120, resources={"metadata": {"path": str(cwd)}}
        )
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return [cell.get("outputs", []) for cell in notebook.cells]


def stream_text(outputs: list[Any], name: str) -> str:
    return "".join(o.get("text", "") for cell in outputs for o in cell if o.get("name") == name)


def test_install_writes_a_kernel_run_by_autonvtx_with_the_rules_and_a_trace_per_session(tmp_path: Path) -> None:
    make_file(tmp_path / "rules.toml", '[[rules]]\nmodules = ["mypkg"]\n')
    done = autonvtx(
        "kernel",
        "install",
        "--prefix",
        str(tmp_path / "jp"),
        "--config",
        "rules.toml",
        "-t",
        "__main__",
        "--trace",
        "traces",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    spec = kernel_json(tmp_path / "jp")
    assert spec["display_name"] == "Python (autonvtx)" and spec["language"] == "python"
    assert spec["argv"][:4] == [sys.executable, "-m", "autonvtx", "run"]
    # Paths are absolute: the kernel runs in its notebook's directory.
    assert spec["argv"][4:6] == [f"--config={tmp_path / 'rules.toml'}", "--target=__main__"]
    assert spec["argv"][6:8] == ["--trace", str(tmp_path / "traces" / "autonvtx-{pid}.json")]
    assert spec["argv"][-4:] == ["-c", "from autonvtx.kernel import launch; launch()", "-f", "{connection_file}"]
    assert (tmp_path / "traces").is_dir()
    assert "installed in" in done.stdout


def test_install_with_flight_runs_each_session_with_the_flight_recorder(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    done = autonvtx(
        "kernel", "install", "--prefix", str(tmp_path / "jp"), "-t", "__main__", "--trace", str(traces),
        "--flight", "step {i}", "--flight-factor", "5", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    argv = kernel_json(tmp_path / "jp")["argv"]
    assert argv[5:10] == [
        "--flight=step {i}", "--flight-factor=5.0", "--flight-keep=10", "--flight-max=20", "--flight-warmup=5"
    ]  # fmt: skip
    refused = autonvtx("kernel", "install", "--prefix", str(tmp_path / "jp2"), "--flight", "step", cwd=tmp_path)
    assert refused.returncode == 2
    assert "kernel install: --flight: needs --trace DIR" in refused.stderr
    assert not (tmp_path / "jp2").exists()


def test_install_with_a_budget_runs_each_session_with_it(tmp_path: Path) -> None:
    done = autonvtx(
        "kernel", "install", "--prefix", str(tmp_path / "jp"), "-t", "__main__", "--budget", "2", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    argv = kernel_json(tmp_path / "jp")["argv"]
    assert argv[4:7] == ["--target=__main__", "--budget", "2.0"]
    refused = autonvtx("kernel", "install", "--prefix", str(tmp_path / "jp2"), "--budget", "200", cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr == (
        "autonvtx: kernel install: --budget: expected a percentage above 0 and at most 100, got '200'\n"
    )
    assert not (tmp_path / "jp2").exists()


def test_install_with_nsys_puts_nsys_in_front_and_interrupts_by_message(tmp_path: Path) -> None:
    # A stand-in `nsys` on PATH: only its path is written, nothing runs it.
    fake = make_file(tmp_path / "bin" / "nsys", "#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    env = autonvtx_env(PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    done = autonvtx(
        "kernel",
        "install",
        "--prefix",
        str(tmp_path / "jp"),
        "--name",
        "nv",
        "-t",
        "mypkg.*",
        "--nsys",
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    spec = kernel_json(tmp_path / "jp", "nv")
    argv = spec["argv"]
    assert argv[0] == str(fake) and argv[1] == "profile" and "cuda,nvtx" in argv
    assert argv[argv.index("-o") + 1] == "nv-%p"
    assert argv[argv.index(sys.executable) :][:5] == [sys.executable, "-m", "autonvtx", "run", "--target=mypkg.*"]
    assert spec["interrupt_mode"] == "message"  # a SIGINT to nsys would end the capture


@pytest.mark.parametrize(
    "args, message",
    [
        (["--config", "bad.toml"], r"^autonvtx: bad.toml: autonvtx.domian: unknown key"),
        (["-t", "x", "--trace", "t", "--nsys"], r"--trace and --nsys: choose one"),
    ],
)
def test_install_refuses_bad_input_in_one_line_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    make_file(tmp_path / "bad.toml", '[autonvtx]\ndomian = "x"\n')
    env = autonvtx_env(PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "nsys").write_text("#!/bin/sh\n")
    (tmp_path / "nsys").chmod(0o755)
    done = autonvtx("kernel", "install", "--prefix", str(tmp_path / "jp"), *args, cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert re.search(message, done.stderr) and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "jp").exists()


def test_a_real_kernel_session_is_recorded_with_cell_functions_and_package_ranges(tmp_path: Path) -> None:
    make_file(
        tmp_path / "nb" / "mypkg" / "__init__.py",
        """
        def work(n):
            return sum(range(n))
    """,
    )
    done = autonvtx(
        "kernel",
        "install",
        "--prefix",
        str(tmp_path / "jp"),
        "-t",
        "__main__",
        "-t",
        "mypkg",
        "--trace",
        str(tmp_path / "traces"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    # A call in the cell that defines the function has its range too (the walk after the cell
    # came too late for it), and a traceback still names the cell's own lines.
    cells = [
        "import mypkg",
        "def step(i):\n    return mypkg.work(i)\nstep(0)",
        "[step(i) for i in range(3)]",
        "class Model:\n    def fail(self):\n        raise ValueError('cell line 3')\ntry:\n    Model().fail()\n"
        "except ValueError as e:\n    print(e.__traceback__.tb_next.tb_lineno)",
    ]
    outputs = run_notebook(
        cells, kernel="autonvtx", cwd=tmp_path / "nb", jupyter_path=tmp_path / "jp" / "share" / "jupyter"
    )
    assert outputs[2][0]["data"]["text/plain"] == "[0, 0, 1]"
    assert stream_text(outputs, "stdout") == "3\n"
    run_notebook(
        ["import mypkg", "mypkg.work(5)"],
        kernel="autonvtx",
        cwd=tmp_path / "nb",
        jupyter_path=tmp_path / "jp" / "share" / "jupyter",
    )
    traces = sorted((tmp_path / "traces").glob("autonvtx-*.json"))
    assert len(traces) == 2, "one trace per kernel session"
    names = [[e["name"] for e in json.loads(t.read_text())["traceEvents"] if e.get("ph") == "X"] for t in traces]
    first = next(n for n in names if "step" in n)
    assert first.count("step") == 4 and first.count("work") == 4
    assert first.count("Model.fail") == 1
    second = next(n for n in names if n is not first)
    assert second.count("work") == 1 and "step" not in second


def test_autonvtx_magic_in_a_plain_kernel_says_to_install_a_recording_kernel(tmp_path: Path) -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    if "python3" not in KernelSpecManager().find_kernel_specs():
        pytest.skip("ipykernel's own kernelspec is not installed in this environment")
    outputs = run_notebook(["%load_ext autonvtx", "%autonvtx -t __main__"], kernel="python3", cwd=tmp_path)
    stderr = stream_text(outputs, "stderr")
    assert "no NVTX tool is attached to this kernel" in stderr, outputs
    assert "autonvtx kernel install" in stderr and "--trace/--summary" not in stderr
