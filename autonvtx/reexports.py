"""A package's own re-exports of the functions the wrap engine wrapped after the package was
imported (`import mypkg`, then `install(targets=["mypkg.*"])`, as notebooks do): the names
`mypkg/__init__.py` bound with `from mypkg.work import crunch` still hold the bare function, so
calls through `mypkg.crunch` would get no range. Rebound here to the wrappers (and put back by
`uninstall()` with the rest)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable

from autonvtx.engines import Engine
from autonvtx.moduledicts import module_dict


def rebind_reexports(walked: Iterable[str], engine: Engine | None) -> int:
    """Point the names the parent packages of the `walked` modules bound to a function `engine`
    wrapped at its wrapper; how many. A package that is a target itself was walked, and rebound
    its own names then."""
    if engine is None or not engine.changes_namespaces:
        return 0
    walked = set(walked)
    parents = set()
    for name in walked:
        while "." in name:
            name = name.rpartition(".")[0]
            parents.add(name)
    rebound = 0
    for parent in sorted(parents - walked):
        package = sys.modules.get(parent)
        if not isinstance(package, types.ModuleType):
            continue
        namespace = module_dict(package)
        for attr, value in list(namespace.items()):
            if type(value) is types.FunctionType and (wrapper := engine.existing(value)) is not None:
                engine.bind(namespace, attr, wrapper)
                rebound += 1
    return rebound
