"""Trains minitrain's Encoder for a few epochs; autonvtx.toml beside it annotates the package.

cd examples/minitrain && autonvtx run --trace train.json --summary train.py --epochs 2
"""

import argparse

from minitrain import BatchLoader, Encoder, Trainer


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    trainer = Trainer(Encoder([32, 64, 64, 8]))
    history = trainer.fit(BatchLoader(batches=4, batch_size=16, features=32), epochs=args.epochs)
    print("loss per epoch:", " ".join(f"{loss:.4f}" for loss in history))


if __name__ == "__main__":
    main()
