"""A two-rank DistributedDataParallel job on CPU (gloo) whose rank 1 loads its batches 50 ms
slower: rank 0 then waits for it in the gradients' all-reduce, inside `backward`.

    torchrun --standalone --nproc-per-node 2 --no-python autonvtx run --trace t.{rank}.json \\
        -t __main__ straggler_ddp.py
"""

import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def load_batch(batches, rank):
    batch = next(batches)
    if rank == 1:
        time.sleep(0.05)  # a slow data loader on this rank only
    return batch


def forward(model, inputs, targets):
    return torch.nn.functional.mse_loss(model(inputs), targets)


def backward(loss):
    loss.backward()  # DDP all-reduces the gradients across ranks here


def train_step(model, optimizer, batches, rank):
    inputs, targets = load_batch(batches, rank)
    optimizer.zero_grad()
    loss = forward(model, inputs, targets)
    backward(loss)
    optimizer.step()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 32), torch.randn(96, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data, shuffle=False))
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = iter(loader)
    for _ in range(len(loader)):
        train_step(model, optimizer, batches, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
