"""views.build_rows on real exports: the rows that launched nothing share one empty Work, and
every row that launched something holds its own (a row's work grows when several of its
nodes, or a start/end range's repeats, add to it; a shared one would grow for every row)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autonvtx.report.figures import Work
from autonvtx.report.profile import ReportOptions, read_profile
from autonvtx.stats.model import ViewOptions

FIXTURES = Path(__file__).parent / "fixtures" / "nsys"


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.sqlite")), ids=lambda p: p.stem)
@pytest.mark.parametrize("each", [True, False])
@pytest.mark.parametrize("by", [None, "thread"])
def test_only_rows_that_launched_nothing_share_their_work(fixture: Path, each: bool, by: str | None) -> None:
    report = read_profile(str(fixture), ReportOptions(ViewOptions(each=each, by=by), with_tree=False))
    busy = [row.work for row in report.rows if row.work != Work()]
    assert busy, "the fixture's rows launch GPU work"
    assert len({id(work) for work in busy}) == len(busy)
