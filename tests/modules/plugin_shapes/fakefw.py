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
