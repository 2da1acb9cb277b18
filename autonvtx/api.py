"""The library face: `autonvtx.install()` in a program or notebook, and the IPython extension
(`%load_ext autonvtx`, then `%autonvtx -t 'mypkg.*'`)."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Union

from autonvtx.config import Config
from autonvtx.control import Instrumentation
from autonvtx.errors import UsageError

if TYPE_CHECKING:
    from autonvtx.cli.options import RuleArgs
    from autonvtx.recorder.flight import Flight

ConfigSource = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]], Config, None]


class Installation:
    """What `install()` returns: `uninstall()` (also on leaving a `with` block) removes the
    import hook and puts back every function and method it replaced."""

    def __init__(self, instrumentation: Instrumentation, disarm: Callable[[], None] | None = None) -> None:
        self._instrumentation = instrumentation
        self._disarm = disarm  # install(budget=): the budget ends with the installation

    @property
    def active(self) -> bool:
        return self._instrumentation.installed

    @property
    def config(self) -> Config:
        return self._instrumentation.config

    def report(self, *, detailed: bool = False) -> list[str]:
        """What was instrumented, as `autonvtx run -v` (`-vv` with `detailed`) prints it."""
        return self._instrumentation.warnings() + self._instrumentation.report_lines(detailed=detailed)

    def instrument_main(self) -> None:
        """Walk `__main__` again: functions it defined since install() get their ranges too
        (rules must target `__main__`; the IPython extension does this after every cell)."""
        main = sys.modules.get("__main__")
        if isinstance(main, types.ModuleType) and self._instrumentation.main_hook is not None:
            self._instrumentation.instrument_module(main)

    def uninstall(self) -> None:
        self._instrumentation.uninstall()
        if self._disarm is not None:
            self._disarm()
            self._disarm = None

    def __enter__(self) -> Installation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    def __repr__(self) -> str:
        state = "active" if self.active else "uninstalled"
        return f"<autonvtx.Installation {state}, {len(self.config.rules)} rules>"


def install(
    config: ConfigSource = None,
    *,
    presets: Sequence[str] = (),
    targets: Sequence[str] = (),
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    engine: str | None = None,
    budget: float | str | None = None,
    flight: str | None = None,
    flight_factor: float | None = None,
    flight_keep: int | None = None,
    flight_max: int | None = None,
    flight_warmup: int | None = None,
) -> Installation:
    """Give the functions the rules select NVTX ranges, from now on, in this process.

    `config` is a rules file (TOML, YAML, pyproject.toml or Nsight Systems' JSON), a list of
    them, or a `Config`; with no config, preset or target, `./autonvtx.toml` or `[tool.autonvtx]`
    in `./pyproject.toml` is used, as `autonvtx run` does. Modules already imported are
    instrumented at once, later imports as they happen, `__main__` too when a rule targets it.
    `engine` is "code" (sys.monitoring, 3.12+: no function is replaced), "wrap" or "auto"
    (the default: the config's, else code where it can run). `budget` (a percentage, as `run
    --budget`): functions whose range costs more than that share of their own time, measured
    over their first calls, have their ranges turned off. `flight` (a range's name, as `profile
    --flight`, with `flight_factor`, `flight_keep`, `flight_max`, `flight_warmup`, whose defaults
    are the command's: 3.0, 10, 20, 5): each instance
    of that range lasting more than `flight_factor` times the median of those before it opens
    Nsight Systems' capture range (`capture@autonvtx`) over the next `flight_keep` instances,
    with a mark saying what fired. Bad rules raise `autonvtx.ConfigError` (an `AutonvtxError`)
    with the CLI's messages; bad settings `autonvtx.UsageError`.
    """
    percent = None
    if budget is not None:
        from autonvtx.budget import parse_percent

        percent = parse_percent(str(budget), "install: budget")
    watch = _flight(flight, flight_factor, flight_keep, flight_max, flight_warmup)
    resolved = _resolve(config, presets, targets, include, exclude, engine)
    if not (resolved.rules or resolved.plugins or resolved.regions):
        raise UsageError(
            "install: no rules found: looked for AUTONVTX_RULES, ./autonvtx.toml and [tool.autonvtx] in"
            " ./pyproject.toml; expected config=FILE, presets=[...] or targets=['MODULE_GLOB']"
        )
    disarm = None
    if percent is not None:
        from autonvtx.budget import arm

        disarm = arm(percent)  # before the walk makes any range
    if watch is not None:
        from autonvtx.flightwatch import arm as watch_flight

        end_watch = watch_flight(watch)  # before the walk: each range is looked at as it is made
        disarm = _both(disarm, end_watch)
    instrumentation = Instrumentation(resolved, restorable=True)
    instrumentation.print_start_notes()
    instrumentation.install()
    installation = Installation(instrumentation, disarm)
    installation.instrument_main()
    return installation


def _both(first: Callable[[], None] | None, second: Callable[[], None] | None) -> Callable[[], None] | None:
    """What ends both (either may be None)."""
    if first is None or second is None:
        return first or second

    def disarm() -> None:
        first()
        second()

    return disarm


def _flight(
    flight: str | None, factor: float | None, keep: int | None, most: int | None, warmup: int | None
) -> Flight | None:
    """install()'s flight settings as a checked Flight (UsageError naming the argument), or None;
    a setting not given keeps Flight's default."""
    from autonvtx.recorder.flight import Flight

    if flight is None:
        return None
    if not isinstance(flight, str):
        raise UsageError(f"install: flight: expected the name of a range, got {flight!r}")
    given = {"factor": (factor, float), "keep": (keep, int), "max_files": (most, int), "warmup": (warmup, int)}
    try:
        settings = {name: kind(value) for name, (value, kind) in given.items() if value is not None}
    except (TypeError, ValueError):
        raise UsageError(
            "install: flight_factor, flight_keep, flight_max, flight_warmup: expected numbers, got"
            f" {factor!r}, {keep!r}, {most!r}, {warmup!r}"
        ) from None
    watch = Flight(range=flight, **settings)
    try:
        watch.check()
    except UsageError as error:  # named as the argument, not the option
        text = str(error).replace("--flight-factor", "flight_factor").replace("--flight-keep", "flight_keep")
        text = text.replace("--flight-max", "flight_max").replace("--flight-warmup", "flight_warmup")
        raise UsageError("install: " + text.replace("--flight", "flight")) from None
    return watch


def _flight_arguments(watch: Flight | None) -> dict[str, Any]:
    """install()'s flight arguments for `watch`."""
    if watch is None:
        return {}
    return {
        "flight": watch.range,
        "flight_factor": watch.factor,
        "flight_keep": watch.keep,
        "flight_max": watch.max_files,
        "flight_warmup": watch.warmup,
    }


def _resolve(
    config: ConfigSource,
    presets: Sequence[str],
    targets: Sequence[str],
    include: Sequence[str],
    exclude: Sequence[str],
    engine: str | None,
) -> Config:
    from autonvtx.configfile import load_rules

    for name, value in (("presets", presets), ("targets", targets), ("include", include), ("exclude", exclude)):
        if isinstance(value, str):
            raise UsageError(f"install: {name}: expected a list of strings, got the string {value!r}")
    if isinstance(config, Config):
        if presets or targets or include or exclude:
            raise UsageError("install: config: a Config object cannot be combined with presets or targets")
        if engine is not None:
            return config.replace(settings=config.settings.replace(engine=engine))
        return config
    if config is None:
        paths: list[str] = []
    elif isinstance(config, (str, os.PathLike)):
        paths = [os.fspath(config)]
    else:
        paths = [os.fspath(path) for path in config]
    return load_rules(paths, presets=presets, targets=targets, includes=include, excludes=exclude, engine=engine)


def is_instrumented(func: Any) -> bool:
    """Whether calls of `func` (a function, method or bound method) get a range from autonvtx's
    rules now: a wrapper of the wrap engine, or code the code engine monitors."""
    from autonvtx.codes import code_of
    from autonvtx.engines import is_marked

    func = getattr(func, "__func__", func)  # a bound method runs its function
    if is_marked(func):  # a wrapper, or a plugin's replacement
        return True
    ranges = sys.modules.get("autonvtx.ranges")  # not loaded: nothing is monitored
    monitor = getattr(getattr(ranges, "CodeMonitor", None), "active", None)
    code = code_of(func)
    return monitor is not None and code is not None and bool(monitor.is_monitored(code))


# IPython: %load_ext autonvtx, then %autonvtx [rule options] | %autonvtx off | %autonvtx
_active: Installation | None = None

MAGIC_USAGE = (
    "usage: %autonvtx [--config FILE] [--preset NAME] [-t GLOB [--include GLOB] [--exclude GLOB]]"
    " [--engine auto|code|wrap] [--budget PCT] [--flight RANGE ...] [-v] | %autonvtx off | %autonvtx (show what is instrumented)"
)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext autonvtx`: registers the `%autonvtx` line magic, and walks `__main__` after
    each cell so that functions defined in cells are selectable (module `__main__`)."""
    from autonvtx import cells

    ipython.register_magic_function(_magic, magic_kind="line", magic_name="autonvtx")
    ipython.events.register("post_run_cell", _after_cell)
    cells.add_to(ipython, __name__, "_after_cell")  # and after each definition: a call in its cell


def unload_ipython_extension(ipython: Any) -> None:
    global _active
    if _active is not None:
        _active.uninstall()
        _active = None
    try:
        ipython.events.unregister("post_run_cell", _after_cell)
    except ValueError:
        pass
    from autonvtx import cells

    cells.remove_from(ipython)


def _after_cell(*_: object) -> None:
    """Walk `__main__` for what the cells defined; also called from inside a cell, right after
    a definition (autonvtx.cells): never raises."""
    if _active is not None and _active.active:
        try:
            _active.instrument_main()
        except Exception:  # the walk reports what it could not do; a cell must not fail for it
            pass


def _magic(line: str) -> None:
    global _active
    from autonvtx.errors import AutonvtxError

    try:
        words = _split(line)
        if words == ["off"]:
            _magic_off()
            return
        parsed = parse_magic_options(words)
    except UsageError as error:
        print(f"autonvtx: {error}\n{MAGIC_USAGE}", file=sys.stderr)
        return
    if parsed is None:
        return  # --help: click printed it
    rules, verbose, budget, flight = parsed
    if not (rules.configs or rules.presets or rules.targets or rules.includes or rules.excludes or rules.engine):
        lines = _active.report(detailed=verbose > 1) if _active is not None else ["nothing is installed"]
        for text in lines:
            print(f"autonvtx: {text}")
        return
    try:
        # Rules (and the budget) checked before the working installation is touched: a refused
        # command changes nothing.
        if budget is not None:
            from autonvtx.budget import parse_percent

            parse_percent(str(budget), "install: budget")
        from autonvtx.cli.flight import flight_setting

        watch = flight_setting(**flight, where="%autonvtx")
        config = _resolve(
            list(rules.configs) or None, rules.presets, rules.targets, rules.includes, rules.excludes, rules.engine
        )
    except AutonvtxError as error:
        print(f"autonvtx: {error}", file=sys.stderr)
        return
    previous = _active
    if previous is not None:
        previous.uninstall()
        _active = None
    try:
        # Checked above, as `run --budget` and `profile --flight` check them.
        _active = install(config, budget=budget, **_flight_arguments(watch))
    except AutonvtxError as error:
        print(f"autonvtx: {error}", file=sys.stderr)
        if previous is not None:  # what was installed before is installed again
            _active = install(previous.config)
            print("autonvtx: the rules installed before are kept", file=sys.stderr)
        return
    summary = _active.report()[-1] if not verbose else "\n".join(_active.report(detailed=verbose > 1))
    print(f"autonvtx: installed: {summary}")


def _magic_off() -> None:
    global _active
    if _active is None:
        print("autonvtx: nothing is installed")
        return
    _active.uninstall()
    _active = None
    print("autonvtx: uninstalled; every replaced function is back")


def _split(line: str) -> list[str]:
    import shlex

    try:
        return shlex.split(line, comments=True)  # a `# comment` after the options, as in a shell
    except ValueError as exc:
        raise UsageError(f"%autonvtx: {exc}") from None


def parse_magic(words: Sequence[str]) -> tuple[RuleArgs, int] | None:
    """`%autonvtx`'s options, parsed by the declarations `autonvtx run` parses its rule options
    with (cli.options): (the rule options, the -v count); None after `--help` (printed)."""
    parsed = parse_magic_budget(words)
    return None if parsed is None else parsed[:2]


def parse_magic_budget(words: Sequence[str]) -> tuple[RuleArgs, int, str | None] | None:
    """parse_magic() with `--budget PCT` (as `run --budget`) as well."""
    parsed = parse_magic_options(words)
    return None if parsed is None else parsed[:3]


def parse_magic_options(words: Sequence[str]) -> tuple[RuleArgs, int, str | None, dict[str, Any]] | None:
    """parse_magic() with `--budget PCT` (as `run --budget`) and `--flight RANGE` and its settings
    (as `profile --flight`, in flight_setting()'s arguments) as well."""
    import click  # only when the magic is used

    from autonvtx.cli.flight import NSYS, flight_options
    from autonvtx.cli.options import rule_options

    @click.command(context_settings={"help_option_names": ["-h", "--help"]})
    @rule_options
    @click.option("-v", "--verbose", count=True, help="What is instrumented (-vv: every decision).")
    @click.option("--budget", metavar="PCT", help="As `autonvtx run --budget`.")
    @flight_options(NSYS)
    def magic(
        rules: RuleArgs, verbose: int, budget: str | None, **flight: Any
    ) -> tuple[RuleArgs, int, str | None, dict[str, Any]]:
        return rules, verbose, budget, flight

    try:
        with magic.make_context("%autonvtx", list(words)) as context:
            result: tuple[RuleArgs, int, str | None, dict[str, Any]] = magic.invoke(context)
            return result
    except click.exceptions.Exit:
        return None
    except click.ClickException as error:
        raise UsageError(f"%autonvtx: {error.format_message()}") from None
