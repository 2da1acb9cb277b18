"""Keras 3 plugin: a range per layer call that executes, named by the layer's path and class,
never around graph building or symbolic model construction (a range there would time the
build once, not each run).

What gets a range:

- each call of a Keras layer or model that executes: ``sequential/dense_1 (Dense)`` (the
  layer's Keras path, or its name before it is built, and its class); category "layer", or
  "model" for models. No range when the call only builds something: inside a `tf.function`
  being traced (TensorFlow backend, `tf.executing_eagerly()` is false), inside `jax.jit` /
  `grad` / `vmap` tracing (JAX backend), under `torch.compile` (torch backend), or with
  symbolic inputs (building a functional model from `keras.Input`).
- the optimizer's `apply` (what `apply_gradients` calls) when it executes: ``Adam.apply``
  (category "optimizer").
- ``Sequential.fit``, ``.evaluate``, ``.predict`` (named by the model's class; category
  "training"): one range for the whole call.

So in `model.fit` with the TensorFlow backend, steps run inside a compiled `tf.function`:
the tensorflow plugin gives one range per step (``tf.function(one_step_on_iterator)``) and
the layers get none (their work is graph ops, with no Python call to range). Eager calls
(`model(x)`, custom training loops, `run_eagerly=True`) get per-layer ranges, and these
measure the layer's eager execution (on a GPU: launching its kernels).

Options (`[autonvtx.plugin.keras]`): `layers`, `optimizer`, `training` (each default true),
`domain` (default: the global domain).
"""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autonvtx.config import RangeStyle
    from autonvtx.engines.wrap import EmitterChooser
    from autonvtx.plugins import PluginContext
    from autonvtx.ranges import Emitter

TRIGGER = "keras"

OPTIONS: dict[str, type] = {"layers": bool, "optimizer": bool, "training": bool, "domain": str}


def activate(framework: types.ModuleType, context: PluginContext) -> None:
    keras = framework
    options = context.read_options(OPTIONS)
    domain = options.get("domain")
    executing = _executing_function(keras, context)
    layer_module = sys.modules.get("keras.src.layers.layer")
    Layer = getattr(layer_module, "Layer", None)
    if not isinstance(Layer, type):
        context.note("keras.src.layers.layer.Layer not found (Keras 2?): no ranges")
        return
    if options.get("layers", True):
        names = LayerNamer(context, domain, getattr(keras, "Model", None))
        symbolic = _symbolic_function()

        def layer_emitter(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Emitter | None:
            if not executing() or symbolic(args[1:], kwargs):
                return None  # tracing, or building a model from symbolic inputs
            return names.emitter(args)

        if context.wrap_method(Layer, "__call__", layer_emitter):
            context.note("Layer.__call__: a range per executed layer call")
    if options.get("optimizer", True):
        style = context.style(domain=domain, category="optimizer", module="keras.optimizers")
        optimizer = getattr(getattr(keras, "optimizers", None), "Optimizer", None)
        owner = _defining_class(optimizer, "apply")
        if owner is not None and context.wrap_method(owner, "apply", _by_class(context, style, "{}.apply", executing)):
            context.note("Optimizer.apply: a range per executed optimizer update")
    if options.get("training", True):
        style = context.style(domain=domain, category="training", module="keras.models")
        model = getattr(keras, "Model", None)
        for attr in ("fit", "evaluate", "predict"):
            owner = _defining_class(model, attr)
            if owner is not None:
                context.wrap_function(owner, attr, _class_message(attr), style)


def plan(framework: types.ModuleType, context: PluginContext) -> list[tuple[str, str, str]]:
    """What activate() would range, for `autonvtx list`."""
    keras = framework
    options = context.read_options(OPTIONS)
    entries: list[tuple[str, str, str]] = []
    if options.get("layers", True):
        entries.append(("keras.src.layers.layer", "Layer.__call__", "every executed layer call, named 'path (Class)'"))
    if options.get("optimizer", True):
        owner = _defining_class(getattr(getattr(keras, "optimizers", None), "Optimizer", None), "apply")
        if owner is not None:
            entries.append(
                (owner.__module__, f"{owner.__qualname__}.apply", "when executing, named '<optimizer class>.apply'")
            )
    if options.get("training", True):
        for attr in ("fit", "evaluate", "predict"):
            owner = _defining_class(getattr(keras, "Model", None), attr)
            if owner is not None:
                entries.append((owner.__module__, f"{owner.__qualname__}.{attr}", f"named '<model class>.{attr}'"))
    return entries


def _executing_function(keras: types.ModuleType, context: PluginContext) -> Callable[[], bool]:
    """True when a call executes rather than being traced, for Keras' current backend."""
    try:
        backend = str(keras.backend.backend())
    except Exception:
        backend = "unknown"
    if backend == "tensorflow":
        # Imported by Keras' TensorFlow backend already; tf.executing_eagerly's own function.
        eager = getattr(sys.modules.get("tensorflow.python.eager.context"), "executing_eagerly", None)
        if callable(eager):
            return eager  # type: ignore[no-any-return]
    elif backend == "jax":
        clean = getattr(sys.modules.get("jax._src.core"), "trace_state_clean", None)
        if callable(clean):
            return clean  # type: ignore[no-any-return]
    elif backend == "torch":
        torch = sys.modules.get("torch")
        compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
        if callable(compiling):
            return lambda: not compiling()
    context.note(f"backend {backend!r}: no tracing check, every layer call gets a range")
    return _always


def _always() -> bool:
    return True


def _symbolic_function() -> Callable[[tuple[Any, ...], dict[str, Any]], bool]:
    module = sys.modules.get("keras.src.backend.common.keras_tensor")
    found = getattr(module, "any_symbolic_tensors", None)
    if callable(found):
        return found  # type: ignore[no-any-return]
    return lambda args, kwargs: False


def _defining_class(cls: Any, attr: str) -> type | None:
    for klass in getattr(cls, "__mro__", ()):
        if attr in vars(klass):
            return klass  # type: ignore[no-any-return]
    return None


class LayerNamer:
    """The emitter of each layer instance, named once its Keras path is known."""

    def __init__(self, context: PluginContext, domain: str | None, model: Any) -> None:
        self._context = context
        self._domain = domain
        self._model = model if isinstance(model, type) else None
        self._emitters: weakref.WeakKeyDictionary[Any, Emitter] = weakref.WeakKeyDictionary()
        self._styles: dict[type, RangeStyle] = {}

    def emitter(self, args: tuple[Any, ...]) -> Emitter:
        layer = args[0]
        try:
            found = self._emitters.get(layer)
        except TypeError:
            found = None
        if found is not None:
            return found
        cls = type(layer)
        path = getattr(layer, "path", None) or getattr(layer, "name", None) or ""
        message = f"{path} ({cls.__name__})" if path else cls.__name__
        style = self._styles.get(cls)
        if style is None:
            is_model = self._model is not None and isinstance(layer, self._model)
            style = self._styles[cls] = self._context.style(
                domain=self._domain,
                category="model" if is_model else "layer",
                module=f"{cls.__module__}.{cls.__qualname__}",  # colored by class
            )
        found = self._context.emitter(message, style)
        if getattr(layer, "path", None):  # before the first build the path is unknown yet
            try:
                self._emitters[layer] = found
            except TypeError:
                pass
        return found


def _by_class(
    context: PluginContext, style: RangeStyle, template: str, executing: Callable[[], bool]
) -> EmitterChooser:
    """Ranges named by the class of `self`, for calls that execute (none while tracing)."""
    cache: dict[type, Emitter] = {}

    def emitter_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Emitter | None:
        if not executing():
            return None
        cls = type(args[0])
        found = cache.get(cls)
        if found is None:
            found = cache[cls] = context.emitter(template.format(cls.__name__), style)
        return found

    return emitter_for


def _class_message(attr: str) -> Callable[[tuple[Any, ...], dict[str, Any]], str]:
    def message(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        return f"{type(args[0]).__name__}.{attr}"

    return message
