"""`autonvtx report`: GPU time per NVTX range from what Nsight Systems recorded."""
from __future__ import annotations

import sys

import click

from autonvtx.cli.diff import scale_options
from autonvtx.cli.group import cli

@cli.command("report")
@click.argument("profile", nargs=-1, required=True)
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
@click.option("--across", type=click.Choice(["ranks"]), help="Ranks side by side: spread per range, stragglers, NCCL overlap (several files allowed).")
@scale_options
def report_command(profile: tuple[str, ...], tree: bool, by: str | None, sort: str | None, top: int | None, pattern: str | None,
                   strip_ids: bool, fmt: str | None, output: str | None, html: str | None, html_by: str,
                   across: str | None, jobs: int | None, scheduler: str | None, progress: bool | None) -> None:
    """GPU time per NVTX range from PROFILE: an `nsys export --type sqlite` file, a .nsys-rep, or an autonvtx trace."""
    from autonvtx.report.output import ReportRequest, produce

    if across is not None or len(profile) > 1:
        from autonvtx.report.acrossformats import report_across

        report_across(profile, across, sort, top, pattern, strip_ids, fmt, output, (tree, by, html), (jobs, scheduler, progress))
        return
    text = produce(ReportRequest(profile[0], tree, by, sort, top, pattern, strip_ids, fmt, output, html, html_by))
    if text is not None:
        click.echo(text, nl=False)
    if html is not None:
        print(f"autonvtx: report: wrote {html}", file=sys.stderr)
