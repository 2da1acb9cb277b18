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
  `torch.autograd.grad`: ``autograd.grad``. Backward work per layer is not split up.
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
kind of range off), `domain` (default: the global domain).
"""

from __future__ import annotations

import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autonvtx.config import RangeStyle
    from autonvtx.engines.wrap import EmitterChooser
    from autonvtx.plugins import PluginContext
    from autonvtx.ranges import Emitter

TRIGGER = "torch"

_OPTIONS: dict[str, type] = {
    "layer_paths": bool,
    "modules": bool,
    "optimizer": bool,
    "backward": bool,
    "dataloader": bool,
    "domain": str,
}

# Wrappers (a module holding the real model as one child) whose own path prefix says nothing
# about the model: names inside them are given relative to that child.
_WRAPPER_CHILD = {
    "OptimizedModule": "_orig_mod",  # torch.compile(model)
    "DistributedDataParallel": "module",
    "DataParallel": "module",
}


def activate(framework: types.ModuleType, context: PluginContext) -> None:
    torch = framework
    options = context.read_options(_OPTIONS)
    is_compiling = _is_compiling_function(torch)
    domain = options.get("domain")
    if options.get("modules", True):
        namer = ModuleNamer(context, domain, bool(options.get("layer_paths", True)))
        _patch_module_call(torch, namer, is_compiling, context)
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
    options = context.read_options(_OPTIONS)
    entries: list[tuple[str, str, str]] = []
    if options.get("modules", True):
        naming = "path (Class)" if options.get("layer_paths", True) else "Class"
        entries.append(("torch.nn.modules.module", "Module._call_impl", f"every module call, named '{naming}'"))
        for cls in _subclasses(torch.nn.Module):
            if "forward" in vars(cls):
                kind = "loss forward" if _is_loss_class(cls) else "forward"
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


class _Table:
    """The emitters of one root model's modules, keyed by module id. Entries go away with
    their module (weakref callbacks run before an id can be reused), and no module is kept
    alive by the table."""

    __slots__ = ("root", "emitters", "refs", "root_calls", "walked_at")

    def __init__(self, root: Any) -> None:
        try:
            self.root: Callable[[], Any] = weakref.ref(root)
        except TypeError:
            self.root = lambda: None
        self.emitters: dict[int, Emitter] = {}
        self.refs: dict[int, weakref.ref[Any]] = {}
        self.root_calls = 0  # calls of the root so far
        self.walked_at = -1  # root_calls when the tree was last walked

    def add(self, module: Any, emitter: Emitter) -> None:
        key = id(module)
        if key in self.emitters:
            return
        emitters = self.emitters
        refs = self.refs

        def forget(_: object, key: int = key) -> None:
            emitters.pop(key, None)
            refs.pop(key, None)

        try:
            self.refs[key] = weakref.ref(module, forget)
        except TypeError:  # not weakly referenceable: name it, but do not remember it
            return
        self.emitters[key] = emitter


class ModuleNamer:
    """Names modules by their path in the root model they are called under; each name is
    computed once per (root, module), when the root is first called or when a module of its
    tree is first seen after the tree changed."""

    def __init__(self, context: PluginContext, domain: str | None, layer_paths: bool) -> None:
        self._context = context
        self._domain = domain
        self._layer_paths = layer_paths
        self._tables: weakref.WeakKeyDictionary[Any, _Table] = weakref.WeakKeyDictionary()
        self._styles: dict[type, RangeStyle] = {}

    def enter(self, module: Any, tables: list[_Table]) -> tuple[_Table, Emitter]:
        """The table and emitter for a call of `module` that its current root's table does
        not know: a new root, a module added to the current root's tree, or a foreign one."""
        if tables:
            current = tables[-1]
            found = self._rewalk(current, module)
            if found is not None:
                return current, found
        # A root of its own: the model, a loss function, or a module from another tree
        # (a teacher model called inside a student's forward) whose children are named
        # relative to it.
        try:
            table = self._tables.get(module)
        except TypeError:  # unhashable (a subclass defining __eq__ only)
            table = None
        if table is None:
            table = self._walk(module)
        else:
            table.root_calls += 1
        emitter = table.emitters.get(id(module))
        if emitter is None:
            emitter = self._emitter("", module)
        return table, emitter

    def _rewalk(self, table: _Table, module: Any) -> Emitter | None:
        # A miss under a known root: the tree may have grown since it was walked (a replaced
        # head, lazily added layers). Walk again at most once per call of the root, so a
        # forward that creates modules on the fly costs one walk per call, not one per module.
        if table.walked_at == table.root_calls:
            return None
        root = table.root()
        if root is None:
            return None
        self._fill(table, root)
        return table.emitters.get(id(module))

    def _walk(self, root: Any) -> _Table:
        table = _Table(root)
        table.root_calls = 1
        self._fill(table, root)
        try:
            self._tables[root] = table
        except TypeError:  # unhashable: walked again on each call, named all the same
            pass
        return table

    def _fill(self, table: _Table, root: Any) -> None:
        table.walked_at = table.root_calls
        prefix = _WRAPPER_CHILD.get(type(root).__name__)
        try:
            named = list(root.named_modules())
        except Exception:  # an overridden named_modules that fails: class names only
            named = [("", root)]
        for path, module in named:
            if id(module) in table.emitters:
                continue
            if prefix is not None and module is not root:
                if path == prefix:
                    path = ""
                elif path.startswith(prefix + "."):
                    path = path[len(prefix) + 1 :]
            table.add(module, self._emitter(path, module))

    def _emitter(self, path: str, module: Any) -> Emitter:
        cls = type(module)
        name = _class_name(module)
        if path and self._layer_paths:
            message = f"{path} ({name})"
        elif not path and cls.__name__ in _WRAPPER_CHILD:
            # torch.compile(model) is "OptimizedModule(Model)": several compiled models differ.
            inner = getattr(module, "_modules", {}).get(_WRAPPER_CHILD[cls.__name__])
            message = f"{name}({_class_name(inner)})" if inner is not None else name
        else:
            message = name
        style = self._styles.get(cls)
        if style is None:
            category = "loss" if _is_loss(module) else "module"
            # Colored by class: every Linear shares one color, stable from run to run.
            style = self._context.style(
                domain=self._domain,
                category=category,
                module=f"{cls.__module__}.{cls.__qualname__}",
            )
            self._styles[cls] = style
        return self._context.emitter(message, style)


def _class_name(module: Any) -> str:
    # A ScriptModule's class is RecursiveScriptModule; original_name is the scripted class's.
    original = getattr(module, "original_name", None)
    if isinstance(original, str) and original:
        return original
    try:
        return str(module._get_name())
    except Exception:
        return type(module).__name__


def _is_loss(module: Any) -> bool:
    return _is_loss_class(type(module))


def _is_loss_class(cls: type) -> bool:
    loss = sys.modules.get("torch.nn.modules.loss")
    base = getattr(loss, "_Loss", None)
    return isinstance(base, type) and issubclass(cls, base)


class _CallState(threading.local):
    """Per thread: the naming tables of the roots being called, innermost last."""

    def __init__(self) -> None:
        self.tables: list[_Table] = []


def _patch_module_call(
    torch: types.ModuleType,
    namer: ModuleNamer,
    is_compiling: Callable[[], bool],
    context: PluginContext,
) -> None:
    # Module._call_impl, not global forward hooks: any global hook sends every module call
    # down _call_impl's slow path (hook lists rebuilt per call, ~3x the cost, measured), and
    # a post-hook is skipped when forward raises unless registered with always_call (2.1+).
    # A replaced _call_impl keeps the fast path, and try/finally pops on exceptions. Built by
    # hand, not by wrap_method: the emitter comes from the naming table of the root model
    # being called, which this call may have to push first (and pop after).
    Module = torch.nn.Module
    # Before torch 2.1, __call__ was _call_impl itself (no _wrapped_call_impl in between).
    impl = vars(Module).get("_call_impl")
    call_is_impl = impl is not None and vars(Module).get("__call__") is impl
    state = _CallState()
    enter = namer.enter

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _call_impl(self: Any, *args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                # Dynamo folds this to True and inlines the original: nothing of ours is traced.
                return original(self, *args, **kwargs)
            tables = state.tables
            if tables:
                emitter = tables[-1].emitters.get(id(self))
                if emitter is not None:
                    emitter.push()
                    try:
                        return original(self, *args, **kwargs)
                    finally:
                        emitter.pop()
            try:
                table, emitter = enter(self, tables)
            except Exception:  # naming must never break the program's forward: no range then
                return original(self, *args, **kwargs)
            tables.append(table)
            emitter.push()
            try:
                return original(self, *args, **kwargs)
            finally:
                emitter.pop()
                tables.pop()

        return _call_impl

    if not context.replace(Module, "_call_impl", make):
        return  # the context noted why
    if call_is_impl:
        context.replace(Module, "__call__", lambda original: vars(Module)["_call_impl"])
    context.note("nn.Module calls: ranges named by model path")


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
