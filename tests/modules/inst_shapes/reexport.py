"""Re-exports a function of kinds: it keeps the one wrapper made where it is defined."""

from inst_shapes.kinds import plain, plain as also_plain

__all__ = ["plain", "also_plain"]
