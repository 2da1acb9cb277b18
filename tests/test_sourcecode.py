"""runner.compile_script: the native compile (autonvtx._sourcecode) gives what compile() gives,
code objects and errors alike, without building the `ast` types; compile() is its twin."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import pytest

from autonvtx import runner

native = pytest.importorskip("autonvtx._sourcecode", reason="the native twin is not built")

SOURCES: list[str | bytes] = [
    "",
    "x = 1\nprint(x)\n",
    "from __future__ import annotations\ndef f(a: int) -> undefined: return a\n",
    "def g():\n    yield 1\nasync def h():\n    await g()\nclass C:\n    def m(self): return lambda: 2\n",
    "# -*- coding: latin-1 -*-\ns = 'caf\xe9'\n",  # a cookie in text: ignored, as compile() does
    "# -*- coding: latin-1 -*-\ns = 'caf\xe9'\n".encode("latin-1"),  # in bytes: obeyed
    "\ufeffprint('bom')\n".encode("utf-8"),
    "s = 'caf\xe9'\n".encode(),
    b"s = '\xff'\n",  # not UTF-8 and no cookie
    "def f(:\n",
    "x = (1,\n",
    "  indented = 1\n",
    "return 1\n",
    "from __future__ import braces\n",
    "x = 1\nfrom __future__ import annotations\n",
    "f(**x, *y)\n",
    "x = 1\0\n",
    b"x = 1\0\n",
    "'\\N{no such name}'\n",
]


def outcome(compiler: Any, source: str | bytes) -> Any:
    """What compiling `source` gives, comparably: the code object's parts, or the error's."""
    try:
        code = compiler(source, "/tmp/probe.py")
    except BaseException as exc:  # noqa: BLE001 - the error is the outcome
        return type(exc), str(exc), getattr(exc, "lineno", None), getattr(exc, "offset", None)
    return describe(code)


def describe(code: types.CodeType) -> Any:
    return (
        code.co_filename,
        code.co_flags,
        code.co_code,
        code.co_names,
        code.co_varnames,
        tuple(describe(c) if isinstance(c, types.CodeType) else c for c in code.co_consts),
        list(code.co_lines()),
    )


def builtin(source: str | bytes, filename: str) -> types.CodeType:
    return compile(source, filename, "exec", dont_inherit=True)


@pytest.mark.parametrize("source", SOURCES, ids=range(len(SOURCES)))
def test_compile_script_is_compile(source: str | bytes) -> None:
    assert outcome(runner.compile_script, source) == outcome(builtin, source)


@pytest.mark.parametrize("source", ["x = 1\0", b"\0", bytearray(b"x = 1"), memoryview(b"x = 1")])
def test_what_compile_must_say_itself_is_left_to_it(source: Any) -> None:
    assert native.compile_exec(source, "f.py") is NotImplemented


def test_the_future_flags_of_this_module_do_not_leak() -> None:
    # runner.py itself has `from __future__ import annotations`.
    code = runner.compile_script("def f(x: undefined): pass\nf(1)\n", "f.py")
    with pytest.raises(NameError):
        exec(code, {})


def test_compile_script_raises_the_audit_event_compile_does() -> None:
    probe = """if 1:
        import sys
        from autonvtx.runner import compile_script
        seen = []
        sys.addaudithook(lambda event, args: event == "compile" and seen.append(args))
        compile_script(b"x = 1", "f.py")
        compile(b"x = 1", "f.py", "exec", dont_inherit=True)
        print(seen[0] == seen[1], seen[0][1])
    """
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "f.py"], done.stderr
