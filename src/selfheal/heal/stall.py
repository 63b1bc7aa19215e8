"""The stall rule: whether a retraining curve has stopped falling.

A curve has *stalled* when the fall of its validation loss over its last doubling of examples is not above STALL_Z
standard errors of that fall (the curve's own noise), else it is *still falling*. The fall and its standard error
come from a least-squares line of the loss on log2(examples) over the regular evaluations at examples in
[end / 2, end], end the last one; fewer than STALL_MIN_POINTS evaluations cannot show a stall. The analysis gives
every censored cell its verdict by it (``analysis.tables``); with ``retrain.stop_stalled`` a cell stops where it
says so (``heal.retrain``), so the two agree.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from selfheal.lazy import Module

stats = Module("scipy.stats")

STALL_Z = 2.0
STALL_MIN_POINTS = 4


class Trend(NamedTuple):
    """The trend of a curve over its last doubling of examples: ``fall`` (nats per doubling, positive when the loss
    falls) with its standard error, and ``points``, the evaluations it used. ``stalled``: the fall is within
    STALL_Z standard errors of zero, or negative."""

    fall: float
    fall_se: float
    points: int

    @property
    def stalled(self) -> bool:
        return self.points >= STALL_MIN_POINTS and self.fall <= STALL_Z * self.fall_se


def last_doubling(examples, losses) -> Trend:
    """The trend (``Trend``) over the evaluations at examples in [end / 2, end], end the last one."""
    x = np.asarray(examples, dtype=float)
    y = np.asarray(losses, dtype=float)
    end = x.max() if len(x) else 0.0
    keep = (x >= end / 2) & (x > 0) & np.isfinite(y)
    if keep.sum() < 3:
        return Trend(math.nan, math.nan, int(keep.sum()))
    if np.ptp(y[keep]) == 0:  # a flat line: no fall, and no noise (linregress gives a NaN standard error)
        return Trend(0.0, 0.0, int(keep.sum()))
    fit = stats.linregress(np.log2(x[keep]), y[keep])
    return Trend(-float(fit.slope), float(fit.stderr), int(keep.sum()))


def of_curve(curve) -> Trend:
    """The trend of a recovery curve (points with ``examples``, ``val_loss`` and ``replay``) over its regular
    evaluations: the evaluations located after the fact inside an interval (``replay``) do not count."""
    regular = [p for p in curve if not p.replay]
    return last_doubling([p.examples for p in regular], [p.val_loss for p in regular])
