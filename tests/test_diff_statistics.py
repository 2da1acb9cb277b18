"""diff's statistics: the exact rank test, the ratio's interval, the verdicts and the CI gate on runs made to order."""

from __future__ import annotations

import itertools
import json
import math
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import autonvtx_env
from synthetic_runs import FUNCTIONS, Noise, Program, write_run, write_runs

from autonvtx.report.compare.diff import Diff, DiffOptions, compare
from autonvtx.report.compare.diffrun import DiffRequest, produce_diff
from autonvtx.report.compare.gather import Job, gather
from autonvtx.report.compare.noise import achieved_confidence, compare_runs, rank_test, ratio_interval, smallest_p

FIXTURES = Path(__file__).parent / "fixtures" / "nsys"
SAXPY = str(FIXTURES / "saxpy-mpi-cuda-nsys2022.2.sqlite")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autonvtx", *args], capture_output=True, text=True, env=autonvtx_env(), timeout=300
    )


# The test and the interval against their definitions


def _brute_p(base: list[float], new: list[float]) -> float:
    """Every split of the pooled runs, counted: the definition of the exact p-value (midranks for ties)."""
    pooled = base + new
    ordered = sorted(pooled)

    def doubled_rank(value: float) -> int:
        places = [i for i, v in enumerate(ordered) if v == value]
        return places[0] + places[-1] + 2

    expected = len(new) * (len(pooled) + 1)
    observed = abs(sum(doubled_rank(v) for v in new) - expected)
    splits = list(itertools.combinations(range(len(pooled)), len(new)))
    extreme = sum(abs(sum(doubled_rank(pooled[i]) for i in split) - expected) >= observed for split in splits)
    return extreme / len(splits)


def test_complete_separation_gives_the_exact_p() -> None:
    assert rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert rank_test([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == pytest.approx(2 / 252)
    assert rank_test([1, 2, 3, 4], [5, 6, 7, 8]) == pytest.approx(2 / 70)
    assert smallest_p(5, 5) == pytest.approx(2 / 252) and smallest_p(3, 3) == pytest.approx(0.1)
    assert rank_test([1.0, 1.0], [1.0, 1.0]) == 1.0


def test_rank_test_matches_counting_every_split_ties_included() -> None:
    rng = random.Random(5)
    for _ in range(40):
        base = [float(rng.randint(0, 6)) for _ in range(rng.randint(2, 6))]
        new = [float(rng.randint(0, 8)) for _ in range(rng.randint(2, 6))]
        assert rank_test(base, new) == pytest.approx(_brute_p(base, new), abs=1e-12), (base, new)


def test_many_runs_are_counted_quickly_and_agree_with_the_normal_limit() -> None:
    base = [float(i) for i in range(30)]
    new = [i + 4.5 for i in range(30)]
    p = rank_test(base, new)
    # Normal approximation for 30 + 30 without ties: z = (U - 450) / sqrt(30 * 30 * 61 / 12).
    u = sum(y > x for x in base for y in new)
    z = (abs(u - 450) - 0.5) / math.sqrt(30 * 30 * 61 / 12)
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)), rel=0.05)


def test_ratio_interval_is_hodges_lehmann_with_exact_order_statistics() -> None:
    base = [10.0, 11.0, 12.0, 13.0, 14.0]
    new = [13.0, 14.5, 15.0, 16.0, 20.0]
    ratio, low, high, achieved = ratio_interval(base, new, 0.95)
    ratios = sorted(y / x for x in base for y in new)
    assert ratio == pytest.approx(ratios[12])  # the median of 25 ratios
    # 5 and 5: P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252, so the 3rd and 23rd of 25.
    assert (low, high) == (pytest.approx(ratios[2]), pytest.approx(ratios[22]))
    assert achieved == pytest.approx(1 - 8 / 252)
    _, low3, high3, achieved3 = ratio_interval([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], 0.95)
    assert (low3, high3, achieved3) == (0.0, math.inf, 0.0)  # 3 and 3 cannot bound it at 95%


def test_interval_covers_the_true_ratio_as_often_as_it_says() -> None:
    rng = random.Random(11)
    covered = 0
    draws = 2000
    for _ in range(draws):
        base = [rng.lognormvariate(0, 0.1) for _ in range(5)]
        new = [1.3 * rng.lognormvariate(0, 0.1) for _ in range(5)]
        _, low, high, achieved = ratio_interval(base, new, 0.95)
        covered += low <= 1.3 <= high
    # Exact for continuous data: 1 - 8/252 = 0.968; 2,000 draws give a standard error of 0.004.
    assert abs(covered / draws - (1 - 8 / 252)) < 0.015


def test_zero_totals_keep_the_test_and_drop_the_ratio() -> None:
    found = compare_runs([0.0, 0.0, 0.0, 0.0, 0.0], [5.0, 6.0, 7.0, 8.0, 9.0])
    assert found is not None and found.p_value == pytest.approx(2 / 252)
    assert found.ratio is None and found.low is None


# The cases the issue measured: every new run slower than every base run


def _runs_with_factors(directory: Path, stem: str, factors: list[float], seed: int) -> list[str]:
    """One run per factor: every function that many times slower, with little other noise."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    quiet = Noise(run=0.0, function=0.0, call=0.01)
    return [
        str(write_run(directory / f"{stem}{i}.json", Program(slower=dict.fromkeys(FUNCTIONS, f), noise=quiet), rng))
        for i, f in enumerate(factors)
    ]


# Welch's t-test gives p = 0.024 (1.33x) and 0.081 (2.2x) on the per-run factors: `same`, and the gate passed.
SEPARATED = {
    "1.33x": ([1.0, 1.02, 0.98, 1.05, 1.30], [1.33, 1.35, 1.31, 1.37, 1.9]),
    "2.2x, one outlier a side": ([1.0, 1.02, 0.98, 1.01, 2.0], [2.2, 2.25, 2.15, 2.2, 6.0]),
}


@pytest.mark.parametrize("case", sorted(SEPARATED))
def test_every_new_run_slower_is_slower_and_fails_the_gate(tmp_path: Path, case: str) -> None:
    base_factors, new_factors = SEPARATED[case]
    base = _runs_with_factors(tmp_path, "base", base_factors, 1)
    new = _runs_with_factors(tmp_path, "new", new_factors, 2)
    done = cli("diff", *base, "--against", *new, "--fail-over", "10", "--format", "json")
    assert done.returncode == 1, (done.stdout, done.stderr)
    document = json.loads(done.stdout)
    rows = {row["name"]: row for row in document["ranges"]}
    for name in (*FUNCTIONS, "train"):
        assert rows[name]["verdict"] == "slower", rows[name]
        assert rows[name]["p_value"] == pytest.approx(2 / 252)
        low, high = rows[name]["ratio_interval"]
        assert low > 1.0 and high > low
        assert rows[name]["change_pct"] > 10
    assert "range(s) slowed by more than 10%" in done.stderr
    assert "Traceback" not in done.stderr


def test_text_states_the_test_and_the_noise_model(tmp_path: Path) -> None:
    base_factors, new_factors = SEPARATED["1.33x"]
    base = _runs_with_factors(tmp_path, "base", base_factors, 1)
    new = _runs_with_factors(tmp_path, "new", new_factors, 2)
    lines = cli("diff", *base, "--against", *new).stdout.splitlines()
    assert lines[2].startswith("test: exact Mann-Whitney rank test over per-run totals; slower/faster when p < 0.01")
    assert lines[3].startswith("noise model: runs independent, a change multiplies run times")
    slower = next(line for line in lines if line.endswith(" forward"))
    assert slower.startswith("slower") and "0.0079" in slower


# A/A: one program, its runs split five against five


def test_a_a_splits_are_never_flagged(tmp_path: Path) -> None:
    rng = random.Random(2026)
    runs = write_runs(tmp_path, "run", 10, Program(), rng)
    summaries = gather([Job(path) for path in runs], workers=1)
    verdicts: dict[str, int] = {}
    for seed in range(12):
        order = list(range(10))
        random.Random(seed).shuffle(order)
        diff = compare([summaries[i] for i in order[:5]], [summaries[i] for i in order[5:]])
        for row in diff.rows:
            verdicts[row.verdict] = verdicts.get(row.verdict, 0) + 1
            assert row.verdict in ("same", "unclear"), row
            assert row.p_value is not None and row.p_value > 0.01
    assert verdicts.get("same", 0) > 0  # about 2.3% noise a run: within 5% is shown for most


def test_same_needs_an_interval_inside_the_margin(tmp_path: Path) -> None:
    """No real change, but runs too noisy to rule out 5%: unclear, never same."""
    rng = random.Random(3)
    noisy = Program(noise=Noise(run=0.15, function=0.0, call=0.01))
    base = write_runs(tmp_path, "b", 5, noisy, rng)
    new = write_runs(tmp_path, "n", 5, noisy, rng)
    diff = produce_diff(DiffRequest(tuple(base), tuple(new))).diff
    for row in diff.rows:
        assert row.verdict != "same" or (row.interval and 0.95 <= row.interval[0] and row.interval[1] <= 1.05)
    assert "unclear" in {row.verdict for row in diff.rows}
    loose = produce_diff(DiffRequest(tuple(base), tuple(new), options=DiffOptions(min_change_pct=400))).diff
    assert {row.verdict for row in loose.rows} == {"same"}


def test_unclear_warns_at_the_gate_and_fails_when_asked(tmp_path: Path) -> None:
    rng = random.Random(3)
    noisy = Program(noise=Noise(run=0.15, function=0.0, call=0.01))
    base = write_runs(tmp_path, "b", 5, noisy, rng)
    new = write_runs(tmp_path, "n", 5, noisy, rng)
    warned = cli("diff", *base, "--against", *new, "--fail-over", "10")
    assert warned.returncode == 0, warned.stderr
    assert "warning:" in warned.stderr and "may have slowed by more than 10%" in warned.stderr
    strict = cli("diff", *base, "--against", *new, "--fail-over", "10", "--fail-unclear")
    assert strict.returncode == 1 and "unclear" in strict.stderr
    alone = cli("diff", *base, "--against", *new, "--fail-unclear")
    assert alone.returncode == 2 and "--fail-unclear goes with --fail-over" in alone.stderr


def test_too_few_runs_say_no_change_can_be_called_real(tmp_path: Path) -> None:
    rng = random.Random(4)
    base = write_runs(tmp_path, "b", 3, Program(), rng)
    new = write_runs(tmp_path, "n", 3, Program(slower={"forward": 2.0}), rng)
    diff = produce_diff(DiffRequest(tuple(base), tuple(new))).diff
    assert {row.name: row.verdict for row in diff.rows}["forward"] == "unclear"
    assert any("smallest p-value possible is 0.1" in note for note in diff.notes)


# Identical inputs


def test_identical_copies_are_no_change(tmp_path: Path) -> None:
    rng = random.Random(8)
    base = write_runs(tmp_path, "b", 5, Program(), rng)
    copies = []
    for path in base:
        copy = tmp_path / ("copy_" + Path(path).name)
        shutil.copy(path, copy)
        copies.append(str(copy))
    done = cli("diff", *base, "--against", *copies, "--fail-over", "1", "--fail-unclear", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert {row["verdict"] for row in document["ranges"]} == {"same"}
    assert all(row["change_ns"] == 0 and row["p_value"] == 1.0 for row in document["ranges"])
    assert "BASE and NEW hold the same measurements (the same runs): nothing changed" in document["notes"]


def test_copies_within_a_side_count_once(tmp_path: Path) -> None:
    """`a a --against b b` once gave p < 0.0001: a copy is not a second run."""
    rng = random.Random(9)
    (base,) = write_runs(tmp_path, "b", 1, Program(), rng)
    (new,) = write_runs(tmp_path, "n", 1, Program(), rng)
    diff = produce_diff(DiffRequest((base, base, base), (new, new, new))).diff
    assert diff.base_files == [base] and diff.new_files == [new]
    assert all(row.p_value is None for row in diff.rows)  # one run a side: no test
    assert f"BASE: {base} repeats the measurements of {base} (a copy?): counted once" in diff.notes
    same_file = produce_diff(DiffRequest((SAXPY, SAXPY), (SAXPY, SAXPY), strip_ids=True)).diff
    assert {row.verdict for row in same_file.rows} == {"same"}


def test_the_test_line_says_the_confidence_the_exact_interval_holds() -> None:
    # The exact interval's confidence is discrete: asked 95% at 5 and 5 runs, it holds 96.8%
    # (1 - 2 P(U <= 2) = 1 - 2 x 4/252), which the output says rather than a bare "95%".
    assert achieved_confidence(5, 5, 0.95) == pytest.approx(1 - 2 * 4 / 252)
    assert achieved_confidence(2, 2, 0.95) == 0.0  # no bounded interval: too few runs
    assert ratio_interval([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0, 6.0], 0.95)[3] == achieved_confidence(
        5, 5, 0.95
    )
    files = [f"run{i}.json" for i in range(5)]
    line = Diff(files, files, DiffOptions(), False, False, None, []).test
    assert "ratio's 95% interval (exact: 96.8% with 5 and 5 runs) lies within 5% of 1" in line
