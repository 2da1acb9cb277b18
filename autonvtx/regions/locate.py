"""Where a region sits in a function's code: the loop or line span, found through the source's
AST, and the line whose first instruction begins each iteration, found in the bytecode."""

from __future__ import annotations

import ast
import linecache
import opcode
import types
from collections.abc import Iterator
from dataclasses import dataclass

from autonvtx.config import Region

# The enter "line" of a call region: PY_START opens it (regions.c's CALL_LINE).
CALL_LINE = -1
_ALL_LINES = (0, 2**31 - 1)

_Loop = ast.For | ast.AsyncFor | ast.While
_Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Placement:
    """A region resolved in one code object: LINE events at `enter` open it; a line outside
    [lo, hi] closes it. `is_loop`: `lo` is the loop's header, which runs before each iteration;
    entering again after it ran closes the open iteration first."""

    kind: str  # "loop", "lines" or "call"
    enter: int
    lo: int
    hi: int
    is_loop: bool
    description: str


def place(region: Region, code: types.CodeType) -> Placement | str:
    """Where `region` sits in `code`, or why it cannot (the problem, as a message's tail)."""
    if region.loop is None and region.lines is None:
        return _call_placement()
    if region.lines is None and region.loop in ("first", "auto"):
        lines = _lines_without_loops(code)
        if lines is not None:  # most functions a broad glob selects: no source is parsed for them
            if region.loop == "auto":
                return _call_placement()
            return (
                f"no loop in {code.co_qualname} (lines {lines[0]}-{lines[1]}); expected a for, async for or while loop"
            )
    node = _function_node(code)
    if isinstance(node, str):
        return node
    if region.lines is not None:
        return _span(code, node, region.lines)
    loops = list(_loops(node))
    if region.loop == "auto":
        return _loop(code, loops[0], "first loop: ") if loops else _call_placement()
    if region.loop == "first":
        if not loops:
            return f"no loop in {code.co_qualname} ({_lines_of(node)}); expected a for, async for or while loop"
        return _loop(code, loops[0], "first loop: ")
    for loop in loops:
        if loop.lineno == region.loop:
            return _loop(code, loop, "")
    starts = ", ".join(str(loop.lineno) for loop in loops) or "none"
    return f"no loop starts on line {region.loop} of {code.co_qualname}; expected one of its loops' lines ({starts})"


# Instructions every loop of a function compiles to: a for loop's FOR_ITER, an async for's
# GET_ANEXT, the jump back at the end of a loop body (a while loop's; a comprehension's too).
_LOOP_OPCODES = frozenset(
    opcode.opmap[name] for name in ("FOR_ITER", "JUMP_BACKWARD", "GET_ANEXT", "END_ASYNC_FOR") if name in opcode.opmap
)


def _lines_without_loops(code: types.CodeType) -> tuple[int, int] | None:
    """(first, last line) of `code` when it certainly holds no loop, else None (its source's
    AST decides). A while loop whose body never jumps back (it always returns or breaks) has
    none of those instructions: a `while` in the function's text sends it to the AST."""
    if not _LOOP_OPCODES.isdisjoint(code.co_code[::2]):  # (opcode, argument) pairs
        return None
    first = code.co_firstlineno
    last = max((line for _, _, line in code.co_lines() if line is not None), default=first)
    if any("while" in text for text in linecache.getlines(code.co_filename)[first - 1 : last]):
        return None
    return first, last


def _call_placement() -> Placement:
    return Placement("call", CALL_LINE, *_ALL_LINES, False, "each call")


def _lines_of(node: _Function) -> str:
    return f"lines {node.lineno}-{node.end_lineno}"


def _function_node(code: types.CodeType) -> _Function | str:
    """The def of `code` in its file's AST (linecache: the file, or what the runner cached)."""
    definitions = _definitions(code.co_filename)
    if definitions is None:
        return f"no source for {code.co_qualname} ({code.co_filename})"
    node = definitions.get((code.co_name, code.co_firstlineno))
    if node is None:
        return f"{code.co_qualname} not found in {code.co_filename} (source changed since import?)"
    return node


_trees: dict[str, ast.Module | None] = {}
# Per file, (name, line) -> its def, the line being the def's or its first decorator's (either
# can be a code object's first line): one walk of the file, however many of its functions a
# region's glob selects (a `*:*` region once walked each file once per function).
_defs: dict[str, dict[tuple[str, int], _Function] | None] = {}


def _definitions(filename: str) -> dict[tuple[str, int], _Function] | None:
    if filename not in _defs:
        tree = _parsed(filename)
        index: dict[tuple[str, int], _Function] | None = None
        if tree is not None:
            index = {}
            for node in _statements(tree.body, into_definitions=True):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                    index.setdefault((node.name, first), node)
                    index.setdefault((node.name, node.lineno), node)
        _defs[filename] = index
    return _defs[filename]


def _parsed(filename: str) -> ast.Module | None:
    if filename not in _trees:
        source = "".join(linecache.getlines(filename))
        try:
            _trees[filename] = ast.parse(source) if source else None
        except SyntaxError:
            _trees[filename] = None
    return _trees[filename]


def _loops(node: _Function) -> Iterator[_Loop]:
    """The function's own loops in source order (not those of functions defined inside it)."""
    found = [child for child in _statements(node.body, into_definitions=False) if isinstance(child, _LOOPS)]
    return iter(sorted(found, key=lambda loop: (loop.lineno, loop.col_offset)))


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(body: list[ast.stmt], *, into_definitions: bool) -> Iterator[ast.stmt]:
    """Every statement in `body` and in the blocks nested in it (if, loops, with, try, match;
    with `into_definitions`, function and class bodies too). Loops and definitions are
    statements only: expressions, the bulk of a tree, are not visited (ast.walk visited them,
    seconds over a program's modules for a `*:*` region)."""
    pending: list[ast.AST] = list(body)
    while pending:
        stmt = pending.pop()
        if not isinstance(stmt, ast.stmt):  # an except handler or a match case: its body
            pending.extend(getattr(stmt, "body", ()))
            continue
        yield stmt
        if not into_definitions and isinstance(stmt, _DEFINITIONS):
            continue
        for field in _BLOCKS:
            pending.extend(getattr(stmt, field, ()))


def _first_line_run(code: types.CodeType, lo: int, hi: int) -> int | None:
    """The line of the first instruction (by offset, the order the compiler lays a block out)
    whose line is in [lo, hi]."""
    for _, _, line in sorted(code.co_lines()):
        if line is not None and lo <= line <= hi:
            return line
    return None


def _loop(code: types.CodeType, loop: _Loop, which: str) -> Placement | str:
    keyword = {ast.For: "for", ast.AsyncFor: "async for", ast.While: "while"}[type(loop)]
    first = loop.body[0]
    last = max(stmt.end_lineno or stmt.lineno for stmt in loop.body)
    if first.lineno == loop.lineno:
        return (
            f"the {keyword} loop on line {loop.lineno} has its body on the same line;"
            " expected the body on lines of its own (iterations are seen by line)"
        )
    enter = _first_line_run(code, first.lineno, first.end_lineno or first.lineno)
    if enter is None:
        return f"no code for the body of the {keyword} loop on line {loop.lineno}"
    return Placement(
        "loop",
        enter,
        loop.lineno,
        last,
        True,
        f"{which}{keyword} loop on line {loop.lineno} (lines {loop.lineno}-{last}), iterations begin at line {enter}",
    )


def _span(code: types.CodeType, node: _Function, lines: tuple[int, int]) -> Placement | str:
    lo, hi = lines
    body_first, body_last = node.body[0].lineno, node.end_lineno or node.lineno
    if lo < body_first or hi > body_last:
        return (
            f"lines {lo}-{hi} are not all inside the body of {code.co_qualname};"
            f" expected lines within {body_first}-{body_last}"
        )
    enter = min((line for _, _, line in code.co_lines() if line is not None and lo <= line <= hi), default=None)
    if enter is None:
        return f"no code on lines {lo}-{hi} of {code.co_qualname}"
    return Placement("lines", enter, lo, hi, False, f"lines {lo}-{hi}, entered at line {enter}")
