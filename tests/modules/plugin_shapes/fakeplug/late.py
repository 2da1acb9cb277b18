"""A plugin whose trigger the program imports before the hook is installed."""
TRIGGER = "json"


def activate(framework, context):
    context.wrap_function(framework, "dumps", "json.dumps", context.style())
