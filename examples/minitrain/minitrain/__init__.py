"""A tiny training library, used by examples/minitrain/train.py to show autonvtx on a package."""

from minitrain.data import BatchLoader
from minitrain.model import Encoder, Linear
from minitrain.trainer import Trainer

__all__ = ["BatchLoader", "Encoder", "Linear", "Trainer"]
