"""The `autonvtx` command line: parsing and wiring only."""
from __future__ import annotations

import atexit
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence

import click

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


def summary_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that shape a summary table, shared by `run --summary` and `summary`."""
    options = [
        click.option("--tree", is_flag=True, help="Summary: one row per call path, indented by nesting."),
        click.option("--group", "group_by", type=click.Choice(["name", "class"]), default="name",
                     help="Summary: class folds 'a.b.3.attn (Attention)' rows into one per class."),
        click.option("--skip-first", type=click.IntRange(min=0), default=0, metavar="N",
                     help="Summary: leave out each range's first N instances on each thread (warm-up)."),
        click.option("--by", type=click.Choice(["process", "rank", "thread"]), help="Summary: a table per group."),
        click.option("--sort", type=click.Choice(["total", "self", "count", "mean", "max"]), default="total",
                     help="Summary: the column rows are sorted by (largest first)."),
        click.option("--top", type=click.IntRange(min=1), metavar="N", help="Summary: only the first N rows."),
        click.option("--filter", "name_filter", metavar="GLOB", help="Summary: only ranges whose name matches."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def make_summary_options(values: dict[str, Any]) -> Any:
    from autonvtx.recorder.summary import SummaryOptions

    return SummaryOptions(tree=values["tree"], group=values["group_by"], skip_first=values["skip_first"],
                          by=values["by"], sort=values["sort"], top=values["top"], filter=values["name_filter"])


SUMMARY_OPTION_DEFAULTS = {"tree": False, "group_by": "name", "skip_first": 0, "by": None, "sort": "total",
                           "top": None, "name_filter": None}


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="autonvtx", prog_name="autonvtx")
def cli() -> None:
    """NVTX ranges on any Python program's own functions, without touching its source."""


# The rule options of `run`, `list` and `export` (and %autonvtx in IPython), declared once.
RULE_OPTIONS = [
    click.option(
        "--config", "configs", multiple=True, metavar="FILE",
        help="Rules file (.toml, .yaml, .yml, or Nsight Systems' functions-trace .json); repeatable,"
        " merged in order. Default: ./autonvtx.toml, else [tool.autonvtx] in ./pyproject.toml.",
    ),
    click.option(
        "--preset", "presets", multiple=True, metavar="NAME",
        help="Shipped or installed rules for a framework (e.g. torch, pandas); repeatable."
        " See 'autonvtx presets'.",
    ),
    click.option(
        "-t", "--target", "targets", multiple=True, metavar="GLOB",
        help="Quick rule: annotate modules matching GLOB (e.g. 'mypkg.*'); repeatable.",
    ),
    click.option(
        "--include", "includes", multiple=True, metavar="GLOB",
        help="With -t: only qualified names matching GLOB (e.g. 'Trainer.*'); repeatable.",
    ),
    click.option(
        "--exclude", "excludes", multiple=True, metavar="GLOB",
        help="With -t: never qualified names matching GLOB (e.g. '_*'); repeatable.",
    ),
    click.option(
        "--engine", type=click.Choice(["auto", "code", "wrap"]), default=None,
        help="How rules put ranges on functions: code (sys.monitoring, Python 3.12+, replaces"
        " nothing), wrap (wrappers), auto (code where it can run; the default, or the config's"
        " [autonvtx] engine).",
    ),
]


def rule_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--config, --preset, -t/--target, --include, --exclude, --engine."""
    for option in reversed(RULE_OPTIONS):
        command = option(command)
    return command


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
    configs: tuple[str, ...],
    presets: tuple[str, ...],
    targets: tuple[str, ...],
    includes: tuple[str, ...],
    excludes: tuple[str, ...],
    engine: str | None,
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
    if summary is None and table != SUMMARY_OPTION_DEFAULTS:
        raise UsageError("run: --tree, --group, --skip-first, --by, --sort, --top and --filter shape --summary; "
                         "add --summary")
    left_out = False  # by --ranks: this rank runs as plain `python` would
    outputs = None
    if ranks is not None or trace is not None or summary is not None or buffer_mb is not None or keep != "all":
        # Imported only for these options: a plain run loads neither (start-up, issue 6).
        from autonvtx.ranks import detect_rank, label_with_rank, parse_ranks
        from autonvtx.recorder.outputs import Outputs, check_outputs

        rank = detect_rank()
        left_out = ranks is not None and rank.rank not in parse_ranks(ranks)
        outputs = Outputs(
            trace=trace,
            summary=summary,
            label=label_with_rank(describe_target(kind, value, target_args), rank),
            buffer_mb=buffer_mb,
            children=not no_children,
            keep=keep,
            summary_options=make_summary_options(table) if summary is not None else None,
        ).for_rank(rank)
        check_outputs(outputs)
    config = load_rules(configs, presets, targets, includes, excludes, engine, captures)
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

    session = None
    if outputs is not None and outputs.wanted:
        # Imported only when recording: start-up cost of a plain run (issue 6).
        from autonvtx.recorder.session import RecordingSession, other_tool_attached

        other = other_tool_attached()
        if other is not None:
            print(
                f"autonvtx: another NVTX tool is attached (NVTX_INJECTION64_PATH={other}); "
                "it stays in charge and --trace/--summary are off",
                file=sys.stderr,
            )
        else:
            session = RecordingSession(outputs)
            session.start()
    on_main_statement = (
        start_instrumentation(config, plugins, verbose)
        if config.rules or config.plugins or config.regions
        else None
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


def load_rules(
    configs: Sequence[str],
    presets: Sequence[str],
    targets: Sequence[str],
    includes: Sequence[str],
    excludes: Sequence[str],
    engine: str | None = None,
    captures: Sequence[str] = (),
) -> Config:
    """The config from presets, config files (or discovery), the -t rule, --engine and --capture."""
    from autonvtx.configfile import load_rules as load

    return load(configs, presets=presets, targets=targets, includes=includes, excludes=excludes, engine=engine,
                captures=captures)


def say_if_no_rules(config: Config, command: str) -> None:
    """With no rules given and none discovered, say so once on stderr, and where we looked:
    a command without rules most often means a config in another directory or a forgotten -t."""
    if not config.sources:
        print(
            f"autonvtx: {command}: no rules found: looked for ./autonvtx.toml and [tool.autonvtx]"
            " in ./pyproject.toml; give rules with --config FILE, --preset NAME or -t 'MODULE_GLOB'"
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
    from autonvtx.control import NO_TOOL_NOTE, Instrumentation

    instrumentation = Instrumentation(config, plugins=plugins)
    if not instrumentation.applies:
        print(f"autonvtx: {NO_TOOL_NOTE}", file=sys.stderr)
    elif instrumentation.engine_note is not None:
        print(f"autonvtx: {instrumentation.engine_note}", file=sys.stderr)
    atexit.register(instrumentation.print_report, verbose)
    instrumentation.install()
    return instrumentation.main_hook


def describe_target(kind: str, value: str, args: Sequence[str]) -> str:
    """The target as the user would have typed it after `python`."""
    python = os.path.basename(sys.executable) or "python"
    head = {"script": [value], "module": ["-m", value], "code": ["-c", value]}[kind]
    return " ".join([python, *head, *args])


@cli.command("summary")
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    metavar="PATH",
    help="Write the table to PATH (.txt, .csv, .json) instead of standard output.",
)
@summary_options
def summary_command(trace: str, output: str | None, **table: Any) -> None:
    """Print the range statistics table of a saved TRACE (.json, .json.gz, .pftrace)."""
    from autonvtx.recorder.outputs import check_summary_path
    from autonvtx.recorder.perfetto import read_trace
    from autonvtx.recorder.summary import summarize, summary_notes
    from autonvtx.recorder.table import format_text, use_color, write_summary

    if not os.path.exists(trace):
        raise UsageError(f"summary: no such file '{trace}'")
    if output is not None:
        check_summary_path("summary: -o", output)
    recordings = read_trace(trace)
    stats = summarize(recordings, make_summary_options(table))
    if output is None:
        click.echo(format_text(stats, notes=summary_notes(recordings), color=use_color(sys.stdout)), nl=False)
    else:
        write_summary(stats, output, notes=summary_notes(recordings))


@cli.command("recover")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("-o", "--output", required=True, metavar="PATH", help="The trace (.json, .json.gz, .pftrace).")
def recover_command(directory: str, output: str) -> None:
    """Write the trace of a run whose events were spilled to DIRECTORY but never written out
    (the directory `autonvtx run` named on stderr, or one left by a killed run)."""
    from autonvtx.recorder.outputs import check_trace_path
    from autonvtx.recorder.results import recover

    check_trace_path("recover: -o", output)
    recover(directory, output)
    print(f"autonvtx: trace written to {output} (open it in https://ui.perfetto.dev)", file=sys.stderr)


@cli.command("presets")
def presets_command() -> None:
    """List the presets: shipped with autonvtx and installed by other packages."""
    from autonvtx.configfile import describe_preset
    from autonvtx.presets import all_presets

    known = all_presets()
    width = max((len(name) for name in known), default=0)
    for name, preset in known.items():
        source = "" if preset.source == "autonvtx" else f" [{preset.source}]"
        click.echo(f"{name.ljust(width)}  {describe_preset(preset)}{source}")


@cli.command("list")
@rule_options
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Also print every name skipped, with why.")
@click.argument("modules", nargs=-1, required=True)
def list_command(
    configs: tuple[str, ...],
    presets: tuple[str, ...],
    targets: tuple[str, ...],
    includes: tuple[str, ...],
    excludes: tuple[str, ...],
    engine: str | None,
    as_json: bool,
    verbose: bool,
    modules: tuple[str, ...],
) -> None:
    """Import MODULE(s) and print, per rule, what it selects and which patterns matched nothing.

    The decisions are the ones `autonvtx run` makes: the same walk, without wrapping.
    """
    from autonvtx import listing
    from autonvtx.plugins import load_plugins

    config = load_rules(configs, presets, targets, includes, excludes, engine)
    say_if_no_rules(config, "list")
    load_plugins(config)
    sys.path.insert(0, os.getcwd())  # as `python -c "import MODULE"` would find it
    notes = listing.import_modules(modules, where="list")
    plan = listing.plan_modules(config, modules, notes)
    click.echo(listing.format_json(plan) if as_json else listing.format_text(plan, verbose=verbose), nl=False)


@cli.command("export")
@rule_options
@click.option("--format", "fmt", type=click.Choice(["nsys"]), default="nsys", show_default=True,
              help="nsys: Nsight Systems' --python-functions-trace JSON.")
@click.option("-o", "--output", metavar="PATH", help="Write to PATH instead of standard output.")
@click.argument("modules", nargs=-1, required=True)
def export_command(
    configs: tuple[str, ...],
    presets: tuple[str, ...],
    targets: tuple[str, ...],
    includes: tuple[str, ...],
    excludes: tuple[str, ...],
    engine: str | None,
    fmt: str,
    output: str | None,
    modules: tuple[str, ...],
) -> None:
    """Resolve the rules against MODULE(s) (imported) into another tool's format.

    \b
      autonvtx export --format nsys --preset pandas pandas -o pandas.json
      nsys profile --python-functions-trace=pandas.json python job.py
    """
    from autonvtx import listing
    from autonvtx.export import plan_to_nsys_json

    config = load_rules(configs, presets, targets, includes, excludes, engine)
    say_if_no_rules(config, "export")
    sys.path.insert(0, os.getcwd())
    notes = listing.import_modules(modules, where="export")
    plan = listing.plan_modules(config, modules, notes)
    for note in notes:
        print(f"autonvtx: export: {note}", file=sys.stderr)
    for rule, _ in plan.selected:
        for line in plan.unmatched.get(id(rule), []):
            print(f"autonvtx: warning: {line}", file=sys.stderr)
    if plan.plugins:
        names = ", ".join(name for name, _, _, _ in plan.plugins)
        print(
            f"autonvtx: export: plugins ({names}) name their ranges at run time;"
            " Nsight Systems' format cannot express them, so they are not exported",
            file=sys.stderr,
        )
    text = plan_to_nsys_json(plan)
    if output is None:
        click.echo(text, nl=False)
    else:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)


@cli.command("init")
@click.option("--pyproject", is_flag=True,
              help="Append a [tool.autonvtx] table to ./pyproject.toml instead of writing ./autonvtx.toml.")
def init_command(pyproject: bool) -> None:
    """Write a commented starter config naming the frameworks installed here."""
    from autonvtx.starter import write_starter

    click.echo(write_starter(os.getcwd(), pyproject=pyproject))


@cli.command("merge")
@click.argument("traces", nargs=-1, required=True)
@click.option("-o", "--output", required=True, metavar="PATH",
              help="The merged trace (.json or .json.gz); inputs may be .pftrace too.")
def merge_command(traces: tuple[str, ...], output: str) -> None:
    """Merge per-rank (or per-run) TRACES into one timeline, aligned on one clock."""
    from autonvtx.recorder.merge import check_inputs, merge_traces
    from autonvtx.recorder.outputs import check_trace_path

    check_inputs(traces, output)
    check_distinct_files("merge", traces)
    check_trace_path("merge: -o", output)
    for note in merge_traces(traces, output):
        print(f"autonvtx: {note}", file=sys.stderr)
    noun = "trace" if len(traces) == 1 else "traces"
    print(f"autonvtx: merged {len(traces)} {noun} into {output}", file=sys.stderr)


def check_distinct_files(where: str, paths: Sequence[str]) -> None:
    """A file named twice (by any path) is a mistake: merged twice, its events would show
    twice on the timeline."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        status = os.stat(path)
        key = (status.st_dev, status.st_ino)
        first = seen.get(key)
        seen[key] = path
        if first is not None:
            raise UsageError(f"{where}: '{path}': the same file as '{first}'; expected each trace once")


@cli.command("report")
@click.argument("profile")
@click.option("--tree", is_flag=True, help="Show the nesting of ranges, GPU time at each level.")
@click.option("--by", type=click.Choice(["process", "rank", "thread", "gpu"]), help="One table per process, rank, thread or GPU.")
@click.option("--sort", type=click.Choice(["gpu", "cpu", "kernels", "instances", "span", "memcpy", "name"]),
              help="Order of rows (default: gpu, or cpu for a recording without GPU data).")
@click.option("--top", type=click.IntRange(min=1), metavar="N", help="Only the N first rows (with --tree: children per range).")
@click.option("--filter", "pattern", metavar="GLOB", help="Only ranges whose name matches GLOB (with --tree: and what encloses them).")
@click.option("--strip-ids", is_flag=True, help="Fold per-call suffixes such as ', op_id = 990760' into one name.")
@click.option("--format", "fmt", type=click.Choice(["text", "csv", "json"]), help="Output form (default: text, or from -o's extension).")
@click.option("-o", "--output", metavar="PATH", help="Write to PATH instead of standard output.")
@click.option("--html", metavar="PATH", help="Also write a self-contained page: a flame chart of the tree beside the table.")
@click.option("--html-by", type=click.Choice(["gpu", "cpu"]), default="gpu", show_default=True, help="What sizes the boxes of --html.")
def report_command(profile: str, tree: bool, by: str | None, sort: str | None, top: int | None, pattern: str | None,
                   strip_ids: bool, fmt: str | None, output: str | None, html: str | None, html_by: str) -> None:
    """GPU time per NVTX range from PROFILE: an `nsys export --type sqlite` file, a .nsys-rep, or an autonvtx trace."""
    from autonvtx.report.output import ReportRequest, produce

    text = produce(ReportRequest(profile, tree, by, sort, top, pattern, strip_ids, fmt, output, html, html_by))
    if text is not None:
        click.echo(text, nl=False)
    if html is not None:
        print(f"autonvtx: report: wrote {html}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry: controlled errors print one line, never a traceback."""
    try:
        result = cli.main(args=list(argv) if argv is not None else None, prog_name="autonvtx", standalone_mode=False)
        if isinstance(result, TargetRun):
            result.execute()  # outside click's contexts: a click program must not see ours
        return result
    except AutonvtxError as error:
        for line in str(error).splitlines():  # one problem a line (a config's, all at once)
            print(f"autonvtx: {line}", file=sys.stderr)
        raise SystemExit(error.exit_status) from None
    except click.exceptions.Abort:
        print("autonvtx: aborted", file=sys.stderr)
        raise SystemExit(130) from None
    except click.ClickException as error:
        context = getattr(error, "ctx", None)
        subcommand = context.command_path.partition(" ")[2] if context is not None else ""
        where = f"{subcommand}: " if subcommand else ""
        print(f"autonvtx: {where}{error.format_message()}", file=sys.stderr)
        raise SystemExit(error.exit_code) from None
