"""The quick start annotated by hand with nvtx.annotate, as one would without autonvtx.

quickstart.py is the same program with no annotation: its autonvtx.toml gives the same ranges.

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
