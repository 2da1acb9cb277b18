"""A selected function's label and its prepared range, as named tuples (ranges makes them)."""

from __future__ import annotations

import os
from collections import namedtuple

TYPE_CHECKING = False  # typing is not imported at start-up (issue 24)
if TYPE_CHECKING:
    from typing import Any, NamedTuple

    from autonvtx.resumptions import Thunk

    class _LabelFields(NamedTuple):
        module: str
        qualname: str
        file: str
        line: int

    class _EmitterFields(NamedTuple):
        message: str
        domain: str
        push: Thunk
        pop: Thunk
        native: Any = None
        span: Any = None
else:  # the same named tuples, built without typing's machinery
    _LabelFields = namedtuple("Label", "module qualname file line")
    _EmitterFields = namedtuple("Emitter", "message domain push pop native span", defaults=(None, None))


# Label and Emitter are made once per wrapped function, thousands of times when a package is
# targeted wholesale: named tuples build in a fraction of a frozen dataclass's time
# (benchmarks/wholesale.py).
class Label(_LabelFields):
    """What a range's message template can name about the function it covers: module,
    qualname, file, line."""

    __slots__ = ()  # no __dict__: as small as the tuple

    @property
    def name(self) -> str:
        return self.qualname.rpartition(".")[2]

    @property
    def class_(self) -> str:
        head, _, _ = self.qualname.rpartition(".")
        # "f.<locals>.g" has no class: only a dotted prefix made of class names is one.
        return "" if "<locals>" in head else head

    def format(self, template: str) -> str:
        if template == "{qualname}":  # the default: no formatting needed
            return self.qualname
        return template.format(
            module=self.module,
            qualname=self.qualname,
            name=self.name,
            file=self.file,
            line=self.line,
            **{"class": self.class_},
        )


def label_for(func: Any, module: str, qualname: str) -> Label:
    """The label of `func`, known in `module` as `qualname`; file and line come from its code."""
    code = getattr(func, "__code__", None)
    filename = getattr(code, "co_filename", "") or ""
    return Label(module, qualname, os.path.basename(filename), getattr(code, "co_firstlineno", 0) or 0)


class Emitter(_EmitterFields):
    """A range ready to emit (message, domain, push, pop, native, span): `push()` and `pop()`
    take no arguments and allocate nothing. `native` is the native client's prepared range when
    it serves this emitter (None by default); `span`, on the pure-Python path, the (start, end)
    of a coroutine call's one start/end range (`end(start())`), None where coroutines get a
    range per resumption (or the native range decides)."""

    __slots__ = ()
