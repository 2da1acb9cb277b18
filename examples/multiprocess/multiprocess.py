"""Two spawned "calculate" processes beside the main one, and no NVTX annotation in the code:
the ranges a hand-annotated version would get from @nvtx.annotate come from autonvtx.toml.

    autonvtx run --trace multiprocess.json --summary multiprocess.py

Each spawned process re-runs this file as `__mp_main__`; its functions get their ranges there
too, and the trace shows both "calculate" processes next to the main one.
"""

import multiprocessing
import time

import numpy as np


def compute_mean(x):
    return x.mean()


def read_data(size):
    return np.random.random((size, size))


def big_computation(size):
    time.sleep(0.5)  # mock warmup
    data = read_data(size)
    return compute_mean(data)


def main():
    ctx = multiprocessing.get_context("spawn")
    sizes = [4096, 1024]
    procs = [ctx.Process(name="calculate", target=big_computation, args=[sizes[i]]) for i in range(2)]

    for proc in procs:
        proc.start()

    for proc in procs:
        proc.join()


if __name__ == "__main__":
    main()
