"""Statistics over cells: intervals across seeds; where a curve first reaches a level (``first_crossing``, defined
with the thresholds in ``heal.thresholds``: the retraining budget uses it too)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from selfheal.heal.thresholds import RESOLUTION, Crossing, first_crossing  # noqa: F401 (the analysis' names)


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and t-distribution confidence interval; a single value gives a zero-width interval."""
    n = len(values)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    mean = sum(values) / n
    if n == 1:
        return (mean, mean, mean)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return (mean, mean - half, mean + half)


