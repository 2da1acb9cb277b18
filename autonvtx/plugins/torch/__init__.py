"""PyTorch plugin: module calls named by model path, optimizer steps, backward, DataLoader batches.

What gets a range, and what the range measures (CPU time of the calling thread; CUDA work is
asynchronous, so a range covers launching the kernels, not running them):

- every `nn.Module` call, named by the module's path in the root model it was called under
  and by its class: ``encoder.layers.2.attn (MultiheadAttention)``; a root (a module called
  from outside any other module: the model, a loss function) is named by its class alone.
  Loss modules (`nn.modules.loss._Loss`) get category "loss", the others "module".
- `Optimizer.step` and `Optimizer.zero_grad` of every optimizer class, named by the
  optimizer's class: ``AdamW.step``.
- `torch.autograd.backward` (what `Tensor.backward()` calls): ``backward``; and
  `torch.autograd.grad`: ``autograd.grad``. With `backward_modules`, each module call's
  backward pass is a range of its own too, ``encoder.layers.2.attn (MultiheadAttention)
  [backward]`` (`backward.py` says how it is placed).
- fetching a batch from a DataLoader (`_BaseDataLoaderIter.__next__`):
  ``DataLoader.__next__ (TensorDataset)``, named by the dataset's class. With worker
  processes the range is the wait for the next ready batch.

None of these emit anything while `torch.compile` (dynamo) or `torch.export` traces: the
check is `torch.compiler.is_compiling()`, which dynamo folds to a constant, so no NVTX call
and no graph break enters a compiled graph. A compiled model is one range
(``OptimizedModule(Model)``); a `torch.jit.script`/`trace` module is one range named by its
original class, its submodules run inside TorchScript.

Module ranges come from a replacement of `nn.Module._call_impl` that looks the module up in
a table of names built once per root model; it costs about 0.7 us per module call with the
recorder attached (PyTorch's own call costs about 0.6 us on the same machine), against
about 2 us for global forward hooks.

Options (`[autonvtx.plugin.torch]`): `layer_paths` (default true; false names module ranges
by class only), `modules`, `optimizer`, `backward`, `dataloader` (each default true: turn a
kind of range off), `domain` (default: the global domain), `backward_modules` and `shapes`
(default false: a range over each module call's backward pass; the call's tensor shapes in
its range's name, ``head (Linear) [32x128 float32]``), `memory` (default false: on CUDA, the
caching allocator's bytes at each module call's start and end and its peak, as marks
inside the call's range: `memory.py`).
"""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autonvtx.plugins.torch.backward import BackwardRanges
from autonvtx.plugins.torch.memory import memory_marks
from autonvtx.plugins.torch.modulecalls import CallOptions, patch_module_call
from autonvtx.plugins.torch.naming import ModuleNamer, is_loss_class

if TYPE_CHECKING:
    from autonvtx.config import RangeStyle
    from autonvtx.engines.wrap import EmitterChooser
    from autonvtx.plugins import PluginContext
    from autonvtx.ranges import Emitter

TRIGGER = "torch"

OPTIONS: dict[str, type] = {
    "layer_paths": bool,
    "modules": bool,
    "optimizer": bool,
    "backward": bool,
    "dataloader": bool,
    "domain": str,
    "backward_modules": bool,
    "shapes": bool,
    "memory": bool,
}


def activate(framework: types.ModuleType, context: PluginContext) -> None:
    torch = framework
    options = context.read_options(OPTIONS)
    is_compiling = _is_compiling_function(torch)
    domain = options.get("domain")
    if options.get("modules", True):
        namer = ModuleNamer(context, domain, bool(options.get("layer_paths", True)))
        calls = CallOptions(shapes=bool(options.get("shapes", False)))
        if options.get("memory", False):
            calls.memory = memory_marks(torch, context.warn)
        if options.get("backward_modules", False):
            calls.backward = BackwardRanges(torch)
        patch_module_call(torch, namer, is_compiling, context, calls)
    if options.get("optimizer", True):
        _patch_optimizers(torch, context, domain, is_compiling)
    if options.get("backward", True):
        _patch_backward(torch, context, domain, is_compiling)
    if options.get("dataloader", True):
        _patch_dataloader(context, domain, is_compiling)


def plan(framework: types.ModuleType, context: PluginContext) -> list[tuple[str, str, str]]:
    """What activate() would range, for `autonvtx list`: every module class's forward (all
    reached through Module._call_impl), optimizer methods, autograd, the DataLoader."""
    torch = framework
    options = context.read_options(OPTIONS)
    entries: list[tuple[str, str, str]] = []
    if options.get("modules", True):
        naming = "path (Class)" if options.get("layer_paths", True) else "Class"
        shapes = " [<argument shapes>]" if options.get("shapes", False) else ""
        entries.append(("torch.nn.modules.module", "Module._call_impl", f"every module call, named '{naming}{shapes}'"))
        if options.get("backward_modules", False):
            entries.append(
                (
                    "torch.nn.modules.module",
                    "Module._call_impl",
                    f"each module call's backward pass, '{naming} [backward]'",
                )
            )
        if options.get("memory", False):
            entries.append(
                (
                    "torch.nn.modules.module",
                    "Module._call_impl",
                    "CUDA allocated bytes at each module call's start and end, and its peak (marks)",
                )
            )
        for cls in _subclasses(torch.nn.Module):
            if "forward" in vars(cls):
                kind = "loss forward" if is_loss_class(cls) else "forward"
                entries.append((cls.__module__, f"{cls.__qualname__}.forward", kind))
    if options.get("optimizer", True):
        for cls in _subclasses(torch.optim.Optimizer):
            for attr in ("step", "zero_grad"):
                if attr in vars(cls):
                    entries.append((cls.__module__, f"{cls.__qualname__}.{attr}", f"'<optimizer class>.{attr}'"))
    if options.get("backward", True):
        entries.append(("torch.autograd", "backward", "'backward' (Tensor.backward calls it)"))
        entries.append(("torch.autograd", "grad", "'autograd.grad'"))
    if options.get("dataloader", True):
        entries.append(
            (
                "torch.utils.data.dataloader",
                "_BaseDataLoaderIter.__next__",
                "'DataLoader.__next__ (<dataset class>)' per batch",
            )
        )
    return entries


def _is_compiling_function(torch: types.ModuleType) -> Callable[[], bool]:
    # torch.compiler.is_compiling (2.3+) is what dynamo constant-folds without a guard;
    # torch._dynamo.is_compiling is the older spelling. Reading a flag ourselves would make
    # dynamo guard on its value and recompile.
    compiler = getattr(torch, "compiler", None)
    found = getattr(compiler, "is_compiling", None)
    if found is None:
        dynamo = sys.modules.get("torch._dynamo")
        found = getattr(dynamo, "is_compiling", None)
    if found is None:
        return _never
    return found  # type: ignore[no-any-return]


def _never() -> bool:
    return False


def _by_class(
    context: PluginContext, style: RangeStyle, template: str, key: Callable[[tuple[Any, ...]], Any]
) -> EmitterChooser:
    """An emitter chooser naming the range by the class of `key(args)`, cached per class."""
    cache: dict[Any, Emitter] = {}
    fallback = context.emitter(template.format("?"), style)

    def emitter_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Emitter:
        try:
            cls = type(key(args))
        except Exception:
            return fallback
        found = cache.get(cls)
        if found is None:
            found = cache[cls] = context.emitter(template.format(cls.__name__), style)
        return found

    return emitter_for


def _subclasses(cls: type) -> list[type]:
    """`cls` and its subclasses, each once (a class reached through several bases too)."""
    found: dict[type, None] = {}
    stack = [cls]
    while stack:
        current = stack.pop()
        if current not in found:
            found[current] = None
            stack.extend(current.__subclasses__())
    return list(found)


def _patch_optimizers(
    torch: types.ModuleType,
    context: PluginContext,
    domain: str | None,
    is_compiling: Callable[[], bool],
) -> None:
    Optimizer = torch.optim.Optimizer
    style = context.style(domain=domain, category="optimizer", module="torch.optim")
    choosers = (
        ("step", _by_class(context, style, "{}.step", _first_arg)),
        ("zero_grad", _by_class(context, style, "{}.zero_grad", _first_arg)),
    )
    done: weakref.WeakSet[type] = weakref.WeakSet()  # asked once per class, not per instance

    def wrap_class(cls: type) -> None:
        # `step` is replaced by torch itself on a class's first instantiation
        # (Optimizer._patch_step_function wraps it in profile_hook_step): wrap what is there
        # after that, so the range covers torch's step hooks too.
        if cls in done:
            return
        done.add(cls)
        for attr, emitter_for in choosers:
            if attr in vars(cls):  # an inherited one is wrapped where it is defined
                context.wrap_method(cls, attr, emitter_for, skip_if=is_compiling)

    def make(patch: Callable[[Any], None]) -> Callable[[Any], None]:
        def _patch_step_function(self: Any) -> None:
            patch(self)
            for cls in type(self).__mro__:
                if cls is object:
                    break
                if "step" in vars(cls) or "zero_grad" in vars(cls):
                    wrap_class(cls)

        return _patch_step_function

    if context.replace(Optimizer, "_patch_step_function", make):
        # Classes already instantiated before the plugin was activated.
        for cls in _subclasses(Optimizer):
            step = vars(cls).get("step")
            if getattr(step, "hooked", False) or cls is Optimizer:
                wrap_class(cls)
    elif "_patch_step_function" not in vars(Optimizer):
        # Unknown torch layout: wrap the classes that exist now, and the base zero_grad.
        for cls in _subclasses(Optimizer):
            wrap_class(cls)
        context.note("Optimizer._patch_step_function not found: optimizer classes defined later get no ranges")
    context.note("optimizers: step and zero_grad ranges named by optimizer class")


def _constant(emitter: Emitter) -> EmitterChooser:
    def emitter_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Emitter:
        return emitter

    return emitter_for


def _first_arg(args: tuple[Any, ...]) -> Any:
    return args[0]


def _patch_backward(
    torch: types.ModuleType,
    context: PluginContext,
    domain: str | None,
    is_compiling: Callable[[], bool],
) -> None:
    autograd = torch.autograd
    style = context.style(domain=domain, category="backward", module="torch.autograd")
    for attr, message in (("backward", "backward"), ("grad", "autograd.grad")):
        # Tensor.backward calls torch.autograd.backward through the module attribute.
        emitter_for = _constant(context.emitter(message, style))
        context.wrap_method(autograd, attr, emitter_for, skip_if=is_compiling)
    context.note("autograd: backward and autograd.grad ranges")


def _patch_dataloader(context: PluginContext, domain: str | None, is_compiling: Callable[[], bool]) -> None:
    # Imported by `import torch` already (torch/__init__ imports torch.utils.data).
    loader = sys.modules.get("torch.utils.data.dataloader")
    iterator = getattr(loader, "_BaseDataLoaderIter", None)
    if not isinstance(iterator, type):
        context.note("DataLoader iterator class not found: DataLoader ranges are off")
        return
    style = context.style(domain=domain, category="data", module="torch.utils.data")
    emitter_for = _by_class(context, style, "DataLoader.__next__ ({})", _dataset_of)
    if context.wrap_method(iterator, "__next__", emitter_for, skip_if=is_compiling):
        context.note("DataLoader: a range per batch fetched, named by dataset class")


def _dataset_of(args: tuple[Any, ...]) -> Any:
    return args[0]._dataset
