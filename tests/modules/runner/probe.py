"""Probe docstring: prints what a program can see of how it was started."""

import os
import sys


def describe_loader(loader):
    if isinstance(loader, type):
        return loader.__name__
    return (type(loader).__name__, getattr(loader, "name", None), getattr(loader, "path", None))


spec = globals()["__spec__"]
print("globals", sorted(globals()))
print("name", __name__)
print("file", globals().get("__file__", "<absent>"))
print("cached", globals().get("__cached__", "<absent>"))
print("package", repr(__package__))
print("loader", describe_loader(__loader__))
if spec is None:
    print("spec", None)
else:
    print("spec", spec.name, spec.origin, spec.cached, spec.parent, spec.submodule_search_locations)
    print("spec loader", describe_loader(spec.loader))
print("builtins", type(__builtins__).__name__)
print("doc", __doc__)
print("argv", sys.argv)
print("path", sys.path)
print("main", sys.modules["__main__"].__dict__ is globals())
print("cwd", os.getcwd())

if __name__ == "__main__":
    print("main block ran")
