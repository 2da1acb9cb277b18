"""A third-party plugin for fakefw: named per layer, options from its config table."""

import os

TRIGGER = "fakefw"


def activate(framework, context):
    style = context.style(domain=context.options.get("domain", "fake"), color="red")
    prefix = context.options.get("prefix", "")
    context.wrap_function(framework.Layer, "forward", lambda args, kwargs: f"{prefix}{args[0].name}.forward", style)
    context.wrap_function(framework.Layer, "make", "Layer.make", style)
    context.wrap_function(framework.Layer, "kind", "Layer.kind", style)
    context.wrap_function(framework, "op", "op", style)
    context.wrap_function(framework, "gen", "gen", style)
    # Never twice: a second request for the same attribute is refused.
    again = context.wrap_function(framework, "op", "op again", style)
    context.note(f"second wrap of op: {again}")
    if os.environ.get("FAKEPLUG_FAIL"):
        raise RuntimeError("boom")


def plan(framework, context):
    yield "fakefw", "Layer.forward", "per call, named by layer"
    yield "fakefw", "op", "function"
