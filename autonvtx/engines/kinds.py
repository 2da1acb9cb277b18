"""The engines as records: what each can do and how to make one, and the choice of one for a
setting (coverage.py's core.py chooses its tracer this way). Callers read the capabilities;
none compares engine names."""

from __future__ import annotations

import sys

from autonvtx.config import Config
from autonvtx.engines import Engine
from autonvtx.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class EngineUnavailableError(Exception):
    """An engine's factory could not make it here (the one-line reason is the message)."""


class EngineKind(Value):
    """An engine as callers see it: what it does (its capabilities) and how to make one.
    Callers read these fields; none compares engine names. (A frozen value without
    dataclasses: start-up, issue 24.)"""

    __slots__ = ("name", "description", "verb", "reaches_nested", "replaces_functions", "factory")
    name: str
    description: str  # what `-v` says about it
    verb: str  # what it does to a selected function: "monitored", "wrapped"
    reaches_nested: bool  # ranges code objects: decides about nested functions too
    replaces_functions: bool  # the program sees wrappers where its functions were
    # (config, restorable) -> the engine; EngineUnavailableError when it cannot run after all.
    factory: Callable[[Config, bool], Engine]

    def __init__(
        self,
        name: str,
        description: str,
        verb: str,
        *,
        reaches_nested: bool,
        replaces_functions: bool,
        factory: Callable[[Config, bool], Engine],
    ) -> None:
        self._set(name, description, verb, reaches_nested, replaces_functions, factory)

    def build(self, config: Config, *, restorable: bool = False) -> Engine:
        return self.factory(config, restorable)

    def line(self) -> str:
        return f"engine: {self.name} ({self.description})"


def _make_code_engine(config: Config, restorable: bool) -> Engine:
    # Imported when the first target module is walked: a process that imports no target never
    # loads the engine, and the code engine never loads wrapt.
    from autonvtx import ranges
    from autonvtx.engines.code import CodeEngine

    monitor = ranges.CodeMonitor()
    why_not = monitor.install()
    if why_not is not None:  # taken since choose_engine() asked (another tool claimed the id)
        raise EngineUnavailableError(why_not)
    return CodeEngine(config, monitor, restorable=restorable)


def _make_wrap_engine(config: Config, restorable: bool) -> Engine:
    from autonvtx.engines.wrap import WrapEngine

    return WrapEngine(config, restorable=restorable)


CODE = EngineKind(
    "code",
    "sys.monitoring; no function replaced",
    "monitored",
    reaches_nested=True,
    replaces_functions=False,
    factory=_make_code_engine,
)
# 3.12+: coroutine and async generator functions are ranged through their code (coroutines.py).
_WRAP_DESCRIPTION = (
    "functions replaced by wrappers"
    if sys.version_info < (3, 12)
    else "functions replaced by wrappers; coroutine functions ranged through their code"
)
WRAP = EngineKind(
    "wrap", _WRAP_DESCRIPTION, "wrapped", reaches_nested=False, replaces_functions=True, factory=_make_wrap_engine
)

# The engines by name (`engines.ENGINES`, the settings, is "auto" and these names).
KINDS = {kind.name: kind for kind in (CODE, WRAP)}


def choose_engine(setting: str) -> tuple[EngineKind, str | None]:
    """The engine `[autonvtx] engine = setting` gives here, and None; or the wrap engine and
    the one line saying why the code engine cannot run, when it was asked for and cannot.
    `auto` is the code engine on 3.12+ and the wrap engine before, silently."""
    if setting == "wrap":
        return WRAP, None
    if setting == "auto" and sys.version_info < (3, 12):
        return WRAP, None
    from autonvtx import ranges  # the native client says whether its callbacks are there

    reason = ranges.monitoring_available()
    if reason is None:
        return CODE, None
    return WRAP, f"engine {setting!r}: the code engine cannot run ({reason}); using the wrap engine"
