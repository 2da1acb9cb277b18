"""A .nsys-rep report (or the .qdstrm nsys leaves without its importer) turned into its SQLite
export by `nsys export`, cached beside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from autonvtx.report.nsys.export import ReportError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep", ".qdstrm")


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
    nsys = _nsys(path, target)
    if path.lower().endswith(".qdstrm"):
        path = _imported(nsys, path)
    _export(nsys, path, target)
    return target


def _nsys(path: str, target: str) -> str:
    from autonvtx.environment import NSYS
    from autonvtx.nsight import NsysError, locate_nsys

    try:
        return locate_nsys()
    except NsysError as error:
        where = "`nsys` on PATH, which is not there" if not os.environ.get(NSYS) else f"nsys ({error})"
        raise ReportError(
            f"{path}: reading a .nsys-rep needs Nsight Systems' {where}; "
            f"expected `nsys export --type sqlite --output {target} {path}` run where nsys is installed, "
            f"then `autonvtx report {target}`"
        ) from None


def _imported(nsys: str, path: str) -> str:
    """The .nsys-rep of a .qdstrm: made by nsys's importer (QdstrmImporter) when it is newer."""
    from autonvtx.nsight import NsysError, find_importer, import_qdstrm

    report = path[: -len(".qdstrm")] + ".nsys-rep"
    if os.path.exists(report) and os.path.getmtime(report) >= os.path.getmtime(path):
        return report
    importer = find_importer(nsys)
    if importer is None:
        raise ReportError(
            f"{path}: Nsight Systems' importer (QdstrmImporter) was not found beside {nsys};"
            " expected an installation with its host-linux-x64 directory"
        )
    try:
        return str(import_qdstrm(importer, path))
    except NsysError as error:
        raise ReportError(str(error)) from None


def _export(nsys: str, path: str, target: str) -> None:
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
