"""The native NVTX recorder and the trace and summary written from what it saw."""
from __future__ import annotations
