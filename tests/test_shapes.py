"""Shapes on ranges: the key and text of a call's array-like arguments, a rule's `shapes = true`
on both engines (through the recorder), and one summary row per function unless --each."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import make_file, run_autonvtx, skip_without

from autonvtx import shapes
from autonvtx.recorder import native
from autonvtx.recorder.trace import read_chrome_trace
from autonvtx.stats.model import name_template

np = pytest.importorskip("numpy")


class _Anything:
    """Answers every attribute: not array-like (asked of the type, not the instance)."""

    def __getattr__(self, name: str) -> object:
        return (1, 2)


def test_key_and_text_of_array_arguments() -> None:
    a, b = np.ones((32, 128)), np.ones((128, 64), dtype=np.float32)
    key = shapes.shapes_key((a, 3, "x", None, _Anything()), {"other": b})
    assert shapes.describe(key) == "32x128 float64, 128x64 float32"
    assert shapes.suffix(key) == " [32x128 float64, 128x64 float32]"
    # One level inside lists and tuples (np.concatenate([a, b])); a 0-d array is a scalar.
    assert shapes.describe(shapes.shapes_key(([a, a], np.float32(1.0)), None)) == (
        "32x128 float64, 32x128 float64, scalar float32"
    )
    assert shapes.shapes_key((1, 2.0, [3]), {}) == () and shapes.suffix(()) == ""
    # Equal shapes give equal keys: the emitter is found by a dict look-up.
    assert shapes.shapes_key((np.zeros((32, 128)),), None) == shapes.shapes_key((a,), None)


class _ListShaped:  # an array-like whose shape is a list: keyed as a tuple, so hashable
    shape, dtype = [2, 5], "int16"


def test_the_native_key_is_the_python_key() -> None:
    from autonvtx import ranges

    if not hasattr(ranges.native_client(), "shapes_key"):
        pytest.skip("the native client is not built in this checkout")
    assert shapes.key_function() is ranges.native_client().shapes_key  # type: ignore[union-attr]
    a, b = np.ones((32, 128)), np.ones((128, 64), dtype=np.float32)
    calls = [
        ((a, 3, "x", None, _Anything()), {"other": b}),
        (([a, a], np.float32(1.0), (b,)), None),
        ((1, 2.0, [3], [[a]]), {}),  # two levels down: not looked at
        ((_ListShaped(), np.ones(())), {"k": [b, 1]}),
        ((), None),
    ]
    for args, kwargs in calls:
        native = shapes.shapes_key(args, kwargs)
        assert native == shapes._python_shapes_key(args, kwargs)
        assert hash(native) == hash(shapes._python_shapes_key(args, kwargs))
    with pytest.raises(TypeError):
        shapes.key_function()([a], None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("mm [32x128 float64, 128x64 float64]", "mm [{shapes}]"),
        ("blocks.3.mlp.0 (Linear) [4x5x8 float32]", "blocks.{n}.mlp.{n} (Linear) [{shapes}]"),
        ("loss [scalar float32]", "loss [{shapes}]"),
        ("f [128 torch.float32]", "f [{shapes}]"),
        # Not shapes: brackets of other kinds stay, numbers in them fold as anywhere.
        ("blocks.0 (Block) [backward]", "blocks.{n} (Block) [backward]"),
        ("f [32x128]", "f [32x128]"),
        ("f [3 items]x", "f [{n} items]x"),
        ("f [32 float32,]", "f [{n} float32,]"),
    ],
)
def test_summary_row_of_a_shaped_name(name: str, row: str) -> None:
    assert name_template(name) == row


PROGRAM = """
    import numpy as np
    import mathy

    a, b = np.ones((32, 128)), np.ones((128, 64))
    for _ in range(3):
        mathy.mm(a, b)
    mathy.mm(a.astype(np.float32), b.astype(np.float32))
    print(mathy.mm(np.ones((2, 2)), np.ones((2, 2))).sum(), mathy.cat([a, a]).shape, mathy.scale(a, 2.0).shape)
"""

MATHY = """
    import numpy as np

    def mm(x, y):
        return x @ y

    def cat(arrays):
        return np.concatenate(arrays)

    def scale(x, factor):
        return x * factor
"""

ENGINES = ["wrap"] + (["code"] if sys.version_info >= (3, 12) else [])


def run_shaped(workdir: Path, engine: str, program: str, module: str, source: str) -> tuple[Any, Counter[str]]:
    """`program` run under a rule with shapes on `module` (written from `source`): the finished
    run and its ranges' names counted."""
    make_file(workdir / "prog.py", program)
    make_file(workdir / f"{module}.py", source)
    make_file(workdir / "autonvtx.toml", f'[[rules]]\nmodules = ["{module}"]\nshapes = true\n')
    done = run_autonvtx("--engine", engine, "prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.trace_path is not None
    (recording,) = read_chrome_trace(done.trace_path)
    return done, Counter(r.name for r in recording.ranges)


@pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built in this checkout")
@pytest.mark.parametrize("engine", ENGINES)
def test_rule_with_shapes_names_each_call_by_its_arrays(workdir: Path, engine: str) -> None:
    make_file(workdir / "prog.py", PROGRAM)
    make_file(workdir / "mathy.py", MATHY)
    make_file(workdir / "autonvtx.toml", '[[rules]]\nmodules = ["mathy"]\nshapes = true\n')
    done = run_autonvtx("--engine", engine, "--summary", "prog.py", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("8.0 (64, 128) (32, 128)")
    assert done.trace_path is not None
    (recording,) = read_chrome_trace(done.trace_path)
    assert Counter(r.name for r in recording.ranges) == {
        "mm [32x128 float64, 128x64 float64]": 3,
        "mm [32x128 float32, 128x64 float32]": 1,
        "mm [2x2 float64, 2x2 float64]": 1,
        "cat [32x128 float64, 32x128 float64]": 1,
        "scale [32x128 float64]": 1,
    }
    # The exporter's summary (native) groups a function's shapes in one row, as name_template does.
    (mm_row,) = [line for line in done.stderr.splitlines() if "mm [" in line]
    assert mm_row.endswith("autonvtx:mm [{shapes}]") and " 5 " in mm_row, done.stderr
    # --each splits them again (the Python statistics of the saved trace).
    each = run_autonvtx("--each", "--summary", "prog.py", cwd=workdir)
    assert "autonvtx:mm [32x128 float32, 128x64 float32]" in each.stderr


def test_shapes_key_must_be_true_or_false(workdir: Path) -> None:
    make_file(workdir / "prog.py", "print('ran')\n")
    make_file(workdir / "autonvtx.toml", '[[rules]]\nmodules = ["mathy"]\nshapes = "yes"\n')
    done = run_autonvtx("prog.py", cwd=workdir, trace=False)
    assert done.returncode == 2 and "ran" not in done.stdout
    assert "rules[0].shapes: expected true or false, got 'yes'" in done.stderr or "shapes: expected true or false" in (
        done.stderr
    ), done.stderr


skip_without("numpy")


ODD = """
    class Unhashable:                  # array-like, but its dtype cannot be in a key
        shape, dtype = (2, 3), ["float32"]

    class Unreadable:                  # array-like by its type, but reading its shape raises
        dtype = "float32"

        @property
        def shape(self):
            raise RuntimeError("no shape")

    class Fine:
        shape, dtype = (4,), "int8"

    def f(*args, **kwargs):
        return len(args) + len(kwargs)
"""

ODD_PROGRAM = """
    import odd
    print(odd.f(odd.Unhashable()), odd.f(odd.Unreadable(), k=1), odd.f([odd.Fine(), odd.Fine()], scale=odd.Fine()))
    print(odd.f(1, 2.0, "s", None, True, (odd.Fine(),)))
"""


@pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built in this checkout")
@pytest.mark.parametrize("engine", ENGINES)
def test_odd_array_likes_give_the_range_without_shapes(workdir: Path, engine: str) -> None:
    done, names = run_shaped(workdir, engine, ODD_PROGRAM, "odd", ODD)
    assert done.stdout == "1 2 2\n6\n"  # every call made once, with its own arguments
    # Inside a list one level down, keyword arguments after positional ones; scalars left out.
    assert names == {"f": 2, "f [4 int8, 4 int8, 4 int8]": 1, "f [4 int8]": 1}


def test_the_native_wrapper_builds_the_keys_the_python_one_does() -> None:
    from autonvtx import ranges, shapes

    client = ranges.native_client()
    if client is None or not hasattr(client, "ShapedRanges"):
        pytest.skip("the native client is not built in this checkout")

    class Fine:
        shape, dtype = (4,), "int8"

    seen: list[tuple[object, ...]] = []
    plain = client.Range("d", "f")

    def make(key: tuple[object, ...]) -> object:
        seen.append(key)
        return client.Range("d", "f" + shapes.suffix(key))

    wrapper = client.ShapedRanges(plain, make, {}, shapes._is_array_type)
    assert wrapper(lambda *a, **k: (a, k), None, (Fine(), [Fine()], 3), {"x": Fine()}) is not None
    wrapper(lambda *a, **k: None, None, (Fine(), [Fine()], 3), {"x": Fine()})  # seen: no second make
    assert seen == [(((4,), "int8"), ((4,), "int8"), ((4,), "int8"))] and wrapper.seen == 1


MIXED = """
    import numpy as np

    class Shaped(np.ndarray):          # a subclass whose shape is its own: read through .shape
        @property
        def shape(self):
            return (7,)

    class FreshDtype:                  # a new dtype object at each call: never found by address
        shape = (3,)

        @property
        def dtype(self):
            return "".join(["int", "16"])

    def f(*args, **kwargs):
        return len(args) + len(kwargs)
"""

MIXED_PROGRAM = """
    import numpy as np
    import mixed

    a, b = np.ones((2, 3)), np.ones((3,), dtype=np.float32)
    big = np.ones((4,), dtype=">f8")   # not the native byte order
    sub = np.ones((5,)).view(mixed.Shaped)
    for _ in range(3):                 # alternating shapes, each found again
        mixed.f(a, b)
        mixed.f(b, a)
        mixed.f(a, y=b)
    for _ in range(2):
        mixed.f(big)
        mixed.f(np.ones((4,), dtype=">f8"))
        mixed.f(sub)
        mixed.f(mixed.FreshDtype())
        mixed.f([a] * 20)              # more arrays than the native key holds
        mixed.f(np.ones(()))
    for n in range(1, 5001):           # more shapes than the native wrapper keeps found by address
        mixed.f(np.ones((n,), dtype=np.int8))
    mixed.f(a, b)
"""


@pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built in this checkout")
@pytest.mark.parametrize("engine", ENGINES)
def test_every_call_is_named_by_its_own_arrays(workdir: Path, engine: str) -> None:
    _, names = run_shaped(workdir, engine, MIXED_PROGRAM, "mixed", MIXED)
    assert {name: count for name, count in names.items() if not name.endswith(" int8]")} == {
        "f [2x3 float64, 3 float32]": 7,  # f(a, b) and f(a, y=b): keyword arguments after the others
        "f [3 float32, 2x3 float64]": 3,
        "f [4 >f8]": 4,
        "f [7 float64]": 2,
        "f [3 int16]": 2,
        "f [" + ", ".join(["2x3 float64"] * 20) + "]": 2,
        "f [scalar float64]": 2,
    }
    assert all(names[f"f [{n} int8]"] == 1 for n in range(1, 5001))
    assert sum(names.values()) == 9 + 12 + 5000 + 1


GROWING_PROGRAM = """
    import numpy as np
    import mixed

    for n in range(1, 10_051):         # a growing length: more shapes than a function names
        mixed.f(np.ones((n,), dtype=np.int8))
    mixed.f(np.ones((1,), dtype=np.int8))
    mixed.f(np.ones((10_040,), dtype=np.int8))
"""


@pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built in this checkout")
@pytest.mark.parametrize("engine", ENGINES)
def test_ever_new_shapes_share_one_range_past_the_limit(workdir: Path, engine: str) -> None:
    done, names = run_shaped(workdir, engine, GROWING_PROGRAM, "mixed", MIXED)
    assert done.stderr.count("called with more than 10,000 different shapes") == 1, done.stderr
    assert names["f [other shapes]"] == 51  # shapes 10,001 to 10,050, then 10,040 again
    assert names["f [1 int8]"] == 2 and names["f [10000 int8]"] == 1 and len(names) == 10_001


CLEARING = """
    class Clearing:                    # reading its shape empties the list it is in
        dtype = "int8"

        def __init__(self, owner):
            self.owner = owner

        @property
        def shape(self):
            self.owner.clear()
            return (1,)

    def f(*args):
        return len(args)
"""

CLEARING_PROGRAM = """
    import clearing

    for _ in range(200):
        items = []
        items.extend(clearing.Clearing(items) for _ in range(50))
        clearing.f(items)
    print("done")
"""


@pytest.mark.skipif(native.library_path() is None, reason="the native recorder is not built in this checkout")
@pytest.mark.parametrize("engine", ENGINES)
def test_a_list_changed_while_its_items_are_read_is_read_safely(workdir: Path, engine: str) -> None:
    # The native key read a list's items through a pointer taken before reading them: an item
    # whose `shape` empties the list left it reading freed memory.
    done, names = run_shaped(workdir, engine, CLEARING_PROGRAM, "clearing", CLEARING)
    assert done.stdout == "done\n"
    assert names["f"] + names["f [1 int8]"] == 200
