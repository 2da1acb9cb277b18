"""The sys.monitoring tool ids autonvtx claims, in one place: the code engine's and regions'
orders depend on each other, so they are written side by side."""

from __future__ import annotations

# The code engine's ids, tried in this order: 3 and 4 have no role sys.monitoring names; then
# the optimizer's, the debugger's, the profiler's (cProfile takes 2 on 3.12+) and last
# coverage.py's (1), the tool most often run together with autonvtx.
ENGINE = (4, 3, 5, 0, 2, 1)

# Regions' ids, tried in this order. sys.monitoring calls a location's tools from the highest
# id down, and the code engine's come first as 4, then 3, then 5: with a lower id, regions'
# callbacks run after the engine's at PY_RESUME, so an iteration reopened in a resumed
# generator or coroutine nests inside the function's own range. At PY_RETURN and PY_YIELD the
# engine's pop runs first: NVTX pops close the innermost range, and both happen at that instant.
REGIONS = (3, 2, 1, 0, 5, 4)

ENGINE_NAME = "autonvtx"
REGIONS_NAME = "autonvtx regions"
