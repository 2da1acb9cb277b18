"""A pandas data workflow on the CPU: build frames, then group-by aggregations done two ways.

With no annotation in the code, autonvtx.toml beside it gives every step a range, so the
timeline shows why one `agg` beats three separate group-bys:

    cd examples/dataframe && autonvtx run --trace workflow.json --summary workflow.py
"""

import numpy as np
import pandas as pd


def make_frame(rows, seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": rng.integers(0, 1_000, rows),
            "name": rng.choice(["alice", "bob", "carol", "dave"], rows),
            "x": rng.random(rows),
            "y": rng.random(rows),
        }
    )


def squared_diff(x, y):
    return (x - y) * (x - y)


def agg_all(frame):
    return frame.groupby("name")[["x", "y"]].agg(["count", "mean", "sum"])


def split_agg(frame):
    grouped = frame.groupby("name")[["x", "y"]]
    return grouped.count(), grouped.mean(), grouped.sum()


def join_means(left, right):
    left_means = left.groupby("id")[["x", "y"]].mean().reset_index()
    right_means = right.groupby("id")[["x", "y"]].mean().reset_index()
    return right_means.merge(left_means, on="id", suffixes=("_r", "_l"))


def main():
    first = make_frame(200_000, seed=1)
    second = make_frame(100_000, seed=2)
    squares = squared_diff(first["x"].to_numpy(), first["y"].to_numpy())
    combined = agg_all(first)
    separate = split_agg(first)
    joined = join_means(first, second)
    print(
        f"mean square {squares.mean():.4f}; {len(combined)} groups ({len(separate)} tables); {len(joined)} joined rows"
    )


if __name__ == "__main__":
    main()
