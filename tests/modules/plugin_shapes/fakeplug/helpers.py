"""A plugin for fakefw that uses every wrapping helper of the context."""

TRIGGER = "fakefw"


def activate(framework, context):
    style = context.style(domain="helpers")

    def named(message):
        emitter = context.emitter(message, style)
        return lambda args, kwargs: emitter

    def by_layer(args, kwargs):
        return context.emitter(f"{args[0].name}.forward", style)

    def unless_anonymous(args, kwargs):  # a chooser may refuse: no range for that call
        return None if args[0] == "anon" else context.emitter("Layer.make", style)

    context.wrap_method(framework.Layer, "forward", by_layer, skip_if=framework.is_tracing)
    context.wrap_method(framework.Layer, "make", unless_anonymous)
    context.wrap_method(framework.Layer, "kind", named("Layer.kind"))
    context.wrap_function(framework, "op", "op", style)

    def make(original):
        def compile(fn):
            return context.wrap_callable(original(fn), named(f"compiled({fn.__name__})"))

        return compile

    context.replace(framework, "compile", make)
    context.note(f"second replace of compile: {context.replace(framework, 'compile', make)}")
