"""Decide which rule, if any, selects a function: compiled globs and a one-line reason."""

from __future__ import annotations

import fnmatch
import os
import re
import sys
import types

from autonvtx.config import Config, Rule
from autonvtx.moduledicts import module_dict as _module_dict

TYPE_CHECKING = False  # collections.abc is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    _Match = Callable[[str], "re.Match[str] | None"]


class Selection:
    """The decision for one function: whether it is wrapped, the deciding rule, and why.

    `reason` is a line of text built when first asked for (and shared between decisions that
    read the same): instrumenting a package wholesale decides for thousands of names."""

    __slots__ = ("selected", "rule", "_reason", "_matcher", "_opinions", "_qualname")

    def __init__(self, selected: bool, rule: Rule | None, reason: str | None = None) -> None:
        self.selected = selected
        self.rule = rule
        self._reason = reason
        self._matcher: Matcher | None = None
        self._opinions: list[tuple[_CompiledRule, bool]] | None = None
        self._qualname = ""

    @property
    def reason(self) -> str:
        if self._reason is None:
            matcher, opinions = self._matcher, self._opinions
            self._reason = (
                matcher._reason(opinions, self._qualname) if matcher is not None and opinions is not None else ""
            )
            self._matcher = self._opinions = None
        return self._reason

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selection):
            return NotImplemented
        return (self.selected, self.rule, self.reason) == (other.selected, other.rule, other.reason)

    def __hash__(self) -> int:
        return hash((self.selected, self.rule, self.reason))

    def __repr__(self) -> str:
        return f"Selection(selected={self.selected!r}, rule={self.rule!r}, reason={self.reason!r})"


_NOT_TARGETED = Selection(False, None, "module not targeted")
_NO_RULE_INCLUDES = Selection(False, None, "no rule includes it")
_UNDECIDED = object()


def normalize_module(name: str) -> str:
    """multiprocessing re-imports the main script as `__mp_main__`; rules see `__main__`."""
    return "__main__" if name == "__mp_main__" else name


def _compile(glob: str) -> _Match:
    return re.compile(fnmatch.translate(glob)).match


class _CompiledRule:
    __slots__ = (
        "rule",
        "index",
        "modules",
        "include",
        "exclude",
        "include_any",
        "exclude_any",
        "pending",
        "modules_any",
        "modules_pending",
    )

    def __init__(self, rule: Rule, index: int) -> None:
        self.rule = rule
        self.index = index
        self.modules = [_compile(g) for g in rule.modules]
        # Whether any module glob matches, in one regex match (a new module name is asked
        # about once: hundreds when a package is targeted wholesale, issue 24); the globs not
        # yet seen matching are tried one by one only for unmatched_patterns().
        self.modules_any = _any_module_glob(rule.modules) if rule.modules else None
        self.modules_pending = list(enumerate(self.modules))
        self.include = [_compile(g) for g in rule.include]
        self.exclude = [_compile(g) for g in rule.exclude]
        # Whether any include (exclude) glob matches, in one regex match; None: no glob.
        self.include_any = _compile_any(rule.include)
        self.exclude_any = _compile_any(rule.exclude)
        # (key, index, match) of the include/exclude globs not yet seen matching a name: only
        # those are tried one by one (for unmatched_patterns()), and they are few once a
        # program has run a while.
        self.pending = [("exclude", i, m) for i, m in enumerate(self.exclude)] + [
            ("include", i, m) for i, m in enumerate(self.include)
        ]


def _always(name: str) -> bool:
    return True


def _compile_any(globs: tuple[str, ...]) -> Callable[[str], object] | None:
    if not globs:
        return None
    if "*" in globs:
        return _always
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs)).match


def _any_module_glob(globs: list[str] | tuple[str, ...]) -> Callable[[str], object]:
    """Whether any module glob matches a name: names and names ending in `*` (`-t pkg` writes
    `pkg`, `pkg.*`) by a set and str.startswith, not a regex: every import asks (issue 24)."""
    names = frozenset(g for g in globs if not g.endswith("*"))
    starts = tuple(g[:-1] for g in globs if g.endswith("*"))
    if any(_GLOB_CHARS.search(g) for g in (*names, *starts)):
        return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs)).match
    if not starts:
        return names.__contains__
    return lambda name: name in names or name.startswith(starts)


def _first_index(matches: list[_Match], name: str) -> int:
    if len(matches) == 1:
        return 0
    for i, match in enumerate(matches):
        if match(name):
            return i
    raise AssertionError("no glob matches")  # callers know one does


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
        # Every module glob at once: rejecting a non-target import costs one match.
        self._any_module = _any_module_glob(globs)
        self._by_module: dict[str, tuple[_CompiledRule, ...]] = {}
        self._rule_sets: dict[tuple[_CompiledRule, ...], tuple[_CompiledRule, ...]] = {}
        self._seen_modules: set[str] = set()
        self._matched: set[tuple[int, str, int]] = set()
        self._modules_of_rule: dict[int, set[str]] = {i: set() for i in range(len(self._rules))}
        self._names_in_module: dict[str, set[str]] = {}
        self._reasons: dict[tuple[int, ...], str] = {}
        # module -> the one Selection of every name in it, for modules whose rules cannot tell
        # names apart (include "*", no exclude: a package targeted wholesale); None: they can.
        self._uniform: dict[str, Selection | None] = {}
        self.uniform_known = self._uniform  # read by the walk (a call less per module)
        self._uniform_by_rules: dict[tuple[_CompiledRule, ...], Selection | None] = {}
        self._considered: dict[str, bool] = {}  # should_consider_module(), by module name

    def should_consider_module(self, name: str) -> bool:
        """The cheap name-only check: could any rule select something in this module?"""
        known = self._considered.get(name)
        if known is not None:  # asked again for every function a module re-exports
            return known
        module = normalize_module(name)
        if not self._any_module(module):
            self._seen_modules.add(module)
            known = False
        else:
            known = bool(self._compiled_for(module))
        self._considered[name] = known
        return known

    def rules_for_module(self, module: str) -> tuple[Rule, ...]:
        """The rules whose `modules` globs match `module`, in precedence order."""
        return tuple(c.rule for c in self._compiled_for(normalize_module(module)))

    def select(self, module: str, qualname: str) -> Selection:
        if module == "__mp_main__":
            module = "__main__"
        uniform = self._uniform.get(module, _UNDECIDED)
        if uniform is _UNDECIDED:
            uniform = self.uniform_selection(module)
        if uniform is not None:
            return uniform  # type: ignore[return-value]
        rules = self._compiled_for(module)
        if not rules:
            return _NOT_TARGETED
        names = self._names_in_module.get(module)
        if names is None:
            names = self._names_in_module[module] = set()
        names.add(qualname)
        return self._decide(rules, qualname)

    def uniform_selection(self, module: str) -> Selection | None:
        """The one Selection of every name in `module` when its rules cannot tell names apart
        (each includes "*" and none excludes: a package targeted wholesale), else None.
        Names decided this way are not kept for did-you-mean: no glob of these rules needs one."""
        module = normalize_module(module)
        known = self._uniform.get(module, _UNDECIDED)
        if known is not _UNDECIDED:
            return known  # type: ignore[return-value]
        rules = self._by_module.get(module)
        if rules is None:
            rules = self._compiled_for(module)
        # One per set of rules, shared by every module they target alike (hundreds when a
        # package is targeted wholesale): decided once, its reason made then, no opinions kept.
        shared = self._uniform_by_rules.get(rules, _UNDECIDED)
        if shared is _UNDECIDED:
            uniform: Selection | None = None
            if rules and all(c.exclude_any is None and c.rule.include == ("*",) for c in rules):
                decided = self._decide(rules, "*")
                uniform = Selection(decided.selected, decided.rule, decided.reason)
            self._uniform_by_rules[rules] = uniform
        else:
            uniform = shared  # type: ignore[assignment]
        self._uniform[module] = uniform
        return uniform

    def _decide(self, rules: tuple[_CompiledRule, ...], qualname: str) -> Selection:
        # (rule, verdict) per rule with an opinion, decided with one regex per key; the globs
        # that matched are found one by one only among those not yet seen matching, so that
        # unmatched_patterns() knows exactly what matched.
        opinions: list[tuple[_CompiledRule, bool]] = []
        for c in rules:
            if c.pending:
                self._note_matches(c, qualname)
            exclude_any = c.exclude_any
            if exclude_any is not None and exclude_any(qualname):
                opinions.append((c, False))
            else:
                include_any = c.include_any
                if include_any is not None and include_any(qualname):
                    opinions.append((c, True))
        if not opinions:
            return _NO_RULE_INCLUDES
        c, selected = opinions[-1]
        decided = Selection(selected, c.rule)
        decided._matcher, decided._opinions, decided._qualname = self, opinions, qualname
        return decided

    def _note_matches(self, c: _CompiledRule, qualname: str) -> None:
        hit = [p for p in c.pending if p[2](qualname)]
        if hit:
            for key, i, _ in hit:
                self._matched.add((c.index, key, i))
            c.pending = [p for p in c.pending if p not in hit]

    def _reason(self, opinions: list[tuple[_CompiledRule, bool]], qualname: str) -> str:
        c, selected = opinions[-1]
        parts: tuple[int, ...] = (c.index, selected, self._first_glob(c, selected, qualname))
        for other, other_selected in reversed(opinions[:-1]):
            if other_selected != selected:
                parts += (other.index, self._first_glob(other, other_selected, qualname))
                break
        reason = self._reasons.get(parts)
        if reason is None:
            reason = self._reasons[parts] = self._reason_text(parts)
        return reason

    @staticmethod
    def _first_glob(c: _CompiledRule, selected: bool, qualname: str) -> int:
        return _first_index(c.include if selected else c.exclude, qualname)

    def _reason_text(self, parts: tuple[int, ...]) -> str:
        def opinion(index: int, selected: bool, glob_index: int) -> str:
            rule = self._rules[index].rule
            key = "include" if selected else "exclude"
            glob = getattr(rule, key)[glob_index]
            return f"{rule.origin} ({key} {glob!r})"

        selected = bool(parts[1])
        reason = f"{'selected' if selected else 'excluded'} by {opinion(parts[0], selected, parts[2])}"
        if len(parts) > 3:
            reason += f", overriding {opinion(parts[3], not selected, parts[4])}"
        return reason

    def unmatched_patterns(self) -> list[str]:
        """One warning line per pattern that matched nothing it was asked about. Presets'
        patterns are left out: they name what several versions of a framework define, and a
        program uses part of it (`autonvtx list` shows them all)."""
        return [
            line for rule, lines in self.unmatched_by_rule() if not self.config.is_preset_rule(rule) for line in lines
        ]

    def unmatched_by_rule(self) -> list[tuple[Rule, list[str]]]:
        """Per rule, in order, a line per pattern of it that matched nothing."""
        result = []
        readings: dict[str, list[_CompiledRule]] = {}
        for c in self._rules:
            if c.rule.reading_of:
                readings.setdefault(c.rule.reading_of, []).append(c)
        for c in self._rules:
            rule = c.rule
            if rule.reading_of:
                group = readings[rule.reading_of]
                result.append((rule, self._unmatched_readings(group) if c is group[0] else []))
                continue
            lines = []
            hit_modules = self._modules_of_rule[c.index]
            for i, glob in enumerate(rule.modules):
                # `pkg.*` beside a `pkg` that matched: a package without submodules, no typo.
                if glob.endswith(".*") and glob[:-2] in hit_modules:
                    continue
                if (c.index, "modules", i) not in self._matched:
                    lines.append(
                        f"{rule.where('modules')}: {glob!r} matched no module"
                        + (_suggest(glob, self._seen_modules | set(self._by_module)) or _hint(glob, rule))
                    )
            if hit_modules:  # else its include/exclude globs were never tried: no news in them
                lines += [f"{rule.where('modules')}: {line}" for line in self._reexport_notes(hit_modules)]
                names: set[str] | None = None  # made only for a line to write (not for `-t pkg`)
                for key in ("include", "exclude"):
                    for i, glob in enumerate(getattr(rule, key)):
                        if glob not in _NEVER_A_TYPO[key] and (c.index, key, i) not in self._matched:
                            if names is None:
                                names = set().union(*(self._names_in_module.get(m, ()) for m in hit_modules))
                            lines.append(
                                f"{rule.where(key)}: {glob!r} matched no qualified name"
                                f" in {_plural(len(hit_modules), 'module')} it targets" + _suggest(glob, names)
                            )
            result.append((rule, lines))
        return result

    def _reexport_notes(self, modules: Iterable[str]) -> list[str]:
        """A targeted package whose `__init__` defines no function or class, only re-exports
        them from submodules no rule targets: the rule selects nothing there (functions get
        their ranges where they are defined), and the submodules' glob is what was meant."""
        notes = []
        untargeted: set[str] | None = None  # packages holding a module no rule targets
        for name in sorted(modules):
            package = sys.modules.get(name)
            # Its dictionary, not hasattr(): a module's __getattr__ is the program's code, and
            # it would raise an AttributeError for each of hundreds of plain modules at exit.
            if not isinstance(package, types.ModuleType) or "__path__" not in _module_dict(package):
                continue
            if _defines_any(package, name):
                continue
            if untargeted is None:
                # One pass over sys.modules for all packages, not one per package: a package
                # targeted wholesale has hundreds of subpackages, and this runs at exit.
                untargeted = set()
                considered = self._considered
                for sub in list(sys.modules):
                    known = considered.get(sub)
                    if known is None:
                        known = self.should_consider_module(sub)
                    if not known and "." in sub:
                        # Each dotted prefix, longest first: one already there has its own.
                        prefix = sub.rpartition(".")[0]
                        while prefix and prefix not in untargeted:
                            untargeted.add(prefix)
                            prefix = prefix.rpartition(".")[0]
            if name in untargeted:
                notes.append(f"0 functions defined in {name!r}; its submodules match {name + '.*'!r}")
        return notes

    def _unmatched_readings(self, group: list[_CompiledRule]) -> list[str]:
        """The unmatched names of one Nsight Systems entry, whose rules are its readings: the
        first targets the entry's module with every name, the others a submodule each with
        the names' tails (see config.Rule.reading_of)."""
        first = group[0].rule
        module = first.modules[0]
        if (group[0].index, "modules", 0) not in self._matched:
            return [
                f"{first.where('module')}: {module!r} matched no module"
                + _suggest(module, self._seen_modules | set(self._by_module))
            ]
        found: set[str] = set()
        seen: set[str] = set()
        for c in group:
            prefix = c.rule.modules[0][len(module) + 1 :]
            prefix += "." if prefix else ""
            found.update(
                prefix + glob for i, glob in enumerate(c.rule.include) if (c.index, "include", i) in self._matched
            )
            for hit in self._modules_of_rule[c.index]:
                seen.update(prefix + name for name in self._names_in_module.get(hit, ()))
        return [
            f"{first.where('functions')}: {name!r} matched no function defined in {module!r}"
            " or its submodules" + _suggest(name, seen)
            for name in first.include
            if name not in found
        ]

    def _compiled_for(self, module: str) -> tuple[_CompiledRule, ...]:
        known = self._by_module.get(module)  # not try/except: a miss (each new module) raised
        if known is not None:
            return known
        found = []
        for c in self._rules:
            match = c.modules_any
            if match is None or not match(module):
                continue
            found.append(c)
            self._modules_of_rule[c.index].add(module)
            if c.modules_pending:
                self._note_module_globs(c, module)
        result = tuple(found)
        # The same tuple for every module the same rules target: one object, not one per
        # module (hundreds when a package is targeted wholesale), and uniform_selection()'s key.
        result = self._by_module[module] = self._rule_sets.setdefault(result, result)
        shared = self._uniform_by_rules.get(result, _UNDECIDED)
        if shared is not _UNDECIDED:  # known for these rules: the walk need not ask (issue 24)
            self._uniform[module] = shared  # type: ignore[assignment]
        return result

    def _note_module_globs(self, c: _CompiledRule, module: str) -> None:
        # The module globs of `c` that match `module`, among those never seen matching.
        hit = [(i, match) for i, match in c.modules_pending if match(module)]
        for i, _ in hit:
            self._matched.add((c.index, "modules", i))
        if hit:
            c.modules_pending = [p for p in c.modules_pending if p not in hit]


_GLOB_CHARS = re.compile(r"[*?\[]")


def _hint(glob: str, rule: Rule) -> str:
    """What a module glob that matched nothing was most likely meant as: the script (which runs
    as `__main__`), or a class or function (chosen by include globs, not module ones)."""
    head = glob.split(".", 1)[0]
    scripts = [getattr(sys.modules.get("__main__"), "__file__", None), sys.argv[0] if sys.argv else None]
    if any(isinstance(s, str) and head == os.path.basename(s).removesuffix(".py") for s in scripts):
        return "; the script runs as module '__main__': target it as '__main__'"
    if head[:1].isupper():
        if rule.where("include").startswith("-"):
            return f"; {head!r} looks like a class: -t MODULE --include {glob!r}"
        return f"; {head!r} looks like a class: its module goes in 'modules', {glob!r} in 'include'"
    return ""


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
    import difflib  # imported here: only a pattern that matched nothing needs it (start-up)

    close = difflib.get_close_matches(literal, sorted(candidates), n=1, cutoff=0.75)
    if not close:
        return ""
    return f"; did you mean {'.'.join([close[0], *tail])!r}?"


# Globs that matching nothing cannot mean a typo: every name, and (excluded) the conventional
# private names, which a module may simply not have (`autonvtx init` writes them).
_NEVER_A_TYPO = {"include": ("*",), "exclude": ("*", "_*", "*._*")}


def _defines_any(module: types.ModuleType, name: str) -> bool:
    # Type checks and vars() only: no attribute lookup runs the program's code. A wrapper of
    # autonvtx's is asked about its function directly: isinstance() reads __class__ through
    # the proxy, and at exit a package targeted wholesale holds thousands of them.
    from autonvtx.valuekinds import KINDS, RANGE_WRAPPER, kind_of  # at exit only (start-up)

    for value in list(vars(module).values()):
        kind = type(value)
        if (
            kind is not types.FunctionType
            and KINDS.get(kind, RANGE_WRAPPER) == RANGE_WRAPPER
            and kind_of(kind) == RANGE_WRAPPER
        ):  # known kinds without a call (modules: most)
            value = value.__wrapped__
            if type(value) is types.FunctionType and value.__module__ == name:
                return True
            continue
        if isinstance(value, types.FunctionType) and value.__module__ == name:
            return True
        if isinstance(value, type) and vars(value).get("__module__") == name:
            return True
    return False


def _plural(n: int, word: str) -> str:
    return f"the {word}" if n == 1 else f"the {n} {word}s"
