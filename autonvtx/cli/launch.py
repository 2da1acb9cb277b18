"""What `autonvtx run` does once its arguments are parsed, by click (`cli.run`) or by its own
parser (`cli.runargs`): the target, its rules and its recording, wired together; the target
itself runs once parsing is over (see `TargetRun`). Nothing here loads click (start-up)."""

from __future__ import annotations

import atexit
import os
import sys

from autonvtx.errors import AutonvtxError, UsageError
from autonvtx.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType
    from typing import Any, Literal, NoReturn

    from autonvtx.cli.ruleargs import RuleArgs
    from autonvtx.config import Config
    from autonvtx.plugins import Plugin

    # A run's target as parsed: (kind, value, its arguments).
    TargetKind = Literal["script", "module", "code"]
    Target = tuple[TargetKind, str, tuple[str, ...]]


class TargetRun(Value):
    """The target, found and ready: `start_run` returns it and `cli.main` executes it once
    parsing is over, so the target finds click's context stack as `python` leaves it (empty)."""

    __slots__ = ("resolved", "on_main_statement")
    resolved: Any
    on_main_statement: Callable[[ModuleType], object] | None

    def __init__(self, resolved: Any, on_main_statement: Callable[[ModuleType], object] | None = None) -> None:
        self._set(resolved, on_main_statement)

    def execute(self) -> NoReturn:
        from autonvtx import runner

        runner.execute(self.resolved, on_main_statement=self.on_main_statement)


def start_run(
    target: Target | None,
    *,
    rules: RuleArgs,
    verbose: int,
    dry_run: bool,
    trace: str | None,
    summary: str | None,
    buffer_mb: int | None,
    keep: str,
    no_children: bool,
    captures: tuple[str, ...],
    ranks: str | None,
    table: dict[str, Any] | None,
    budget: str | None = None,
    **flight_options: Any,
) -> TargetRun:
    """`autonvtx run` with these options; `table`: the view options that shape --summary (None
    when none was given); `budget`: --budget's percentage, as given; `flight_options`: --flight
    and its settings (`flight_settings`)."""
    from autonvtx import runner
    from autonvtx.propagate import children

    if target is None:
        raise UsageError("run: missing SCRIPT, -m MODULE or -c CODE (see 'autonvtx run --help')")
    kind, value, target_args = target
    # A script that is not there is one line and nothing more: no rules, notes or warnings
    # about patterns that never had a chance to match.
    check_script(target)
    # Registered first, so it runs last: after the recording's and the program's exit handlers.
    atexit.register(runner.end_as_python_would)
    if budget is not None:
        from autonvtx.budget import arm_option

        arm_option(budget, verbose)  # a bad percentage stops us before anything starts
    if summary is None and table is not None and not is_default_table(table):
        raise UsageError(
            "run: --tree, --group, --each, --skip-first, --by, --sort, --top and --filter shape --summary; "
            "add --summary"
        )
    # left_out: left out by --ranks, this rank runs as `python` would
    recorded: dict[str, Any] = dict(trace=trace, summary=summary, buffer_mb=buffer_mb, keep=keep, **flight_options)
    label = describe_target(kind, value, target_args)
    left_out, outputs = recording_outputs(label, ranks=ranks, table=table, children=not no_children, **recorded)
    # A script's own directory is where its autonvtx.toml usually sits: discovery looks there
    # after the working directory.
    near = (os.path.dirname(value) or ".") if kind == "script" else None
    config, plugins = _rules_and_plugins(rules, captures, near, verbose)
    if dry_run:
        resolved = runner.resolve(runner.Target(kind=kind, value=value, args=target_args))
        say_if_no_rules(config, "run")
        dry_run_listing(config, resolved, verbose)
        raise SystemExit(0)

    if left_out:
        # Not a rank to look at: it runs as plain `python` would, at full speed.
        return TargetRun(runner.resolve(runner.Target(kind=kind, value=value, args=target_args)))

    session = start_recording(outputs) if outputs is not None and outputs.wanted else None
    on_main_statement = (
        start_instrumentation(config, plugins, verbose) if config.rules or config.plugins or config.regions else None
    )
    children.start(config, verbose=verbose, recording=session is not None, follow=not no_children)
    try:
        resolved = runner.resolve(runner.Target(kind=kind, value=value, args=target_args))
    except AutonvtxError:
        if session is not None:
            session.cancel()
        # "No module named X" is the whole story: no warning follows about patterns that never
        # had a chance to match.
        from autonvtx.control import silence_exit_reports

        silence_exit_reports()
        raise
    say_if_no_rules(config, "run")  # once the target is found: about to run without ranges
    if outputs is None:
        say_if_outputs_were_given_to_the_target(target_args)
    return TargetRun(resolved, on_main_statement)


def _rules_and_plugins(
    rules: RuleArgs, captures: tuple[str, ...], near: str | None, verbose: int
) -> tuple[Config, list[Plugin]]:
    """The run's config, said where it came from, and its plugins loaded: a missing or malformed
    plugin stops us before anything starts."""
    config = rules.load(captures=captures, near=near)
    say_where_rules_came_from(config, rules, near, verbose=verbose)
    if not config.plugins:
        return config, []
    # Imported only then: a run without plugins does not pay for it (start-up, issue 6).
    from autonvtx.plugins import load_plugins

    return config, load_plugins(config)


FLIGHT_OPTIONS = ("flight", "flight_factor", "flight_keep", "flight_max", "flight_warmup")


def flight_settings(
    flight: str | None = None,
    flight_factor: float = 3.0,
    flight_keep: int = 10,
    flight_max: int = 20,
    flight_warmup: int = 5,
) -> Any:
    """--flight and its settings as a `recorder.flight.Flight`, or None; a setting without
    --flight is refused (it would do nothing). Its own copy of Flight's defaults, not
    `recorder.flight.from_options`: importing that module (json, pathlib) on every run would add
    to start-up and import json before the program's rules are in place."""
    factor, keep, most, warmup = flight_factor, flight_keep, flight_max, flight_warmup
    if flight is None:
        given = (factor != 3.0, keep != 10, most != 20, warmup != 5)
        names = ("--flight-factor", "--flight-keep", "--flight-max", "--flight-warmup")
        for name, changed in zip(names, given):
            if changed:
                raise UsageError(f"run: {name} sets how --flight watches; add --flight RANGE")
        return None
    from autonvtx.recorder.flight import Flight

    return Flight(range=flight, factor=factor, keep=keep, max_files=most, warmup=warmup)


def say_where_rules_came_from(config: Config, rules: RuleArgs, near: str | None, *, verbose: int) -> None:
    """When rules were given, the config files discovery left unread, in one line (a `-t` run
    beside an autonvtx.toml silently used other domains and exclusions); -v: also the ones it found."""
    if not (rules.configs or rules.presets or rules.targets):
        if config.sources and verbose:
            print(f"autonvtx: rules from {', '.join(config.sources)}", file=sys.stderr)  # found, not given
        return
    from autonvtx.configfile import discover

    given = {os.path.realpath(path) for path in rules.configs}
    unread = [path for _, path in discover(".", near) if os.path.realpath(path) not in given]
    if unread:
        print(
            f"autonvtx: note: {', '.join(unread)} not read: rules were given (a config is discovered only"
            " without --config, --preset and -t; add --config to use it too)",
            file=sys.stderr,
        )


# autonvtx run's options that a newcomer puts after the script, where they are the script's.
_OUTPUT_OPTIONS = ("--trace", "--summary")


def say_if_outputs_were_given_to_the_target(target_args: Sequence[str]) -> None:
    """An output option after SCRIPT belongs to the script; when autonvtx itself was given no
    output, that is most likely a misplaced option of ours: say so once."""
    misplaced = [arg for arg in target_args if arg.partition("=")[0] in _OUTPUT_OPTIONS]
    if misplaced:
        print(
            f"autonvtx: note: {misplaced[0].partition('=')[0]} comes after the script, so the script gets it,"
            " not autonvtx; autonvtx's options go before SCRIPT",
            file=sys.stderr,
        )


def is_default_table(table: dict[str, Any]) -> bool:
    """Whether the view options say nothing (click passes their defaults)."""
    from autonvtx.cli.views import VIEW_OPTION_DEFAULTS  # only click passes a table: it is loaded

    return table == VIEW_OPTION_DEFAULTS


def check_script(target: Target) -> None:
    """A script that is not there stops us before anything starts (`profile`: before nsys),
    worded as Python words it (a module is looked for when it runs: finding it imports its
    parent packages, which the rules may select)."""
    from autonvtx import runner

    kind, value, args = target
    if kind != "script":
        return
    argv, path = list(sys.argv), list(sys.path)
    try:
        runner.resolve(runner.Target(kind="script", value=value, args=args))
    finally:
        sys.argv[:], sys.path[:] = argv, path


def recording_outputs(
    label: str, *, ranks: str | None, table: dict[str, Any] | None, **options: Any
) -> tuple[bool, Any]:
    """(whether --ranks leaves this rank out, the recorder's outputs for this rank), checked;
    (False, None) when no option asks for a recording."""
    flight = flight_settings(**{key: options.pop(key) for key in FLIGHT_OPTIONS if key in options})
    asked = [options["trace"], options["summary"], options["buffer_mb"], ranks, flight]
    if all(value is None for value in asked) and options["keep"] == "all":
        return False, None
    # Imported only for these options: a plain run loads neither (start-up, issue 6).
    from autonvtx.ranks import detect_rank, label_with_rank, parse_ranks
    from autonvtx.recorder.outputs import Outputs, check_outputs

    rank = detect_rank()
    left_out = ranks is not None and rank.rank not in parse_ranks(ranks)
    summary_options = None
    if options["summary"] is not None:
        from autonvtx.cli.views import VIEW_OPTION_DEFAULTS, make_view_options

        summary_options = make_view_options(table if table is not None else VIEW_OPTION_DEFAULTS)
    outputs = Outputs(label=label_with_rank(label, rank), summary_options=summary_options, flight=flight, **options)
    outputs = outputs.for_rank(rank)
    check_outputs(outputs)
    return left_out, outputs


def start_recording(outputs: Any) -> Any:
    """The recording session of this run, started; None when another NVTX tool is in charge."""
    # Imported only when recording: start-up cost of a plain run (issue 6).
    from autonvtx.recorder.session import RecordingSession, other_tool_attached

    other = other_tool_attached()
    if other is not None:
        print(
            f"autonvtx: another NVTX tool is attached (NVTX_INJECTION64_PATH={other}); "
            "it stays in charge and --trace/--summary are off",
            file=sys.stderr,
        )
        return None
    session = RecordingSession(outputs)
    session.start()
    return session


def say_if_no_rules(config: Config, command: str) -> None:
    """With no rules given and none discovered, say so once on stderr, and where we looked:
    a command without rules most often means a config in another directory or a forgotten -t."""
    if not config.sources:
        beside = ", then the same beside the script" if command == "run" else ""
        print(
            f"autonvtx: {command}: no rules found: looked for AUTONVTX_RULES, ./autonvtx.toml and [tool.autonvtx]"
            f" in ./pyproject.toml{beside}; give rules with --config FILE, --preset NAME or -t 'MODULE_GLOB'"
            " (autonvtx init writes a starter ./autonvtx.toml)",
            file=sys.stderr,
        )


def dry_run_listing(config: Config, resolved: Any, verbose: int) -> None:
    """run --dry-run: the listing for the modules the target imports at its top level, and
    for the target's own functions when rules select `__main__`."""
    from autonvtx import listing

    source = resolved.source
    if source is None and resolved.filename.endswith(".py") and os.path.isfile(resolved.filename):
        with open(resolved.filename, "rb") as f:  # -m targets are read when they run
            source = f.read()
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    notes = []
    if not isinstance(source, str):
        notes.append(f"{resolved.filename}: no source to read its imports from")
        source = ""
    imports = [name for name in listing.top_level_imports(source, resolved.filename) if listing.is_module(name)]
    notes += listing.import_modules(imports, where="run")
    plan = listing.plan_modules(config, imports, notes, main_source=(source, resolved.filename))
    print(f"dry run: {describe_target(resolved.target.kind, resolved.target.value, resolved.target.args)}")
    print(f"top-level imports: {', '.join(imports) or '(none)'}")
    print(listing.format_text(plan, verbose=verbose > 0), end="", flush=True)


def start_instrumentation(config: Config, plugins: list[Plugin], verbose: int) -> Callable[[ModuleType], object] | None:
    """Install the rules and plugins; return what the runner calls after each statement of
    `__main__`. At exit, unmatched patterns are reported and, with -v, what was wrapped."""
    from autonvtx.control import Instrumentation

    instrumentation = Instrumentation(config, plugins=plugins)
    instrumentation.print_start_notes()
    atexit.register(instrumentation.print_report, verbose)
    instrumentation.install()
    return instrumentation.main_hook


def describe_target(kind: str, value: str, args: Sequence[str]) -> str:
    """The target as the user would have typed it after `python`."""
    python = os.path.basename(sys.executable) or "python"
    head = {"script": [value], "module": ["-m", value], "code": ["-c", value]}[kind]
    return " ".join([python, *head, *args])
