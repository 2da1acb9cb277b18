"""Carrying autonvtx into child processes and across distributed ranks."""

from __future__ import annotations
