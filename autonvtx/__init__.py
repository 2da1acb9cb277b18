"""autonvtx: NVTX ranges on any Python program's own functions, without touching its source.

Importing the package is cheap on purpose: `autonvtx run` installs its import hook before
anything heavy (nvtx imports numpy) is loaded.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
