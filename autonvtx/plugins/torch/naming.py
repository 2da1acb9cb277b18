"""Names of module calls: each module's path in the root model it is called under, and its class."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autonvtx.config import RangeStyle
    from autonvtx.plugins import PluginContext
    from autonvtx.ranges import Emitter

# Wrappers (a module holding the real model as one child) whose own path prefix says nothing
# about the model: names inside them are given relative to that child.
WRAPPER_CHILD = {
    "OptimizedModule": "_orig_mod",  # torch.compile(model)
    "DistributedDataParallel": "module",
    "DataParallel": "module",
}


class Table:
    """The emitters of one root model's modules, keyed by module id. Entries go away with
    their module (weakref callbacks run before an id can be reused), and no module is kept
    alive by the table."""

    __slots__ = ("root", "emitters", "refs", "variants", "root_calls", "walked_at")

    def __init__(self, root: Any) -> None:
        try:
            self.root: Callable[[], Any] = weakref.ref(root)
        except TypeError:
            self.root = lambda: None
        self.emitters: dict[int, Emitter] = {}
        self.refs: dict[int, weakref.ref[Any]] = {}
        # Per module, the emitters of its other ranges (backward, shapes), made when first needed.
        self.variants: dict[int, dict[Any, Emitter]] = {}
        self.root_calls = 0  # calls of the root so far
        self.walked_at = -1  # root_calls when the tree was last walked

    def add(self, module: Any, emitter: Emitter) -> None:
        key = id(module)
        if key in self.emitters:
            return
        emitters = self.emitters
        refs = self.refs
        variants = self.variants

        def forget(_: object, key: int = key) -> None:
            emitters.pop(key, None)
            refs.pop(key, None)
            variants.pop(key, None)

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
        self._tables: weakref.WeakKeyDictionary[Any, Table] = weakref.WeakKeyDictionary()
        self._styles: dict[type, RangeStyle] = {}

    def enter(self, module: Any, tables: list[Table]) -> tuple[Table, Emitter]:
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

    def _rewalk(self, table: Table, module: Any) -> Emitter | None:
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

    def _walk(self, root: Any) -> Table:
        table = Table(root)
        table.root_calls = 1
        self._fill(table, root)
        try:
            self._tables[root] = table
        except TypeError:  # unhashable: walked again on each call, named all the same
            pass
        return table

    def _fill(self, table: Table, root: Any) -> None:
        table.walked_at = table.root_calls
        prefix = WRAPPER_CHILD.get(type(root).__name__)
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

    def variant(
        self,
        table: Table,
        module: Any,
        emitter: Emitter,
        key: Any,
        suffix: Callable[[Any], str],
        category: str | None,
    ) -> Emitter:
        """The emitter of another range of `module`'s call, named as its own range (`emitter`)
        followed by `suffix(key)` (" [backward]", " [32x8 float32]"), in `category` (None: the
        module's); made once per (module, key), so a steady loop costs a dict look-up."""
        ident = id(module)
        found = table.variants.get(ident)
        if found is None:
            if ident not in table.refs:  # a module the table cannot follow: not cached
                return self._context.emitter(emitter.message + suffix(key), self._style(module, category))
            found = table.variants[ident] = {}
        made = found.get(key)
        if made is None:
            made = found[key] = self._context.emitter(emitter.message + suffix(key), self._style(module, category))
        return made

    def _style(self, module: Any, category: str | None) -> RangeStyle:
        cls = type(module)
        style = self._styles.get(cls)
        if style is None:
            # Colored by class: every Linear shares one color, stable from run to run.
            style = self._context.style(
                domain=self._domain,
                category="loss" if is_loss(module) else "module",
                module=f"{cls.__module__}.{cls.__qualname__}",
            )
            self._styles[cls] = style
        if category is not None and category != style.category:
            style = style.replace(category=category)
        return style

    def _emitter(self, path: str, module: Any) -> Emitter:
        cls = type(module)
        name = class_name(module)
        if path and self._layer_paths:
            message = f"{path} ({name})"
        elif not path and cls.__name__ in WRAPPER_CHILD:
            # torch.compile(model) is "OptimizedModule(Model)": several compiled models differ.
            inner = getattr(module, "_modules", {}).get(WRAPPER_CHILD[cls.__name__])
            message = f"{name}({class_name(inner)})" if inner is not None else name
        else:
            message = name
        return self._context.emitter(message, self._style(module, None))


def class_name(module: Any) -> str:
    # A ScriptModule's class is RecursiveScriptModule; original_name is the scripted class's.
    original = getattr(module, "original_name", None)
    if isinstance(original, str) and original:
        return original
    try:
        return str(module._get_name())
    except Exception:
        return type(module).__name__


def is_loss(module: Any) -> bool:
    return is_loss_class(type(module))


def is_loss_class(cls: type) -> bool:
    loss = sys.modules.get("torch.nn.modules.loss")
    base = getattr(loss, "_Loss", None)
    return isinstance(base, type) and issubclass(cls, base)
