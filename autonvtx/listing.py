"""What the rules select, decided by the walk that wraps but without wrapping: `list`,
`run --dry-run` and `export` print from here, so they never disagree with a real run."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import sys
import types
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autonvtx.config import Config, Rule
from autonvtx.control import Instrumentation
from autonvtx.decisions import ModuleReport
from autonvtx.errors import TargetNotFoundError

if TYPE_CHECKING:
    from autonvtx.regions import RegionInstaller

_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80
_CO_ASYNC_GENERATOR = 0x200


@dataclass(frozen=True)
class Planned:
    """One function a run would wrap: where it is defined, what it is, and why."""

    module: str
    qualname: str
    kind: str  # function, method, staticmethod, classmethod, generator, async, builtin
    reason: str


@dataclass
class Plan:
    """The outcome of a plan: per rule what it selects and which of its patterns matched
    nothing, the modules walked, and what could not be imported."""

    config: Config
    selected: list[tuple[Rule, list[Planned]]] = field(default_factory=list)
    unmatched: dict[int, list[str]] = field(default_factory=dict)  # id(rule) -> lines
    modules: list[str] = field(default_factory=list)
    reports: dict[str, ModuleReport] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Per configured plugin: (name, trigger, what its plan() lists, a note when it lists nothing).
    plugins: list[tuple[str, str, list[tuple[str, str, str]], str]] = field(default_factory=list)
    # Regions: where each was placed, and those that could not be (naming file and key).
    regions: list[str] = field(default_factory=list)
    unplaced_regions: list[str] = field(default_factory=list)

    def all_selected(self) -> list[Planned]:
        return [p for _, planned in self.selected for p in planned]


def plan_modules(
    config: Config,
    imported: Iterable[str],
    notes: Sequence[str] = (),
    main_source: tuple[str, str] | None = None,
) -> Plan:
    """Walk every module in sys.modules that the rules target (after the caller imported
    what it wanted) and record what a run would wrap; with `main_source` (source, filename),
    also the functions that script defines, read from its source."""
    instrumentation = Instrumentation(config, plan=True)  # the run's own assembly, as a plan
    matcher, planner, engine = instrumentation.matcher, instrumentation.walker, instrumentation.plan_engine
    assert engine is not None
    engine_note = instrumentation.engine_note
    plan = Plan(config, notes=list(notes) + ([engine_note] if engine_note else []))
    for name in sorted(n for n in list(sys.modules) if n not in ("__main__", "__mp_main__")):
        module = sys.modules.get(name)
        if isinstance(module, types.ModuleType) and matcher.should_consider_module(name):
            planner.instrument(module)
            plan.modules.append(name)
    planned = [
        (
            p.rule,
            Planned(
                p.module,
                p.qualname,
                _kind(p.__wrapped__, sys.modules.get(p.module), p.qualname),
                matcher.select(p.module, p.qualname).reason,
            ),
        )
        for p in engine.planned
    ]
    main = main_stand_in(*main_source) if main_source is not None else None
    if main is not None and matcher.should_consider_module("__main__"):
        start = len(engine.planned)
        planner.instrument(main)
        planned.extend(
            (
                p.rule,
                Planned(
                    p.module,
                    p.qualname,
                    _kind(p.__wrapped__, main, p.qualname),
                    matcher.select(p.module, p.qualname).reason,
                ),
            )
            for p in engine.planned[start:]
        )
        plan.modules.append("__main__")
    for name in imported:
        matcher.should_consider_module(name)  # seen, for "did you mean" suggestions
    by_rule: dict[int, list[Planned]] = {id(rule): [] for rule in config.rules}
    for rule, one in planned:
        by_rule.setdefault(id(rule), []).append(one)
    plan.selected = [(rule, sorted(by_rule[id(rule)], key=lambda p: (p.module, p.qualname))) for rule in config.rules]
    plan.unmatched = {id(rule): lines for rule, lines in matcher.unmatched_by_rule()}
    plan.reports = planner.reports
    plan.plugins = plan_plugins(config)
    if instrumentation.regions is not None:
        _plan_regions(plan, instrumentation.regions, main_source)
    return plan


def _plan_regions(plan: Plan, regions: RegionInstaller, main_source: tuple[str, str] | None) -> None:
    """Where the config's regions sit in the imported modules (and the script's source)."""
    for name in sorted(n for n in list(sys.modules) if n not in ("__main__", "__mp_main__")):
        module = sys.modules.get(name)
        if isinstance(module, types.ModuleType) and regions.should_consider_module(name):
            regions.module_executed(module)
    if main_source is not None:
        regions.place_source("__main__", *main_source)
    plan.regions = regions.resolved
    plan.unplaced_regions = regions.unplaced_lines()


def plan_plugins(config: Config) -> list[tuple[str, str, list[tuple[str, str, str]], str]]:
    """What each configured plugin says it would put ranges on, for a framework that is
    imported; plugins decide at run time, so this is their own account (their plan())."""
    from autonvtx.plugins import PluginContext, load_plugins

    out = []
    for plugin in load_plugins(config):
        framework = sys.modules.get(plugin.trigger)
        entries: list[tuple[str, str, str]] = []
        note = ""
        if not isinstance(framework, types.ModuleType):
            note = f"inactive here: {plugin.trigger} is not imported"
        elif plugin.plan is None:
            note = "decides at run time (the plugin has no plan() to list)"
        else:
            try:
                context = PluginContext(plugin.name, plugin.trigger, config, [])
                entries = sorted((str(m), str(q), str(k)) for m, q, k in plugin.plan(framework, context))
            except Exception as exc:
                note = f"plan() failed: {type(exc).__name__}: {exc}"
        out.append((plugin.name, plugin.trigger, entries, note))
    return out


def import_modules(names: Sequence[str], *, where: str) -> list[str]:
    """Import each named module as the program would; the import errors are returned as
    notes (a module that fails to import is reported, never fatal), a missing module is
    fatal, its message located at `where` (the command)."""
    notes = []
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                raise TargetNotFoundError(
                    f"{where}: No module named '{exc.name}';"
                    " expected a module importable from the working directory or sys.path"
                ) from None
            notes.append(f"{name}: import failed: {type(exc).__name__}: {exc}")
        except Exception as exc:  # the module's own code failed: list what did import
            notes.append(f"{name}: import failed: {type(exc).__name__}: {exc}")
    return notes


def main_stand_in(source: str, filename: str) -> types.ModuleType | None:
    """A `__main__` for a script that is not run: every function and class its top-level
    statements define (under `if`, `try`, `with`, `for`, `while` and `match` too, as a run binds
    them), made from the script's compiled code without running any of it, so that the walk
    decides about it as it does in a run. Decorators are not run: `staticmethod`,
    `classmethod` and `property` are applied by name, any other leaves the function as
    written. None when the source does not compile."""
    try:
        tree = ast.parse(source, filename)
        code = compile(tree, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    codes = {(c.co_name, c.co_firstlineno): c for c in _codes_within(code)}
    module = types.ModuleType("__main__")
    module.__file__ = filename
    for node in _definitions(tree.body):
        vars(module)[node.name] = _stand_in(node, codes, vars(module), node.name)
    return module


_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _definitions(body: list[ast.stmt]) -> Iterator[_Definition]:
    """The function and class definitions a block of statements binds in its own namespace."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node
            continue
        for field_name in ("body", "orelse", "finalbody"):
            inner = getattr(node, field_name, None)
            if isinstance(inner, list):
                yield from _definitions(inner)
        for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
            yield from _definitions(part.body)


def _codes_within(code: types.CodeType) -> Iterator[types.CodeType]:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _codes_within(const)


def _stand_in(
    node: _Definition, codes: dict[tuple[str, int], types.CodeType], globals_: dict[str, Any], qualname: str
) -> Any:
    # A definition's code starts at its first decorator's line (3.8+).
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    decorators = [d.id for d in node.decorator_list if isinstance(d, ast.Name)]
    if isinstance(node, ast.ClassDef):
        namespace: dict[str, Any] = {"__module__": "__main__", "__qualname__": qualname}
        for inner in _definitions(node.body):
            namespace[inner.name] = _stand_in(inner, codes, globals_, f"{qualname}.{inner.name}")
        return type(node.name, (), namespace)
    code = codes.get((node.name, first))
    if code is None:
        return None
    func = types.FunctionType(code, globals_, node.name)
    func.__qualname__ = qualname
    for name, decorator in (("staticmethod", staticmethod), ("classmethod", classmethod), ("property", property)):
        if name in decorators:
            return decorator(func)
    return func


def top_level_imports(source: str, filename: str) -> list[str]:
    """The absolute module names a script imports in its top-level statements (including
    those under top-level if/try/with), in order; `from a import b` gives `a` and, when it
    is a submodule, `a.b`."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError:
        return []
    names: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                names.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
                names.extend(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    return list(dict.fromkeys(names))


def is_module(name: str) -> bool:
    """Whether `name` is an importable module (imports its parent package, not itself)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _kind(func: Any, module: Any, qualname: str) -> str:
    code = func if isinstance(func, types.CodeType) else getattr(func, "__code__", None)
    if code is None:
        return "builtin"
    flags = code.co_flags
    if flags & (_CO_COROUTINE | _CO_ASYNC_GENERATOR):
        return "async"
    if flags & _CO_GENERATOR:
        return "generator"
    if code is func and "<locals>" in qualname:
        return "nested"  # a code object the code engine reaches inside another function
    owner_path, _, attr = qualname.rpartition(".")
    if not owner_path:
        return "function"
    owner: Any = module
    for part in owner_path.split("."):
        owner = vars(owner).get(part) if hasattr(owner, "__dict__") else None
    raw = vars(owner).get(attr) if isinstance(owner, type) else None
    if isinstance(raw, staticmethod):
        return "staticmethod"
    if isinstance(raw, classmethod):
        return "classmethod"
    return "method" if isinstance(owner, type) else "function"


# Output.
def format_text(plan: Plan, *, verbose: bool = False) -> str:
    """The human-readable listing: per rule its selections, then its unmatched patterns."""
    lines: list[str] = []
    blocks = _entries(plan.selected)
    for rule, planned in blocks:
        lines.append(f"{rule.origin}: {_describe_rule(rule)}")
        width = max((len(f"{p.module}:{p.qualname}") for p in planned), default=0)
        for p in planned:
            lines.append(f"  {p.module}:{p.qualname}".ljust(width + 4) + p.kind)
        if not planned:
            lines.append("  (selects nothing)")
        for line in plan.unmatched.get(id(rule), []):
            lines.append(f"  unmatched: {line}")
    for name, trigger, entries, note in plan.plugins:
        lines.append(f"plugin {name} (activates on import of {trigger})")
        width = max((len(f"{m}:{q}") for m, q, _ in entries), default=0)
        for module, qualname, kind in entries:
            lines.append(f"  {module}:{qualname}".ljust(width + 4) + kind)
        if note:
            lines.append(f"  {note}")
    lines.extend(plan.regions)
    lines.extend(f"region not placed: {line}" for line in plan.unplaced_regions)
    if verbose:
        for name, report in sorted(plan.reports.items()):
            for qualname, why in report.skipped.items():
                lines.append(f"skipped {name}:{qualname} ({why})")
    for note in plan.notes:
        lines.append(note)
    total = len(plan.all_selected())
    plugged = sum(len(entries) for _, _, entries, _ in plan.plugins)
    if plugged:
        lines.append(f"{plugged} function{'s' if plugged != 1 else ''} ranged by plugins")
    lines.append(
        f"{total} function{'s' if total != 1 else ''} selected in"
        f" {len({p.module for p in plan.all_selected()})} of {len(plan.modules)} targeted"
        f" module{'s' if len(plan.modules) != 1 else ''} by {len(blocks)}"
        f" rule{'s' if len(blocks) != 1 else ''}"
    )
    return "\n".join(lines) + "\n"


def format_json(plan: Plan) -> str:
    """The listing for tools."""
    return (
        json.dumps(
            {
                "rules": [
                    {
                        "origin": rule.origin,
                        "modules": list(rule.modules),
                        "include": list(rule.include),
                        "exclude": list(rule.exclude),
                        "selected": [
                            {"module": p.module, "qualname": p.qualname, "kind": p.kind, "reason": p.reason}
                            for p in planned
                        ],
                        "unmatched": plan.unmatched.get(id(rule), []),
                    }
                    for rule, planned in plan.selected
                ],
                "modules": plan.modules,
                "plugins": [
                    {
                        "name": name,
                        "trigger": trigger,
                        "selected": [{"module": m, "qualname": q, "kind": k} for m, q, k in entries],
                        "note": note,
                    }
                    for name, trigger, entries, note in plan.plugins
                ],
                "notes": plan.notes,
            },
            indent=2,
        )
        + "\n"
    )


def _entries(selected: list[tuple[Rule, list[Planned]]]) -> list[tuple[Rule, list[Planned]]]:
    """The rules as the user wrote them: the readings of one Nsight Systems entry (see
    config.Rule.reading_of) folded into its first rule, which names every function."""
    blocks: list[tuple[Rule, list[Planned]]] = []
    first: dict[str, list[Planned]] = {}
    for rule, planned in selected:
        if rule.reading_of and rule.reading_of in first:
            first[rule.reading_of].extend(planned)
            continue
        block = (rule, list(planned))
        blocks.append(block)
        if rule.reading_of:
            first[rule.reading_of] = block[1]
    return [(rule, sorted(planned, key=lambda p: (p.module, p.qualname))) for rule, planned in blocks]


def _describe_rule(rule: Rule) -> str:
    if rule.reading_of:  # an Nsight Systems entry, in its own words
        return f"module {rule.modules[0]}; functions {', '.join(rule.include)}"
    parts = [f"modules {', '.join(rule.modules)}"]
    if rule.include != ("*",):
        parts.append(f"include {', '.join(rule.include)}")
    if rule.exclude:
        parts.append(f"exclude {', '.join(rule.exclude)}")
    return "; ".join(parts)


# Nsight Systems' --python-functions-trace JSON (`autonvtx export`; configfile.nsys reads it back).
def format_nsys_json(plan: Plan) -> str:
    """The functions a plan selects as Nsight Systems' JSON: one entry per (module, domain,
    color), each function named where it is defined (so reading the file back selects the
    same functions)."""
    grouped: dict[tuple[str, str, int], list[str]] = {}
    for rule, planned in plan.selected:
        for p in planned:
            if p.module == "__main__":
                continue  # Nsight Systems cannot name the script's own functions
            style = plan.config.style(rule, p.module)
            grouped.setdefault((p.module, style.domain, style.color), []).append(p.qualname)
    return to_nsys_json(
        (module, sorted(set(names)), domain, color) for (module, domain, color), names in sorted(grouped.items())
    )


def to_nsys_json(entries: Iterable[tuple[str, Sequence[str], str | None, int | None]]) -> str:
    """Nsight Systems' JSON for (module, function names, domain, color) entries; a color is
    0xAARRGGBB and is written as "RRGGBB"."""
    out = []
    for module, functions, domain, color in entries:
        entry: dict[str, Any] = {"module": module}
        if domain is not None:
            entry["domain"] = domain
        if color is not None:
            entry["color"] = f"{color & 0xFFFFFF:06X}"
        entry["functions"] = list(functions)
        out.append(entry)
    return json.dumps(out, indent=4) + "\n"
