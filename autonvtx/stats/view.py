"""The one view over any table's rows: --filter, --sort, --top and --tree, written once.

Every table a command prints (a recording's statistics, an export's report rows and tree, a
diff, ranks side by side) hands its rows here with the sort key its figures give; the rows
satisfy `ViewRow`, so each view option means the same in every command: groups (--by) in natural
order (rank 2 before rank 10), --filter a glob over the names, --top per group (per parent in a
tree), and in a tree each kept row followed by its children, a match keeping what encloses it
and what it encloses. Iterative throughout: a recursion thousands of levels deep is a tree as deep.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from operator import attrgetter
from typing import Any, Protocol, TypeVar


class ViewRow(Protocol):
    """What the view needs of a row."""

    @property
    def group(self) -> str:
        """The --by group it belongs to ("" without --by)."""

    @property
    def view_key(self) -> Hashable:
        """Unique in its table: in a tree, its path from the outermost range."""

    @property
    def view_parent(self) -> Hashable | None:
        """The key of the row enclosing it in a tree; None for an outermost (or a flat) row."""

    def view_matches(self, pattern: str) -> bool:
        """Whether --filter's glob matches its name (with or without its domain)."""


R = TypeVar("R", bound=ViewRow)


@dataclass(frozen=True)
class View:
    """What --tree, --sort, --top and --filter asked for: the same carrier for every table."""

    tree: bool = False
    sort: str | None = None  # None: the table's default order
    top: int | None = None  # per group; in a tree, children per row (and outermost rows per group)
    filter: str | None = None


def glob_matches(domain: str, name: str, pattern: str) -> bool:
    """--filter as every table reads it: a glob over the range's name, or over `domain:name`."""
    return fnmatchcase(name, pattern) or (bool(domain) and fnmatchcase(f"{domain}:{name}", pattern))


def natural_order(text: str) -> list[tuple[int, int, str]]:
    """A sort key that puts "rank 2" before "rank 10"."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)]


def arrange(rows: Sequence[R], view: View, order: Callable[[R], Any]) -> list[R]:
    """`rows` as `view` shows them, each group (in natural order) filtered, sorted by `order`
    (ascending: a table's key puts its largest figures first) and cut."""
    groups: dict[str, list[R]] = {}
    labels = set(map(attrgetter("group"), rows))
    if len(labels) == 1:  # no --by: one group, gathered without a call a row
        groups[labels.pop()] = list(rows)
    else:
        for row in rows:
            groups.setdefault(row.group, []).append(row)
    # An order may sort a whole list itself (an export's rows: views.RowOrder, in C), the same
    # order `sort(key=order)` gives, or decline it (False).
    sort_in_place: Callable[[list[R]], bool] | None = getattr(order, "sort_in_place", None)
    arranged: list[R] = []
    for _, members in sorted(groups.items(), key=lambda item: natural_order(item[0])):
        if view.tree:
            arranged.extend(_tree(members, view, order))
            continue
        if view.filter is not None:
            members = [row for row in members if row.view_matches(view.filter)]
        if sort_in_place is None or not sort_in_place(members):
            members.sort(key=order)
        arranged.extend(members[: view.top] if view.top is not None else members)
    return arranged


def _tree(rows: list[R], view: View, order: Callable[[R], Any]) -> list[R]:
    """Depth first from the outermost rows, siblings in `order`, --top children per row."""
    children: dict[Hashable | None, list[R]] = {}
    for row in rows:
        children.setdefault(row.view_parent, []).append(row)
    kept = None if view.filter is None else _kept(rows, children, view.filter)

    def below(key: Hashable | None) -> list[R]:
        kids = sorted((r for r in children.get(key, ()) if kept is None or r.view_key in kept), key=order)
        return kids[: view.top] if view.top is not None else kids

    arranged: list[R] = []
    placed: set[Hashable] = set()  # a row that names itself its parent is placed once
    stack = list(reversed(below(None)))
    while stack:
        row = stack.pop()
        if row.view_key in placed:
            continue
        placed.add(row.view_key)
        arranged.append(row)
        stack.extend(reversed(below(row.view_key)))
    return arranged


def _kept(rows: list[R], children: dict[Hashable | None, list[R]], pattern: str) -> set[Hashable]:
    """The keys a --filter keeps in a tree: each match, what encloses it and what it encloses."""
    parent_of = {row.view_key: row.view_parent for row in rows}
    matched = [row.view_key for row in rows if row.view_matches(pattern)]
    kept: set[Hashable] = set()
    for key in matched:
        walk: Hashable | None = key
        while walk is not None and walk not in kept:
            kept.add(walk)
            walk = parent_of.get(walk)
    inside: set[Hashable] = set(matched)
    pending = list(matched)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child.view_key not in inside:
                inside.add(child.view_key)
                pending.append(child.view_key)
    return kept | inside
