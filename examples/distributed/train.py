"""A small data-parallel training run on CPU: two ranks (gloo), DataLoader workers, no annotations.

    torchrun --nproc-per-node 2 --no-python autonvtx run --trace t.{rank}.json train.py
    autonvtx merge t.0.json t.1.json -o all.json

autonvtx.toml (next to this file) says which functions get ranges.
"""

import argparse
import os

import torch
import torch.distributed as dist
from data import RandomRegression
from model import Net
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def train_step(model, optimizer, batch):
    inputs, targets = batch
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()  # DDP all-reduces the gradients across ranks here
    optimizer.step()
    return loss.item()


def train(epochs, workers):
    dist.init_process_group("gloo")  # torchrun's environment says where the other ranks are
    rank = dist.get_rank()
    torch.manual_seed(0)
    dataset = RandomRegression(samples=64, features=16)
    sampler = DistributedSampler(dataset, shuffle=False)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler, num_workers=workers)
    model = DistributedDataParallel(Net(features=16))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        losses = [train_step(model, optimizer, batch) for batch in loader]
        if rank == 0:
            print(f"epoch {epoch}: mean loss {sum(losses) / len(losses):.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    train(arguments.epochs, arguments.workers)
