"""A plugin without activate()."""

TRIGGER = "fakefw"
