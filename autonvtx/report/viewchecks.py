"""Which view options a kind of file can answer, refused the same way by every command that
reads files (`report`, `diff`): one line naming the option, the file and what was expected,
once the files' kinds are known (a .json may hold a recording or not, which only reading says)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autonvtx.errors import UsageError

if TYPE_CHECKING:
    from autonvtx.stats.model import ViewOptions


def no_gpu_data(path: str | None) -> UsageError:
    """--by gpu asked of an autonvtx recording (`path`, or the program's own where None)."""
    what = "an autonvtx recording" if path is None else f"{path} is an autonvtx recording, which"
    return UsageError(f"--by gpu: {what} holds no GPU data; expected process, rank or thread")


def check_view_applies(kind: str, path: str, view: ViewOptions) -> None:
    """Refuse a view option `path`, a file of `kind` ("autonvtx" or "nsys"), has no data for."""
    if kind == "autonvtx" and view.by == "gpu":
        raise no_gpu_data(path)
    if kind == "nsys" and (view.group != "name" or view.skip_first):
        option = "--group" if view.group != "name" else "--skip-first"
        raise UsageError(
            f"{option}: applies to autonvtx recordings; {path} is an Nsight Systems export, whose ranges are"
            " swept as recorded"
        )
