"""`autonvtx run`: the target, its rules and its recording, wired together; the target itself
runs once click has returned (see `TargetRun`)."""
from __future__ import annotations

import atexit
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence

import click

from autonvtx.cli.group import cli
from autonvtx.cli.options import SUMMARY_OPTION_DEFAULTS, RuleArgs, make_summary_options, rule_options, summary_options
from autonvtx.errors import AutonvtxError, UsageError

if TYPE_CHECKING:
    from autonvtx.config import Config
    from autonvtx.plugins import Plugin

TARGET_KEY = "autonvtx.target"


@dataclass(frozen=True)
class TargetRun:
    """The target, found and ready: `run` returns it and :func:`main` executes it once click
    has returned, so the target finds click's context stack as `python` leaves it (empty)."""

    resolved: Any
    on_main_statement: Callable[[ModuleType], object] | None = None

    def execute(self) -> NoReturn:
        from autonvtx import runner

        runner.execute(self.resolved, on_main_statement=self.on_main_statement)


class RunCommand(click.Command):
    """`run` stops parsing its own options at the target: everything after belongs to the target.

    click alone would keep parsing options after `-m MODULE` (an option value, not a positional),
    so `autonvtx run -m pkg --help` would show our help; we split the arguments first.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ours, target = split_target_arguments(args, _value_options(self))
        ctx.meta[TARGET_KEY] = target
        return super().parse_args(ctx, ours)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        # The target is split off before click parses, so click does not know to show it.
        return [*super().collect_usage_pieces(ctx), "SCRIPT", "[ARGS]..."]


def _value_options(command: click.Command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def split_target_arguments(
    args: Sequence[str], value_options: set[str]
) -> tuple[list[str], tuple[str, str, tuple[str, ...]] | None]:
    """Split `run`'s arguments into (our options, (kind, value, target args)).

    `--summary` takes a value when written `--summary=PATH`, or when the next argument has a
    file suffix other than a script's (`outputs.is_option_value`), so `autonvtx run --summary
    train.py` runs train.py and `--summary out.html` is refused for its suffix.
    """
    ours: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            if i + 1 >= len(args):
                return ours, None
            return ours, ("script", args[i + 1], tuple(args[i + 2 :]))
        for flag, kind in (("-m", "module"), ("-c", "code")):
            if token == flag:
                if i + 1 >= len(args):
                    raise UsageError(f"run: {flag}: option requires an argument")
                return ours, (kind, args[i + 1], tuple(args[i + 2 :]))
            if token.startswith(flag) and not token.startswith("--"):
                return ours, (kind, token[len(flag) :], tuple(args[i + 1 :]))
        if token == "--summary":
            # Imported here: a run without --summary does not load outputs (start-up, issue 6).
            from autonvtx.recorder.outputs import SUMMARY_TO_STDERR, is_option_value

            following = args[i + 1] if i + 1 < len(args) else ""
            if is_option_value(following):
                ours.append(f"--summary={following}")
                i += 2
            else:
                ours.append(f"--summary={SUMMARY_TO_STDERR}")
                i += 1
            continue
        if token.startswith("-") and token != "-":
            ours.append(token)
            if token in value_options and i + 1 < len(args):
                ours.append(args[i + 1])
                i += 1
            i += 1
            continue
        return ours, ("script", token, tuple(args[i + 1 :]))
    return ours, None


@cli.command(
    cls=RunCommand,
    context_settings={"help_option_names": ["-h", "--help"]},
    short_help="Run a Python program with NVTX ranges on the functions the rules select.",
)
@rule_options
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="At exit, list per module what was wrapped and skipped (-vv: every decision with its reason).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Run nothing: print what 'autonvtx list' would for the modules the target imports "
    "at its top level (and its own functions).",
)
@click.option(
    "--trace",
    metavar="PATH",
    help="Record every NVTX event and write a trace: Chrome JSON (.json, .json.gz) or Perfetto (.pftrace).",
)
@click.option(
    "--summary",
    metavar="[PATH]",
    help="Print a range statistics table to stderr, or write it to PATH (.txt, .csv, .json).",
)
@click.option(
    "--buffer-mb",
    type=int,
    metavar="MB",
    help="Memory bound of the recorder's event buffers per process (default 512).",
)
@click.option(
    "--keep",
    type=click.Choice(["all", "last"]),
    default="all",
    help="last: keep only the most recent events, within --buffer-mb (a ring per thread).",
)
@summary_options
@click.option(
    "--no-children",
    is_flag=True,
    help="Leave child processes alone: neither instrumented nor recorded.",
)
@click.option(
    "--capture",
    "captures",
    multiple=True,
    metavar="FUNCTION:FROM-TO",
    help="Profile only iterations FROM <= i < TO of FUNCTION's first loop (or its calls when it"
    " has none), e.g. '__main__:train:100-110': cudaProfilerStart/Stop, an NVTX range"
    " 'capture@autonvtx', and --trace/--summary keep only the window. Python 3.12+.",
)
@click.option(
    "--ranks",
    metavar="LIST",
    help="Under torchrun, Slurm or MPI, instrument and record only these ranks ('0,3', '0-3'); "
    "the others run untouched.",
)
def run(
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
    **table: Any,
) -> TargetRun:
    """Run SCRIPT (or -m MODULE, or -c CODE) as `python` would, with NVTX ranges.

    \b
      autonvtx run [OPTIONS] SCRIPT [ARGS]...
      autonvtx run [OPTIONS] -m MODULE [ARGS]...
      autonvtx run [OPTIONS] -c CODE [ARGS]...

    Everything after the target belongs to it: `autonvtx run s.py --help` passes --help to s.py.
    """
    from autonvtx import runner
    from autonvtx.propagate import children

    target = click.get_current_context().meta.get(TARGET_KEY)
    if target is None:
        raise UsageError("run: missing SCRIPT, -m MODULE or -c CODE (see 'autonvtx run --help')")
    kind, value, target_args = target
    # A script that is not there is one line and nothing more: no rules, notes or warnings
    # about patterns that never had a chance to match.
    check_script(target)
    if summary is None and table != SUMMARY_OPTION_DEFAULTS:
        raise UsageError("run: --tree, --group, --each, --skip-first, --by, --sort, --top and --filter shape --summary; "
                         "add --summary")
    left_out, outputs = False, None  # left out by --ranks: this rank runs as `python` would
    if ranks is not None or trace is not None or summary is not None or buffer_mb is not None or keep != "all":
        left_out, outputs = recording_outputs(
            describe_target(kind, value, target_args), ranks=ranks, trace=trace, summary=summary,
            buffer_mb=buffer_mb, keep=keep, children=not no_children, table=table,
        )
    # A script's own directory is where its autonvtx.toml usually sits: discovery looks there
    # after the working directory.
    config = rules.load(captures=captures, near=(os.path.dirname(value) or ".") if kind == "script" else None)
    if verbose and config.sources and not (rules.configs or rules.presets or rules.targets):
        print(f"autonvtx: rules from {', '.join(config.sources)}", file=sys.stderr)  # found, not given
    plugins: list[Plugin] = []
    if config.plugins:
        # Imported only then: a run without plugins does not pay for it (start-up, issue 6).
        from autonvtx.plugins import load_plugins

        plugins = load_plugins(config)  # a missing or malformed plugin stops us before anything starts
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
        raise
    say_if_no_rules(config, "run")  # once the target is found: about to run without ranges
    return TargetRun(resolved, on_main_statement)


def check_script(target: tuple[str, str, tuple[str, ...]]) -> None:
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


def recording_outputs(label: str, *, ranks: str | None, table: dict[str, Any], **options: Any) -> tuple[bool, Any]:
    """(whether --ranks leaves this rank out, the recorder's outputs for this rank), checked."""
    # Imported only for these options: a plain run loads neither (start-up, issue 6).
    from autonvtx.ranks import detect_rank, label_with_rank, parse_ranks
    from autonvtx.recorder.outputs import Outputs, check_outputs

    rank = detect_rank()
    left_out = ranks is not None and rank.rank not in parse_ranks(ranks)
    summary_options = make_summary_options(table) if options["summary"] is not None else None
    outputs = Outputs(label=label_with_rank(label, rank), summary_options=summary_options, **options).for_rank(rank)
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
    click.echo(f"dry run: {describe_target(resolved.target.kind, resolved.target.value, resolved.target.args)}")
    click.echo(f"top-level imports: {', '.join(imports) or '(none)'}")
    click.echo(listing.format_text(plan, verbose=verbose > 0), nl=False)


def start_instrumentation(
    config: Config, plugins: list[Plugin], verbose: int
) -> Callable[[ModuleType], object] | None:
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
