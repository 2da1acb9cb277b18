"""Turn the sweep's tally into rows per range name and a tree, and give both to the one view
(`stats.view.arrange`): their sort keys, and the tree's nodes as rows and back."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from autonvtx.report.figures import KernelShare, Row, TreeNode, Work
from autonvtx.report.nsys.sweep import CPU_NS, INSTANCES, SPAN_NS, TOP_KERNELS, WORK, WORK_FIELDS, Tally
from autonvtx.stats.model import name_template
from autonvtx.stats.view import glob_matches, natural_order

_native_sort: Callable[[list[Row], str], bool] | None
try:  # the C twin of export_order's sort over a list of rows (setup.py: optional)
    from autonvtx.report._rowtext import sort_rows as _native_sort
except ImportError:  # pragma: no cover - a build without it
    _native_sort = None

# Per-call suffixes that make every instance's name unique: PyTorch's emit_nvtx writes
# "aten::mm, seq = 45440, op_id = 990760"; any ", <identifier> = <integer>" part is folded.
_CALL_ID = re.compile(r",\s*[A-Za-z_]\w*\s*=\s*-?\d+(?=,|$)")
SORT_KEYS = ("gpu", "cpu", "kernels", "instances", "span", "memcpy", "name")


def strip_ids(name: str) -> str:
    """The name without its per-call ", key = number" parts."""
    if " = " not in name:
        return name
    return _CALL_ID.sub("", name)


def has_ids(name: str) -> bool:
    """Whether `strip_ids` would change the name (one search, no new string)."""
    return " = " in name and _CALL_ID.search(name) is not None


def range_naming(strip: bool, each: bool) -> Callable[[str], str] | None:
    """How an export's recorded names become its rows' names: --strip-ids drops the per-call ids,
    then, unless --each, numbers become {n} (`stats.model.name_template`, as in a recording's
    rows); None when names stay as recorded. Remembered per name: the sweep asks once a range."""
    if each and not strip:
        return None
    seen: dict[str, str] = {}

    def rename(name: str) -> str:
        row = seen.get(name)
        if row is None:
            row = strip_ids(name) if strip else name
            row = seen[name] = row if each else name_template(row)
        return row

    return rename


def _work(totals: list[int]) -> Work:
    return Work(*totals[WORK : WORK + len(WORK_FIELDS)])


def build_rows(
    tally: Tally, domain_name: Callable[[int], str], kernel_names: Callable[[Iterable[object]], Mapping[object, str]]
) -> list[Row]:
    """One row per (group, domain, name); nested instances of a name count once. (The native
    sweep makes the same rows itself, `Tally.rows`: report/nsys/_native/sweep_rows.c.)

    The rows that launched nothing (most of a per-name report's) share one empty Work: a row's
    work is read, never changed, once the rows are built (here, a shared one is replaced by a
    row's own before anything is added to it)."""
    rows: dict[tuple[str, int], Row] = {}
    groups, shadowed, repeats, keys = tally.group, tally.shadowed, tally.repeated, tally.keys
    domains: dict[int, str] = {}
    end = WORK + len(WORK_FIELDS)
    idle = Work()
    for node, (key, totals) in enumerate(zip(tally.key, tally.totals)):
        if key < 0 or totals[INSTANCES] == 0:
            continue
        slot = (groups[node], key)
        row = rows.get(slot)
        counted = not shadowed[node]
        if row is None:  # most names of a per-name report: one node, its row made whole at once
            domain, name = keys[key]
            shown = domains.get(domain)
            if shown is None:
                shown = domains[domain] = domain_name(domain)
            if counted:
                work = totals[WORK:end]
                row = rows[slot] = Row(
                    groups[node],
                    shown,
                    name,
                    totals[INSTANCES],
                    totals[CPU_NS],
                    totals[SPAN_NS],
                    Work(*work) if any(work) else idle,
                )
            else:
                row = rows[slot] = Row(groups[node], shown, name, totals[INSTANCES], 0, 0, idle)
        else:
            row.instances += totals[INSTANCES]
            if counted:
                row.cpu_ns += totals[CPU_NS]
                row.span_ns += totals[SPAN_NS]
                if row.work is idle:
                    row.work = Work()
                row.work.add(Work(*totals[WORK:end]))
        if counted and repeats:
            repeated = repeats.get(node)
            if repeated is not None:
                if row.work is idle:
                    row.work = Work()
                row.work.add(Work(*(-value for value in repeated)))
    if tally.self_kernels:
        _add_top_kernels(tally, rows, kernel_names)
    return list(rows.values())


def _add_top_kernels(
    tally: Tally, rows: dict[tuple[str, int], Row], kernel_names: Callable[[Iterable[object]], Mapping[object, str]]
) -> None:
    """Each kernel counts for every distinct name enclosing the range that launched it."""
    # Per node first, then each node's kernels walked up its enclosing nodes once (not once
    # per kernel): (node, kernel) pairs of one node are adjacent in the sweep's dictionary
    # only by chance, and a name's nodes are few, so the walk dominates.
    by_node: dict[int, list[tuple[object, list[int]]]] = {}
    for (node, kernel), seen in tally.self_kernels.items():
        found = by_node.get(node)
        if found is None:
            by_node[node] = [(kernel, seen)]
        else:
            found.append((kernel, seen))
    # A name's kernels: most names of a per-name report are reached by one node launching one
    # kernel, so a name keeps its first node's list (shared, never changed) until a second node
    # reaches it; only then are they merged into a dictionary of its own.
    per_row: dict[tuple[str, int], list[tuple[object, list[int]]] | dict[object, list[int]]] = {}
    parent, key, shadowed, group = tally.parent, tally.key, tally.shadowed, tally.group
    for node, launched in by_node.items():
        walk = node
        while walk >= 0 and key[walk] >= 0:
            if not shadowed[walk]:
                slot = (group[walk], key[walk])
                kernels = per_row.get(slot)
                if kernels is None:
                    per_row[slot] = launched
                else:
                    if isinstance(kernels, list):
                        kernels = per_row[slot] = {kernel: [count, ns] for kernel, (count, ns) in kernels}
                    for kernel, (count, ns) in launched:
                        adding = kernels.get(kernel)
                        if adding is None:
                            kernels[kernel] = [count, ns]
                        else:
                            adding[0] += count
                            adding[1] += ns
            walk = parent[walk]
    chosen: list[tuple[Row, list[tuple[object, list[int]]]]] = []
    wanted: set[object] = set()
    for slot, kernels in per_row.items():
        row = rows.get(slot)
        if row is not None:
            best = kernels if isinstance(kernels, list) else list(kernels.items())
            if len(best) == 1:  # most ranges of a per-name report launch one kernel
                wanted.add(best[0][0])
            else:
                best = sorted(best, key=lambda item: (-item[1][1], -item[1][0], str(item[0])))[:TOP_KERNELS]
                wanted.update(kernel for kernel, _ in best)
            chosen.append((row, best))
    names = kernel_names(wanted)
    for row, best in chosen:
        if len(best) == 1:
            kernel, (count, ns) = best[0]
            row.top_kernels.append(KernelShare(names[kernel], count, ns))
        else:
            row.top_kernels.extend(KernelShare(names[kernel], count, ns) for kernel, (count, ns) in best)


def build_tree(tally: Tally, domain_name: Callable[[int], str]) -> list[TreeNode]:
    """The group roots, each holding the nesting of ranges seen under it."""
    nodes: list[TreeNode | None] = []
    roots: list[TreeNode] = []
    for node, key in enumerate(tally.key):
        totals = tally.totals[node]
        if key < 0:
            tree = TreeNode(tally.group[node], "", tally.group[node])
            roots.append(tree)
        elif totals[INSTANCES] == 0:
            nodes.append(None)
            continue
        else:
            domain, name = tally.keys[key]
            tree = TreeNode(
                tally.group[node],
                domain_name(domain),
                name,
                totals[INSTANCES],
                totals[CPU_NS],
                totals[SPAN_NS],
                _work(totals),
                tally.start_end[node],
            )
            parent = nodes[tally.parent[node]]
            if parent is not None:
                parent.children.append(tree)
        nodes.append(tree)
    for root in roots:
        for child in root.children:
            root.instances += child.instances
            root.cpu_ns += child.cpu_ns
            root.work.add(child.work)
    return roots


class RowOrder:
    """An export's sort key (called on a row), and the same order applied to a whole list in C
    (`sort_in_place`, which `stats.view.arrange` uses where it is offered)."""

    __slots__ = ("key", "field")

    def __init__(self, key: Callable[[Row | TreeNode], tuple[object, ...]], field: str | None) -> None:
        self.key = key
        self.field = field  # what _rowtext.sort_rows orders by; None: only the key

    def __call__(self, row: Row | TreeNode) -> tuple[object, ...]:
        return self.key(row)

    def sort_in_place(self, rows: list[Row]) -> bool:
        """Sorts `rows` as `sorted(rows, key=self)` would; False (untouched) where it cannot."""
        return _native_sort is not None and self.field is not None and _native_sort(rows, self.field)


def export_order(sort: str) -> RowOrder:
    """The view's sort key for an export's rows and tree nodes (`stats.view.arrange`)."""
    if sort == "name":
        return RowOrder(lambda r: (r.name, r.domain), None)
    field_of: dict[str, Callable[[Row | TreeNode], int]] = {
        "gpu": lambda r: r.work.gpu_ns,
        "cpu": lambda r: r.cpu_ns,
        "kernels": lambda r: r.work.kernels,
        "instances": lambda r: r.instances,
        "span": lambda r: r.span_ns,
        "memcpy": lambda r: r.work.memcpy_bytes,
    }
    # The statistics model's names for the same columns (`--sort total|count`, as `summary` says).
    field_of["total"], field_of["count"] = field_of["cpu"], field_of["instances"]
    native = {"total": "cpu", "count": "instances"}.get(sort, sort)
    # Ties broken by CPU time, then by name, so the order never depends on the file's order.
    if sort == "gpu":  # the default, over every row of a per-name report: one call a row
        return RowOrder(
            lambda r: (
                -(r.work.kernel_ns + r.work.memcpy_ns + r.work.memset_ns),
                -r.cpu_ns,
                r.name,
                r.domain,
            ),
            native,
        )
    value = field_of[sort]
    return RowOrder(lambda r: (-value(r), -r.cpu_ns, r.name, r.domain), native)


def group_order(label: str) -> list[tuple[int, int, str]]:
    """Groups in natural order: rank 2 before rank 10."""
    return natural_order(label)


@dataclass(frozen=True)
class PlacedNode:
    """A tree node as a row of the one view (`stats.view.ViewRow`): its place and its parent's."""

    node: TreeNode
    view_key: int
    view_parent: int | None

    @property
    def group(self) -> str:
        return self.node.group

    def view_matches(self, pattern: str) -> bool:
        return glob_matches(self.node.domain, self.node.name, pattern)


def placed(roots: list[TreeNode]) -> list[PlacedNode]:
    """Every node under the group roots, depth first, as rows `stats.view.arrange` can
    arrange with `View(tree=True)` (and `placed_order`); `nested` turns them back into trees.
    Iterative: a recursion thousands of levels deep is a tree as deep."""
    rows: list[PlacedNode] = []
    for root in roots:
        stack: list[tuple[TreeNode, int | None]] = [(child, None) for child in reversed(root.children)]
        while stack:
            node, parent = stack.pop()
            rows.append(PlacedNode(node, len(rows), parent))
            stack.extend((child, len(rows) - 1) for child in reversed(node.children))
    return rows


def placed_order(sort: str) -> Callable[[PlacedNode], tuple[object, ...]]:
    key = export_order(sort).key
    return lambda item: key(item.node)


def nested(roots: list[TreeNode], arranged: list[PlacedNode]) -> list[TreeNode]:
    """The group roots (in natural order) holding copies of the arranged nodes, nested again."""
    tops: dict[str, TreeNode] = {}
    for root in sorted(roots, key=lambda r: group_order(r.group)):
        tops[root.group] = dataclasses.replace(root, start_end=False, children=[])
    copies: dict[int, TreeNode] = {}
    for item in arranged:
        copy = copies[item.view_key] = dataclasses.replace(item.node, children=[])
        parent = tops[item.group] if item.view_parent is None else copies[item.view_parent]
        parent.children.append(copy)
    return list(tops.values())
