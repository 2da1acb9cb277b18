"""install() after `import mypkg` (a notebook's usual order): calls through the package's own
re-export of a target function (`mypkg.crunch`, bound by `from mypkg.work import crunch` in
`mypkg/__init__.py` before the wrapper existed) are ranged, on the wrap engine too, and
uninstall() puts the original back there as well."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_file, run_under_recorder

from autonvtx import ranges

needs_native = pytest.mark.skipif(ranges._client is None, reason="autonvtx._nvtxclient is not built in this checkout")

PROGRAM = """
import autonvtx
import mypkg
crunch = mypkg.crunch
installation = autonvtx.install(targets=["mypkg.*"], engine=ENGINE)
print(mypkg.crunch(1), mypkg.work.crunch(2), mypkg.deep.inner.helper(3), mypkg.inner_helper(4))
installation.uninstall()
print(mypkg.crunch is crunch, mypkg.crunch(5))
"""


@needs_native
@pytest.mark.parametrize("engine", ["wrap", "auto"])
def test_a_package_s_re_export_is_ranged_when_installed_after_import(tmp_path: Path, engine: str) -> None:
    make_file(
        tmp_path / "mypkg" / "__init__.py",
        "from mypkg import work\nfrom mypkg.work import crunch\nfrom mypkg.deep.inner import helper as inner_helper\n",
    )
    make_file(tmp_path / "mypkg" / "work.py", "def crunch(x):\n    return x * 2\n")
    make_file(tmp_path / "mypkg" / "deep" / "__init__.py", "from mypkg.deep.inner import helper\n")
    make_file(tmp_path / "mypkg" / "deep" / "inner.py", "def helper(x):\n    return x + 1\n")
    (rec,), out = run_under_recorder(tmp_path, PROGRAM.replace("ENGINE", repr(engine)))
    assert out.splitlines() == ["2 4 4 5", "True 10"]
    names = [r.name for r in rec.ranges]
    # Through the re-export and the defining module alike; nothing after uninstall().
    assert names.count("crunch") == 2
    assert names.count("helper") == 2
