"""The quick start: a program with no annotations at all; autonvtx.toml beside it selects f and loop.

../annotated/annotated.py is the same program annotated by hand with nvtx.annotate, for comparison.

    cd examples/quickstart && autonvtx run --trace quickstart.json --summary quickstart.py
"""

import time


def loop(i):
    time.sleep(i / 50)


def f():
    for i in range(5):
        loop(i)


if __name__ == "__main__":
    f()
