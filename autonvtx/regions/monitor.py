"""A sys.monitoring tool id of regions' own, with regions.c's callbacks, on the code objects
that hold regions only: local LINE events (and the frame events), DISABLE where no region
needs a line, so functions without regions pay nothing. A function a region selects is placed
at its first call (`defer`: local PY_START and PY_RESUME events until then), so that a glob
selecting thousands of functions costs what the program runs."""

from __future__ import annotations

import sys
import types
from typing import Any

from autonvtx import ranges, toolids

_TOOL_IDS = toolids.REGIONS  # the order and why: toolids
_NAME = toolids.REGIONS_NAME


def _monitoring() -> Any:
    # sys.monitoring is 3.12+ (callers run once monitoring_problem() said yes); typed for
    # every Python mypy checks with.
    return sys.monitoring  # type: ignore[attr-defined, unused-ignore]


def monitoring_problem() -> str | None:
    """None when regions can run here, else why not."""
    if sys.version_info < (3, 12):
        return f"Python {sys.version_info[0]}.{sys.version_info[1]} has no sys.monitoring (3.12+)"
    client = ranges.native_client()
    if client is None or not hasattr(client, "attach_regions"):
        return "autonvtx's native client (autonvtx._nvtxclient) is not built"
    if not any(_monitoring().get_tool(tool) is None for tool in _TOOL_IDS):
        return "no free sys.monitoring tool id"
    return None


class RegionMonitor:
    """Claims a tool id, registers the callbacks; attach() gives a code object its regions."""

    def __init__(self) -> None:
        self.tool_id: int | None = None
        # Codes given events (regions, or a placer), by identity: equal code objects of two
        # files (same name, line and body) are two functions.
        self._codes: dict[int, types.CodeType] = {}
        self._deferred: list[types.CodeType] = []  # codes given a placer
        self._client: Any = None

    def install(self) -> str | None:
        """Claim a tool id; None on success, else why not."""
        problem = monitoring_problem()
        if problem is not None:
            return problem
        monitoring = _monitoring()
        tool_id = next(tool for tool in _TOOL_IDS if monitoring.get_tool(tool) is None)
        monitoring.use_tool_id(tool_id, _NAME)
        client: Any = ranges.native_client()  # not None: monitoring_problem() said so
        events = monitoring.events
        for event, callback in (
            (events.LINE, client.region_line),
            (events.PY_START, client.region_start),
            (events.PY_RESUME, client.region_resume),
            (events.PY_RETURN, client.region_exit),
            (events.PY_UNWIND, client.region_exit),
            (events.PY_YIELD, client.region_yield),
        ):
            monitoring.register_callback(tool_id, event, callback)
        # PY_UNWIND cannot be a local event: every frame an exception leaves calls back, and a
        # code object without regions costs one lookup of its code extra.
        monitoring.set_events(tool_id, events.PY_UNWIND)
        self.tool_id, self._client = tool_id, client
        return None

    def defer(self, code: types.CodeType, placer: Any) -> bool:
        """Have `placer(code)` called at `code`'s next call or resumption (natively, once), so
        that only functions the program runs are placed; False when this client cannot."""
        if self.tool_id is None:
            raise RuntimeError("RegionMonitor is not installed")
        if not hasattr(self._client, "defer_regions"):
            return False
        try:
            self._client.defer_regions(code, placer)
        except RuntimeError:  # no code extra index left: placed as its module runs
            return False
        events = _monitoring().events
        _monitoring().set_local_events(self.tool_id, code, events.PY_START | events.PY_RESUME)
        self._deferred.append(code)
        self._codes[id(code)] = code
        return True

    def forget(self, code: types.CodeType) -> None:
        """`code` was deferred and holds no region after all: no event of regions' on it."""
        if self.tool_id is not None:
            self._client.defer_regions(code, None)
            _monitoring().set_local_events(self.tool_id, code, 0)

    def attach(self, code: types.CodeType, natives: tuple[Any, ...], calls: bool) -> None:
        """Give `code` these native Regions (outermost first); `calls`: one opens per call."""
        if self.tool_id is None:
            raise RuntimeError("RegionMonitor is not installed")
        events = _monitoring().events
        flags = events.LINE | events.PY_RESUME | events.PY_RETURN | events.PY_YIELD
        if calls:
            flags |= events.PY_START
        self._client.attach_regions(code, natives)
        _monitoring().set_local_events(self.tool_id, code, flags)
        self._codes[id(code)] = code

    def uninstall(self) -> None:
        """No event, callback or tool id of regions' is left; open ranges stay open."""
        if self.tool_id is None:
            return
        monitoring = _monitoring()
        for code in self._codes.values():
            monitoring.set_local_events(self.tool_id, code, 0)
            self._client.detach_regions(code)
        self._codes.clear()
        for code in self._deferred:  # a placer not yet called holds the installer
            self._client.defer_regions(code, None)
        self._deferred.clear()
        monitoring.set_events(self.tool_id, 0)
        for event in (
            monitoring.events.LINE,
            monitoring.events.PY_START,
            monitoring.events.PY_RESUME,
            monitoring.events.PY_RETURN,
            monitoring.events.PY_UNWIND,
            monitoring.events.PY_YIELD,
        ):
            monitoring.register_callback(self.tool_id, event, None)
        monitoring.free_tool_id(self.tool_id)
        self.tool_id = None
