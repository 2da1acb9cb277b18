"""A stack of dense layers written in plain Python."""

import math
import random


class Linear:
    def __init__(self, inputs, outputs, seed):
        rng = random.Random(seed)
        self.weights = [[rng.gauss(0.0, 1.0 / math.sqrt(inputs)) for _ in range(inputs)] for _ in range(outputs)]

    def forward(self, batch):
        return [[math.tanh(sum(w * x for w, x in zip(row, sample))) for row in self.weights] for sample in batch]

    def update(self, scale):
        self.weights = [[w * scale for w in row] for row in self.weights]


class Encoder:
    def __init__(self, sizes):
        self.layers = [Linear(a, b, seed=i) for i, (a, b) in enumerate(zip(sizes, sizes[1:]))]

    def forward(self, batch):
        for layer in self.layers:
            batch = layer.forward(batch)
        return batch

    @staticmethod
    def loss(outputs):
        return sum(value * value for sample in outputs for value in sample) / len(outputs)
