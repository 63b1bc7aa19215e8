"""Recovery thresholds and censoring: where a recovery curve crosses baseline x (1 + eps).

A cell *recovers* to threshold eps at the first evaluation whose validation loss is <= baseline * (1 + eps).
A threshold not reached within the budget is *censored*: the row is kept, ``recovered`` is False and the cost
columns hold the budget actually spent (a lower bound on the true cost), never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from selfheal.records import Recovery


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
