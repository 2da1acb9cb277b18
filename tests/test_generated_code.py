"""Code that a library generates from text (dataclasses' `__init__`, namedtuple's `__new__`,
attrs' methods) is ranged alike on both engines: under the code engine its code object, made
by `exec` for that one class, is named by the function it became."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import make_file, run_under_recorder

from autonvtx import ranges

needs_native = pytest.mark.skipif(ranges._client is None, reason="autonvtx._nvtxclient is not built in this checkout")
ENGINES = ["wrap"] + (["code"] if sys.version_info >= (3, 12) else [])

MODULE = """
import collections, dataclasses

@dataclasses.dataclass
class Point:
    x: int
    y: int = 0

    def norm(self):
        return self.x + self.y

Pair = collections.namedtuple("Pair", "a b")

def factory(n):
    def made():
        return n
    return made

first = factory(1)
second = factory(2)
"""

ATTRS = """
import attr

@attr.s
class Box:
    size = attr.ib()
"""

PROGRAM = """
import sys
import autonvtx
autonvtx.install(targets=["genmod", "genattrs"], include=INCLUDE, engine=ENGINE)
import genmod
p = genmod.Point(1, 2)
print(p.norm(), genmod.Pair(3, 4), p == genmod.Point(1, 2), genmod.first(), genmod.second())
try:
    import genattrs
    print(genattrs.Box(5).size)
except ImportError:
    print(5)
"""


@needs_native
@pytest.mark.parametrize("include", ["*", "[A-Za-z_]*"], ids=["native-walk", "python-walk"])
@pytest.mark.parametrize("engine", ENGINES)
def test_generated_methods_are_ranged_alike_on_both_engines(tmp_path: Path, engine: str, include: str) -> None:
    make_file(tmp_path / "genmod.py", MODULE)
    make_file(tmp_path / "genattrs.py", ATTRS)
    program = PROGRAM.replace("ENGINE", repr(engine)).replace("INCLUDE", repr([include]))
    (rec,), out = run_under_recorder(tmp_path, program)
    assert out.splitlines() == ["3 Pair(a=3, b=4) True 1 2", "5"]
    names = [r.name for r in rec.ranges]
    # Point(1, 2) twice: its generated __init__ each time (protocol methods such as __eq__ are
    # left alone on both engines).
    assert names.count("Point.__init__") == 2
    # namedtuple's __new__ is a protocol method too: no range on either engine.
    assert names.count("Pair.__new__") == 0
    assert names.count("Point.norm") == 1
    try:
        import attr  # noqa: F401
    except ImportError:
        pass
    else:
        assert names.count("Box.__init__") == 1
