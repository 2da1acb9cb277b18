"""decisions.ModuleReport: decisions kept as flat lists (what a wholesale walk appends to), read as
the dictionaries --verbose, `list` and the counts print from, in the order they were taken."""

from __future__ import annotations

import sys

import pytest

from autonvtx.decisions import MEMBER, ModuleReport


def test_decisions_fold_into_dictionaries_in_order_and_first_skip_wins() -> None:
    report = ModuleReport("mod")
    report.add_wrapped("b", "rule 1")
    report.names_wrapped_for("rule 1").append("a")  # as the native walk appends
    report.skip("x", "property: descriptors are left untouched")
    report.skips.extend([MEMBER, "Box", "__repr__", "protocol method: called implicitly"])
    report.skip("x", "a later reason")  # setdefault: the first reason stands
    assert list(report.wrapped.items()) == [("b", "rule 1"), ("a", "rule 1")]
    assert list(report.skipped.items()) == [
        ("x", "property: descriptors are left untouched"),
        ("Box.__repr__", "protocol method: called implicitly"),
    ]
    # Decided again after a read (a script's __main__ walked statement by statement): kept in
    # order, a name decided twice keeps its first place and takes the new reason.
    report.add_wrapped("c", "rule 2")
    report.add_wrapped("b", "rule 2")
    assert list(report.wrapped.items()) == [("b", "rule 2"), ("a", "rule 1"), ("c", "rule 2")]
    assert report.summary() == "mod: wrapped 3, skipped 2 (1 property, 1 protocol method)"


def test_the_lists_a_walk_holds_stay_the_report_s_own_after_a_read() -> None:
    report = ModuleReport("mod")
    names, skips = report.names_wrapped_for("why"), report.skips
    names.append("f")
    skips.extend(["g", "why not"])
    assert report.wrapped == {"f": "why"} and report.skipped == {"g": "why not"}
    names.append("h")
    skips.extend([MEMBER, "C", "m", "why not"])
    assert report.wrapped == {"f": "why", "h": "why"}
    assert report.skipped == {"g": "why not", "C.m": "why not"}


def _code_named(qualname: str) -> object:
    def f() -> None:
        pass

    return f.__code__.replace(co_qualname=qualname)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="code objects have co_qualname from Python 3.11")
def test_a_code_object_in_the_names_reads_as_its_qualname_and_stays_after_a_read() -> None:
    # The code engine's native walk writes the code it monitors in place of its name: the same
    # list is the one its uninstall reads, so a read folds the names and keeps the codes.
    report = ModuleReport("mod", verb="monitored")
    names = report.names_wrapped_for("rule 1")
    first, second = _code_named("A.first"), _code_named("second")
    names.extend([first, "plain", second])
    assert list(report.wrapped.items()) == [("A.first", "rule 1"), ("plain", "rule 1"), ("second", "rule 1")]
    assert names == [first, second] and report.names_wrapped_for("rule 1") is names
    assert list(report.wrapped) == ["A.first", "plain", "second"]  # folded once, not again
    # Appended after the read: folded with the reason then current; codes still kept.
    third = _code_named("third")
    names.append(third)
    report.add_wrapped("late", "rule 2")
    assert list(report.wrapped.items()) == [
        ("A.first", "rule 1"),
        ("plain", "rule 1"),
        ("second", "rule 1"),
        ("third", "rule 1"),
        ("late", "rule 2"),
    ]
    assert names == [first, second, third]
    # What uninstall does (ranges.CodeMonitor): names back in place of the codes; the report
    # reads the same.
    names[:] = [getattr(entry, "co_qualname", entry) for entry in names]
    assert report.summary() == "mod: monitored 5, skipped 0"
    assert report.lines()[:5] == [
        f"mod:{q}: monitored (rule {1 if q != 'late' else 2})" for q in ("A.first", "plain", "second", "third", "late")
    ]
