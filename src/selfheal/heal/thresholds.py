"""Recovery thresholds and censoring: where a recovery curve crosses baseline x (1 + eps).

A cell *recovers* to threshold eps at the first evaluation whose validation loss is <= baseline * (1 + eps); the
crossing is the interval (last evaluation above, that evaluation], kept as ``examples_lo`` / ``examples``.
A threshold not reached within the budget is *censored*: the row is kept, ``recovered`` is False and the cost
columns hold the budget actually spent (a lower bound on the true cost), never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from selfheal.records import Recovery

# A crossing bracket wider than this share of the interpolated crossing is coarse (the retrain resolution).
RESOLUTION = 0.1


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
        out.append(
            Recovery(
                eps,
                i is not None,
                point.examples,
                point.tokens,
                point.steps,
                point.wall_s,
                point.val_loss,
                before.examples,
                before.tokens,
                before.steps,
            )
        )
    return out


def all_reached(val_loss: float, baseline: float, thresholds: Sequence[float]) -> bool:
    """True once the tightest threshold is met (so every looser one is too)."""
    return val_loss <= threshold_loss(baseline, min(thresholds))


class Crossing(NamedTuple):
    """Where a curve first reaches a level: ``examples`` interpolated linearly between the bracketing evaluations
    ``examples_lo`` (the last above the level) and ``examples_hi`` (the first at or below it); both the first
    evaluation when that one is already at or below. Never reached: examples NaN, examples_lo the last evaluation,
    examples_hi None. ``coarse``: the bracket is wider than ``resolution`` x examples."""

    examples: float
    examples_lo: int | None
    examples_hi: int | None
    coarse: bool


def first_crossing(examples, losses, level: float, resolution: float = RESOLUTION) -> Crossing:
    """The first crossing of ``level`` on a curve (evaluations at ``examples`` with ``losses``, in any order),
    interpolated: the one function behind the retraining budget's from-scratch cost (``heal.budget``),
    summary.parquet's scratch_* columns (analysis/tables.py) and ``pretrain_reference``."""
    x = np.asarray(examples, dtype=float)
    y = np.asarray(losses, dtype=float)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if not len(x):
        return Crossing(math.nan, None, None, False)
    at = np.flatnonzero(y <= level)
    if not len(at):
        return Crossing(math.nan, int(x[-1]), None, False)
    i = int(at[0])
    if i == 0:
        return Crossing(float(x[0]), int(x[0]), int(x[0]), False)
    x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
    value = float(x0 + (y0 - level) / (y0 - y1) * (x1 - x0))
    return Crossing(value, int(x0), int(x1), bool(x1 - x0 > resolution * value))


def copies(curve) -> list[tuple[np.ndarray, np.ndarray]]:
    """A pretraining curve (a DataFrame: examples, val_loss and, for a raced pretraining, ``lr``) as its copies,
    one (examples, losses) pair per lr in the order they appear (one copy where there is no ``lr`` column)."""
    if "lr" not in curve.columns or curve["lr"].isna().all():
        return [(curve["examples"].to_numpy(dtype=float), curve["val_loss"].to_numpy(dtype=float))]
    return [
        (g["examples"].to_numpy(dtype=float), g["val_loss"].to_numpy(dtype=float))
        for _, g in curve.groupby("lr", sort=False)
    ]


def fewest_crossing(curves: Sequence[tuple], level: float, resolution: float = RESOLUTION) -> Crossing:
    """Over the copies of a raced pretraining (``curves``: (examples, losses) per copy): the ``first_crossing`` of
    ``level`` with the fewest examples, the from-scratch cost like for like with the healing race (docs/method.md,
    budgets). A level no copy reaches: not reached, ``examples_lo`` the last evaluation of the copy that ran longest."""
    found = [first_crossing(x, y, level, resolution) for x, y in curves]
    reached = [c for c in found if math.isfinite(c.examples)]
    if reached:
        return min(reached, key=lambda c: c.examples)
    ran = [c for c in found if c.examples_lo is not None]
    return max(ran, key=lambda c: c.examples_lo) if ran else Crossing(math.nan, None, None, False)
