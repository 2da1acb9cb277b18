"""Run pinned third-party test suites plainly and under `autonvtx run`, and print the comparison.

    python benchmarks/transparency.py                      # full suites, this interpreter
    python benchmarks/transparency.py --python /root/.pyenv/versions/3.13.0/bin/python3.13
    python benchmarks/transparency.py --quick --suite attrs

Per suite it prints the tests compared, every difference in outcome, the wrapped functions,
the ranges recorded and the slowdown annotated/plain; it exits 1 when any suite differs or
shows no sign of annotation, 2 when the check could not be carried out. The suites, their
pinned versions and rules live in tests/thirdparty/.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "tests" / "thirdparty" / "harness.py"


def load_harness():  # type: ignore[no-untyped-def]
    # tests/ is not a package; load the harness by path under a name of its own.
    spec = importlib.util.spec_from_file_location("autonvtx_thirdparty_harness", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    harness = load_harness()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter of the suites' environment (default: this one)"
    )
    parser.add_argument(
        "--suite", action="append", dest="suites", metavar="NAME", help="run only this suite (repeatable)"
    )
    parser.add_argument("--quick", action="store_true", help="the quick subset CI runs, not the full suites")
    parser.add_argument(
        "--cache", type=Path, help=f"download and environment cache (default: ${harness.CACHE_ENV} or a temp dir)"
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="also write a trace of each annotated run (large: gigabytes for a full suite)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in both runs, e.g. AUTONVTX_PURE_PYTHON=1 (repeatable)",
    )
    parser.add_argument("--workdir", type=Path, help="where JUnit files, traces, summaries and outputs of the runs go")
    options = parser.parse_args(argv)
    if options.workdir is not None:
        options.workdir = options.workdir.resolve()
    try:
        results = harness.check(
            python=options.python,
            names=options.suites,
            quick=options.quick,
            cache=options.cache.resolve() if options.cache else None,
            workdir=options.workdir,
            log=lambda text: print(text + "\n", flush=True),
            trace_too=options.trace,
            extra_env=dict(item.split("=", 1) for item in options.env),
        )
    except harness.HarnessError as error:
        print(f"transparency: {error}", file=sys.stderr)
        return 2
    if options.workdir is not None:
        report = "\n\n".join(harness.format_result(result) for result in results)
        (options.workdir / "report.txt").write_text(report + "\n")
    failed = [result.suite.name for result in results if not result.ok]
    print(
        f"transparency: {len(results) - len(failed)} of {len(results)} suite(s) ok"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
