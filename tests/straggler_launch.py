"""A launcher of tests/straggler_job.py's two ranks, as torchrun is one: it gives each child its
RANK and waits for both; under `autonvtx profile` one capture holds the launcher and the ranks.

    python straggler_launch.py DIR data|compute
"""

import os
import subprocess
import sys

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "straggler_job.py")


def launch(where, case):
    for rank in (0, 1):
        os.mkfifo(os.path.join(where, f"to{rank}"))
    ranks = [
        subprocess.Popen([sys.executable, JOB, where, case], env={**os.environ, "RANK": str(rank), "WORLD_SIZE": "2"})
        for rank in (0, 1)
    ]
    return max(process.wait() for process in ranks)


sys.exit(launch(sys.argv[1], sys.argv[2]))
