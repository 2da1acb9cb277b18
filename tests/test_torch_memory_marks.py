"""The memory marks' join without torch (any Python autonvtx supports): marks emitted by the
torch plugin's mark writer under the real recorder, and what `--memory` says of marks it cannot
give a range."""

from __future__ import annotations

from pathlib import Path

from conftest import run_under_recorder

from autonvtx.report import memory as report_memory


def test_marks_without_a_whole_range_are_counted_not_dropped(tmp_path: Path) -> None:
    from autonvtx.report.sideviews import memory_table
    from autonvtx.stats.model import ViewOptions

    (recording,), _ = run_under_recorder(
        tmp_path,
        """
        import nvtx
        from autonvtx.plugins.torch.memory import NvtxMarks

        marks = NvtxMarks()
        marks.mark("peak allocated", 5)  # no range around it
        nvtx.push_range("half")
        marks.mark("allocated at start", 1)  # its range never gets the other two
        nvtx.pop_range()
        """,
    )
    assert [m.payload for m in recording.marks] == [5, 1]
    found = report_memory.from_recordings([recording], None, False)
    assert found == ([], 2)
    text = memory_table(found, ViewOptions(), "text")
    assert text.splitlines() == [
        "note: " + report_memory.NO_FIGURES,
        "note: 2 memory mark(s) had no range around them with all three figures (events dropped or outside "
        "the capture): left out of the table",
    ]
