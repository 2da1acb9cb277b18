"""`autonvtx kernel install`: a Jupyter kernel that runs under autonvtx (wiring only: the
kernelspec and the kernel itself are autonvtx.kernel's)."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

import click

from autonvtx.cli.flight import RECORDER, flight_options, flight_setting
from autonvtx.cli.group import cli
from autonvtx.cli.options import RuleArgs, rule_options
from autonvtx.errors import UsageError


@cli.group("kernel", invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def kernel_group(ctx: click.Context) -> None:
    """Jupyter kernels that run under autonvtx."""
    if ctx.invoked_subcommand is None:  # `autonvtx kernel` alone: what it offers, not an error
        click.echo(ctx.get_help())


@kernel_group.command("install")
@click.option(
    "--name", default="autonvtx", show_default=True, metavar="N", help="The kernelspec's name (a directory name)."
)
@click.option(
    "--display-name",
    metavar="TEXT",
    help="What the notebook's kernel menu shows (default: 'Python (autonvtx)'; with --name N, 'Python (autonvtx: N)').",
)
@rule_options
@click.option(
    "--trace",
    "trace_dir",
    metavar="DIR",
    help="Record with autonvtx's recorder: one trace per kernel session, DIR/NAME-<pid>.json.",
)
@click.option(
    "--budget",
    metavar="PCT",
    help="As `autonvtx run --budget`: each session turns off the ranges costing more than PCT% of their function's time.",
)
@flight_options(RECORDER)
@click.option(
    "--nsys",
    is_flag=True,
    help="Run the kernel under Nsight Systems: one NAME-<pid>.nsys-rep per session, in the notebook's directory.",
)
@click.option(
    "--user/--sys-prefix",
    "user",
    default=True,
    help="Install for this user (the default) or into this Python's environment.",
)
@click.option("--prefix", metavar="DIR", help="Install under DIR/share/jupyter/kernels (Jupyter's --prefix).")
def install_command(
    name: str,
    display_name: str | None,
    rules: RuleArgs,
    trace_dir: str | None,
    budget: str | None,
    nsys: bool,
    user: bool,
    prefix: str | None,
    **flight: Any,
) -> None:
    """Write a Jupyter kernel ("Python (autonvtx)") whose sessions run under `autonvtx run`
    with these rules: pick it in a notebook and every session is recorded (--trace DIR) or
    profiled by Nsight Systems (--nsys). With no rule options, each session reads the
    autonvtx.toml beside the notebook; `-t __main__` selects the functions cells define."""
    from autonvtx.kernel import check_name, install_spec, kernel_spec

    check_name(name)  # before anything is read, made or replaced
    args = rules.as_args(absolute_configs=True)  # a kernel runs in its notebook's directory
    if args:
        rules.load()  # bad rules stop here, not in a kernel that dies where nobody reads its stderr
    if budget is not None:
        from autonvtx.budget import parse_percent

        args += ["--budget", repr(parse_percent(budget, "kernel install: --budget"))]
    watch = flight_setting(**flight, where="kernel install")
    if watch is not None:
        if trace_dir is None:
            raise UsageError(
                "kernel install: --flight: needs --trace DIR (each session's windows are written beside its trace)"
            )
        args += [f"--flight={watch.range}", f"--flight-factor={watch.factor!r}", f"--flight-keep={watch.keep}"]
        args += [f"--flight-max={watch.max_files}", f"--flight-warmup={watch.warmup}"]
    nsys_path = None
    if nsys:
        nsys_path = shutil.which("nsys")
        if nsys_path is None:
            raise UsageError("kernel install: --nsys: no 'nsys' on PATH; expected Nsight Systems installed")
    spec = kernel_spec(args, name=name, display_name=display_name, trace_dir=trace_dir, nsys=nsys_path)
    if prefix is None and not user:
        prefix = sys.prefix
    where = install_spec(spec, user=prefix is None, prefix=prefix)
    if trace_dir is not None:
        os.makedirs(trace_dir, exist_ok=True)  # once installed: a refused install makes nothing
    click.echo(f"autonvtx: kernel {spec.display_name!r} installed in {where}")
    if trace_dir is None and not nsys:
        click.echo(
            "autonvtx: note: neither --trace nor --nsys: its ranges are seen only by a tool attached to the"
            " notebook server itself (nsys profile -t cuda,nvtx jupyter lab)",
            err=True,
        )
    if trace_dir is not None:
        click.echo(
            f"autonvtx: each session writes {os.path.join(os.path.abspath(trace_dir), name + '-<pid>.json')}"
            " when the kernel shuts down or restarts"
        )
