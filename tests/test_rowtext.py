"""autonvtx.report._rowtext, the C twin of an export's per-name table (render.text._gpu_lines and
render.table.build_table for a file or a pipe) and of its sort (views.export_order): the same text and the
same order as the Python twins, for every value it takes, and None / False for what it declines."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from autonvtx.report import views
from autonvtx.report.figures import KernelShare, Row, Work
from autonvtx.report.output import ReportRequest, produce
from autonvtx.report.render import text
from autonvtx.stats.model import ViewOptions

native = pytest.importorskip("autonvtx.report._rowtext", reason="the native twin is not built")

FIXTURES = Path(__file__).parent / "fixtures" / "nsys"
HEADERS = ("GPU time", "GPU %", "Kernels", "Mem ops", "GPU span", "CPU time", "Inst")


def python_table(rows: list[Row], total: int) -> str:
    """What the Python twin writes for `rows` (a report with GPU work, written to a pipe)."""
    report: Any = SimpleNamespace(has_gpu=True, totals=SimpleNamespace(capture=SimpleNamespace(gpu_ns=total)))
    return "\n".join(text._gpu_table(report, text._gpu_lines(report, rows), None))


def native_table(rows: list[Row], total: int) -> str | None:
    return native.gpu_table(rows, total, HEADERS, text.shown, text.printable)


def row(name: str = "r", domain: str = "", **figures: Any) -> Row:
    work = Work(
        kernels=figures.pop("kernels", 0),
        kernel_ns=figures.pop("kernel_ns", 0),
        memcpy=figures.pop("memcpy", 0),
        memcpy_ns=figures.pop("memcpy_ns", 0),
        memset=figures.pop("memset", 0),
        memset_ns=figures.pop("memset_ns", 0),
        memcpy_bytes=figures.pop("memcpy_bytes", 0),
    )
    return Row("", domain, name, work=work, **figures)


def durations() -> list[int]:
    """Every unit's edges and ties (x.5 of the last digit), negatives and huge values, and a
    random spread over every magnitude."""
    values = [0, 1, -1, 999, 1000, -999, -1000, 2**53, 2**53 + 1, 2**62, 2**63 - 1, -(2**63)]
    for unit in (1_000, 1_000_000, 1_000_000_000):
        for whole in (1, 2, 9, 10, 999, 1000, 123_456, 10**9):
            base = whole * unit
            for delta in (-1, 0, 1, unit // 2 - 1, unit // 2, unit // 2 + 1, unit // 1000 // 2, unit - 1):
                values += [base + delta, -(base + delta)]
            # ties of the rounded last digit: a remainder of exactly half of it
            values += [base + unit // 2000, base + 3 * unit // 2000, -(base + unit // 2000)]
    generator = random.Random(32)
    for _ in range(20_000):
        values.append(int(generator.random() * 10 ** generator.uniform(0, 18.9)) * generator.choice((1, 1, 1, -1)))
    return [value for value in values if -(2**63) <= value < 2**63]


def test_format_duration_gives_the_python_text_for_every_integer() -> None:
    mismatched = [(ns, native.format_duration(ns), text.format_duration(ns)) for ns in durations()]
    assert [m for m in mismatched if m[1] != m[2]] == []
    assert native.format_duration(2**63) is None  # beyond int64: the Python twin writes it


def test_the_table_is_the_python_tables_text_for_every_figure() -> None:
    generator = random.Random(7)
    values = durations()
    rows = []
    for index in range(3_000):
        kernel_ns = generator.choice((0, 0, generator.choice(values) % 2**45))
        rows.append(
            row(
                f"name {index}",
                generator.choice(("", "torch", "d")),
                instances=generator.choice((0, 1, 999, 1000, 1_234_567, -1000)),
                cpu_ns=generator.choice(values),
                span_ns=generator.choice(values),
                kernels=generator.choice((0, 5, 999, 1000, 12_345_678, -2000)),
                kernel_ns=kernel_ns,
                memcpy=generator.choice((0, 3, 2000)),
                memcpy_ns=generator.choice((0, 1500, 2**40)),
                memset=generator.choice((0, 1, 999)),
                memset_ns=generator.choice((0, 500, 1_000_500)),
            )
        )
    for total in (0, 1, 7, 1000, 3 * 10**12, -5):
        written = native_table(rows, total)
        assert written is not None
        assert written == python_table(rows, total)


def test_shares_round_as_python_rounds_them() -> None:
    """ "%.1f" of the same double: ties of the decimal (0.05, 0.25, 12.35 ...) included."""
    rows = [row(f"r{k}", kernel_ns=k) for k in range(1, 4001)]
    for total in (4000, 8000, 3, 7, 20_000, 40_000, 1_000_000, 999_983):
        assert native_table(rows, total) == python_table(rows, total)


def test_shares_worked_out_from_the_integers_match_the_double_near_every_tie() -> None:
    """The share is worked out from the integers where they can tell how the double rounds: values
    a hair either side of a tie of the last digit (within and beyond the double's error), shares
    past 100% and 1,000%, and totals up to 2^53, for both the GPU % cell and a top kernel's."""
    generator = random.Random(53)
    totals = [3, 7, 1000, 999_983, 10**12 + 39, 2**52 + 1, 2**53 - 1]
    totals += [generator.randrange(1, 2**53) for _ in range(12)]
    for total in totals:
        parts = {0, 1, total - 1, total, total + 1, 10 * total, 11 * total - 1}
        for _ in range(300):
            halves = 2 * generator.randrange(0, 20_000) + 1  # k + 1/2 tenths of a per cent, doubled
            exact = halves * total // 2000
            parts.update(exact + delta for delta in (-2, -1, 0, 1, 2))
            parts.add(generator.randrange(0, 2 * total + 2))
        rows = [row(f"r{p}", kernel_ns=p) for p in sorted(parts) if 0 <= p < 2**53 // 1000]
        assert native_table(rows, total) == python_table(rows, total), total
        tops = [
            row("k", kernels=1, kernel_ns=total, top_kernels=[KernelShare("a", 1, p), KernelShare("b", 1, total - p)])
            for p in sorted(parts)
            if 0 <= p <= total and max(p, total - p) < 2**53 // 1000
        ]
        assert native_table(tops, total) == python_table(tops, total), total


NAMES = [
    "plain",
    "",
    "   ",
    "ends with spaces   ",
    "esc\x1b[31mred\x1b[0m",
    "tab\there",
    "del\x7f",
    "\x00",
    "caf\u00e9",
    "c1\x85\x9b control",
    "nbsp at the end\u00a0",
    "ideographic space\u3000",
    "line\u2028separator",
    "wide \U0001f600",
    "\u00a0",
    # a control character in each place of an eight-byte step, and after the last whole step
    "eight by\x7fes, then more",
    "sixteen bytes ok\x01 and on",
    "a name of twenty-three\x1f",
    "fifteen bytes.\x7f",
]


@pytest.mark.parametrize("domain", ["", "torch", "d\x1b", "dom\u00e9"])
def test_names_are_shown_as_the_python_twin_shows_them(domain: str) -> None:
    rows = [row(name, domain, instances=1, cpu_ns=10) for name in NAMES]
    assert native_table(rows, 100) == python_table(rows, 100)


def test_the_rule_follows_the_longest_name_in_code_points() -> None:
    for name in ("\u00e9" * 7, "\u00e9" * 30, "x" * 39, "x" * 41, "\x01" * 3):
        rows = [row(name, instances=1)]
        assert native_table(rows, 0) == python_table(rows, 0)


def test_top_kernel_lines_are_the_python_lines() -> None:
    kernels = [
        KernelShare("gemm", 3, 600),
        KernelShare("k\x1bernel", 1_234, 300),
        KernelShare("caf\u00e9 \u0085", 2, 75),
        KernelShare("fourth, not shown", 1, 25),
    ]
    rows = [
        row("one", kernels=1, kernel_ns=600, top_kernels=kernels[:1]),
        row("four", kernels=4, kernel_ns=1000, top_kernels=list(kernels)),
        row("tie", kernels=2, kernel_ns=8, top_kernels=[KernelShare("a", 1, 1), KernelShare("b", 1, 7)]),
        row("no kernel time", kernels=1, kernel_ns=0, top_kernels=kernels[:2]),
        row("negative", kernels=1, kernel_ns=-40, top_kernels=[KernelShare("n", 1, 0), KernelShare("m", 1, 2)]),
    ]
    written = native_table(rows, 1000)
    assert (
        written is not None and "      top: 60% gemm (x3), 30% k\\x1bernel (x1,234), 8% caf\u00e9 \\x85 (x2)" in written
    )
    assert written == python_table(rows, 1000)


@pytest.mark.parametrize(
    "declined",
    [
        row("float", cpu_ns=1.5),
        row("huge", cpu_ns=2**70),
        row("exact share", kernel_ns=2**53),
        row("lone surrogate \ud800", instances=1),
        Row("", "", "not a list", work=Work(kernels=1, kernel_ns=5), top_kernels=(KernelShare("k", 1, 5),)),  # type: ignore[arg-type]
        SimpleNamespace(name="no work", domain=""),
    ],
)
def test_what_it_cannot_write_exactly_is_left_to_python(declined: Any) -> None:
    rows = [row("fine", instances=1), declined]
    assert native_table(rows, 10) is None


def test_a_shown_that_fails_raises() -> None:
    def failing(domain: str, name: str) -> str:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        native.gpu_table([row("caf\u00e9")], 0, HEADERS, failing, text.printable)


@pytest.mark.parametrize("sort", ["gpu", "cpu", "kernels", "instances", "span", "memcpy", "total", "count"])
def test_sort_rows_gives_export_orders_order(sort: str) -> None:
    generator = random.Random(sort)
    rows = [
        row(
            generator.choice(("a", "b", "B", "\u00e9", "")),
            generator.choice(("", "x", "y")),
            instances=generator.randrange(3),
            cpu_ns=generator.randrange(3),
            span_ns=generator.randrange(3),
            kernels=generator.randrange(3),
            kernel_ns=generator.randrange(3),
            memcpy_ns=generator.randrange(2),
            memset_ns=generator.randrange(2),
            memcpy_bytes=generator.randrange(3),
        )
        for _ in range(2_000)
    ]
    order = views.export_order(sort)
    expected = sorted(rows, key=order.key)
    assert order.sort_in_place(rows)
    assert [id(r) for r in rows] == [id(r) for r in expected]  # ties keep their order, as sorted's


def test_sort_rows_declines_what_it_cannot_order_and_leaves_the_list() -> None:
    rows = [row("a", cpu_ns=1), row("b", cpu_ns=2.5)]
    before = list(rows)
    assert native.sort_rows(rows, "cpu") is False and rows == before
    assert native.sort_rows([row("a"), row("b", cpu_ns=2**64)], "gpu") is False
    assert native.sort_rows([row("a")], "name") is False  # by name: the Python key
    assert native.sort_rows([], "gpu") is True


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.sqlite")), ids=lambda p: p.stem)
@pytest.mark.parametrize("each", [True, False])
@pytest.mark.parametrize("by", [None, "rank"])
def test_reports_are_the_same_bytes_without_the_native_twin(
    fixture: Path, each: bool, by: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = ReportRequest(str(fixture), view=ViewOptions(each=each, by=by))
    with_native = produce(request)
    monkeypatch.setattr(text, "_native_gpu_table", None)
    monkeypatch.setattr(views, "_native_sort", None)
    assert with_native == produce(request)


def test_fields_read_from_their_slots_follow_the_class_as_python_reads_it() -> None:
    # Row and Work keep their fields in __slots__: the native twin reads them at their places,
    # but a class whose attribute is no longer a plain slot is read by name, as Python reads it.
    slot = Work.__dict__["kernel_ns"]

    class Halved(Work):
        __slots__ = ()

        @property  # type: ignore[misc]
        def kernel_ns(self) -> int:  # a property in place of the inherited slot
            return 1_000_000

        @kernel_ns.setter
        def kernel_ns(self, value: int) -> None:  # kept in the slot, which is not what reads give
            slot.__set__(self, value)

    plain = [row("a", kernels=2, kernel_ns=5_000_000, instances=1), row("b", kernel_ns=7, instances=2)]
    assert native_table(plain, 10_000_000) == python_table(plain, 10_000_000)  # the slots' places found
    rows = [*plain, Row("", "", "halved", 1, 0, 0, Halved(kernels=3, kernel_ns=9))]
    assert rows[-1].work.kernel_ns == 1_000_000 and slot.__get__(rows[-1].work) == 9
    assert native_table(rows, 10_000_000) == python_table(rows, 10_000_000)
    assert "1.000 ms" in (native_table(rows, 10_000_000) or "")
    order = views.export_order("gpu")
    expected = sorted(rows, key=order.key)
    assert order.sort_in_place(rows) and rows == expected
    # The class itself changed after its slots were read: its version changes, the place is found again.
    original = Work.__dict__["memcpy_ns"]
    try:
        Work.memcpy_ns = property(lambda self: 3_000_000)  # type: ignore[assignment, method-assign]
        assert native_table(plain, 10_000_000) == python_table(plain, 10_000_000)
        assert "3.000 ms" in (native_table(plain, 10_000_000) or "")
    finally:
        Work.memcpy_ns = original  # type: ignore[method-assign]
    assert native_table(plain, 10_000_000) == python_table(plain, 10_000_000)
