"""Seed 000's quick start, annotated by hand with nvtx.annotate: what autonvtx replaces.

    autonvtx run --trace quickstart.json --summary examples/quickstart/annotated.py
"""
import time

import nvtx


@nvtx.annotate("f()", color="purple")
def f():
    for i in range(5):
        with nvtx.annotate("loop", color="red"):
            time.sleep(i / 50)


if __name__ == "__main__":
    f()
