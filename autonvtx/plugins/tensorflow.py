"""TensorFlow plugin: ranges around the execution of `tf.function`s, gradient computations and
`tf.data` batches, never around graph building (NVTX calls made while a graph is built
measure the build, not the run).

What gets a range, only where TensorFlow executes eagerly (`tf.executing_eagerly()`: outside
any `tf.function` being traced):

- each call of a `tf.function` from eager code: ``tf.function(train_step)``, category
  "function". Keras' `fit`/`evaluate`/`predict` steps are such calls
  (``tf.function(one_step_on_iterator)``). The range covers running the function's graph;
  the first call for a new input signature also traces and optimizes the graph inside the
  same range (a long first range, then short ones; a long range on every call means
  retracing). On a GPU, kernels are enqueued asynchronously: some may still run after the
  range ends. A `tf.function` called inside another one is part of its graph: no range.
- ``GradientTape.gradient`` (category "backward") and ``tf.data next`` (iterating a
  `tf.data.Dataset` in eager code; category "data"). Inside a `tf.function` these are
  graph ops and run within the function's range.

Per-layer ranges come from the keras plugin (`autonvtx.plugins.keras`, in the same preset),
also only for eager execution. Layers running inside a `tf.function` (as in `model.fit`)
execute as graph ops with no Python call to put a range around: that needs NVTX ops in the
graph (what nvtx-plugins-tf added by hand) and is not done here. For per-layer ranges under
`fit`, compile the model with `run_eagerly=True` (slower: it is eager execution that is then
measured).

Options (`[autonvtx.plugin.tensorflow]`): `functions`, `gradients`, `datasets` (each
default true), `domain` (default: the global domain).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autonvtx.config import RangeStyle
    from autonvtx.engines.wrap import EmitterChooser
    from autonvtx.plugins import PluginContext
    from autonvtx.ranges import Emitter

TRIGGER = "tensorflow"

OPTIONS: dict[str, type] = {"functions": bool, "gradients": bool, "datasets": bool, "domain": str}


def activate(framework: types.ModuleType, context: PluginContext) -> None:
    options = context.read_options(OPTIONS)
    domain = options.get("domain")
    eager = _executing_eagerly_function()
    if eager is None:
        context.note("tensorflow.python.eager.context.executing_eagerly not found: no ranges")
        return
    for option, module, cls_name, attr, category, name_of in _TARGETS:
        if not options.get(option, True):
            continue
        cls = getattr(sys.modules.get(module), cls_name, None)
        style = context.style(domain=domain, category=category, module="tensorflow")
        if not isinstance(cls, type):
            context.note(f"{module}.{cls_name} not found: no {option} ranges")
        elif context.wrap_method(cls, attr, _named(context, style, name_of, eager)):  # or notes why not
            context.note(f"{cls_name}.{attr}: ranges when executing eagerly")


def plan(framework: types.ModuleType, context: PluginContext) -> list[tuple[str, str, str]]:
    """What activate() would range, for `autonvtx list`."""
    options = context.read_options(OPTIONS)
    return [
        (module, f"{cls_name}.{attr}", f"when executing eagerly, named {example}")
        for option, module, cls_name, attr, _, name_of in _TARGETS
        if options.get(option, True)
        for example in [_EXAMPLES[option]]
    ]


def _executing_eagerly_function() -> Callable[[], bool] | None:
    # The internal function tf.executing_eagerly is exported from; imported by
    # `import tensorflow` already.
    context_module = sys.modules.get("tensorflow.python.eager.context")
    found = getattr(context_module, "executing_eagerly", None)
    return found if callable(found) else None


def _function_name(args: tuple[Any, ...]) -> str:
    function = args[0]
    name = getattr(function, "_name", None) or getattr(function, "__name__", "function")
    return f"tf.function({name})"


# (option, module, class, method, category, range name from the call's arguments)
_TARGETS: tuple[tuple[str, str, str, str, str, Callable[[tuple[Any, ...]], str]], ...] = (
    (
        "functions",
        "tensorflow.python.eager.polymorphic_function.polymorphic_function",
        "Function",
        "__call__",
        "function",
        _function_name,
    ),
    (
        "gradients",
        "tensorflow.python.eager.backprop",
        "GradientTape",
        "gradient",
        "backward",
        lambda args: "GradientTape.gradient",
    ),
    (
        "datasets",
        "tensorflow.python.data.ops.iterator_ops",
        "OwnedIterator",
        "__next__",
        "data",
        lambda args: "tf.data next",
    ),
)
_EXAMPLES = {
    "functions": "'tf.function(<name>)'",
    "gradients": "'GradientTape.gradient'",
    "datasets": "'tf.data next'",
}


def _named(
    context: PluginContext,
    style: RangeStyle,
    name_of: Callable[[tuple[Any, ...]], str],
    eager: Callable[[], bool],
) -> EmitterChooser:
    def emitter_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Emitter | None:
        if not eager():  # building a graph: a range here would time the build
            return None
        return context.emitter(name_of(args), style)  # cached per name by the context

    return emitter_for
