"""A small PyTorch training loop (CPU is enough) to profile with the torch preset.

    autonvtx run --preset torch --summary examples/torch_training/train.py
    nsys profile -t cuda,nvtx autonvtx run --preset torch examples/torch_training/train.py --device cuda

Nothing here knows about NVTX: the preset names every layer by its path in the model
(`encoder.layers.1.attn (MultiheadAttention)`), the loss, `AdamW.step`, `backward` and each
DataLoader batch.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class CopyTask(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Sequences of tokens; the label of a sequence is its first token."""

    def __init__(self, size: int, length: int, vocab: int) -> None:
        generator = torch.Generator().manual_seed(1)
        self.tokens = torch.randint(0, vocab, (size, length), generator=generator)

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        row = self.tokens[index]
        return row, row[0]


class EncoderLayer(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Encoder(nn.Module):
    def __init__(self, depth: int, width: int, heads: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(width, heads) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class Classifier(nn.Module):
    def __init__(self, vocab: int, width: int = 32, depth: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.encoder = Encoder(depth, width, heads)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    vocab = 16
    data = DataLoader(CopyTask(args.samples, 8, vocab), batch_size=args.batch_size, shuffle=True)
    model = Classifier(vocab).to(args.device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for epoch in range(args.epochs):
        total = 0.0
        for tokens, labels in data:
            tokens, labels = tokens.to(args.device), labels.to(args.device)
            optimizer.zero_grad()
            loss = loss_fn(model(tokens), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: loss {total / len(data):.4f}")


if __name__ == "__main__":
    main()
