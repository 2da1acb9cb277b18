"""Every kind of callable autonvtx wraps or skips, each small enough to reason about."""

import abc
import asyncio
import dataclasses
import functools
import threading


def plain(x):
    """Add one."""
    return x + 1


def outer(x):
    return plain(x) * 2


def fails():
    raise ValueError("boom")


def counter(n):
    for i in range(n):
        yield plain(i)


async def pause(name, steps, log):
    for _ in range(steps):
        log.append(name)
        await asyncio.sleep(0)
    return name


async def parent(log):
    return await pause("child", 2, log)


async def ticks(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield plain(i)


def marked():
    return "marked"


marked.marker = 1


def in_threads(count):
    threads = [threading.Thread(target=outer, args=(i,), name=f"worker-{i}") for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class Trainer:
    """Trains."""

    def __init__(self, scale=2):
        self.scale = scale

    def step(self, x):
        return x * self.scale

    @staticmethod
    def static(x):
        return x

    @classmethod
    def build(cls):
        return cls()

    @property
    def doubled(self):
        return self.scale * 2

    def __repr__(self):
        return f"Trainer({self.scale})"

    def __call__(self, x):
        return self.step(x)

    async def astep(self, x):
        await asyncio.sleep(0)
        return x

    def epochs(self, n):
        yield from range(n)

    class Inner:
        def run(self):
            return "inner"


class Slotted:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def get(self):
        return self.v


class Base(abc.ABC):
    @abc.abstractmethod
    def area(self):
        """The area."""


class Square(Base):
    def __init__(self, side):
        self.side = side

    def area(self):
        return self.side**2


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0

    def norm1(self):
        return abs(self.x) + abs(self.y)


class Meta(type):
    def __call__(cls, *args, **kwargs):
        return super().__call__(*args, **kwargs)


class WithMeta(metaclass=Meta):
    def hello(self):
        return "hello"


@functools.singledispatch
def describe(obj):
    return "object"


@describe.register
def _describe_int(obj: int):
    return "int"


def _private():
    return "private"


class Item:
    """A fresh object per yield, to check that nothing else keeps it alive."""


def fresh_items(n):
    for _ in range(n):
        received = yield Item()
        del received


async def fresh_async_items(n):
    for _ in range(n):
        received = yield Item()
        del received
