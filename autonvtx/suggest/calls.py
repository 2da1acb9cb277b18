"""What a measured run says about each function: its call paths and, summed over them, its
calls and its time with the measurement's own cost and the imports under it taken out."""

from __future__ import annotations

from dataclasses import dataclass, field

# The name part of the range the measuring child puts around each import that loads a module
# (`child.importing`), and of its calibration probe: they are measurements, never suggestions.
MARKS_MODULE = "autonvtx_suggest_marks"
IMPORT_MARK = f"{MARKS_MODULE}:importing"
PROBE_MARKS = (f"{MARKS_MODULE}:probe", f"{MARKS_MODULE}:Probe.method")


@dataclass
class PathNode:
    """One call path (the function names from the outermost range down) and what its calls took."""

    path: tuple[str, ...]
    count: int
    total_ns: int
    gpu_ns: int = 0
    children: list[PathNode] = field(default_factory=list)
    # Filled by `settle`: its time without the imports and the other ranges' cost under it.
    net_ns: float = 0.0
    under_import: bool = False

    @property
    def name(self) -> str:
        return self.path[-1]


@dataclass
class Function:
    """A function summed over the call paths it appears on outside imports (an inner call of a
    recursion counts as a call, its time is already in the outer one's)."""

    name: str  # module:qualname
    calls: int = 0
    net_ns: float = 0.0
    gpu_ns: int = 0
    child_calls: int = 0  # calls of ranged functions made directly inside its calls
    child_ns: float = 0.0  # their time
    callees: dict[str, list[float]] = field(default_factory=dict)  # per name: [calls, time] of those
    import_calls: int = 0  # its calls made while a module was being imported
    median_ns: float | None = None  # its calls' typical duration, where the source has medians

    @property
    def module(self) -> str:
        return self.name.partition(":")[0]

    @property
    def qualname(self) -> str:
        return self.name.partition(":")[2]

    @property
    def is_private(self) -> bool:
        """A leading underscore on a part of its name (dunders are public: `__init__`, `__call__`)."""
        return any(part.startswith("_") and not part.endswith("__") for part in self.qualname.split("."))

    @property
    def mean_ns(self) -> float:
        return self.net_ns / self.calls if self.calls else 0.0

    @property
    def typical_ns(self) -> float:
        """How long a call takes, the calls the machine's other work interrupted aside: the
        lesser of the mean and the median (a busy host stretched the means of tiny functions
        past the bar for a range, 3-4 us a call for a 1 us function)."""
        return self.mean_ns if self.median_ns is None else min(self.mean_ns, self.median_ns)


@dataclass
class Measurement:
    """One measured run: its call paths, what a range cost in it, and how long it took."""

    roots: list[PathNode]
    range_cost_ns: float  # the time one range adds to a call, measured at the run's start
    run_ns: int  # the program's wall time, from its first statement to its exit
    status: int = 0  # the program's exit status
    gpu: bool = False  # GPU time per range was measured (under Nsight Systems with a device)
    notes: list[str] = field(default_factory=list)
    inside_median_ns: float | None = None  # the probe's median duration, where the source has it
    median_ns: dict[str, float] = field(default_factory=dict)  # per function: its calls' median duration
    # Filled by `settle`.
    inside_ns: float = 0.0  # the part of a range's cost inside it: an empty function's duration
    import_ns: float = 0.0
    ranged_calls: int = 0
    functions: dict[str, Function] = field(default_factory=dict)

    @property
    def net_run_ns(self) -> float:
        """The run's time outside imports and without the measurement's own ranges."""
        return max(1.0, self.run_ns - self.import_ns - self.range_cost_ns * self.ranged_calls)


def build_tree(rows: list[tuple[tuple[str, ...], int, int, int]]) -> list[PathNode]:
    """Nodes from rows of (path, count, total ns, GPU ns); a row whose parent path is missing
    becomes a root."""
    nodes = {path: PathNode(path, count, total, gpu) for path, count, total, gpu in rows}
    roots: list[PathNode] = []
    for path, node in nodes.items():
        parent = nodes.get(path[:-1]) if len(path) > 1 else None
        (parent.children if parent is not None else roots).append(node)
    return roots


def settle(measurement: Measurement) -> Measurement:
    """Net times, per-function sums and the run's import time, from the call paths."""
    probes = [node for node in walk(measurement.roots) if node.name in PROBE_MARKS]
    probe_calls = sum(node.count for node in probes)
    # A range's own duration holds part of its cost (the engine's call path and the recorder's
    # clock between push and pop): an empty ranged function shows how much.
    inside = sum(node.total_ns for node in probes) / probe_calls if probe_calls else 0.0
    if measurement.inside_median_ns is not None:
        inside = measurement.inside_median_ns  # the mean holds the calls the machine interrupted
    # What the caller sees a range cost holds that part: a calibration disturbed below it is raised.
    cost = measurement.range_cost_ns = max(measurement.range_cost_ns, inside)
    functions: dict[str, Function] = {}
    import_ns = 0.0
    ranged_calls = 0
    stack: list[tuple[PathNode, bool]] = [(root, False) for root in measurement.roots]
    order: list[PathNode] = []
    while stack:  # iterative: call paths can be deeper than Python's recursion limit
        node, under = stack.pop()
        node.under_import = under or node.name == IMPORT_MARK
        order.append(node)
        stack.extend((child, node.under_import) for child in node.children)
    below_calls: dict[int, int] = {}
    below_imports: dict[int, float] = {}
    for node in reversed(order):  # children before parents
        calls = 0
        imports = 0.0
        for child in node.children:
            calls += child.count + below_calls[id(child)]
            imports += child.total_ns if child.name == IMPORT_MARK else below_imports[id(child)]
        below_calls[id(node)], below_imports[id(node)] = calls, imports
        node.net_ns = max(0.0, node.total_ns - inside * node.count - imports - cost * calls)
    for node in order:
        if node.name not in PROBE_MARKS:
            ranged_calls += node.count
        if node.name == IMPORT_MARK and not _has_import_above(node):
            import_ns += node.total_ns
        if node.name == IMPORT_MARK or node.name in PROBE_MARKS:
            continue
        function = functions.setdefault(node.name, Function(node.name))
        function.calls += node.count
        if node.under_import:
            function.import_calls += node.count
            continue
        if node.name in node.path[:-1]:
            continue  # recursion: inside an outer call of itself, whose time holds it
        function.net_ns += node.net_ns
        function.gpu_ns += node.gpu_ns
        for child in node.children:
            if child.name == IMPORT_MARK or child.name in PROBE_MARKS:
                continue
            function.child_calls += child.count
            function.child_ns += child.net_ns
            callee = function.callees.setdefault(child.name, [0, 0.0])
            callee[0] += child.count
            callee[1] += child.net_ns
    for name, median in measurement.median_ns.items():
        if name in functions:
            functions[name].median_ns = median
    measurement.inside_ns = inside
    measurement.import_ns = import_ns
    measurement.ranged_calls = ranged_calls
    measurement.functions = functions
    return measurement


def _has_import_above(node: PathNode) -> bool:
    return IMPORT_MARK in node.path[:-1]


def walk(roots: list[PathNode]) -> list[PathNode]:
    """Every node, parents before their children."""
    order: list[PathNode] = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    return order
