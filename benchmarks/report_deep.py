"""How `autonvtx report --tree --format json` grows with the depth of nesting.

    python benchmarks/report_deep.py                   # depths 1,500, 3,000 and 6,000
    python benchmarks/report_deep.py --depths 500 1000

A trace of one recursion as deep as asked (each level one range inside the one before) is
reported as a JSON tree in this process; printed per depth: seconds, the document's size, and
both against the smallest depth's, beside the depth's own ratio. Linear growth keeps the three
ratios alike; growth with depth squared makes the time and size ratios the depth's squared
(6,000 levels once took 48 s and 2.09 GB).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autonvtx.report.output import ReportRequest, produce  # noqa: E402
from autonvtx.stats.model import ViewOptions  # noqa: E402


def deep_trace(path: Path, depth: int) -> None:
    events = [{"ph": "X", "pid": 1, "tid": 1, "ts": i, "dur": 2 * (depth - i), "name": "f"} for i in range(depth)]
    path.write_text(json.dumps({"traceEvents": events}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[1500, 3000, 6000])
    args = parser.parse_args()
    first: tuple[int, float, int] | None = None
    with tempfile.TemporaryDirectory() as directory:
        for depth in args.depths:
            trace = Path(directory) / f"deep{depth}.json"
            deep_trace(trace, depth)
            start = time.perf_counter()
            text = produce(ReportRequest(str(trace), fmt="json", view=ViewOptions(tree=True)))
            seconds = time.perf_counter() - start
            size = len(text or "")
            if first is None:
                first = (depth, seconds, size)
            print(
                f"depth {depth:,}: {seconds:.2f} s, {size / 1e6:.1f} MB; against depth {first[0]:,}: "
                f"depth x{depth / first[0]:.1f}, time x{seconds / first[1]:.1f}, size x{size / first[2]:.1f}"
            )


if __name__ == "__main__":
    main()
