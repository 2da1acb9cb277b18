"""Transparency on real code (issue 7): third-party suites behave the same with their package annotated.

Each pinned suite (tests/thirdparty/suites.toml) runs plainly and under `autonvtx run` with
rules that wrap every function of its package; per-test outcomes must match, and the run must
show the annotation was active. Here the quick subsets run (what CI runs); the full suites and
other interpreters: `python benchmarks/transparency.py [--python PY]`, or set
AUTONVTX_THIRDPARTY_FULL=1 (and AUTONVTX_THIRDPARTY_PYTHON=PY) for this test.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.thirdparty

FULL_ENV = "AUTONVTX_THIRDPARTY_FULL"
PYTHON_ENV = "AUTONVTX_THIRDPARTY_PYTHON"


def _load_harness() -> Any:
    # Loaded by path: whether tests/ is a package or on sys.path is not this module's business.
    path = Path(__file__).resolve().parent / "thirdparty" / "harness.py"
    spec = importlib.util.spec_from_file_location("autonvtx_thirdparty_harness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = sys.modules.get("autonvtx_thirdparty_harness") or _load_harness()
PINS = harness.load_pins()
PYTHON = os.environ.get(PYTHON_ENV) or sys.executable
QUICK = os.environ.get(FULL_ENV, "") in ("", "0")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, Path], Path]]:
    """The suites' environment and unpacked trees, once for the module."""
    reason = harness.index_unreachable()
    if reason is not None:
        pytest.skip(reason)
    cache = (
        Path(os.environ[harness.CACHE_ENV])
        if os.environ.get(harness.CACHE_ENV)
        else tmp_path_factory.mktemp("thirdparty-cache")
    )
    version = harness.python_version(PYTHON)
    suites = [suite for suite in PINS.suites if version >= suite.requires_python]
    try:
        environment, trees = harness.prepare(PYTHON, suites, PINS, cache)
    except harness.NetworkUnavailable as error:
        pytest.skip(str(error))
    yield environment, trees, tmp_path_factory.mktemp("thirdparty-runs")


@pytest.mark.parametrize("suite", PINS.suites, ids=[suite.name for suite in PINS.suites])
def test_suite_outcomes_are_unchanged_when_annotated(
    suite: Any, prepared: tuple[Any, dict[str, Path], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    environment, trees, runs = prepared
    if suite.name not in trees:
        pytest.skip(f"{suite.requirement} does not support Python {'.'.join(map(str, harness.python_version(PYTHON)))}")
    tag = harness.python_tag(str(environment.python))
    result = harness.check_suite(environment, suite, trees[suite.name], runs / suite.name, tag, QUICK)
    report = harness.format_result(result)
    if not result.ok:
        pytest.fail(report, pytrace=False)
    with capsys.disabled():  # the numbers are the point of the check: show them on success too
        print("\n" + report)
