"""A training loop whose data loader stalls once (pure Python, CPU only): each step waits 4 ms
for its device work, and step 400 waits 100 ms more for its batch, as a read from a slow shared
filesystem would. Nothing in it knows about NVTX."""

from __future__ import annotations

import random
import time


def load_batch(step: int, rng: random.Random) -> list[list[float]]:
    if step == 400:
        time.sleep(0.1)  # the stall a long run meets once in a while
    return [[rng.uniform(-1, 1) for _ in range(8)] for _ in range(64)]


def forward(weights: list[float], batch: list[list[float]]) -> list[float]:
    return [sum(w * v for w, v in zip(weights, x)) for x in batch]


def update(weights: list[float], batch: list[list[float]], outputs: list[float]) -> list[float]:
    grads = [sum(o * x[j] for o, x in zip(outputs, batch)) / len(batch) for j in range(len(weights))]
    return [w - 0.01 * g for w, g in zip(weights, grads)]


def wait_for_device() -> None:
    time.sleep(0.004)  # what a GPU step would take, the program waiting for it


def step(i: int, weights: list[float], rng: random.Random) -> list[float]:
    batch = load_batch(i, rng)
    weights = update(weights, batch, forward(weights, batch))
    wait_for_device()
    return weights


def train(steps: int = 600) -> list[float]:
    rng = random.Random(0)
    weights = [0.1] * 8
    for i in range(steps):
        weights = step(i, weights, rng)
    return weights


if __name__ == "__main__":
    train()
