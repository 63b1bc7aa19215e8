"""Recovery thresholds and censoring: where a recovery curve crosses baseline x (1 + eps).

A cell *recovers* to threshold eps at the first evaluation whose validation loss is <= baseline * (1 + eps); the
crossing is the interval (last evaluation above, that evaluation], kept as ``examples_lo`` / ``examples``.
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
    curve = sorted(curve, key=lambda p: p.examples)  # replayed evaluations sit inside earlier intervals
    out = []
    for eps in thresholds:
        limit = threshold_loss(baseline, eps)
        i = next((i for i, p in enumerate(curve) if p.val_loss <= limit), None)
        point = curve[i] if i is not None else curve[-1]
        before = curve[i - 1] if i else point  # the last evaluation above (itself when reached at the first)
        out.append(Recovery(eps, i is not None, point.examples, point.tokens, point.steps, point.wall_s,
                            point.val_loss, before.examples, before.tokens, before.steps))
    return out


def all_reached(val_loss: float, baseline: float, thresholds: Sequence[float]) -> bool:
    """True once the tightest threshold is met (so every looser one is too)."""
    return val_loss <= threshold_loss(baseline, min(thresholds))
