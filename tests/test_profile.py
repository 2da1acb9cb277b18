"""`autonvtx profile` without a capture: what it asks of nsys, and how it refuses before nsys runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, autonvtx_env, make_file
from nsys_support import nsys_or_skip

from autonvtx import nsight

NSYS = nsight.Nsys(path="/opt/nsys/bin/nsys", version="2022.4.2.1", importer=None)
RUN = ("python", "-m", "autonvtx", "run", "--", "train.py")


def profile(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = autonvtx_env() if env is None else env
    environment["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", "profile", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_defaults_nsys_is_given_around_the_run() -> None:
    plan = nsight.plan_profile(NSYS, output="out", force=False, capture=False, cuda=True, nsys_args=(), run_command=RUN)
    assert plan.command == (
        "/opt/nsys/bin/nsys",
        "profile",
        "--trace=cuda,nvtx,osrt",
        "--sample=none",
        "--cpuctxsw=none",
        "--trace-fork-before-exec=true",
        "--export=sqlite",
        "--output=out",
        "--force-overwrite=false",
        *RUN,
    )
    assert plan.notes == ()


def test_without_a_cuda_device_cuda_is_not_traced_and_a_note_says_so() -> None:
    plan = nsight.plan_profile(NSYS, output="out", force=True, capture=False, cuda=False, nsys_args=(), run_command=RUN)
    assert "--trace=nvtx,osrt" in plan.command and "--force-overwrite=true" in plan.command
    assert plan.notes == ("no CUDA device here (libcuda.so.1 loads none): tracing nvtx,osrt only",)


def test_a_capture_window_becomes_nsys_capture_range() -> None:
    plan = nsight.plan_profile(NSYS, output="out", force=False, capture=True, cuda=False, nsys_args=(), run_command=RUN)
    assert plan.command[plan.command.index("--trace-fork-before-exec=true") + 1 :][:3] == (
        "--capture-range=nvtx",
        "--nvtx-capture=capture@autonvtx",
        "--capture-range-end=stop",
    )


@pytest.mark.parametrize(
    ("given", "replaced"),
    [
        (("-t", "cuda,nvtx"), "--trace="),
        (("--trace=nvtx",), "--trace="),
        (("-s", "cpu"), "--sample="),
        (("--capture-range-end=repeat",), "--capture-range-end="),
        (("--trace-fork-before-exec=false",), "--trace-fork-before-exec="),
    ],
)
def test_an_option_passed_with_nsys_arg_replaces_the_default_of_that_name(
    given: tuple[str, ...], replaced: str
) -> None:
    plan = nsight.plan_profile(
        NSYS, output="out", force=False, capture=True, cuda=True, nsys_args=given, run_command=RUN
    )
    ours = plan.command[2 : plan.command.index(given[0])]
    assert not any(arg.startswith(replaced) for arg in ours)
    assert plan.command[plan.command.index(given[0]) :][: len(given)] == given


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("rep_%q{RANK}", "rep_3"),
        ("rep_%q{UNSET_VARIABLE}", "rep_"),
        ("run_%p", "run_*"),
        ("100%%", "100%"),
        ("plain", "plain"),
    ],
)
def test_output_names_expand_as_nsys_expands_them(pattern: str, expected: str) -> None:
    assert nsight.expand_output(pattern, {"RANK": "3"}) == expected


def test_the_files_looked_for_drop_a_report_suffix_given_with_o() -> None:
    assert nsight.report_paths("run.nsys-rep", {}) == ["run.nsys-rep", "run.qdstrm", "run.sqlite"]


def test_no_nsys_is_status_2_and_one_line_saying_how_to_install_it(tmp_path: Path) -> None:
    make_file(tmp_path / "app.py", "print('ran')\n")
    env = autonvtx_env(PATH=os.path.dirname(sys.executable))
    env.pop("NSYS", None)
    done = profile("app.py", cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("autonvtx: nsys: not found on PATH ($NSYS unset); install Nsight Systems: on Debian")
    assert "nsight-systems" in line


def test_an_nsys_variable_naming_nothing_is_refused(tmp_path: Path) -> None:
    make_file(tmp_path / "app.py", "print('ran')\n")
    done = profile("app.py", cwd=tmp_path, env=autonvtx_env(NSYS=str(tmp_path / "no-nsys")))
    assert done.returncode == 2
    assert (
        done.stderr
        == f"autonvtx: $NSYS '{tmp_path / 'no-nsys'}': no such executable; expected the path of Nsight Systems' nsys\n"
    )


def test_bad_rules_stop_before_nsys_is_looked_for(tmp_path: Path) -> None:
    make_file(tmp_path / "app.py", "print('ran')\n")
    make_file(tmp_path / "autonvtx.toml", "[[rules]]\nmodules = 3\n")
    done = profile("app.py", cwd=tmp_path, env=autonvtx_env(NSYS=str(tmp_path / "no-nsys")))
    assert done.returncode == 2
    assert "autonvtx.toml" in done.stderr and "$NSYS" not in done.stderr and "Traceback" not in done.stderr


def test_a_missing_script_stops_before_nsys_is_looked_for(tmp_path: Path) -> None:
    done = profile("absent.py", cwd=tmp_path, env=autonvtx_env(NSYS=str(tmp_path / "no-nsys")))
    assert done.returncode == 2
    assert done.stderr == f"autonvtx: can't open file '{tmp_path / 'absent.py'}': [Errno 2] No such file or directory\n"


def test_a_missing_target_is_a_usage_error(tmp_path: Path) -> None:
    done = profile(cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "autonvtx: profile: missing SCRIPT, -m MODULE or -c CODE (see 'autonvtx profile --help')\n"


def test_an_existing_report_is_kept_unless_force_is_given(tmp_path: Path) -> None:
    nsys_or_skip()
    make_file(tmp_path / "app.py", "print('ran')\n")
    make_file(tmp_path / "out.sqlite", "")
    done = profile("-o", "out", "app.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "autonvtx: profile: -o 'out': out.sqlite exists; expected --force to overwrite it, or another -o\n"
    )
    assert "ran" not in done.stdout


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("nodir/out", "no such directory '{cwd}/nodir'; expected an existing directory"),
        # /proc is no place for a file, even for root (whom access() lets through): found by trying.
        ("/proc/out", "cannot write in '/proc' (No such file or directory); expected a writable directory"),
    ],
)
def test_an_output_nsys_could_not_write_stops_before_the_program_runs(
    tmp_path: Path, output: str, message: str
) -> None:
    # nsys ran the whole capture, then saved it under /tmp, and autonvtx said nsys wrote nothing.
    nsys_or_skip()
    make_file(tmp_path / "app.py", "print('ran')\n")
    done = profile("-o", output, "app.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"autonvtx: profile: -o '{output}': {message.format(cwd=tmp_path)}\n"
    assert "ran" not in done.stdout


def test_an_html_page_that_could_not_be_written_stops_before_the_program_runs(tmp_path: Path) -> None:
    nsys_or_skip()
    make_file(tmp_path / "app.py", "print('ran')\n")
    done = profile("--html", "/proc/page.html", "app.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "autonvtx: profile: --html '/proc/page.html': cannot write in '/proc' (No such file or"
        " directory); expected a writable directory\n"
    )
    assert "ran" not in done.stdout


def test_report_on_a_nsys_rep_without_nsys_says_what_to_run(tmp_path: Path) -> None:
    (tmp_path / "run.nsys-rep").write_bytes(b"not read")
    env = autonvtx_env(PATH=os.path.dirname(sys.executable))
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", "run.nsys-rep"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "autonvtx: run.nsys-rep: reading a .nsys-rep needs Nsight Systems' `nsys` on PATH, which is not there;"
        " expected `nsys export --type sqlite --output run.sqlite run.nsys-rep` run where nsys is installed,"
        " then `autonvtx report run.sqlite`\n"
    )


def test_report_with_nsys_naming_nothing_says_so(tmp_path: Path) -> None:
    (tmp_path / "run.nsys-rep").write_bytes(b"not read")
    env = autonvtx_env(NSYS="/no/such/nsys")
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "report", "run.nsys-rep"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "autonvtx: run.nsys-rep: reading a .nsys-rep needs Nsight Systems' nsys ($NSYS"
        " '/no/such/nsys': no such executable;"
    )


def test_the_inner_run_starts_this_autonvtx_not_a_source_folder_in_the_working_directory(tmp_path: Path) -> None:
    # From a source checkout's root, `python -m autonvtx` imported ./autonvtx (no native parts
    # built there) and nsys recorded nothing; the inner run must import the autonvtx that runs
    # `profile`. A decoy package in the working directory stands in for that folder.
    from autonvtx.cli.options import RuleArgs
    from autonvtx.cli.profile import inner_run_command

    make_file(tmp_path / "autonvtx" / "__init__.py", "raise SystemExit('the decoy autonvtx was imported')")
    make_file(
        tmp_path / "prog.py",
        """\
        import sys
        def work():
            return 42
        print(work(), sys.path[0])
        """,
    )
    rules = RuleArgs(targets=("__main__",))
    command = inner_run_command(rules, (), False, 1, ("script", "prog.py", ()))
    environment = autonvtx_env()
    environment.pop("PYTHONPATH", None)
    done = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "decoy" not in done.stderr
    assert done.stdout.split()[0] == "42"
    assert done.stdout.split()[1] in (
        str(tmp_path),
        os.path.realpath(tmp_path),
    )  # the script's own directory leads sys.path
    assert "engine:" in done.stderr  # -v: autonvtx's own report, so autonvtx ran the script


# What nsys 2022.4.2 printed on standard output for one capture with stdout in a file (its
# progress bar redrawn with carriage returns), shortened, after the program's own line.
NSYS_STDOUT = (
    b"hello\nGenerating '/tmp/nsys-report-a43a.qdstrm'\n"
    b"\r[1/1] [0%                          ] t2.nsys-rep"
    b"\r[1/1] [===========50%              ] t2.nsys-rep"
    b"\r[1/1] [========================100%] t2.nsys-rep\n"
    b"Generated:\n    /tmp/nsystest/t2.nsys-rep\n"
)


@pytest.mark.parametrize("chunk", [1, 7, len(NSYS_STDOUT)])
def test_nsys_progress_is_kept_as_its_final_state_whatever_the_chunks(chunk: int) -> None:
    written: list[bytes] = []
    progress = nsight.ProgressFilter(written.append)
    for start in range(0, len(NSYS_STDOUT), chunk):
        progress.feed(NSYS_STDOUT[start : start + chunk])
    progress.close()
    assert b"".join(written) == (
        b"hello\nGenerating '/tmp/nsys-report-a43a.qdstrm'\n"
        b"[1/1] [========================100%] t2.nsys-rep\n"
        b"Generated:\n    /tmp/nsystest/t2.nsys-rep\n"
    )


def test_two_bars_keep_one_line_each_and_the_programs_own_carriage_returns_pass() -> None:
    written: list[bytes] = []
    progress = nsight.ProgressFilter(written.append)
    program = b" 50%|#####     | 5/10\r100%|##########| 10/10\r\n"
    progress.feed(program + b"\r[1/2] [50%] a.nsys-rep\r[1/2] [100%] a.nsys-rep\r[2/2] [100%] a.sqlite\n")
    progress.feed(b"prompt> ")
    progress.close()
    assert b"".join(written) == program + b"[1/2] [100%] a.nsys-rep\n[2/2] [100%] a.sqlite\nprompt> "


@pytest.mark.parametrize("host", ["host-linux-x64", "linux-desktop-glibc_2_11_3-x64"])
def test_the_importer_is_found_beside_nsys_in_nvidia_layouts(tmp_path: Path, host: str) -> None:
    # NVIDIA's installer keeps it in host-linux-x64; the nsys that Nsight Compute bundles (as on
    # the CUDA image of our GPU machines) in a directory named for the host's glibc.
    nsys = make_file(tmp_path / "host" / "target-linux-x64" / "nsys", "#!/bin/sh\n")
    importer = make_file(tmp_path / "host" / host / "QdstrmImporter", "#!/bin/sh\n")
    for path in (nsys, importer):
        os.chmod(path, 0o755)
    assert nsight.find_importer(str(nsys)) == str(importer)


def test_no_importer_beside_nsys_is_none_unless_debians_directory_has_one(tmp_path: Path) -> None:
    nsys = make_file(tmp_path / "bin" / "nsys", "#!/bin/sh\n")
    os.chmod(nsys, 0o755)
    debian = os.path.join("/usr/lib/nsight-systems/host-linux-x64", "QdstrmImporter")
    expected = debian if os.access(debian, os.X_OK) else None
    assert nsight.find_importer(str(nsys)) == expected
