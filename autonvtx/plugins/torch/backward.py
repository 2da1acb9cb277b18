"""A module call's backward pass as a range of its own, from hooks on the autograd nodes it made.

How a call's backward range is found, without changing the graph the program sees (no
`BackwardHookFunction` around inputs and outputs, as module full backward hooks insert):

- start: the first time, in a backward pass, that autograd is about to run a node the call
  created and returned (an output's `grad_fn` made during the call: its sequence number is at
  least the one autograd's counter showed when the call began). An output changed in place
  afterwards keeps its original node in the graph, so the start is still seen.
- end: when autograd is about to run the node of one of its inputs that needs a gradient:
  autograd runs ready nodes by decreasing sequence number, and the nodes the call made are
  numbered above its inputs', so by then they are done (and the gradient accumulation of its
  parameters, which comes first). Not the last input's node: an input shared with another
  branch (a residual) waits for that branch too, which is no part of the call. Sooner, for a
  call that made few nodes (a layer): when they have all run (a post-hook on each), since an
  input shared with siblings (query, key and value projections of one tensor) waits for them.
  A call none of whose ends comes (inputs that need no gradient and many nodes: the root
  model; `autograd.grad` for an intermediate tensor) ends with the backward pass, from a
  callback autograd runs when the pass is over.

Both are actions on one pre-hook per node, kept in the node's `metadata` dict: a node that is
one call's input and another's output ends the first before it starts the second, whatever
order the hooks were added in. The ranges are NVTX start/end ranges: backward passes of
different modules interleave (branches, autograd's threads per device), which a push/pop stack
cannot hold. A retained graph's second backward starts each range afresh.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from typing import Any

# The key of autonvtx's actions in an autograd node's `metadata` dict.
_KEY = "autonvtx.backward"
_AFTER_KEY = "autonvtx.backward.after"
# Outputs are looked for this deep in tuples, lists and dicts (a ModelOutput is a dict).
_DEPTH = 2
# A call that made this few nodes (a layer) also ends when they have all run: sooner than its
# input's node when that input is shared with siblings (query, key and value of one input).
# Larger calls are not walked (the walk is per call).
_MADE_LIMIT = 16


class _Call:
    """One module call's backward range: open or not in the current pass, and how many of the
    nodes that end it are still to come."""

    __slots__ = ("range", "id", "left", "made")

    def __init__(self, range_: Any, made: int) -> None:
        self.range = range_
        self.id: int | None = None
        self.left = 0
        self.made = made  # nodes counted towards the end (0: none are)


class _NodeActions:
    """The one pre-hook autonvtx puts on a node: ends the calls this node is an input of,
    then starts those it is an output of."""

    __slots__ = ("ends", "starts", "ranges")

    def __init__(self, ranges: BackwardRanges) -> None:
        self.ends: list[_Call] = []
        self.starts: list[_Call] = []
        self.ranges = ranges

    def __call__(self, grad_outputs: Any) -> None:
        try:
            if self.ends:
                self.ranges.ended(self.ends)
            if self.starts:
                # Added innermost call first (it returned first): the outermost starts first.
                self.ranges.started(self.starts[::-1])
        except Exception:  # never break the program's backward pass
            pass
        return None


class _AfterActions:
    """The post-hook autonvtx puts on a node made by a call whose inputs need no gradient:
    counts the node towards that call's end."""

    __slots__ = ("ends", "ranges")

    def __init__(self, ranges: BackwardRanges) -> None:
        self.ends: list[_Call] = []
        self.ranges = ranges

    def __call__(self, grad_inputs: Any, grad_outputs: Any) -> None:
        try:
            self.ranges.counted(self.ends)
        except Exception:  # never break the program's backward pass
            pass
        return None


class BackwardRanges:
    """Attaches backward ranges to module calls (attach()), and keeps the ones a backward pass
    opened until it ends."""

    def __init__(self, torch: types.ModuleType) -> None:
        self._Tensor = torch.Tensor
        self._sequence_nr: Callable[[], int] = torch._C._autograd._get_sequence_nr
        self._task_id: Callable[[], int] = torch._C._current_graph_task_id
        self._queue_callback: Callable[[Callable[[], None]], None] = (
            torch.autograd.Variable._execution_engine.queue_callback
        )
        self._lock = threading.Lock()
        # Per backward pass (autograd graph task id): the calls it opened, oldest first.
        self._open: dict[int, list[_Call]] = {}
        self.failures = 0

    def attach(self, range_: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, first: int) -> None:
        """Give the call that returned `result` a backward range `range_` (start() -> id, end(id)),
        if it made autograd nodes; `first`: autograd's sequence number when it began."""
        try:
            outputs = _nodes_made(_tensors(result, self._Tensor, _DEPTH), first)
            if not outputs:
                return
            inputs = _input_nodes(args, kwargs, self._Tensor)
            made = _nodes_between(outputs, first, self._sequence_nr())
            # Ended by the first input node autograd reaches (the others may wait on branches
            # the call is no part of), or once the nodes it made have all run.
            call = _Call(range_, len(made or ()))
            for node in outputs:
                _actions(node, self).starts.append(call)
            for node in inputs:
                _actions(node, self).ends.append(call)
            for node in made or ():
                _after_actions(node, self).ends.append(call)
        except Exception:  # an odd output type, a node refusing hooks: no backward range then
            self.failures += 1

    def started(self, calls: list[_Call]) -> None:
        for call in calls:
            if call.id is not None:
                continue
            task = self._task_id()
            call.id = call.range.start()
            call.left = call.made
            with self._lock:
                opened = self._open.get(task)
                fresh = opened is None
                if fresh:
                    opened = self._open[task] = []
            opened.append(call)  # type: ignore[union-attr]
            if fresh:
                self._queue_callback(self._closer(task))

    def ended(self, calls: list[_Call]) -> None:
        for call in calls:
            if call.id is not None:
                self._end(call)

    def counted(self, calls: list[_Call]) -> None:
        for call in calls:
            if call.id is None:
                continue
            call.left -= 1
            if call.left == 0:
                self._end(call)

    def _end(self, call: _Call) -> None:
        ident, call.id = call.id, None
        if ident is not None:
            call.range.end(ident)

    def _closer(self, task: int) -> Callable[[], None]:
        def close() -> None:
            # Runs when the pass is over: ends, innermost first, what no input node ended.
            with self._lock:
                opened = self._open.pop(task, [])
            for call in reversed(opened):
                self._end(call)

        return close


def _actions(node: Any, ranges: BackwardRanges) -> _NodeActions:
    metadata = node.metadata
    actions: _NodeActions | None = metadata.get(_KEY)
    if actions is None:
        actions = metadata[_KEY] = _NodeActions(ranges)
        node.register_prehook(actions)
    return actions


def _after_actions(node: Any, ranges: BackwardRanges) -> _AfterActions:
    metadata = node.metadata
    actions: _AfterActions | None = metadata.get(_AFTER_KEY)
    if actions is None:
        actions = metadata[_AFTER_KEY] = _AfterActions(ranges)
        node.register_hook(actions)
    return actions


def _nodes_between(outputs: list[Any], first: int, last: int) -> list[Any] | None:
    """The nodes a call made (sequence numbers in [first, last)) reachable from its outputs'
    nodes; None when there are more than _MADE_LIMIT (the call then ends with the pass).
    Gradient accumulators of parameters are no one's: their sequence number is the largest."""
    found: dict[int, Any] = {}
    stack = list(outputs)
    while stack:
        node = stack.pop()
        if id(node) in found:
            continue
        found[id(node)] = node
        if len(found) > _MADE_LIMIT:
            return None
        for following, _ in node.next_functions:
            if following is not None and first <= following._sequence_nr() < last:
                stack.append(following)
    return list(found.values())


def _tensors(value: Any, Tensor: type, depth: int) -> list[Any]:
    if isinstance(value, Tensor):
        return [value]
    found: list[Any] = []
    if depth <= 0:
        return found
    if isinstance(value, (tuple, list)):
        items: Any = value
    elif isinstance(value, dict):
        items = value.values()
    else:
        return found
    for item in items:
        if isinstance(item, Tensor):
            found.append(item)
        elif isinstance(item, (tuple, list, dict)):
            found.extend(_tensors(item, Tensor, depth - 1))
    return found


def _nodes_made(tensors: list[Any], first: int) -> list[Any]:
    """The distinct grad_fn nodes of `tensors` made since sequence number `first` (an input
    handed back unchanged, or a cached tensor, is not the call's)."""
    nodes: list[Any] = []
    for tensor in tensors:
        node = tensor.grad_fn
        if node is not None and node._sequence_nr() >= first and all(node is not n for n in nodes):
            nodes.append(node)
    return nodes


def _input_nodes(args: tuple[Any, ...], kwargs: dict[str, Any], Tensor: type) -> list[Any]:
    nodes: list[Any] = []
    tensors = _tensors(args, Tensor, _DEPTH)
    if kwargs:
        tensors.extend(_tensors(kwargs, Tensor, _DEPTH))
    for tensor in tensors:
        node = tensor.grad_fn  # None for leaves: those end with the pass
        if node is not None and all(node is not n for n in nodes):
            nodes.append(node)
    return nodes
