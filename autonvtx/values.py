"""Frozen value classes without `dataclasses`: what the start path builds (config, rules, the
target) costs no import of `dataclasses` and `inspect` (about 9 ms of `autonvtx run`, issue 24).

A value class lists its fields in `__slots__` (in order), annotates them, and writes its own
`__init__`, which hands every field to `Value._set` in that order. It gets what a frozen
dataclass gives: equality and hashing by fields, a repr, no assignment, `replace()`, and
`as_dict()` (recursive, as `dataclasses.asdict`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    V = TypeVar("V", bound="Value")


class FrozenValueError(AttributeError):
    """An assignment to a field of a frozen value."""


class Value:
    """The base of frozen value classes (see the module's docstring)."""

    __slots__: tuple[str, ...] = ()

    def _set(self, *values: object) -> None:
        names = self.__slots__
        if len(values) != len(names):
            raise TypeError(f"{type(self).__name__}: {len(names)} fields, {len(values)} values")
        for name, value in zip(names, values):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenValueError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise FrozenValueError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Value) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (and copied) as a call of the class: the default sets the slots one by one.
        return (type(self), self._values())

    def replace(self: V, **changes: Any) -> V:
        """A copy with the fields named in `changes` changed (`dataclasses.replace`)."""
        unknown = set(changes) - set(self.__slots__)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return type(self)(*(changes.get(name, getattr(self, name)) for name in self.__slots__))

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict, values inside (in tuples, lists and dicts too) as dicts."""
        return {name: _plain(getattr(self, name)) for name in self.__slots__}


def _plain(value: Any) -> Any:
    if isinstance(value, Value):
        return value.as_dict()
    if isinstance(value, (tuple, list)):
        return type(value)(_plain(item) for item in value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value
