"""The plan engine: decisions recorded, nothing applied. `list`, `run --dry-run` and `export`
walk modules with it, so they print exactly what a run would do."""

from __future__ import annotations

from typing import Any

from autonvtx.config import Rule


class Placeholder:
    """Stands where a run would install a wrapper, so the walk's "already wrapped" and
    re-export logic decides exactly as in a run."""

    __slots__ = ("rule", "module", "qualname", "__wrapped__")

    def __init__(self, func: Any, module: str, qualname: str, rule: Rule) -> None:
        self.rule = rule
        self.module = module
        self.qualname = qualname
        self.__wrapped__ = func  # as a wrapper's: existing() finds re-exports by it


class PlanEngine:
    """Records what would be applied, in order; changes no class, module or function."""

    changes_namespaces = False

    def __init__(self, *, reaches_nested: bool = False) -> None:
        # As the engine a run would use: the code engine decides about nested functions too.
        self.reaches_nested = reaches_nested
        self._placeholders: dict[int, Placeholder] = {}
        self.planned: list[Placeholder] = []

    def apply(self, func: Any, module: str, qualname: str, rule: Rule) -> Placeholder:
        found = self.existing(func)
        if found is not None:
            return found
        placeholder = self._placeholders[id(func)] = Placeholder(func, module, qualname, rule)
        self.planned.append(placeholder)
        return placeholder

    def apply_code(self, code: Any, module: str, qualname: str, rule: Rule) -> None:
        """A nested function's code object, as the code engine would monitor it."""
        self.apply(code, module, qualname, rule)

    def existing(self, func: Any) -> Placeholder | None:
        found = self._placeholders.get(id(func))
        return found if found is not None and found.__wrapped__ is func else None

    def bind(self, namespace: dict[str, Any], attr: str, value: Any) -> None:
        namespace[attr] = value  # the walk's own copy (changes_namespaces is False)

    def set_member(self, cls: type, attr: str, value: Any) -> None:
        pass  # a plan writes no class attribute

    def remember_reference(self, func: Any, module: Any, attr: str) -> None:
        pass  # a plan rebinds no module name

    def restore(self) -> int:
        return 0  # a plan changed nothing
