"""Re-exports a function of kinds: it keeps the one wrapper made where it is defined."""

from inst_shapes.kinds import plain
from inst_shapes.kinds import plain as also_plain

__all__ = ["plain", "also_plain"]
