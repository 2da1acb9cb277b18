"""GPU time per NVTX range from Nsight Systems exports (and CPU time from autonvtx's recordings)."""

from __future__ import annotations
