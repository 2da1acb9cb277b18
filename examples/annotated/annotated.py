"""The quick start annotated by hand with nvtx.annotate, as one would without autonvtx.

examples/quickstart/quickstart.py is the same program with no annotation: the autonvtx.toml
beside it gives the same ranges. This one sits in a directory of its own, with no autonvtx.toml
to discover, so autonvtx's recorder shows only the hand-written ranges:

    autonvtx run --trace annotated.json --summary examples/annotated/annotated.py
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
