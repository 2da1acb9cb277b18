"""A .nsys-rep report turned into its SQLite export by `nsys export`, cached beside it."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from autonvtx.report.export import ReportError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


def is_report(path: str) -> bool:
    return path.lower().endswith(REPORT_SUFFIXES)


def cached_export_path(path: str) -> str:
    """Where the export of `path` lives: run.nsys-rep -> run.sqlite (nsys export's own default)."""
    for suffix in REPORT_SUFFIXES:
        if path.lower().endswith(suffix):
            return path[: -len(suffix)] + ".sqlite"
    return path + ".sqlite"


def ensure_export(path: str) -> str:
    """The SQLite export of report `path`: the cached one when newer than the report, else made now."""
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file; expected an Nsight Systems report (.nsys-rep) or its SQLite export")
    target = cached_export_path(path)
    if os.path.exists(target) and os.path.getmtime(target) >= os.path.getmtime(path):
        return target
    nsys = shutil.which("nsys")
    if nsys is None:
        raise ReportError(
            f"{path}: reading a .nsys-rep needs Nsight Systems' `nsys` on PATH, which is not there; "
            f"expected `nsys export --type sqlite --output {target} {path}` run where nsys is installed, "
            f"then `autonvtx report {target}`"
        )
    directory = os.path.dirname(os.path.abspath(target))
    # Export into a private temporary directory beside the target, then rename: a reader never
    # sees a half-written export, and two reports exporting at once do not collide.
    scratch = tempfile.mkdtemp(prefix=".autonvtx-export-", dir=directory)
    try:
        produced = os.path.join(scratch, os.path.basename(target))
        command = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", produced, path]
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as exc:
            raise ReportError(f"{path}: could not run nsys ({exc}); expected a working `nsys export`") from None
        if result.returncode != 0 or not os.path.exists(produced):
            detail = (result.stderr or result.stdout).strip().splitlines()
            last = detail[-1] if detail else f"exit status {result.returncode}"
            raise ReportError(f"{path}: `nsys export --type sqlite` failed: {last}")
        os.replace(produced, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
