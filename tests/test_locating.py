"""Locating a threshold crossing inside one evaluation interval (``training.locating.bracket``) on arbitrary validation
curves: it ends on a bracket that meets the resolution rule and holds a real crossing, probes each step at most
once and only strictly inside the interval, and on a smooth recovery curve needs few probes."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from selfheal.training import locating
from selfheal.training.state import CurvePoint

BATCH = 32


def point(step: int, loss: float, replay: bool = False) -> CurvePoint:
    return CurvePoint(step * BATCH, step * BATCH * 64, step, 0.0, loss, None, replay)


def locate(losses: list[float], start: int, level: float, resolution: float):
    """Bracket the crossing of ``level`` in the interval (start, start + len(losses) - 1] of per-step losses."""
    end = start + len(losses) - 1
    probed = []

    def evaluate_at(step):
        probed.append(step)
        return point(step, losses[step - start], replay=True)

    known = [point(start, losses[0]), point(end, losses[-1])]
    locating.bracket(known, level, evaluate_at, lambda step: step * BATCH, resolution)
    known.sort(key=lambda p: p.steps)
    i = next(i for i, p in enumerate(known) if p.val_loss <= level)
    return known[i - 1], known[i], probed


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 200),
    st.lists(st.floats(3.0, 6.0), min_size=1, max_size=40),
    st.floats(0.0, 0.3),
    st.sampled_from([5.0, math.inf]),
    st.sampled_from([3.9, 4.0, 3.0]),
)
def test_bracket_holds_a_crossing_and_meets_the_rule(start, middle, resolution, first, last):
    level = 4.0
    losses = [first, *middle, last]  # above the level at the interval's start, at or below it at its end (3.0:
    # below the rule's floor of 0.9 x level; inf: a damage that overflowed)
    lo, hi, probed = locate(losses, start, level, resolution)
    assert lo.val_loss > level >= hi.val_loss  # a real crossing: above, then at or below
    assert locating.narrow_enough(lo, hi, resolution)
    assert len(probed) == len(set(probed)) <= len(losses) - 2
    assert all(start < s < start + len(losses) - 1 for s in probed)


def test_a_smooth_recovery_is_located_in_few_probes():
    """An exponential recovery from 6.0 towards 4.0 crossing 4.4 at step 10.2: the one-step bracket (10, 11] in
    two probes (linear interpolation between the interval's ends aims far too late on such a convex curve)."""
    losses = [4.0 + 2.0 * math.exp(-k / 6.57) for k in range(17)]
    lo, hi, probed = locate(losses, 0, 4.4, 0.1)
    assert (lo.steps, hi.steps) == (10, 11)
    assert len(probed) <= 2
