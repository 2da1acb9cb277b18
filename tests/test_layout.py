"""The package's shape: its import graph (imports inside functions included) is one-way, and no
module imports another's private names."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator

import pytest

PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "autonvtx")


def module_files() -> dict[str, str]:
    """Every module of the package: dotted name -> file."""
    found = {}
    for directory, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            if not name.endswith(".py"):
                continue
            relative = os.path.relpath(os.path.join(directory, name), os.path.dirname(PACKAGE_DIR))
            dotted = relative[: -len(".py")].replace(os.sep, ".")
            if dotted.endswith(".__init__"):
                dotted = dotted[: -len(".__init__")]
            found[dotted] = os.path.join(directory, name)
    return found


def imports_of(module: str, path: str, known: set[str]) -> Iterator[tuple[str, str, int]]:
    """(imported module, imported name or '', line) for every autonvtx import in `path`,
    at any depth, type-checking-only blocks included (they name the same dependencies)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "autonvtx":
                    yield alias.name, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != "autonvtx":
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known or submodule in EXTENSIONS:
                    yield submodule, "", node.lineno
                else:
                    yield base, alias.name, node.lineno


# Extension modules built from autonvtx/_native (typed by a .pyi beside them): private by
# name, imported by the Python module they serve.
EXTENSIONS = {"autonvtx._nvtxclient"}


def graph() -> tuple[dict[str, set[str]], list[str]]:
    files = module_files()
    known = set(files)
    edges: dict[str, set[str]] = {name: set() for name in files}
    private = []
    for module, path in files.items():
        for target, name, line in imports_of(module, path, known):
            if target not in known:
                continue  # an extension module: the native half of the module importing it
            if target != module:
                edges[module].add(target)
            leaf = name or target.rpartition(".")[2]
            if leaf.startswith("_") and not leaf.startswith("__") and not (not name and _same_package(module, target)):
                private.append(f"{module}:{line} imports {target}{'.' + name if name else ''}")
    return edges, private


def _same_package(module: str, target: str) -> bool:
    # A package may import its own private submodules.
    return target.rpartition(".")[0] == module.rpartition(".")[0] or target.startswith(module + ".")


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_import_graph_is_one_way() -> None:
    edges, _ = graph()
    assert cycles(edges) == []


def test_no_private_cross_imports() -> None:
    _, private = graph()
    assert private == []


# Parents and children on the chain: CLI / API / bootstrap -> control -> config -> matching ->
# walk -> engine -> ranges. Nothing below may import what sits above it.
BELOW = {
    "autonvtx.config": ["autonvtx.control", "autonvtx.cli", "autonvtx.api", "autonvtx.matching"],
    "autonvtx.matching": ["autonvtx.control", "autonvtx.cli", "autonvtx.api", "autonvtx.walk"],
    "autonvtx.ranges": ["autonvtx.control", "autonvtx.walk", "autonvtx.matching", "autonvtx.engines"],
    "autonvtx.recorder": ["autonvtx.propagate", "autonvtx.control", "autonvtx.cli", "autonvtx.plugins"],
}


@pytest.mark.parametrize("low", sorted(BELOW))
def test_nothing_reaches_back_up(low: str) -> None:
    edges, _ = graph()
    reached = {
        (module, target)
        for module, targets in edges.items()
        if module == low or module.startswith(low + ".")
        for target in targets
        for high in BELOW[low]
        if target == high or target.startswith(high + ".")
    }
    assert reached == set()


def test_the_checker_sees_a_cycle() -> None:
    # The checker itself can fail: a two-module loop is reported.
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


# Functions past this many lines are doing more than one thing (issue 12): Python and C alike.
LONGEST_FUNCTION = 80


def long_functions() -> list[str]:
    """Every function of the package's Python and C sources longer than LONGEST_FUNCTION lines."""
    found = []
    for directory, _, files in os.walk(PACKAGE_DIR):
        for name in sorted(files):
            path = os.path.join(directory, name)
            if name.endswith(".py"):
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        length = (node.end_lineno or node.lineno) - node.lineno + 1
                        if length > LONGEST_FUNCTION:
                            found.append(f"{path}: {node.name}: {length} lines")
            elif name.endswith(".c"):
                found.extend(_long_c_functions(path))
    return found


def _long_c_functions(path: str) -> Iterator[str]:
    # The house style puts a function's braces in column 0: "{" after its signature, "}" last.
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = None
    for number, line in enumerate(lines):
        if start is None and line.startswith("{") and number > 0:
            start, signature = number, lines[number - 1]
        elif start is not None and line.startswith("}"):
            if number - start + 1 > LONGEST_FUNCTION:
                yield f"{path}: {signature.strip()}: {number - start + 1} lines"
            start = None


def test_no_function_is_longer_than_80_lines() -> None:
    assert long_functions() == []


# A module past these sizes is probably doing two jobs (issue 20: one job per module). Python is
# measured in lines that hold code or docstrings: blank lines, comment lines and the lines the
# formatter gives a closing bracket alone (its one-item-per-line layout) are not counted, so the
# bound means the same whatever the layout (the formatter turned 500 lines into 542, no code added).
LONGEST_MODULE = {".py": 480, ".c": 800, ".h": 800}
_NOT_CODE = re.compile(r"\s*(#.*)?|\s*[)\]}]+[,:]?\s*(#.*)?")


def test_no_module_is_longer_than_its_bound() -> None:
    too_long = []
    for directory, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            bound = LONGEST_MODULE.get(os.path.splitext(name)[1])
            if bound is None:
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as f:
                if name.endswith(".py"):
                    lines = sum(1 for line in f if not _NOT_CODE.fullmatch(line.rstrip("\n")))
                else:
                    lines = sum(1 for _ in f)
            if lines > bound:
                too_long.append(f"{os.path.relpath(path, PACKAGE_DIR)}: {lines} lines (at most {bound})")
    assert not too_long, "\n".join(too_long)


def test_the_view_options_travel_in_one_carrier() -> None:
    """--tree, --by, --sort, --top, --filter, --group, --skip-first, --each, --pair and --memory
    live in `ViewOptions` only: every request and every reading option holds that one value, so
    no command can read an option another way (they were fields of six classes)."""
    import dataclasses

    from autonvtx.report.compare.acrossrun import AcrossRequest
    from autonvtx.report.compare.diffrun import DiffRequest
    from autonvtx.report.compare.gather import Job
    from autonvtx.report.output import ReportRequest
    from autonvtx.report.profile import ReportOptions
    from autonvtx.stats.model import ViewOptions

    view_fields = {field.name for field in dataclasses.fields(ViewOptions)} | {"pattern", "name_filter", "group_by"}
    for carrier in (ReportRequest, DiffRequest, AcrossRequest, ReportOptions, Job):
        own = {field.name for field in dataclasses.fields(carrier)}
        assert own & view_fields == set(), f"{carrier.__name__} carries view options of its own"
        assert own & {"view", "options"}, f"{carrier.__name__} holds no ViewOptions"
