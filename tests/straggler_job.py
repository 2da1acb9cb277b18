"""Two ranks of a training loop without torch: a pipe barrier stands for the all-reduce.

    RANK=r WORLD_SIZE=2 python straggler_job.py DIR data|compute

`data`: rank 1's load_batch sleeps 20 ms longer; rank 0 waits for rank 1 inside `backward`
(the barrier is backward's own code, no range of its own). `compute`: rank 1's backward
computes 20 ms longer before `all_reduce` (a function), where rank 0 waits.
"""

import os
import sys
import time

RANK = int(os.environ["RANK"])
WHERE, CASE = sys.argv[1], sys.argv[2]
SLOW = 0.02 if RANK == 1 else 0.0


def open_pipes():
    # Rank 0 reads "to0" and writes "to1"; opening in this order on both sides cannot deadlock.
    mine, theirs = os.path.join(WHERE, f"to{RANK}"), os.path.join(WHERE, f"to{1 - RANK}")
    if RANK == 0:
        return open(mine, "rb", buffering=0), open(theirs, "wb", buffering=0)
    writer = open(theirs, "wb", buffering=0)
    return open(mine, "rb", buffering=0), writer


READ, WRITE = open_pipes()


def load_batch():
    time.sleep(0.01 + (SLOW if CASE == "data" else 0.0))


def forward():
    time.sleep(0.01)


def all_reduce():
    WRITE.write(b"x")
    READ.read(1)


def backward():
    time.sleep(0.01 + (SLOW if CASE == "compute" else 0.0))
    if CASE == "compute":
        all_reduce()
    else:  # the same barrier, inline: the wait is backward's own time
        WRITE.write(b"x")
        READ.read(1)


def train_step():
    load_batch()
    forward()
    backward()


WRITE.write(b"x")  # both ranks start their steps together
READ.read(1)
for _ in range(6):
    train_step()
