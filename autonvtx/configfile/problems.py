"""Every problem of a config collected, to be reported in one error, as linters do."""

from __future__ import annotations

from autonvtx.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType


class Problems:
    """Every problem found in a config, reported together in one ConfigError, one line
    each, as linters do: a run shows all the mistakes of a file, not the first one."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        self.messages.append(message)

    def collect(self) -> Collector:
        """A check inside that raises ConfigError adds its lines, and the load goes on."""
        return Collector(self)

    def raise_any(self) -> None:
        if self.messages:
            raise ConfigError("\n".join(self.messages))


class Collector:
    """`with problems.collect():` (a class, not contextlib's decorator: contextlib is not
    imported at start-up on 3.12, issue 24)."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        if isinstance(error, ConfigError):
            self.problems.messages.extend(str(error).splitlines())
            return True
        return False
