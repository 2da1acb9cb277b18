"""A child process's own `__main__` (`python script.py`, `-m`, `-c`, a directory) is walked as
`autonvtx run` walks its own when the rules select `__main__`: its functions get ranges, and the
child behaves as Python would (output, sys.argv, exit status, SystemExit messages, tracebacks
free of autonvtx frames, Python's own words for a script that is not there)."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import make_file, run_autonvtx, run_under_recorder

from autonvtx.recorder import native
from autonvtx.recorder.model import ProcessRecording
from autonvtx.recorder.trace import read_chrome_trace

pytestmark = pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built")

PYTHON = os.path.basename(sys.executable)

CHILD = """
    import sys

    def step(x):
        return x + 1

    def train(n):
        return sum(step(i) for i in range(n))

    print("argv", sys.argv[1:], train(3))
    if len(sys.argv) > 2:
        raise SystemExit(int(sys.argv[2]))
"""

PARENT = """
    import subprocess, sys

    def launch(*command):
        done = subprocess.run([sys.executable, *command], capture_output=True, text=True)
        print(repr(done.stdout), done.returncode, repr(done.stderr.strip().splitlines()[-1:]))

    launch("child.py", "a")
    launch("child.py", "a", "3")
    launch("-m", "childmod", "b")
    launch("-c", "from childmod import train; print('argv', train(2))")
    launch("pkgdir", "c")
"""


def counts(recording: ProcessRecording) -> Counter[str]:
    return Counter(r.name for r in recording.ranges)


def test_a_childs_own_main_is_walked_in_each_form(workdir: Path) -> None:
    make_file(workdir / "child.py", CHILD)
    make_file(workdir / "childmod.py", CHILD)
    make_file(workdir / "pkgdir" / "__main__.py", CHILD)
    make_file(workdir / "parent.py", PARENT)
    done = run_autonvtx("-t", "__main__", "parent.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "\"argv ['a'] 6\\n\" 0 []",
        "\"argv ['a', '3'] 6\\n\" 3 []",
        "\"argv ['b'] 6\\n\" 0 []",
        # -c: childmod's own lines print too; `train` comes from childmod, which no rule selects.
        "'argv [] 6\\nargv 3\\n' 0 []",
        "\"argv ['c'] 6\\n\" 0 []",
    ]
    recordings = {r.label: r for r in read_chrome_trace(done.trace_path)}
    assert counts(recordings[f"{PYTHON} parent.py"]) == Counter({"launch": 5})
    for label in (f"{PYTHON} child.py a", f"{PYTHON} child.py a 3", f"{PYTHON} -m childmod b", f"{PYTHON} pkgdir c"):
        assert counts(recordings[label]) == Counter({"train": 1, "step": 3}), label
        [train] = [r for r in recordings[label].ranges if r.name == "train"]
        assert all(
            train.start_ns <= r.start_ns <= r.end_ns <= train.end_ns
            for r in recordings[label].ranges
            if r.name == "step"
        )
    assert counts(recordings[f"{PYTHON} -c from childmod import train; print('argv', train(2))"]) == Counter()


def test_a_childs_failures_read_as_under_python(workdir: Path) -> None:
    make_file(
        workdir / "fails.py",
        """
        def broken():
            raise ValueError("boom")

        broken()
    """,
    )
    make_file(
        workdir / "says.py",
        """
        import sys
        sys.exit("a message of the program's")
    """,
    )
    make_file(
        workdir / "parent.py",
        """
        import subprocess, sys

        for command in (["fails.py"], ["says.py"], ["missing.py"]):
            done = subprocess.run([sys.executable, *command], capture_output=True, text=True)
            print(done.returncode)
            print(done.stderr, end="")
    """,
    )
    done = run_autonvtx("-t", "__main__", "parent.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    traceback_end = lines.index("ValueError: boom")
    assert lines[0] == "1" and lines[1] == "Traceback (most recent call last):"
    shown = "\n".join(lines[:traceback_end])
    assert 'fails.py", line 4, in <module>' in shown and "in broken" in shown
    assert "autonvtx" not in shown  # the runner's frames are trimmed, as for the parent
    assert lines[traceback_end + 1 : traceback_end + 3] == ["1", "a message of the program's"]
    assert lines[traceback_end + 3] == "2"
    assert "can't open file" in lines[traceback_end + 4] and "missing.py" in lines[traceback_end + 4]
    recordings = {r.label: r for r in read_chrome_trace(done.trace_path)}
    assert counts(recordings[f"{PYTHON} fails.py"]) == Counter({"broken": 1})


def test_a_child_whose_main_no_rule_selects_runs_untouched(workdir: Path) -> None:
    make_file(workdir / "child.py", CHILD)
    make_file(
        workdir / "parent.py",
        """
        import subprocess, sys
        subprocess.run([sys.executable, "child.py", "x"], check=True)
    """,
    )
    done = run_autonvtx("-t", "child", "parent.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "argv ['x'] 6\n"
    recordings = {r.label: r for r in read_chrome_trace(done.trace_path)}
    assert counts(recordings[f"{PYTHON} child.py x"]) == Counter()


def test_autonvtx_rules_selecting_main_walk_a_plain_pythons_script(tmp_path: Path) -> None:
    if not list((Path(sys.prefix) / "lib").glob("python*/site-packages/autonvtx-autostart.pth")):
        pytest.skip("autonvtx is not installed in this Python (the .pth comes with the install)")
    make_file(tmp_path / "rules.toml", '[[rules]]\nmodules = ["__main__"]\n')
    recordings, _ = run_under_recorder(
        tmp_path,
        CHILD.replace("import sys", "import sys  # the program itself"),
        env={"AUTONVTX_RULES": "rules.toml"},
    )
    assert sum((counts(r) for r in recordings), Counter()) == Counter({"train": 1, "step": 3})


def test_a_childs_main_can_be_traced_and_debugged(workdir: Path) -> None:
    # CPython runs audit hooks with tracing off; the child's program runs inside one here and
    # must see sys.settrace (debuggers, coverage) work as under Python.
    make_file(
        workdir / "child.py",
        """
        import sys

        seen = []

        def tracer(frame, event, arg):
            seen.append((event, frame.f_code.co_name))

        def traced():
            return 1

        sys.settrace(tracer)
        traced()
        sys.settrace(None)
        print(("call", "traced") in seen)
    """,
    )
    make_file(
        workdir / "parent.py",
        """
        import subprocess, sys
        subprocess.run([sys.executable, "child.py"], check=True)
    """,
    )
    done = run_autonvtx("-t", "__main__", "parent.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"
    recordings = {r.label: r for r in read_chrome_trace(done.trace_path)}
    assert counts(recordings[f"{PYTHON} child.py"])["traced"] == 1
