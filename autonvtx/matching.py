"""Decide which rule, if any, selects a function: compiled globs and a one-line reason."""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from autonvtx.config import Config, Rule

_Match = Callable[[str], "re.Match[str] | None"]


@dataclass(frozen=True)
class Selection:
    """The decision for one function: whether it is wrapped, the deciding rule, and why."""

    selected: bool
    rule: Rule | None
    reason: str


def normalize_module(name: str) -> str:
    """multiprocessing re-imports the main script as `__mp_main__`; rules see `__main__`."""
    return "__main__" if name == "__mp_main__" else name


def _compile(glob: str) -> _Match:
    return re.compile(fnmatch.translate(glob)).match


class _CompiledRule:
    __slots__ = ("rule", "index", "modules", "include", "exclude")

    def __init__(self, rule: Rule, index: int) -> None:
        self.rule = rule
        self.index = index
        self.modules = [_compile(g) for g in rule.modules]
        self.include = [_compile(g) for g in rule.include]
        self.exclude = [_compile(g) for g in rule.exclude]


class Matcher:
    """Every rule of a Config compiled once; remembers which patterns ever matched.

    Precedence: the rules whose `modules` match the module are read in order (presets,
    config files in order, the command line). A rule has an opinion on a name when one of
    its globs matches it: "excluded" if an `exclude` glob matches (exclude beats include
    within a rule), else "selected" if an `include` glob matches. The last rule with an
    opinion decides, and supplies the range's attributes.
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        self._rules = [_CompiledRule(rule, i) for i, rule in enumerate(config.rules)]
        globs = [g for rule in config.rules for g in rule.modules]
        # One regex for every module glob: rejecting a non-target import costs one match.
        self._any_module = re.compile(
            "|".join(f"(?:{fnmatch.translate(g)})" for g in globs) or r"(?!)"
        ).match
        self._by_module: dict[str, tuple[_CompiledRule, ...]] = {}
        self._seen_modules: set[str] = set()
        self._matched: set[tuple[int, str, int]] = set()
        self._modules_of_rule: dict[int, set[str]] = {i: set() for i in range(len(self._rules))}
        self._names_in_module: dict[str, set[str]] = {}

    def should_consider_module(self, name: str) -> bool:
        """The cheap name-only check: could any rule select something in this module?"""
        name = normalize_module(name)
        if self._any_module(name) is None:
            self._seen_modules.add(name)
            return False
        return bool(self._compiled_for(name))

    def rules_for_module(self, module: str) -> tuple[Rule, ...]:
        """The rules whose `modules` globs match `module`, in precedence order."""
        return tuple(c.rule for c in self._compiled_for(normalize_module(module)))

    def select(self, module: str, qualname: str) -> Selection:
        module = normalize_module(module)
        rules = self._compiled_for(module)
        if not rules:
            return Selection(False, None, "module not targeted")
        self._names_in_module.setdefault(module, set()).add(qualname)
        # (rule, verdict, key, glob) per rule with an opinion. Every glob is tried, not only
        # up to the first hit, so that unmatched_patterns() knows exactly what matched.
        opinions: list[tuple[Rule, bool, str, str]] = []
        for c in rules:
            excluded = self._first_hit(c, "exclude", c.exclude, qualname)
            included = self._first_hit(c, "include", c.include, qualname)
            if excluded is not None:
                opinions.append((c.rule, False, "exclude", c.rule.exclude[excluded]))
            elif included is not None:
                opinions.append((c.rule, True, "include", c.rule.include[included]))
        if not opinions:
            return Selection(False, None, "no rule includes it")
        rule, selected, key, glob = opinions[-1]
        reason = f"{'selected' if selected else 'excluded'} by {rule.origin} ({key} {glob!r})"
        for other, other_selected, other_key, other_glob in reversed(opinions[:-1]):
            if other_selected != selected:
                reason += f", overriding {other.origin} ({other_key} {other_glob!r})"
                break
        return Selection(selected, rule, reason)

    def unmatched_patterns(self) -> list[str]:
        """One warning line per pattern that matched nothing it was asked about. Presets'
        patterns are left out: they name what several versions of a framework define, and a
        program uses part of it (`autonvtx list` shows them all)."""
        return [
            line
            for rule, lines in self.unmatched_by_rule()
            if not self.config.is_preset_rule(rule)
            for line in lines
        ]

    def unmatched_by_rule(self) -> list[tuple[Rule, list[str]]]:
        """Per rule, in order, a line per pattern of it that matched nothing."""
        result = []
        for c in self._rules:
            rule = c.rule
            lines = []
            hit_modules = self._modules_of_rule[c.index]
            for i, glob in enumerate(rule.modules):
                if (c.index, "modules", i) not in self._matched:
                    lines.append(
                        f"{rule.where('modules')}: {glob!r} matched no module"
                        + _suggest(glob, self._seen_modules | set(self._by_module))
                    )
            if hit_modules:  # else its include/exclude globs were never tried: no news in them
                names = set().union(*(self._names_in_module.get(m, ()) for m in hit_modules))
                for key in ("include", "exclude"):
                    for i, glob in enumerate(getattr(rule, key)):
                        if glob != "*" and (c.index, key, i) not in self._matched:
                            lines.append(
                                f"{rule.where(key)}: {glob!r} matched no qualified name"
                                f" in {_plural(len(hit_modules), 'module')} it targets"
                                + _suggest(glob, names)
                            )
            result.append((rule, lines))
        return result

    def _compiled_for(self, module: str) -> tuple[_CompiledRule, ...]:
        try:
            return self._by_module[module]
        except KeyError:
            pass
        found = []
        for c in self._rules:
            hits = [i for i, match in enumerate(c.modules) if match(module)]
            if hits:
                found.append(c)
                self._modules_of_rule[c.index].add(module)
                self._matched.update((c.index, "modules", i) for i in hits)
        result = self._by_module[module] = tuple(found)
        return result

    def _first_hit(
        self, c: _CompiledRule, key: str, matches: list[_Match], name: str
    ) -> int | None:
        first = None
        for i, match in enumerate(matches):
            if match(name):
                self._matched.add((c.index, key, i))
                if first is None:
                    first = i
        return first


_GLOB_CHARS = re.compile(r"[*?\[]")


def _suggest(glob: str, seen: Iterable[str]) -> str:
    """A "did you mean" for a glob: its literal dotted head against the names (and their
    dotted prefixes) actually seen, keeping the glob's tail, e.g. 'myprojet.*' -> 'myproject.*'."""
    parts = glob.split(".")
    head: list[str] = []
    for part in parts:
        if _GLOB_CHARS.search(part):
            break
        head.append(part)
    if not head:
        return ""
    literal, tail = ".".join(head), parts[len(head) :]
    candidates: set[str] = set()
    for name in seen:
        pieces = name.split(".")
        candidates.update(".".join(pieces[:n]) for n in range(1, len(pieces) + 1))
    candidates.discard(literal)
    close = difflib.get_close_matches(literal, sorted(candidates), n=1, cutoff=0.75)
    if not close:
        return ""
    return f"; did you mean {'.'.join([close[0], *tail])!r}?"


def _plural(n: int, word: str) -> str:
    return f"the {word}" if n == 1 else f"the {n} {word}s"
