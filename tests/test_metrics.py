"""Threshold and censoring logic, and confidence intervals."""

import math

import pytest

from selfheal.heal import thresholds
from selfheal.training.state import CurvePoint
from selfheal.analysis import stats


def _curve(losses, every=100):
    return [CurvePoint(i * every, i * every * 10, i * 3, float(i), loss, None) for i, loss in enumerate(losses)]


def test_first_evaluation_under_each_threshold():
    curve = _curve([6.0, 5.0, 4.3, 4.15, 4.05, 4.12])
    recs = {r.threshold: r for r in thresholds.recoveries(curve, baseline=4.0, thresholds=[0.01, 0.02, 0.05, 0.10])}
    assert recs[0.10].recovered and recs[0.10].examples == 200  # 4.3 <= 4.4
    assert recs[0.05].recovered and recs[0.05].examples == 300  # 4.15 <= 4.2
    assert recs[0.02].recovered and recs[0.02].examples == 400  # 4.05 <= 4.08
    assert not recs[0.01].recovered  # 4.04 never reached: censored
    assert recs[0.01].examples == 500 and recs[0.01].val_loss == 4.12  # censored at the budget actually spent


def test_threshold_boundary_is_inclusive():
    curve = _curve([5.0, 4.4])
    (rec,) = thresholds.recoveries(curve, baseline=4.0, thresholds=[0.1])
    assert rec.recovered and rec.examples == 100


def test_recovered_at_zero_examples():
    (rec,) = thresholds.recoveries(_curve([4.0]), baseline=4.0, thresholds=[0.01])
    assert rec.recovered and rec.examples == 0 and rec.steps == 0


def test_all_reached_uses_tightest_threshold():
    assert thresholds.all_reached(4.03, 4.0, [0.1, 0.01])
    assert not thresholds.all_reached(4.05, 4.0, [0.1, 0.01])


def test_mean_ci_t_distribution():
    mean, lo, hi = stats.mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert hi - mean == pytest.approx(4.302653 * 1.0 / math.sqrt(3), rel=1e-5)  # t(0.975, df=2) * sd / sqrt(n)
    assert stats.mean_ci([5.0]) == (5.0, 5.0, 5.0)
    assert all(math.isnan(v) for v in stats.mean_ci([]))
