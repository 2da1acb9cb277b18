"""Is a change beyond run-to-run noise? An exact rank test and a distribution-free interval, standard library only.

The noise model is the one a benchmark on a shared machine can defend: runs are independent, and
a change multiplies a side's run times (a busy machine slows a whole run; a slower function is
slower by a factor). Nothing is assumed of the noise's shape: an outlier run counts as one rank,
however far out it is, so it cannot hide a change (as it does in a t-test's variance) or fake one.

- The test is the exact two-sided Wilcoxon-Mann-Whitney rank-sum test (Mann and Whitney 1947):
  its p-value is the share of the C(m+n, m) ways to split the pooled runs into two sides whose
  rank sum is at least as far from its mean as the one observed. Tied totals take their mean rank,
  and the null distribution is counted for those tied ranks, so ties are exact too.
- The change is the Hodges-Lehmann estimate of the ratio new / base (the median of the m x n
  ratios of a new run to a base run) with its exact distribution-free confidence interval (order
  statistics of the same ratios, Lehmann 1963), computed on log times: a shift of the logs is the
  multiplicative change of the model above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

TEST_NAME = "exact Mann-Whitney rank test over per-run totals"
NOISE_MODEL = (
    "runs independent, a change multiplies run times; no assumption on the noise's shape (an outlier run is one rank)"
)
EXACT_LIMIT = 60  # pooled runs counted exactly; beyond, the normal approximation with the tie correction


@dataclass(frozen=True)
class Comparison:
    """Two sides' per-run totals compared: p-value, the ratio new / base and its confidence interval."""

    p_value: float
    ratio: float | None  # Hodges-Lehmann: median of new/base over every pair of runs; None without positive totals
    low: float | None  # confidence interval of the ratio; 0 and inf stand for unbounded
    high: float | None


def compare_runs(base: list[float], new: list[float], confidence: float = 0.95) -> Comparison | None:
    """The test and the interval; None when a side has fewer than two runs."""
    if len(base) < 2 or len(new) < 2:
        return None
    p_value = rank_test(base, new)
    if any(value <= 0 for value in (*base, *new)):
        # A run without the range (total 0) has no log: the rank test holds, the ratio does not.
        return Comparison(p_value, None, None, None)
    ratio, low, high, _ = ratio_interval(base, new, confidence)  # its confidence: achieved_confidence()
    return Comparison(p_value, ratio, low, high)


def rank_test(base: list[float], new: list[float]) -> float:
    """Exact two-sided p-value of the rank-sum test (midranks for ties)."""
    scores, observed = _doubled_ranks(base, new)
    total = len(scores)
    expected = len(new) * (total + 1)  # mean of the doubled rank sum of `new`
    distance = abs(observed - expected)
    if distance == 0:
        return 1.0
    if total > EXACT_LIMIT:
        return _normal_p(scores, len(new), distance)
    counts = _sum_distribution(len(new), tuple(scores))
    tail = sum(count for value, count in counts.items() if abs(value - expected) >= distance)
    return min(1.0, tail / math.comb(total, len(new)))


def smallest_p(m: int, n: int) -> float:
    """The p-value of complete separation: no p-value below it is possible with m and n runs."""
    return min(1.0, 2.0 / math.comb(m + n, m))


def ratio_interval(base: list[float], new: list[float], confidence: float) -> tuple[float, float, float, float]:
    """Hodges-Lehmann ratio new / base, its interval (0 / inf when unbounded) and the achieved confidence."""
    logs = sorted(math.log(y) - math.log(x) for x in base for y in new)
    pairs = len(logs)
    middle = (logs[(pairs - 1) // 2] + logs[pairs // 2]) / 2
    # The interval is [D(c), D(mn + 1 - c)] for the largest c with P(U <= c - 1) <= (1 - confidence) / 2,
    # U the Mann-Whitney count without ties (Lehmann 1963); its confidence is 1 - 2 P(U <= c - 1).
    c, achieved = _interval_rank(len(base), len(new), confidence)
    if c == 0:
        return math.exp(middle), 0.0, math.inf, 0.0
    return math.exp(middle), math.exp(logs[c - 1]), math.exp(logs[pairs - c]), achieved


def achieved_confidence(m: int, n: int, confidence: float) -> float:
    """The confidence the exact interval of the ratio holds with m and n runs, at least `confidence`
    where the runs allow it (the distribution is discrete: 96.8% where 95% is asked, at 5 and 5);
    0 where no bounded interval exists."""
    return _interval_rank(m, n, confidence)[1]


def _interval_rank(m: int, n: int, confidence: float) -> tuple[int, float]:
    below = _u_lower_tail(m, n)
    c = 0
    while c < len(below) and below[c] <= (1 - confidence) / 2:
        c += 1
    return c, (1 - 2 * below[c - 1]) if c else 0.0


def _doubled_ranks(base: list[float], new: list[float]) -> tuple[list[int], int]:
    """Twice the midrank of every pooled value (integers), sorted, and the sum of `new`'s."""
    pooled = sorted([(value, 0) for value in base] + [(value, 1) for value in new])
    scores: list[int] = []
    observed = 0
    start = 0
    while start < len(pooled):
        end = start
        while end + 1 < len(pooled) and pooled[end + 1][0] == pooled[start][0]:
            end += 1
        doubled = start + end + 2  # 2 x the mean of ranks start+1 .. end+1
        for index in range(start, end + 1):
            scores.append(doubled)
            observed += doubled * pooled[index][1]
        start = end + 1
    return scores, observed


@lru_cache(maxsize=256)
def _sum_distribution(chosen: int, scores: tuple[int, ...]) -> dict[int, int]:
    """How many ways `chosen` of the scores add up to each sum: the exact null distribution.

    Each count vector is one Python integer holding a digit per possible sum (a generating
    polynomial), so adding a score to every subset is one shift and one add of big integers.
    """
    width = 8 * ((math.comb(len(scores), chosen).bit_length() + 8) // 8)  # a digit never overflows
    ways = [0] * (chosen + 1)
    ways[0] = 1
    for taken, score in enumerate(scores):
        for k in range(min(chosen, taken + 1), 0, -1):
            ways[k] += ways[k - 1] << (score * width)
    packed = ways[chosen]
    digits = packed.to_bytes((packed.bit_length() + 7) // 8 or 1, "little")
    size = width // 8
    counts: dict[int, int] = {}
    for value in range(0, len(digits), size):
        count = int.from_bytes(digits[value : value + size], "little")
        if count:
            counts[value // size] = count
    return counts


@lru_cache(maxsize=256)
def _u_lower_tail(m: int, n: int) -> tuple[float, ...]:
    """P(U <= u) for u = 0 .. mn // 2 under the null, without ties (the recursion of Mann and Whitney)."""
    if m + n > EXACT_LIMIT:
        mean, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
        return tuple(0.5 * math.erfc(-((u + 0.5 - mean) / sd) / math.sqrt(2)) for u in range(m * n // 2 + 1))
    counts = _sum_distribution(n, tuple(2 * rank for rank in range(1, m + n + 1)))
    lowest = n * (n + 1)  # doubled rank sum when `new` holds the n smallest
    total = math.comb(m + n, n)
    tail = []
    running = 0
    for u in range(m * n // 2 + 1):
        running += counts.get(lowest + 2 * u, 0)
        tail.append(running / total)
    return tuple(tail)


def _normal_p(scores: list[int], chosen: int, distance: int) -> float:
    """Two-sided p by the normal approximation with the tie correction (many runs only)."""
    total = len(scores)
    mean = sum(scores) / total
    variance = chosen * (total - chosen) / (total * (total - 1)) * sum((s - mean) ** 2 for s in scores)
    if variance == 0:
        return 1.0
    z = (distance - 1) / math.sqrt(variance)  # doubled ranks move in steps of 2: continuity correction of 1
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))
