"""A module's own namespace, read without running any of the module's code."""

from __future__ import annotations

import types

# The `__dict__` slot of the module type itself: no module `__getattr__`, no module subclass's
# property runs (importer, matching, walk and the wrap engine read target modules through it).
module_dict = vars(types.ModuleType)["__dict__"].__get__
