"""Which measured functions get a range: those that hold the run's time (or its GPU work), long
enough for a range to be cheap beside them, outside imports, within a cost budget and a number
of patterns a person can review."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from autonvtx.suggest.calls import Function, Measurement, PathNode, walk


@dataclass(frozen=True)
class Limits:
    """The thresholds of a suggestion (`autonvtx suggest`'s options)."""

    # A call must last this many times a range's cost: the range then adds at most 1/20 to it.
    min_mean_factor: float = 20.0
    # A function must hold this share of the run's time (or GPU time) to be worth a rule.
    min_share: float = 0.005
    # The suggested ranges together may cost this share of the run's time, estimated from the
    # measured calls and the measured cost of a range.
    cost_share: float = 0.01
    # Include patterns at most, over all rules.
    max_patterns: int = 30
    # A function whose calls make one ranged call each at most, holding this share of its time,
    # adds nothing to the ranges inside it (a dispatcher: `Module._call_impl` around `forward`).
    wrapper_share: float = 0.9


@dataclass
class Entry:
    """One include pattern of a module's rule and the measured functions it selects."""

    pattern: str
    members: list[Function]
    covered_ns: float = 0.0  # the run's time inside its ranges, nested ones counted once
    covered_gpu_ns: int = 0  # the GPU time launched inside them, likewise

    @property
    def net_ns(self) -> float:
        return sum(member.net_ns for member in self.members)

    @property
    def gpu_ns(self) -> int:
        return sum(member.gpu_ns for member in self.members)

    @property
    def calls(self) -> int:
        return sum(member.calls for member in self.members)


@dataclass
class ModuleRule:
    module: str
    entries: list[Entry]
    covered_ns: float = 0.0  # the run's time inside its ranges (each instant counted once)


@dataclass
class Suggestion:
    rules: list[ModuleRule]
    coverage: float  # share of the run's time (outside imports) inside a suggested range
    gpu_coverage: float | None  # share of the GPU time launched inside a suggested range
    cost_share: float  # estimated cost of the suggested ranges, as a share of the run's time
    by_gpu: bool
    left_out: dict[str, int] = field(default_factory=dict)  # why -> how many functions

    @property
    def patterns(self) -> int:
        return sum(len(rule.entries) for rule in self.rules)


def choose(measurement: Measurement, limits: Limits = Limits()) -> Suggestion:
    """The rules for this measurement (`calls.settle` already ran on it)."""
    functions = measurement.functions
    run_ns = measurement.net_run_ns
    cost = measurement.range_cost_ns
    gpu_total = _gpu_total(measurement.roots)
    by_gpu = measurement.gpu and gpu_total > 0
    min_mean = limits.min_mean_factor * cost

    def share(function: Function) -> float:
        cpu = function.net_ns / run_ns
        return max(cpu, function.gpu_ns / gpu_total) if by_gpu else cpu

    def long_enough(function: Function) -> bool:
        return function.calls > function.import_calls and function.typical_ns >= min_mean

    left_out: dict[str, int] = {}

    def leave(why: str) -> None:
        left_out[why] = left_out.get(why, 0) + 1

    candidates = []
    for function in functions.values():
        if function.calls == function.import_calls:
            leave("run only while importing")
        elif not long_enough(function):
            leave(f"with calls shorter than {limits.min_mean_factor:g}x a range's cost")
        elif share(function) < limits.min_share:
            leave(f"holding under {limits.min_share:.1%} of the run")
        elif _is_dispatcher(function, functions, long_enough, limits):
            leave("private dispatchers to one ranged call")
        else:
            candidates.append(function)
    twins = _twins(measurement.roots, candidates, functions, limits.wrapper_share)
    for _ in twins:
        leave("twins of a function around or inside them")
    candidates = [function for function in candidates if function.name not in twins]
    if by_gpu:
        candidates.sort(key=lambda f: (f.gpu_ns, f.net_ns, f.name), reverse=True)
    else:
        candidates.sort(key=lambda f: (f.net_ns, f.name), reverse=True)

    budget = limits.cost_share * run_ns
    chosen: list[Function] = []
    spent = 0.0
    for function in candidates:
        if spent + cost * function.calls > budget:
            leave("over the cost budget")
            continue
        chosen.append(function)
        spent += cost * function.calls

    entries = _group(chosen, functions, long_enough, cost, budget - spent)
    for entry in entries:
        entry.covered_ns, entry.covered_gpu_ns = _covered(measurement.roots, {m.name for m in entry.members})
    rank = (lambda e: (e.covered_gpu_ns, e.covered_ns)) if by_gpu else (lambda e: (e.covered_ns, 0))
    entries.sort(key=rank, reverse=True)
    for _ in entries[limits.max_patterns :]:
        leave(f"past the {limits.max_patterns} patterns")
    entries = entries[: limits.max_patterns]

    selected = {member.name for entry in entries for member in entry.members}
    coverage, gpu_covered = _covered(measurement.roots, selected)
    by_module: dict[str, list[Entry]] = {}
    for entry in entries:
        by_module.setdefault(entry.members[0].module, []).append(entry)
    rules = []
    for module, module_entries in by_module.items():
        names = {member.name for entry in module_entries for member in entry.members}
        rules.append(ModuleRule(module, module_entries, _covered(measurement.roots, names)[0]))
    calls = sum(entry.calls for entry in entries)
    return Suggestion(
        rules=rules,
        coverage=min(1.0, coverage / run_ns),
        gpu_coverage=(gpu_covered / gpu_total) if gpu_total > 0 else None,
        cost_share=cost * calls / run_ns,
        by_gpu=by_gpu,
        left_out=left_out,
    )


def _is_dispatcher(function: Function, functions: dict[str, Function], long_enough: object, limits: Limits) -> bool:
    """A private function whose calls make one ranged call each at most, of functions long
    enough, which hold its time (`Module._call_impl` around each module's `forward`)."""
    assert callable(long_enough)
    outside_imports = function.calls - function.import_calls
    return (
        function.is_private
        and 0 < function.child_calls <= outside_imports
        and function.child_ns >= limits.wrapper_share * function.net_ns
        and function.name not in function.callees
        and all(long_enough(functions[name]) for name in function.callees)
    )


def _twins(roots: list[PathNode], candidates: list[Function], functions: dict[str, Function], share: float) -> set[str]:
    """The functions whose ranges would mostly repeat another's: where they hold `share` of
    their time, they are the one call inside a call of another candidate, once per call,
    holding its time (`Adam.step` around `adam`, `betweenness_centrality` around networkx's
    `_call_if_no_backends_installed`), or that call is the one inside them. Of each such pair,
    the private one is left out, else the inner one."""
    names = {function.name for function in candidates}
    inside_twin_ns: dict[str, float] = {}  # its time where it is a twin of the call around it
    around_twin_ns: dict[str, float] = {}  # its time where a twin call is inside it
    private_around: set[str] = set()  # a private call around it was its twin somewhere
    public_inside: dict[str, bool] = {}  # its twins inside were all public

    def twins(outer: PathNode, inner: PathNode) -> bool:
        return (
            inner.name in names
            and outer.name in names
            and inner.name != outer.name
            and inner.count == outer.count
            and inner.net_ns >= share * outer.net_ns
        )

    stack: list[tuple[PathNode, PathNode | None]] = [(root, None) for root in roots]
    while stack:
        node, parent = stack.pop()
        stack.extend((child, node) for child in node.children)
        if node.under_import or node.name not in names or node.name in node.path[:-1]:
            continue
        if parent is not None and twins(parent, node):
            inside_twin_ns[node.name] = inside_twin_ns.get(node.name, 0.0) + node.net_ns
            if functions[parent.name].is_private:
                private_around.add(node.name)
        twin_child = next((child for child in node.children if twins(node, child)), None)
        if twin_child is not None:
            around_twin_ns[node.name] = around_twin_ns.get(node.name, 0.0) + node.net_ns
            public = not functions[twin_child.name].is_private
            public_inside[node.name] = public_inside.get(node.name, True) and public
    left: set[str] = set()
    for function in candidates:
        name, mostly = function.name, share * function.net_ns
        if inside_twin_ns.get(name, 0.0) >= mostly and (function.is_private or name not in private_around):
            left.add(name)  # the inner one, unless it is public and a call around it is not
        elif around_twin_ns.get(name, 0.0) >= mostly and function.is_private and public_inside.get(name, False):
            left.add(name)  # a private one around a public one
    return left


def _group(
    chosen: list[Function], functions: dict[str, Function], long_enough: object, cost: float, budget: float
) -> list[Entry]:
    """One entry per chosen function, except where methods of one name in one module are chosen
    twice or more: `*.name` replaces them when every measured function it selects is long
    enough, outside imports, and the ones it adds fit the budget left."""
    assert callable(long_enough)
    entries: list[Entry] = []
    by_module: dict[str, list[Function]] = {}
    for function in chosen:
        by_module.setdefault(function.module, []).append(function)
    measured_in: dict[str, list[Function]] = {}
    for function in functions.values():
        measured_in.setdefault(function.module, []).append(function)
    for module, members in by_module.items():
        by_last: dict[str, list[Function]] = {}
        for function in members:
            if "." in function.qualname:
                by_last.setdefault(function.qualname.rpartition(".")[2], []).append(function)
        grouped: set[str] = set()
        for last, same in by_last.items():
            if len(same) < 2:
                continue
            pattern = "*." + escape(last)
            matched = [f for f in measured_in[module] if fnmatch.fnmatchcase(f.qualname, pattern)]
            added = [f for f in matched if f not in same]
            extra = cost * sum(f.calls for f in added)
            if all(long_enough(f) and f.import_calls == 0 for f in matched) and extra <= budget:
                budget -= extra
                entries.append(Entry(pattern, sorted(matched, key=lambda f: f.net_ns, reverse=True)))
                grouped.update(f.name for f in matched)
        entries.extend(Entry(escape(f.qualname), [f]) for f in members if f.name not in grouped)
    return entries


def escape(name: str) -> str:
    """A qualified name as a glob matching only itself (`[` is the one glob character a name can
    hold: `*` and `?` cannot appear in Python identifiers or `<locals>`)."""
    return name.replace("[", "[[]")


def _gpu_total(roots: list[PathNode]) -> int:
    return sum(node.gpu_ns for node in walk(roots) if not node.under_import and _outermost(node))


def _outermost(node: PathNode) -> bool:
    return len(node.path) == 1


def _covered(roots: list[PathNode], selected: set[str]) -> tuple[float, int]:
    """(net time, GPU time) inside a selected function's calls, each counted once (at the
    outermost selected call of its path)."""
    cpu = 0.0
    gpu = 0
    stack = [root for root in roots if not root.under_import]
    while stack:
        node = stack.pop()
        if node.under_import:
            continue
        if node.name in selected:
            cpu += node.net_ns
            gpu += node.gpu_ns
            continue  # what is below is inside this range already
        stack.extend(node.children)
    return cpu, gpu
