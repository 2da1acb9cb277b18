"""`autonvtx profile` and symbolic links at its outputs, with the real Nsight Systems: a dangling
link is "there" (refused without --force, one line, where it once raised a traceback), and with
--force every link at OUT.nsys-rep and OUT.sqlite is replaced, never written through (nsys had
truncated the .sqlite link's target to 0 bytes)."""

from __future__ import annotations

from pathlib import Path

from conftest import make_file
from nsys_support import nsys_or_skip, run_profile


def test_a_dangling_link_at_the_output_is_refused_without_force(tmp_path: Path) -> None:
    nsys_or_skip()
    make_file(tmp_path / "app.py", "print('ran')\n")
    (tmp_path / "out.sqlite").symlink_to(tmp_path / "gone.sqlite")
    done = run_profile("-o", "out", "app.py", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "autonvtx: profile: -o 'out': out.sqlite exists; expected --force to overwrite it, or another -o\n"
    )
    assert "ran" not in done.stdout


def test_force_replaces_links_at_both_outputs_and_leaves_their_targets(tmp_path: Path) -> None:
    nsys_or_skip()
    make_file(tmp_path / "app.py", "def f():\n    return 1\n\nf()\nprint('ran')\n")
    precious_report = tmp_path / "precious.nsys-rep"
    precious_export = tmp_path / "precious.sqlite"
    precious_report.write_bytes(b"an earlier report")
    precious_export.write_bytes(b"an earlier export")
    (tmp_path / "out.nsys-rep").symlink_to(precious_report)
    (tmp_path / "out.sqlite").symlink_to(precious_export)
    done = run_profile("--force", "-o", "out", "-t", "__main__", "app.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ran" in done.stdout
    assert precious_report.read_bytes() == b"an earlier report"
    assert precious_export.read_bytes() == b"an earlier export"
    for name in ("out.nsys-rep", "out.sqlite"):
        assert not (tmp_path / name).is_symlink()
        assert (tmp_path / name).stat().st_size > 0
