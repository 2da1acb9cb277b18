"""Every problem of a config collected, to be reported in one error, as linters do."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from autonvtx.errors import ConfigError


class Problems:
    """Every problem found in a config, reported together in one ConfigError, one line
    each, as linters do: a run shows all the mistakes of a file, not the first one."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        self.messages.append(message)

    @contextmanager
    def collect(self) -> Iterator[None]:
        """A check inside that raises ConfigError adds its lines, and the load goes on."""
        try:
            yield
        except ConfigError as exc:
            self.messages.extend(str(exc).splitlines())

    def raise_any(self) -> None:
        if self.messages:
            raise ConfigError("\n".join(self.messages))
