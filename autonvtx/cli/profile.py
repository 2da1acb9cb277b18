"""`autonvtx profile`: Nsight Systems over `autonvtx run`, then `autonvtx report` on what it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import click

from autonvtx.cli.flight import NSYS, flight_options, flight_setting
from autonvtx.cli.group import cli
from autonvtx.cli.launch import check_script
from autonvtx.cli.options import RuleArgs, rule_options
from autonvtx.cli.run import TARGET_KEY, RunCommand
from autonvtx.errors import UsageError
from autonvtx.report.render.render import check_writable

DEFAULT_OUTPUT = "autonvtx-profile"

# `autonvtx run`'s recorder outputs, which a newcomer gives profile too.
_RUN_OUTPUTS = ("--trace", "--summary", "--buffer-mb", "--keep", "--keep-last")


class ProfileCommand(RunCommand):
    """`run`'s parsing; `run`'s recorder options are refused with what profile writes instead
    (click would suggest unrelated options of similar spelling)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            if error.option_name not in _RUN_OUTPUTS:
                raise
            raise click.UsageError(
                f"{error.option_name} is `autonvtx run`'s (autonvtx's own recorder); profile records with"
                " Nsight Systems and writes OUT.nsys-rep and OUT.sqlite (-o OUT, default"
                f" {DEFAULT_OUTPUT}), then prints their table",
                ctx,
            ) from None


@cli.command(
    "profile",
    cls=ProfileCommand,
    context_settings={"help_option_names": ["-h", "--help"]},
    short_help="Run a program under Nsight Systems with NVTX ranges, then print time per range.",
)
@click.option(
    "-o",
    "--output",
    default=DEFAULT_OUTPUT,
    show_default=True,
    metavar="OUT",
    help="Report name: OUT.nsys-rep and OUT.sqlite; nsys expands %q{VAR}, %h and %p in it.",
)
@click.option("--force", is_flag=True, help="Overwrite OUT.nsys-rep and OUT.sqlite when they exist.")
@click.option(
    "--nsys-arg",
    "nsys_args",
    multiple=True,
    metavar="ARG",
    help="Pass ARG to `nsys profile` (repeatable), e.g. --nsys-arg=--trace=cuda,nvtx,cublas;"
    " it replaces autonvtx's default of the same option.",
)
@rule_options
@click.option(
    "--capture",
    "captures",
    multiple=True,
    metavar="FUNCTION:FROM-TO",
    help="Profile only iterations FROM <= i < TO of FUNCTION's first loop (as `run --capture`);"
    " nsys then records only that window. Python 3.12+.",
)
@click.option("--no-children", is_flag=True, help="Leave child processes alone (as `run --no-children`).")
@click.option(
    "--budget",
    metavar="PCT",
    help="As `run --budget`: ranges costing more than PCT% of their function's time, measured under"
    " nsys, are turned off.",
)
@flight_options(NSYS)
@click.option("-v", "--verbose", count=True, help="As `run -v`.")
@click.option("--tree", is_flag=True, help="Report: show the nesting of ranges.")
@click.option("--by", type=click.Choice(["process", "rank", "thread", "gpu"]), help="Report: one table per group.")
@click.option("--top", type=click.IntRange(min=1), metavar="N", help="Report: only the N first rows.")
@click.option("--html", metavar="PATH", help="Also write the report's page (a flame chart beside the table).")
def profile(
    output: str,
    force: bool,
    nsys_args: tuple[str, ...],
    rules: RuleArgs,
    captures: tuple[str, ...],
    no_children: bool,
    budget: str | None,
    flight: str | None,
    flight_factor: float,
    flight_keep: int,
    flight_max: int,
    flight_warmup: int,
    verbose: int,
    tree: bool,
    by: str | None,
    top: int | None,
    html: str | None,
) -> None:
    """Run SCRIPT (or -m MODULE, or -c CODE) under `nsys profile` with NVTX ranges, as `autonvtx run`
    would, then print `autonvtx report`'s table of the capture. Exits with the program's status.

    \b
      autonvtx profile [OPTIONS] SCRIPT [ARGS]...
      autonvtx profile -o run1 --preset torch train.py --epochs 1
      autonvtx profile --nsys-arg=--duration=60 -t 'mypkg.*' -m mypkg.train

    Defaults given to nsys: --trace=cuda,nvtx,osrt (nvtx,osrt without a CUDA device),
    --sample=none --cpuctxsw=none, --trace-fork-before-exec=true, --export=sqlite, and with a
    capture window --capture-range=nvtx --nvtx-capture=capture@autonvtx --capture-range-end=stop
    (=repeat with --flight: each window after a slow instance is captured).
    """
    from autonvtx import nsight

    target = click.get_current_context().meta.get(TARGET_KEY)
    if target is None:
        raise UsageError("profile: missing SCRIPT, -m MODULE or -c CODE (see 'autonvtx profile --help')")
    config = rules.load(captures=captures)  # bad rules stop us before nsys starts
    if budget is not None:
        from autonvtx.budget import parse_percent

        parse_percent(budget)  # a bad one stops us before nsys starts
    watch = flight_setting(flight, flight_factor, flight_keep, flight_max, flight_warmup)
    check_script(target)
    check_module(target)
    capture = any(region.capture is not None for region in config.regions)
    nsys = nsight.find_nsys()
    outputs = nsight.report_paths(output)
    nsight.check_output_directory(output)
    check_writable("profile", "--html", html)  # before the capture, not after it
    check_outputs(output, outputs, force=force, windows=watch is not None)
    run_command = inner_run_command(rules, captures, no_children, verbose, target, budget)
    plan = nsight.plan_profile(
        nsys,
        output=output,
        force=force,
        capture=capture,
        cuda=nsight.is_cuda_traceable(),
        nsys_args=nsys_args,
        run_command=run_command,
        repeat=watch is not None,
    )
    for note in plan.notes:
        print(f"autonvtx: profile: {note}", file=sys.stderr)
    if watch is not None:
        from autonvtx import environment
        from autonvtx.flightwatch import to_text

        # The run under nsys (and its children) watch from their start (control reads it).
        os.environ[environment.FLIGHT_WATCH] = to_text(watch)
    started = time.time()
    status = run_nsys(plan.command)
    if watch is not None:
        print_windows(nsys, outputs, started, watch.range, tree=tree, by=by, top=top, html=html)
        raise SystemExit(status)
    export = export_of_capture(nsys, outputs, started, status)
    print_report(export, tree=tree, by=by, top=top, html=html)
    raise SystemExit(status)


def check_outputs(output: str, outputs: Sequence[str], *, force: bool, windows: bool) -> None:
    """Refuse to overwrite an earlier report without --force (with --flight, its windows' too);
    with --force, links at the outputs go, never what they point to."""
    from autonvtx import nsight

    if not force:
        taken = nsight.existing(outputs) + (window_reports(outputs, 0.0) if windows else [])
        if taken:
            raise UsageError(
                f"profile: -o '{output}': {taken[-1]} exists; expected --force to overwrite it, or another -o"
            )
        return
    try:
        nsight.unlink_links(outputs)
        stale = window_reports(outputs, 0.0) if windows else []
        for report in stale:  # an earlier run's windows would pass for this run's
            for path in (report, report[: -len(".nsys-rep")] + ".sqlite"):
                if os.path.lexists(path):
                    os.unlink(path)
    except OSError as error:
        raise UsageError(f"profile: -o '{output}': cannot replace {error.filename} ({error.strerror})") from None
    if stale:
        print(
            f"autonvtx: profile: --force: {len(stale)} report(s) of an earlier run's windows removed ({stale[0]}, ...)",
            file=sys.stderr,
        )


def window_reports(outputs: Sequence[str], started: float) -> list[str]:
    """The reports nsys wrote since `started` for a run whose capture ranges repeat: one per
    window, `OUT.N.nsys-rep` by N when there were several, `OUT.nsys-rep` when there was one."""
    import fnmatch
    import glob
    import re

    base = glob.escape(outputs[0][: -len(".nsys-rep")]).replace("[*]", "*")  # -o's %p is any pid
    found = [(0, path) for path in glob.glob(base + ".nsys-rep")]
    for path in glob.glob(base + ".*.nsys-rep"):
        number = re.search(r"\.(\d+)\.nsys-rep$", path)
        if number is not None and fnmatch.fnmatchcase(path[: number.start()], base):
            found.append((int(number.group(1)), path))
    found = [(number, path) for number, path in found if os.path.getmtime(path) >= started - 1]
    return [path for _, path in sorted(found)]


def imported_windows(nsys: Any, outputs: Sequence[str], started: float) -> list[str]:
    """The windows' reports, imported here from the .qdstrm files nsys left without its importer
    (as export_of_capture does for one capture); none when there are none."""
    import glob

    from autonvtx import nsight

    base = outputs[1][: -len(".qdstrm")]
    pattern = glob.escape(base).replace("[*]", "*")
    streams = [p for p in glob.glob(pattern + "*.qdstrm") if os.path.getmtime(p) >= started - 1]
    if streams and nsys.importer is None:
        raise nsight.NsysError(
            f"profile: nsys left only {streams[-1]}: its importer (QdstrmImporter) was not found"
            f" beside {os.path.realpath(nsys.path)}; expected an Nsight Systems installation"
            " with its host-linux-x64 directory"
        )
    return [nsight.import_qdstrm(nsys.importer, stream) for stream in sorted(streams)]


def print_windows(
    nsys: Any,
    outputs: Sequence[str],
    started: float,
    watched: str,
    *,
    tree: bool,
    by: str | None,
    top: int | None,
    html: str | None,
) -> None:
    """profile --flight: the report of each window nsys captured (each opens with the mark saying
    which slow instance it followed), or why there is none."""
    from autonvtx.recorder.flight import flight_path
    from autonvtx.report.nsys.nsysrep import ensure_export

    reports = window_reports(outputs, started)
    if not reports:
        reports = imported_windows(nsys, outputs, started)
    if not reports:
        # No window opened, so nsys collected nothing and wrote no report: the run said why.
        print(
            f"autonvtx: profile: --flight: no capture window opened, so nsys recorded nothing and wrote no"
            f" {outputs[0]} (the lines above say what each process saw of '{watched}')",
            file=sys.stderr,
        )
        return
    for number, report in enumerate(reports, 1):
        page = html if html is None or len(reports) == 1 else flight_path(html, number)
        if len(reports) > 1:
            print(f"autonvtx: profile: --flight: capture {number} of {len(reports)}", file=sys.stderr)
        print_report(ensure_export(report), tree=tree, by=by, top=top, html=page)


def check_module(target: tuple[str, str, tuple[str, ...]]) -> None:
    """`-m MODULE` that cannot be found stops us before nsys starts, as a missing script does.
    Found without running any package's code where the path alone finds it (the rules may
    select the package); a submodule the path does not show (a package that extends its
    __path__) is looked for by Python itself, in a process of its own, before refusing."""
    kind, name, _ = target
    if kind != "module" or name.startswith("."):
        return
    import importlib.machinery
    import importlib.util

    saved = sys.path[0] if sys.path else None
    # As `python -m` sees it: the working directory first.
    sys.path[:1] = [os.getcwd()]
    try:
        top, _, rest = name.partition(".")
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return  # the run says why, worded as Python words it
        for part in rest.split(".") if rest else ():
            if spec is None or spec.submodule_search_locations is None:
                break
            spec = importlib.machinery.PathFinder.find_spec(part, list(spec.submodule_search_locations))
    finally:
        if saved is not None:
            sys.path[0] = saved
    if spec is not None or (rest and _found_by_python(name)):
        return
    raise UsageError(f"profile: -m {name}: No module named {name}; expected a module Python can import from here")


def _found_by_python(name: str) -> bool:
    # Imports the parent packages, as `python -m` would, in a process of its own.
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"
    try:
        return subprocess.run([sys.executable, "-c", probe, name], capture_output=True, timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return True  # cannot tell: the run will say


_START = "import sys; sys.path[0] = {home!r}; from autonvtx.cli import main; main()"


def _package_home() -> str:
    """The directory holding the autonvtx package this process runs."""
    import autonvtx

    return os.path.dirname(os.path.dirname(os.path.abspath(autonvtx.__file__)))


def inner_run_command(
    rules: RuleArgs,
    captures: Sequence[str],
    no_children: bool,
    verbose: int,
    target: tuple[str, str, tuple[str, ...]],
    budget: str | None = None,
) -> list[str]:
    """`autonvtx run ...` with this interpreter and this autonvtx (a fresh venv needs no autonvtx
    on PATH). Not `python -m autonvtx`: -m puts the working directory first on sys.path, and
    from a source checkout that imports its ./autonvtx, whose native parts are not built, so
    nsys would record nothing. The child looks first where this process found autonvtx; the
    runner then gives sys.path[0] to the target, as `autonvtx run` always does."""
    command = [sys.executable, "-c", _START.format(home=_package_home()), "run"]
    for flag, values in (
        ("--config", rules.configs),
        ("--preset", rules.presets),
        ("--target", rules.targets),
        ("--include", rules.includes),
        ("--exclude", rules.excludes),
        ("--capture", captures),
    ):
        for value in values:
            command.append(f"{flag}={value}")
    if rules.engine is not None:
        command.append(f"--engine={rules.engine}")
    if no_children:
        command.append("--no-children")
    if budget is not None:
        command.append(f"--budget={budget}")
    if verbose:
        command.append("-" + "v" * verbose)
    kind, value, args = target
    command += {"script": ["--", value], "module": ["-m", value], "code": ["-c", value]}[kind]
    return [*command, *args]


def run_nsys(command: Sequence[str]) -> int:
    """Run nsys in the foreground and return its status (the program's own: nsys passes it on).
    Ctrl-C reaches nsys too (same process group), which ends the program and writes the report:
    we wait for it. Where standard output is no terminal (a log, a pipe, CI), it is copied
    through nsight.ProgressFilter, so nsys's redrawn progress bars arrive as one line each."""
    if _is_terminal(sys.stdout):
        process = subprocess.Popen(list(command))
    else:
        sys.stdout.flush()
        process = subprocess.Popen(list(command), stdout=subprocess.PIPE)
        assert process.stdout is not None
        _copy_filtered(process.stdout)
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            continue


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _copy_filtered(source: Any) -> None:
    """nsys's standard output to ours until it closes. If ours goes away (`| head`), the copy
    stops and the pipe is closed, so the program sees a closed pipe as it would have, and
    what autonvtx prints later goes nowhere instead of failing."""
    from autonvtx.nsight import ProgressFilter

    def write(data: bytes) -> None:
        if hasattr(sys.stdout, "buffer"):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data.decode(errors="replace"))
        sys.stdout.flush()

    progress = ProgressFilter(write)
    try:
        while True:
            try:
                data = source.read1(65536)
            except KeyboardInterrupt:
                continue
            if not data:
                break
            progress.feed(data)
        progress.close()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        source.close()


def export_of_capture(nsys: Any, outputs: Sequence[str], started: float, status: int) -> str:
    """The SQLite export nsys wrote for this capture; a .qdstrm left without its importer is
    imported here, with the importer found where the Debian package keeps it."""
    from autonvtx import nsight
    from autonvtx.report.nsys.nsysrep import ensure_export

    report_glob, qdstrm_glob, export_glob = outputs
    fresh = [path for path in nsight.existing(outputs) if os.path.getmtime(path) >= started - 1]
    reports = [path for path in fresh if path.endswith(".nsys-rep")]
    exports = [path for path in fresh if path.endswith(".sqlite")]
    if exports and (not reports or os.path.getmtime(exports[-1]) >= os.path.getmtime(reports[-1])):
        return exports[-1]
    if reports:
        return ensure_export(reports[-1])
    streams = [path for path in fresh if path.endswith(".qdstrm")]
    if streams and nsys.importer is not None:
        return ensure_export(nsight.import_qdstrm(nsys.importer, streams[-1]))
    if streams:
        raise nsight.NsysError(
            f"profile: nsys left only {streams[-1]}: its importer (QdstrmImporter) was not found"
            f" beside {os.path.realpath(nsys.path)}; expected an Nsight Systems installation"
            " with its host-linux-x64 directory"
        )
    raise nsight.NsysError(
        f"profile: nsys (status {status}) wrote no report {report_glob}; expected"
        " `nsys profile` to finish (its messages are above)",
        exit_status=status or 2,
    )


def print_report(export: str, *, tree: bool, by: str | None, top: int | None, html: str | None) -> None:
    """`autonvtx report`'s table of the capture on standard output (and its page with --html)."""
    from autonvtx.report.nsys.export import ReportError
    from autonvtx.report.output import ReportRequest, produce
    from autonvtx.stats.model import ViewOptions

    print(f"autonvtx: profile: report {export[: -len('.sqlite')]}.nsys-rep, export {export}", file=sys.stderr)
    try:
        text = produce(ReportRequest(export, ViewOptions(tree=tree, by=by, top=top), html=html))
    except ReportError as error:  # a capture without ranges: said, and the program's status stands
        print(f"autonvtx: profile: {error}", file=sys.stderr)
        return
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()
    if html is not None:
        print(f"autonvtx: profile: wrote {html}", file=sys.stderr)
