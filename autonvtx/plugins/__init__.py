"""Framework plugins: the interface a plugin implements and the machinery that activates it.

Rules wrap functions by name. Some frameworks need more than that: a range named by the
model path of each `nn.Module`, one per CUDA kernel launch named by kernel, ranges that
measure execution rather than graph building. A plugin does that work for one framework.

Enabling a plugin
-----------------
A preset or config file lists plugins in its `[autonvtx]` table, and may give each its own
options table of scalars::

    [autonvtx]
    plugins = ["torch"]                 # built-in: the module autonvtx.plugins.torch
    # plugins = ["mypkg.nvtx_plugin"]   # third-party: any importable dotted module name

    [autonvtx.plugin.torch]
    layer_paths = true                  # read by the plugin as context.options["layer_paths"]

Names are validated like every key: an unknown short name is an error with a "did you
mean", and so is an option its module's `OPTIONS` (option -> type) does not declare, or a
value of another type. Plugin modules are imported before the target runs (an import error or a missing
`TRIGGER`/`activate` stops autonvtx with exit status 2), so a plugin module must be light:
import the framework in `activate`, never at module level.

Writing a plugin
----------------
A plugin module defines::

    TRIGGER: str   # the framework module, e.g. "torch"
    OPTIONS: dict[str, type]   # optional: its options table's keys and types, checked at start

    def activate(framework: types.ModuleType, context: autonvtx.plugins.PluginContext) -> None:
        ...

`activate` is called once, right after the program's import of `TRIGGER` has finished
executing (from the import hook's post-import callback), or at once when `TRIGGER` was
already imported when the hook was installed. It must not import the framework's heavy
optional parts the program did not import itself. An exception from `activate` never
reaches the program: it becomes one warning line on stderr and the plugin stays inactive.

`autonvtx.ranges` is the only module that talks to NVTX: a plugin gets its ranges from the
context, never from `nvtx` directly. Without an NVTX tool attached (no nsys, no
--trace/--summary) no range would be seen, and plugins are not activated at all.

A plugin may also define what `autonvtx list` shows for it, without changing anything::

    def plan(framework: types.ModuleType, context: PluginContext) -> Iterable[tuple[str, str, str]]:
        ...   # (module, qualname, kind) of each function activate() would put a range on

`kind` is free text ("forward", "method", "per call, named by model path" ...). `plan` is
called by `autonvtx list`/`run --dry-run` when the framework is imported, never in a run.

`PluginContext`
    `config`        the resolved `Config`.
    `options`       the plugin's `[autonvtx.plugin.<name>]` table, read-only.
    `style(domain=None, color=None, category=None, module=TRIGGER)`
                    a `RangeStyle`; what is not given comes from the global settings
                    (`color="auto"` or unset: the stable color of `module`).
    `emitter(message, style)`
                    a `ranges.Emitter` (`push()`/`pop()` take no arguments) for that message,
                    cached per (message, style): call it for every dynamically named range,
                    a cache hit is one dict lookup.
    `note(line)`    a line for `--verbose`, printed at exit as `autonvtx: <plugin>: <line>`.
    `wrap_function(owner, attr, message, style=None)`
                    put a range around `owner.attr` (a class, a module or another object),
                    using the same wrapper as rules do: `__wrapped__`, signature, name,
                    static/class method kind and pickling are preserved. `message` is the
                    range's name, or a callable `(args, kwargs) -> str` called on every call
                    with the arguments as the function receives them (for a method, `args[0]`
                    is `self`); its result goes through `emitter`. Returns True when the
                    attribute was wrapped.
    `wrap_method(owner, attr, emitter_for, *, skip_if=None)`
                    put a range chosen per call around `owner.attr` (a method or a module's
                    function): `emitter_for(args, kwargs)` returns the call's `Emitter` (from
                    `emitter`, kept by the plugin per class or per instance), or None for no
                    range (a call that only traces or builds a graph); `skip_if()`, checked
                    first, calls the original directly when true (`torch.compiler.is_compiling`:
                    a check a compiler folds to a constant). The replacement is a plain Python
                    function named after the original, with its attributes and `__wrapped__`,
                    so compilers that trace Python (torch.compile, autograph) inline it as they
                    would the original. Returns True when the attribute was wrapped.
    `replace(owner, attr, make)`
                    for the rare range that needs its own code (torch's module-call naming
                    tables): put `make(original)`, a Python function, in place of
                    `owner.attr`, named after the original as `wrap_method` does. Returns True
                    when the attribute was replaced.
    `wrap_callable(value, emitter_for)`
                    `value`, a callable object the plugin hands to the program (what `jax.jit`
                    returns), in the rules' wrapper, with a range chosen per call as in
                    `wrap_method`: its attributes and methods stay reachable through it.
    `warn(line)`    one warning on stderr per plugin (later ones go to the --verbose notes).
    `read_options(schema)`
                    the plugin's options that `schema` (option -> type) knows, type-checked;
                    others are warned about and ignored.

All four wrapping helpers share the rules' bookkeeping: they never wrap or replace twice (an
attribute that already carries one of autonvtx's wrappers or replacements, marked with
`autonvtx.engines.RANGE_MARK`, is left alone, with a note), never run a metaclass's or a
module's `__setattr__`, keep static and class methods of their kind, and record each write,
so that `uninstall()` of a restorable `Instrumentation` (the API's) puts every original back.
A failure is a note for --verbose, never an exception. When `emitter_for` or a `message`
callable raises, the call runs all the same (without its range, or under the attribute's name
for `wrap_function`) and a warning says so once.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import threading
import types
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from autonvtx.config import COMMAND_LINE_ORIGIN, Config, RangeStyle, Rule, Scalar
from autonvtx.errors import ConfigError, did_you_mean

if TYPE_CHECKING:
    from autonvtx import ranges
    from autonvtx.engines.wrap import EmitterChooser

# The range message of a wrapped attribute: a fixed name, or one computed from the call.
Message = str | Callable[[tuple[Any, ...], dict[str, Any]], str]

# Every literal message goes through the Label machinery as its qualname: the template
# "{qualname}" renders it verbatim, braces and all.
_VERBATIM = "{qualname}"


def module_name(name: str) -> str:
    """The module a configured plugin name refers to: short names are built-ins."""
    return name if "." in name else f"{__name__}.{name}"


@dataclasses.dataclass(frozen=True)
class Plugin:
    """A configured plugin, imported and checked: its name, trigger and activate()."""

    name: str
    trigger: str
    activate: Callable[[types.ModuleType, PluginContext], None]
    plan: Callable[[types.ModuleType, PluginContext], Iterable[tuple[str, str, str]]] | None = None


def load_plugins(config: Config) -> list[Plugin]:
    """Import every plugin the config names; ConfigError if one is missing or malformed.
    Runs before the target, so bad input stops everything before the program starts."""
    plugins = []
    for name in config.plugins:
        target = module_name(name)
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise ConfigError(f"plugin {name!r}: cannot import {target!r} ({exc})") from None
        except SystemExit as exc:  # the plugin must not end the run: say which one tried
            raise ConfigError(
                f"plugin {name!r}: importing {target!r} called sys.exit({exc.code!r}); the program was not started"
            ) from None
        except Exception as exc:
            raise ConfigError(
                f"plugin {name!r}: importing {target!r} failed ({type(exc).__name__}: {exc}); the program was not started"
            ) from None
        trigger = getattr(module, "TRIGGER", None)
        activate = getattr(module, "activate", None)
        if not isinstance(trigger, str) or not trigger:
            raise ConfigError(
                f"plugin {name!r}: {target}.TRIGGER: expected the framework's module name (a string), got {trigger!r}"
            )
        if not callable(activate):
            raise ConfigError(f"plugin {name!r}: {target}.activate: expected a function")
        check_options(config, name, getattr(module, "OPTIONS", None))
        plan = getattr(module, "plan", None)
        plugins.append(Plugin(name, trigger, activate, plan if callable(plan) else None))
    return plugins


def check_options(config: Config, name: str, schema: Mapping[str, type] | None) -> None:
    """The plugin's `[autonvtx.plugin.<name>]` table against the options its module declares
    (`OPTIONS`, option -> type): an unknown key or a value of another type is a ConfigError, as
    everywhere else in a config. A plugin that declares none reads its table itself."""
    if not isinstance(schema, Mapping):
        return
    files = [source for source in config.sources if source != COMMAND_LINE_ORIGIN]
    where = f"{' or '.join(dict.fromkeys(files))}: " if files else ""
    for key, value in config.options_for(name).items():
        expected = schema.get(key)
        if expected is None:
            raise ConfigError(
                f"{where}autonvtx.plugin.{name}.{key}: unknown option; expected one of"
                f" {', '.join(sorted(schema))}" + did_you_mean(key, sorted(schema))
            )
        if type(value) is not expected:
            raise ConfigError(f"{where}autonvtx.plugin.{name}.{key}: expected {_type_word(expected)}, got {value!r}")


def _type_word(kind: type) -> str:
    return {bool: "true or false", str: "a string", int: "an integer", float: "a number"}.get(kind, kind.__name__)


class PluginContext:
    """What a plugin gets from autonvtx: the config, its options, styles, emitters, notes
    and the wrapping helpers. One per plugin; attributes are read-only."""

    __slots__ = (
        "_name",
        "_config",
        "_options",
        "_trigger",
        "_emitters",
        "_notes",
        "_noted",
        "_warned",
        "_written",
    )

    def __init__(
        self,
        name: str,
        trigger: str,
        config: Config,
        notes: list[str],
        written: list[tuple[Any, str, Any, Any]] | None = None,
    ) -> None:
        self._name = name
        self._trigger = trigger
        self._config = config
        self._options: Mapping[str, Scalar] = types.MappingProxyType(config.options_for(name))
        self._emitters: dict[tuple[str, RangeStyle], ranges.Emitter] = {}
        self._notes = notes
        self._noted: set[str] = set()  # each line once: a refusal repeats for each instance
        self._warned = False
        # Every attribute this plugin replaced, (holder, attr, original, replacement), so that
        # an uninstall can put the originals back.
        self._written = written

    @property
    def name(self) -> str:
        return self._name

    @property
    def config(self) -> Config:
        return self._config

    @property
    def options(self) -> Mapping[str, Scalar]:
        return self._options

    def style(
        self,
        domain: str | None = None,
        color: str | None = None,
        category: str | None = None,
        module: str | None = None,
    ) -> RangeStyle:
        """A range style resolved against the global settings (as a rule's would be)."""
        rule = Rule(modules=(module or self._trigger,), color=color, domain=domain, category=category)
        style = self._config.style(rule, module or self._trigger)
        return style.replace(message=_VERBATIM)

    def emitter(self, message: str, style: RangeStyle) -> ranges.Emitter:
        """The emitter for a range named `message` with `style`, built once and cached."""
        key = (message, style)
        found = self._emitters.get(key)
        if found is not None:
            return found
        # Imported here: nvtx (and numpy through it) loads only once a range is needed.
        from autonvtx import ranges

        if style.message != _VERBATIM:
            style = style.replace(message=_VERBATIM)
        made = ranges.emitter_for(style, ranges.Label(self._trigger, message, "", 0))
        return self._emitters.setdefault(key, made)

    def note(self, line: str) -> None:
        """A line for --verbose (a line already noted is not repeated)."""
        if line not in self._noted:
            self._noted.add(line)
            self._notes.append(f"{self._name}: {line}")

    def warn(self, line: str) -> None:
        """A warning on stderr, once per plugin: later ones go to the --verbose notes."""
        if not self._warned:
            self._warned = True
            print(f"autonvtx: warning: plugin {self._name!r}: {line}", file=sys.stderr)
        else:
            self.note(f"warning: {line}")

    def read_options(self, schema: Mapping[str, type]) -> dict[str, Any]:
        """The options from `[autonvtx.plugin.<name>]` that `schema` (option -> type) knows,
        of the right type; any other is warned about and left out, so its default applies."""
        options: dict[str, Any] = {}
        for key, value in self._options.items():
            expected = schema.get(key)
            if expected is None:
                self.warn(f"unknown option {key!r} ignored; expected one of {', '.join(schema)}")
            elif type(value) is not expected:
                self.warn(f"option {key!r}: expected {expected.__name__}, got {value!r}; default used")
            else:
                options[key] = value
        return options

    def wrap_function(self, owner: Any, attr: str, message: Message, style: RangeStyle | None = None) -> bool:
        """Put a range around `owner.attr`; False (with a note saying why) when it cannot."""
        # Imported here, as in every helper: wrapt and nvtx load only when a plugin wraps.
        from autonvtx import ranges
        from autonvtx.engines.wrap import choosing_wrapper, patch_attribute

        style = style or self.style()
        where = f"{_owner_name(owner)}.{attr}"

        def make(func: Any) -> ranges.Wrapper:
            if isinstance(message, str):
                return ranges.wrapper_for(func, self.emitter(message, style))
            return choosing_wrapper(self._named_by(message, style, where))

        return self._patched(where, lambda: patch_attribute(owner, attr, make, self._written))

    def wrap_method(
        self,
        owner: Any,
        attr: str,
        emitter_for: EmitterChooser,
        *,
        skip_if: Callable[[], bool] | None = None,
    ) -> bool:
        """Put a range chosen per call around `owner.attr`, as a plain Python function; False
        (with a note saying why) when it cannot."""
        from autonvtx.engines.wrap import ranged_function, replace_attribute

        where = f"{_owner_name(owner)}.{attr}"
        on_error = self._reporter(where)

        def make(func: Any) -> Callable[..., Any]:
            return ranged_function(func, emitter_for, skip_if=skip_if, on_error=on_error)

        return self._patched(where, lambda: replace_attribute(owner, attr, make, self._written))

    def replace(self, owner: Any, attr: str, make: Callable[[Any], Callable[..., Any]]) -> bool:
        """Put `make(original)`, a function built by the plugin, in place of `owner.attr`;
        False (with a note saying why) when it cannot."""
        from autonvtx.engines.wrap import replace_attribute

        where = f"{_owner_name(owner)}.{attr}"
        return self._patched(where, lambda: replace_attribute(owner, attr, make, self._written))

    def wrap_callable(self, value: Any, emitter_for: EmitterChooser) -> Any:
        """`value`, a callable object, with a range chosen per call; `value` itself (with a
        note) when it cannot be wrapped."""
        from autonvtx.engines.wrap import ranged_proxy

        try:
            return ranged_proxy(value, emitter_for, self._reporter(_owner_name(value)))
        except Exception as exc:  # never break what the framework hands the program
            self.note(f"{_owner_name(value)}: not wrapped ({type(exc).__name__}: {exc})")
            return value

    def _patched(self, where: str, patch: Callable[[], str | None]) -> bool:
        try:
            why_not = patch()
        except Exception as exc:  # a plugin's wrapping never breaks the program
            why_not = f"not wrapped ({type(exc).__name__}: {exc})"
        if why_not is not None:
            self.note(f"{where}: {why_not}")
            return False
        return True

    def _reporter(self, where: str) -> Callable[[Exception], None]:
        """Tells, once per wrapped attribute, that a range could not be chosen."""
        reported = False

        def report(exc: Exception) -> None:
            nonlocal reported
            if reported:
                return
            reported = True
            try:
                self.warn(f"{where}: range name failed ({type(exc).__name__}: {exc})")
            except Exception:  # stderr closed: the call goes on all the same
                pass

        return report

    def _named_by(self, message: Callable[..., str], style: RangeStyle, where: str) -> EmitterChooser:
        """The chooser of a range named by `message(args, kwargs)`; when that fails, named
        `where` (and the failure is told once)."""
        emitter = self.emitter
        report = self._reporter(where)

        def emitter_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> ranges.Emitter:
            try:
                return emitter(message(args, kwargs), style)
            except Exception as exc:  # a naming bug in a plugin must not break the program
                report(exc)
                return emitter(where, style)

        return emitter_for


def _owner_name(owner: Any) -> str:
    return str(getattr(owner, "__qualname__", None) or getattr(owner, "__name__", None) or owner)


class PluginActivator:
    """Activates each configured plugin once, when the program has imported its trigger.

    `install(hook)` registers one post-import callback per trigger on the import hook; the
    hook calls it right after the trigger module executed (or at once if it is imported
    already). Activation errors become a warning line; the program never sees them.
    """

    def __init__(self, config: Config, plugins: list[Plugin]) -> None:
        self.config = config
        self.plugins = plugins
        self.notes: list[str] = []
        self.activated: list[str] = []
        # What plugins replaced: each activated plugin's own list (a failed activation puts back
        # its own and nothing else), and `written` for contexts made outside activate().
        self.written: list[tuple[Any, str, Any, Any]] = []
        self._writes: list[list[tuple[Any, str, Any, Any]]] = []
        self._lock = threading.Lock()
        self._done: set[str] = set()

    def install(self, hook: Any) -> None:
        from autonvtx.environment import is_tool_configured

        if not is_tool_configured():
            # As for rules: with no NVTX tool no range is seen, so nothing is changed.
            for plugin in self.plugins:
                self.notes.append(f"{plugin.name}: not activated (no NVTX tool is attached)")
            return
        for plugin in self.plugins:
            hook.when_imported(plugin.trigger, self._callback(plugin))

    def _callback(self, plugin: Plugin) -> Callable[[types.ModuleType], None]:
        def on_import(framework: types.ModuleType) -> None:
            self.activate(plugin, framework)

        return on_import

    def activate(self, plugin: Plugin, framework: types.ModuleType) -> None:
        with self._lock:  # held only for the bookkeeping, never while the plugin runs
            if plugin.name in self._done:
                return
            self._done.add(plugin.name)
            own: list[tuple[Any, str, Any, Any]] = []
            self._writes.append(own)
        context = PluginContext(plugin.name, plugin.trigger, self.config, self.notes, own)
        try:
            plugin.activate(framework, context)
        except (Exception, SystemExit) as exc:  # SystemExit: a plugin never ends the program
            # Not left half-done: what it replaced before failing is put back.
            from autonvtx.engines.wrap import restore_writes

            restore_writes(own)
            own.clear()
            what = f"sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"
            print(
                f"autonvtx: warning: plugin {plugin.name!r}: activation failed ({what}); its ranges are off",
                file=sys.stderr,
            )
            return
        self.activated.append(plugin.name)
        self.notes.append(f"{plugin.name}: activated on import of {plugin.trigger}")

    def restore(self) -> int:
        """Put back what the plugins replaced through the context (see restore_writes)."""
        lists = [self.written, *self._writes]
        if not any(lists):
            return 0
        from autonvtx.engines.wrap import restore_writes

        restored = 0
        for written in reversed(lists):  # the newest plugin's first
            # Emptied in place: the contexts of activated plugins append to these very lists.
            taken = list(written)
            written.clear()
            restored += restore_writes(taken)
        return restored
