"""Ranges inside functions: a range per loop iteration, per line span or per call, and the
capture window a loop region may carry (Python 3.12+, through sys.monitoring)."""

from __future__ import annotations

from autonvtx.regions.installer import RegionInstaller, regions_available

__all__ = ["RegionInstaller", "regions_available"]
