"""A training loop in miniature for `autonvtx diff` and `report --across ranks`: its functions sleep
for known times (long enough that a busy machine's wake-up delays stay small beside them), and
`forward` is FACTOR times slower (the first argument, default 1).

    autonvtx run --trace base.json -t __main__ examples/diff/train.py        # as it was
    autonvtx run --trace new.json -t __main__ examples/diff/train.py 1.2     # forward 20% slower
"""

import sys
import time

FACTOR = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


def load_batch():
    time.sleep(0.02)


def forward():
    time.sleep(0.2 * FACTOR)


def backward():
    time.sleep(0.1)


for step in range(4):
    load_batch()
    forward()
    backward()
