"""What a region selecting every function (`function = "*:*"`) costs a short program (issue 37,
item 13: it once took 25 s for a 0.09 s program), beside the plain program and `autonvtx run`
without regions:

    python benchmarks/regions_broad.py [--rounds N]     # Python 3.12+

Each variant is a fresh process (start-up included, as a user runs it), run round by round,
interleaved; the figure kept is each variant's fastest round of CPU time (user + system of the
child: a busy machine's waiting is not the program's cost), wall time beside it. Ratios are
against the plain program in the same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PROGRAM = textwrap.dedent("""
    import json

    def main():
        for i in range(3):
            json.loads(json.dumps({"i": i, "items": list(range(10))}))
        print("done")

    main()
""")

STAR = '[[regions]]\nfunction = "*:*"\nloop = "first"\n'
NOTHING = '[[rules]]\nmodules = ["no_such_module"]\n'


def measure(command: list[str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if sys.version_info < (3, 12):
        sys.exit("regions need Python 3.12+ (sys.monitoring)")
    with tempfile.TemporaryDirectory() as directory:
        cwd = Path(directory)
        (cwd / "program.py").write_text(PROGRAM)
        (cwd / "star.toml").write_text(STAR)
        (cwd / "nothing.toml").write_text(NOTHING)
        autonvtx = [sys.executable, "-m", "autonvtx", "run"]
        variants = {
            "python program.py": [sys.executable, "program.py"],
            "autonvtx run (no regions)": [*autonvtx, "--config", "nothing.toml", "program.py"],
            "autonvtx run, a *:* region": [*autonvtx, "--config", "star.toml", "program.py"],
        }
        best = {name: (float("inf"), float("inf")) for name in variants}
        env_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent) + (
            os.pathsep + env_path if env_path else ""
        )
        for _ in range(args.rounds):
            for name, command in variants.items():
                cpu, wall = measure(command, cwd)
                best[name] = (min(best[name][0], cpu), min(best[name][1], wall))
    base_cpu, base_wall = best["python program.py"]
    print(f"fastest of {args.rounds} rounds, Python {sys.version.split()[0]}")
    print(f"{'variant':<30} {'CPU':>9} {'ratio':>7} {'wall':>9} {'ratio':>7}")
    for name, (cpu, wall) in best.items():
        print(f"{name:<30} {cpu:8.3f}s {cpu / base_cpu:6.1f}x {wall:8.3f}s {wall / base_wall:6.1f}x")


if __name__ == "__main__":
    main()
