"""A small training loop (pure Python, CPU only, no downloads): a linear model fitted by
gradient descent on synthetic data, in mini-batches. Nothing in it knows about NVTX."""

from __future__ import annotations

import random


def make_data(count: int, seed: int = 0) -> list[tuple[list[float], float]]:
    rng = random.Random(seed)
    truth = [0.5, -1.5, 2.0, 0.25]
    data = []
    for _ in range(count):
        x = [rng.uniform(-1, 1) for _ in truth]
        data.append((x, sum(w * v for w, v in zip(truth, x)) + rng.gauss(0, 0.01)))
    return data


def batches(data: list[tuple[list[float], float]], size: int):
    for start in range(0, len(data), size):
        yield data[start : start + size]


def forward(weights: list[float], batch: list[tuple[list[float], float]]) -> list[float]:
    return [sum(w * v for w, v in zip(weights, x)) for x, _ in batch]


def backward(weights: list[float], batch: list[tuple[list[float], float]], predictions: list[float]) -> list[float]:
    grads = [0.0] * len(weights)
    for (x, y), p in zip(batch, predictions):
        for j, v in enumerate(x):
            grads[j] += 2 * (p - y) * v / len(batch)
    return grads


def evaluate(weights: list[float], data: list[tuple[list[float], float]]) -> float:
    predictions = forward(weights, data)
    return sum((p - y) ** 2 for p, (_, y) in zip(predictions, data)) / len(data)


def train(epochs: int = 3, batch_size: int = 16, lr: float = 0.1) -> list[float]:
    data = make_data(640)
    weights = [0.0, 0.0, 0.0, 0.0]
    step = 0
    for epoch in range(epochs):
        for batch in batches(data, batch_size):
            predictions = forward(weights, batch)
            grads = backward(weights, batch, predictions)
            weights = [w - lr * g for w, g in zip(weights, grads)]
            step += 1
        loss = evaluate(weights, data)
        print(f"epoch {epoch}: loss {loss:.5f} after {step} steps")
    return weights


if __name__ == "__main__":
    train()
