"""IPython cells: what a cell defines at its top level is instrumented right after its
definition, so a call in the same cell gets its range (a walk after the cell came too late)."""

from __future__ import annotations

import ast
from typing import Any

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class WalkAfterDefinitions(ast.NodeTransformer):
    """An IPython AST transformer: after each top-level def or class of a cell, a call of
    `function` in `module` (which walks `__main__`). The call is made through `__import__`,
    so the cell's namespace gains no name; it sits on the definition's last line, so
    tracebacks and line numbers are the cell's own."""

    def __init__(self, module: str, function: str) -> None:
        self.module = module
        self.function = function

    def visit_Module(self, node: ast.Module) -> ast.Module:
        body: list[ast.stmt] = []
        for statement in node.body:
            body.append(statement)
            if isinstance(statement, _DEFINITIONS):
                body.append(self._walk_call(statement))
        node.body = body
        return node

    def _walk_call(self, after: ast.stmt) -> ast.stmt:
        call = ast.parse(f"__import__({self.module!r}, fromlist=['_']).{self.function}()").body[0]
        line = after.end_lineno or after.lineno
        for part in ast.walk(call):
            if isinstance(part, (ast.expr, ast.stmt)):
                part.lineno = part.end_lineno = line
                part.col_offset = part.end_col_offset = 0
        return call


def add_to(shell: Any, module: str, function: str) -> None:
    """Have `shell` (an InteractiveShell) call `module.function()` after each top-level
    definition of its cells, once."""
    if not any(isinstance(t, WalkAfterDefinitions) for t in shell.ast_transformers):
        shell.ast_transformers.append(WalkAfterDefinitions(module, function))


def remove_from(shell: Any) -> None:
    shell.ast_transformers[:] = [t for t in shell.ast_transformers if not isinstance(t, WalkAfterDefinitions)]
