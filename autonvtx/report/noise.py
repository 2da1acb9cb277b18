"""Is a change beyond run-to-run noise? Welch's t-test over per-run totals, standard library only."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import fmean, variance

TEST_NAME = "Welch's two-sided t-test over per-run totals"


@dataclass(frozen=True)
class Comparison:
    """A two-sample comparison: the change of the means, its p-value and confidence interval."""

    difference: float  # mean(new) - mean(base)
    p_value: float
    low: float  # confidence interval of the difference
    high: float
    degrees: float


def welch(base: list[float], new: list[float], confidence: float = 0.95) -> Comparison | None:
    """Welch's t-test of mean(new) - mean(base); None when a side has fewer than two runs.

    Welch (1947) does not assume equal variances: the runs of two builds often scatter
    differently. Degrees of freedom by the Welch-Satterthwaite equation.
    """
    if len(base) < 2 or len(new) < 2:
        return None
    difference = fmean(new) - fmean(base)
    spread_base = variance(base) / len(base)
    spread_new = variance(new) / len(new)
    error_squared = spread_base + spread_new
    if error_squared == 0.0:
        # Both sides repeat one value exactly: the difference is what it is, noise is nil.
        p_value = 1.0 if difference == 0.0 else 0.0
        return Comparison(difference, p_value, difference, difference, math.inf)
    degrees = error_squared**2 / (spread_base**2 / (len(base) - 1) + spread_new**2 / (len(new) - 1))
    error = math.sqrt(error_squared)
    statistic = difference / error
    p_value = student_two_sided(statistic, degrees)
    margin = student_quantile(0.5 + confidence / 2, degrees) * error
    return Comparison(difference, p_value, difference - margin, difference + margin, degrees)


def student_two_sided(t: float, degrees: float) -> float:
    """P(|T| >= |t|) for Student's t with `degrees` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    x = degrees / (degrees + t * t)
    return min(1.0, max(0.0, incomplete_beta(degrees / 2, 0.5, x)))


def student_quantile(probability: float, degrees: float) -> float:
    """The t with P(T <= t) = probability (probability >= 0.5), by bisection on the CDF."""
    target = 2 * (1 - probability)  # the two-sided tail that leaves `probability` below t
    low, high = 0.0, 1.0
    while student_two_sided(high, degrees) > target:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if student_two_sided(middle, degrees) > target:
            low = middle
        else:
            high = middle
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b).

    Evaluated by its continued fraction (Abramowitz and Stegun 26.5.8) with the modified Lentz
    method; the symmetry I_x(a, b) = 1 - I_(1-x)(b, a) keeps x where the fraction converges fast.
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 400):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return result
