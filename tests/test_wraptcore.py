"""engines.wraptcore: the wrap engine loads wrapt's wrapper types without the rest of wrapt (2.x
imports asyncio and importlib.metadata), and the program's own `import wrapt` still gets all of
wrapt, with the same types. Each check runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import REPO


def run_fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def wrapt_major() -> int:
    return int(run_fresh("from importlib.metadata import version; print(version('wrapt'))").split(".")[0])


def test_the_wrap_engine_does_not_import_asyncio_nor_importlib_metadata() -> None:
    if wrapt_major() < 2:
        pytest.skip("wrapt 1.x is imported whole (its __init__ is cheap)")
    out = run_fresh("""
        import sys
        import autonvtx.engines.wrap
        print(sorted(m for m in ("asyncio", "importlib.metadata", "email") if m in sys.modules))
    """)
    assert out.strip() == "[]"


def test_the_programs_own_import_gets_all_of_wrapt_and_the_same_types() -> None:
    out = run_fresh("""
        from autonvtx.engines.wrap import RangeWrapper
        import wrapt
        from wrapt import ObjectProxy, decorator
        print(issubclass(RangeWrapper, wrapt.FunctionWrapper), wrapt.__version__ is not None,
              callable(decorator), ObjectProxy.__name__, wrapt.wrappers.__name__)

        @wrapt.decorator
        def passthrough(wrapped, instance, args, kwargs):
            return wrapped(*args, **kwargs)

        @passthrough
        def f():
            return 7
        print(f(), isinstance(f, wrapt.FunctionWrapper))
    """)
    assert out.split() == ["True", "True", "True", "ObjectProxy", "wrapt.wrappers", "7", "True"]


def test_a_wrapt_imported_first_is_used_as_it_is() -> None:
    out = run_fresh("""
        import wrapt
        from autonvtx.engines import loaded_function_wrapper
        from autonvtx.engines.wraptcore import load_wrapt
        print(load_wrapt().FunctionWrapper is wrapt.FunctionWrapper, loaded_function_wrapper() is wrapt.FunctionWrapper)
    """)
    assert out.split() == ["True", "True"]
