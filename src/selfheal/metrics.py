"""Recovery thresholds, censoring, and confidence intervals.

A cell *recovers* to threshold eps at the first evaluation whose validation loss is <= baseline * (1 + eps).
A threshold not reached within the budget is *censored*: the row is kept, ``recovered`` is False and the cost
columns hold the budget actually spent (a lower bound on the true cost), never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Recovery:
    threshold: float
    recovered: bool
    examples: int
    tokens: int
    steps: int
    wall_s: float
    val_loss: float


def threshold_loss(baseline: float, eps: float) -> float:
    return baseline * (1.0 + eps)


def recoveries(curve: Sequence, baseline: float, thresholds: Sequence[float]) -> list[Recovery]:
    """One Recovery per threshold from an evaluation curve (points with examples/tokens/steps/wall_s/val_loss)."""
    if not curve:
        raise ValueError("empty recovery curve")
    out = []
    for eps in thresholds:
        limit = threshold_loss(baseline, eps)
        hit = next((p for p in curve if p.val_loss <= limit), None)
        point = hit if hit is not None else curve[-1]
        out.append(
            Recovery(eps, hit is not None, point.examples, point.tokens, point.steps, point.wall_s, point.val_loss)
        )
    return out


def all_reached(val_loss: float, baseline: float, thresholds: Sequence[float]) -> bool:
    """True once the tightest threshold is met (so every looser one is too)."""
    return val_loss <= threshold_loss(baseline, min(thresholds))


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and t-distribution confidence interval; a single value gives a zero-width interval."""
    from scipy import stats

    n = len(values)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    mean = sum(values) / n
    if n == 1:
        return (mean, mean, mean)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return (mean, mean - half, mean + half)


def accuracy(labels: Sequence[int], predictions: Sequence[int]) -> float:
    return sum(int(a == b) for a, b in zip(labels, predictions, strict=True)) / len(labels)


def mcc(labels: Sequence[int], predictions: Sequence[int]) -> float:
    """Matthews correlation coefficient, multi-class (Gorodkin's R_K); equals the usual MCC for two classes.
    0 when either the labels or the predictions are all one class."""
    classes = sorted(set(labels) | set(predictions))
    index = {c: i for i, c in enumerate(classes)}
    k = len(classes)
    confusion = [[0] * k for _ in range(k)]
    for a, b in zip(labels, predictions, strict=True):
        confusion[index[a]][index[b]] += 1
    s = len(labels)
    correct = sum(confusion[i][i] for i in range(k))
    true_counts = [sum(row) for row in confusion]
    pred_counts = [sum(confusion[i][j] for i in range(k)) for j in range(k)]
    cov = correct * s - sum(p * t for p, t in zip(pred_counts, true_counts))
    denom = math.sqrt((s * s - sum(p * p for p in pred_counts)) * (s * s - sum(t * t for t in true_counts)))
    return cov / denom if denom else 0.0
