"""How a run ends and what it leaves, where it once differed from plain Python or lost data:
an uncaught Ctrl-C kills the process by SIGINT (a parent saw status 130, not -2); a recording
kept for `autonvtx recover` is never deleted by the next run with the same --trace (50,000 of
50,000 ranges were gone, without a word); and a writer replaces a symbolic link at its output
instead of writing through it into the link's target."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import autonvtx_env, make_file, run_autonvtx

from autonvtx.recorder.trace import read_chrome_trace

INTERRUPTED = """
    def work():
        return 1

    for _ in range(150):
        work()
    unclosed = open("written.txt", "w")  # flushed by the interpreter's finalization
    unclosed.write("hello")
    raise KeyboardInterrupt
"""


def test_an_uncaught_keyboard_interrupt_ends_by_sigint_as_under_python(workdir: Path) -> None:
    program = make_file(workdir / "program.py", INTERRUPTED)
    plain = subprocess.run([sys.executable, str(program)], cwd=workdir, capture_output=True, text=True, timeout=60)
    assert plain.returncode == -signal.SIGINT
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == -signal.SIGINT, done.stderr
    assert "\nKeyboardInterrupt\n" in done.stderr
    # The kill waits for the interpreter's finalization, as CPython's does: the program's
    # unclosed file keeps what it wrote (it was empty when the kill came from an exit handler).
    assert (workdir / "written.txt").read_text() == "hello"
    [recording] = read_chrome_trace(done.trace_path)  # written before the end
    assert {r.name for r in recording.ranges} == {"work"}


def test_an_uncaught_keyboard_interrupt_still_prints_what_the_budget_turned_off(workdir: Path) -> None:
    make_file(workdir / "program.py", INTERRUPTED)
    done = run_autonvtx("-t", "__main__", "--budget", "1", "program.py", cwd=workdir)
    assert done.returncode == -signal.SIGINT, done.stderr
    assert "--budget 1%: ranges turned off after 100 calls for 1 function" in done.stderr


# The program makes the trace's path a directory: writing the trace fails at exit, and the
# events are kept in trace.json.recording for `autonvtx recover`.
TRACE_UNWRITABLE = """
    import os

    def first_run():
        return 1

    for _ in range(3):
        first_run()
    os.mkdir("trace.json")
"""

SECOND = """
    def second_run():
        return 1

    second_run()
"""


def test_a_kept_recording_is_moved_aside_by_the_next_run_never_deleted(workdir: Path) -> None:
    make_file(workdir / "first.py", TRACE_UNWRITABLE)
    first = run_autonvtx("-t", "__main__", "first.py", cwd=workdir)
    kept = workdir / "trace.json.recording"
    assert "autonvtx recover" in first.stderr, first.stderr
    assert kept.is_dir()
    os.rmdir(workdir / "trace.json")

    make_file(workdir / "second.py", SECOND)
    second = run_autonvtx("-t", "__main__", "second.py", cwd=workdir)
    assert second.returncode == 0, second.stderr
    aside = workdir / "trace.json.recording.1"
    assert f"moved them to {aside}" in second.stderr
    [recording] = read_chrome_trace(workdir / "trace.json")
    assert [r.name for r in recording.ranges] == ["second_run"]

    recovered = workdir / "first.json"
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "recover", str(aside), "-o", str(recovered)],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [old] = read_chrome_trace(recovered)
    assert sorted(r.name for r in old.ranges) == ["first_run"] * 3


def test_export_replaces_a_link_at_its_output(workdir: Path) -> None:
    target = workdir / "precious.txt"
    target.write_text("keep me\n", encoding="utf-8")
    link = workdir / "rules.json"
    link.symlink_to(target)
    done = subprocess.run(
        [sys.executable, "-m", "autonvtx", "export", "--format", "nsys", "-t", "json.*", "json", "-o", str(link)],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert target.read_text(encoding="utf-8") == "keep me\n"
    assert not link.is_symlink()
    json.loads(link.read_text(encoding="utf-8"))


def test_export_to_an_unwritable_place_is_one_line(workdir: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autonvtx",
            "export",
            "--format",
            "nsys",
            "-t",
            "json.*",
            "json",
            "-o",
            "/no/such/dir/x.json",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=autonvtx_env(),
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "/no/such/dir/x.json" in done.stderr


# Loaders importlib treats in its own ways: one whose create_module makes another kind of object
# (allowed: importlib sets the module's attributes on it), and one that defines exec_module
# without create_module (refused with ImportError). Under autonvtx's stand-in loader the first
# raised TypeError into the program's import and the second imported.
ODD_LOADERS = """
    import importlib.abc, importlib.util, sys, types

    class Namespace:
        pass

    class MakesAnObject(importlib.abc.Loader):
        def create_module(self, spec):
            return Namespace()

        def exec_module(self, module):
            module.value = 42

    class NoCreateModule:
        def exec_module(self, module):
            module.value = 7

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "odd_object":
                return importlib.util.spec_from_loader(name, MakesAnObject())
            if name == "odd_nocreate":
                return importlib.util.spec_from_loader(name, NoCreateModule())
            return None

    sys.meta_path.append(Finder())
    import odd_object
    print(type(odd_object).__name__, odd_object.value)
    try:
        import odd_nocreate
        print("imported", odd_nocreate.value)
    except ImportError as error:
        print("ImportError:", error)
"""


def test_odd_loaders_import_as_under_python(workdir: Path) -> None:
    program = make_file(workdir / "program.py", ODD_LOADERS)
    plain = subprocess.run([sys.executable, str(program)], cwd=workdir, capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines() == [
        "Namespace 42",
        "ImportError: loaders that define exec_module() must also define create_module()",
    ]
    done = run_autonvtx("-t", "odd_*", "program.py", cwd=workdir, trace=False)
    assert (done.returncode, done.stdout) == (0, plain.stdout), done.stderr


def test_a_plugin_that_calls_sys_exit_is_named_and_the_program_not_started(workdir: Path) -> None:
    make_file(workdir / "exiting" / "__init__.py", "")
    make_file(workdir / "exiting" / "plugin.py", "import sys\nsys.exit(5)\n")
    make_file(workdir / "rules.toml", '[autonvtx]\nplugins = ["exiting.plugin"]\n')
    make_file(workdir / "program.py", "print('ran')\n")
    done = run_autonvtx("--config", "rules.toml", "program.py", cwd=workdir, trace=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "plugin 'exiting.plugin': importing 'exiting.plugin' called sys.exit(5)" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_program_that_empties_sys_meta_path_still_gets_its_trace(workdir: Path) -> None:
    # Writing the trace imports (a codec): it once failed, status 3 and "unknown encoding: ascii".
    make_file(workdir / "program.py", "import sys\n\ndef f():\n    return 1\n\nf()\nsys.meta_path.clear()\n")
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    [recording] = read_chrome_trace(done.trace_path)
    assert [r.name for r in recording.ranges] == ["f"]


def test_a_fifo_in_place_of_the_recording_fails_the_write_instead_of_hanging_the_exit(workdir: Path) -> None:
    # The recorder's open() for writing waited forever for a reader of the FIFO.
    make_file(
        workdir / "program.py",
        """
        import os

        def f():
            return 1

        f()
        os.mkfifo(os.path.join(os.environ["AUTONVTX_RECORD_DIR"], f"{os.getpid()}.anr"))
        """,
    )
    done = run_autonvtx("-t", "__main__", "program.py", cwd=workdir, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "could not write this process's events" in done.stderr


def test_a_region_that_cannot_be_placed_in_many_functions_is_one_warning(workdir: Path) -> None:
    import pytest

    if sys.version_info < (3, 12):
        pytest.skip("regions need Python 3.12 (sys.monitoring)")
    # Most of json's functions hold no loop: a `*:*`-like region once printed a warning for each
    # (4,951 lines for a 0.09 s program).
    make_file(workdir / "rules.toml", '[[regions]]\nfunction = "json*:*"\nloop = "first"\n')
    make_file(workdir / "program.py", "import json\n\nprint(json.dumps([1]))\n")
    done = run_autonvtx("--config", "rules.toml", "program.py", cwd=workdir, trace=False)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "could not be placed" in line or "no loop" in line]
    assert len(warnings) == 1, done.stderr
    assert "functions it selects could not be placed" in warnings[0]
