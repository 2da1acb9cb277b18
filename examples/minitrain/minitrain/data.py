"""Batches of random samples, produced lazily like a data loader."""

import random


class BatchLoader:
    def __init__(self, batches, batch_size, features, seed=0):
        self.batches = batches
        self.batch_size = batch_size
        self.features = features
        self._random = random.Random(seed)

    def __iter__(self):
        for _ in range(self.batches):
            yield self.load_batch()

    def load_batch(self):
        return [self._sample() for _ in range(self.batch_size)]

    def _sample(self):
        return [self._random.uniform(-1.0, 1.0) for _ in range(self.features)]
