"""A stand-in framework for the plugin mechanism tests."""


class Layer:
    def __init__(self, name):
        self.name = name

    def forward(self, x):
        return x + 1

    @staticmethod
    def make(name):
        return Layer(name)

    @classmethod
    def kind(cls):
        return cls.__name__


def op(x):
    return x * 2


def gen(n):
    yield from range(n)


# What a compiling framework has: a switch for "building a graph" and compiled callables that
# carry an API of their own (as jax.jit's results do).
tracing = False


def is_tracing():
    return tracing


class Compiled:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)

    def lower(self):
        return f"lowered {self.fn.__name__}"


def compile(fn):
    return Compiled(fn)
