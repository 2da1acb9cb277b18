"""A synthetic regression data set: each sample is made when a DataLoader worker asks for it."""

import torch
from torch.utils.data import Dataset


def make_sample(index, features):
    generator = torch.Generator().manual_seed(index)
    x = torch.randn(features, generator=generator)
    return x, x.sum(dim=0, keepdim=True) * 0.5


class RandomRegression(Dataset):
    def __init__(self, samples, features):
        self.samples = samples
        self.features = features

    def __len__(self):
        return self.samples

    def __getitem__(self, index):
        return make_sample(index, self.features)
