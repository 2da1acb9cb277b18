"""What a walk decided about one module: each name wrapped or skipped, with its reason."""

from __future__ import annotations

from collections import Counter

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from typing import Any

from autonvtx.compiled import compiled_callables


class _Member:
    """Marks a class member's skip in ModuleReport's list: its name is made when read."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MEMBER"


MEMBER = _Member()


class ModuleReport:
    """What happened to one module: every name wrapped or skipped, each with its reason.

    A package targeted wholesale has thousands of decisions, read only by --verbose, `list`
    and the exit counts: the walks append them to flat lists (8 bytes a name wrapped, 16 a
    name skipped, 32 a class member skipped, without making its "Class.attr" name), folded
    into the `wrapped` and `skipped` dictionaries in order when something reads those. The
    code engine's native walk writes a code object it monitors, named by its co_qualname, in
    place of that name: the same list is the one its uninstall reads (ranges.CodeMonitor), so
    those entries stay in it, folded, until uninstall puts their names back."""

    __slots__ = ("module", "verb", "rebound", "_wrapped", "_skipped", "_names", "_folded", "_reason", "_skips")

    def __init__(self, module: str, verb: str = "wrapped", reason: str = "") -> None:  # not a dataclass: start-up
        """`reason`: the one that names_wrapped_for() starts with (modulepath.py's)."""
        self.module = module
        self.verb = verb  # what the engine does to a selected function ("monitored": code engine)
        self.rebound: list[str] = []  # names pointed at an existing wrapper
        self._wrapped: dict[str, str] = {}  # qualname -> reason
        self._skipped: dict[str, str] = {}  # qualname -> reason
        # Wrapped, all for `_reason` from `_folded` on: a qualname, or a code object named by
        # its co_qualname (the native walk's; the code engine's uninstall list too).
        self._names: list[Any] = []
        self._folded = 0
        self._reason = reason
        # Skipped, not folded yet: qualname, reason; or MEMBER, class qualname, attr, reason.
        self._skips: list[Any] = []

    @property
    def wrapped(self) -> dict[str, str]:
        if len(self._names) > self._folded:
            self._fold_wrapped()
        return self._wrapped

    @property
    def skipped(self) -> dict[str, str]:
        if self._skips:
            self._fold_skipped()
        return self._skipped

    def add_wrapped(self, qualname: str, reason: str) -> None:
        self.names_wrapped_for(reason).append(qualname)

    def names_wrapped_for(self, reason: str) -> list[str]:
        """The list a walk appends the qualnames it wraps for `reason` to."""
        if reason is not self._reason and reason != self._reason:
            self._fold_wrapped()
            self._reason = reason
        return self._names

    def skip(self, qualname: str, reason: str) -> None:
        self._skips += (qualname, reason)

    @property
    def skips(self) -> list[Any]:
        """The list a walk appends its skips to, as skip() does (MEMBER, class qualname, attr,
        reason for a member)."""
        return self._skips

    # Folded in place: a walk may hold these lists (the native walk does, for its module).
    def _fold_wrapped(self) -> None:
        wrapped, reason, names, folded = self._wrapped, self._reason, self._names, self._folded
        kept: list[Any] = []  # the names go; code objects stay for the uninstall that reads this list
        for entry in names[folded:]:
            if isinstance(entry, str):
                wrapped[entry] = reason
            else:
                wrapped[entry.co_qualname] = reason
                kept.append(entry)
        names[folded:] = kept
        self._folded = len(names)

    def _fold_skipped(self) -> None:
        skips, skipped = self._skips, self._skipped
        i, n = 0, len(skips)
        while i < n:
            qualname = skips[i]
            if qualname is MEMBER:
                qualname = f"{skips[i + 1]}.{skips[i + 2]}"
                i += 2
            skipped.setdefault(qualname, skips[i + 1])
            i += 2
        skips.clear()

    def skip_counts(self) -> Counter[str]:
        return Counter(_reason_kind(reason) for reason in self.skipped.values())

    def summary(self) -> str:
        """One line for --verbose: `mod: wrapped 3, skipped 2 (1 property, 1 protocol method)`."""
        counts = ", ".join(f"{n} {kind}" for kind, n in self.skip_counts().most_common())
        line = f"{self.module}: {self.verb} {len(self.wrapped)}, skipped {len(self.skipped)}"
        if counts:
            line += f" ({counts})"
        if self.rebound:
            line += f", {len(self.rebound)} re-export(s) rebound"
        return line

    def lines(self) -> list[str]:
        """One line per decision, `module:qualname: wrapped (why)` or `... skipped (why)`."""
        out = [f"{self.module}:{q}: {self.verb} ({why})" for q, why in self.wrapped.items()]
        out += [f"{self.module}:{q}: skipped ({why})" for q, why in self.skipped.items()]
        known = {*self.wrapped, *self.skipped}
        return out + [f"{self.module}:{q}: skipped ({why})" for q, why in compiled_callables(self.module, known)]


def _reason_kind(reason: str) -> str:
    # Reasons read "kind: detail"; counts group by kind.
    return reason.split(":", 1)[0]
