"""Every (cell, threshold) has one outcome: not damaged, recovered, diverged, or censored as stalled or still falling
(the stall rule on the cell's own curve); the survival estimates read them so that a diverged cell never counts as
recovered and an undamaged one is never a cost of 0."""

import math

import numpy as np
import pandas as pd
import pytest

from answer_helpers import synthetic
from selfheal.analysis import stats, survival, tables


def _curve(examples, losses):
    return np.asarray(examples, dtype=float), np.asarray(losses, dtype=float)


def test_a_curve_still_closing_its_gap_is_still_falling():
    x = np.arange(0, 20_001, 500)
    y = 4.0 * (1 + 0.2 * np.exp(-x / 8000))  # at the end it still falls about 0.04 nats per doubling
    trend = stats.last_doubling(*_curve(x, y + 1e-4 * np.random.default_rng(0).standard_normal(len(x))))
    assert trend.fall > 0.01 and not trend.stalled


def test_a_flat_noisy_curve_has_stalled():
    rng = np.random.default_rng(1)
    x = np.arange(0, 20_001, 500)
    y = 4.4 + 0.003 * rng.standard_normal(len(x))
    trend = stats.last_doubling(*_curve(x, y))
    assert trend.stalled and abs(trend.fall) < 3 * trend.fall_se


def test_a_rising_curve_has_stalled_and_a_short_one_cannot_show_it():
    x = np.arange(0, 20_001, 500)
    assert stats.last_doubling(*_curve(x, 4.4 + x * 1e-6)).stalled
    few = stats.last_doubling(*_curve([0, 100, 200], [5.0, 5.0, 5.0]))
    assert few.points < stats.STALL_MIN_POINTS and not few.stalled


@pytest.fixture(scope="module")
def cells():
    summary, curves, networks = synthetic(
        models=(("m", 2, 64),), pretrain_seeds=(0, 1, 2), seeds=(0,), thresholds=(0.01, 0.1), budget_fraction=0.3
    )
    return summary, curves, networks


def test_outcomes_follow_the_rows(cells):
    summary, curves, _ = cells
    out = summary["outcome"].astype(str)
    assert set(out) <= set(tables.OUTCOMES)
    recovered = summary["recovered"].astype(bool) & (summary["damaged_loss"] > summary["threshold_loss"])
    assert (out[recovered] == "recovered").all()
    assert (out[~summary["recovered"].astype(bool)].isin(["stalled", "still_falling", "diverged"])).all()
    undamaged = summary["damaged_loss"] <= summary["threshold_loss"]
    assert (out[undamaged] == "not_damaged").all()


def _layer_rows(summary, eps):
    return (summary["target"] == "L0") & (summary["init"] == "fresh") & (summary["threshold"] == eps)


def test_diverged_cells_are_not_recovered_within_the_budget(cells):
    """Two of three networks' cells diverge at step 0: P(recover within the budget) must not read as if only the
    third existed (a censoring at 0 examples would drop them out of the estimate and give 1.0)."""
    summary, curves, networks = cells
    summary = summary.copy()
    hit = _layer_rows(summary, 0.1) & summary["pretrain_seed"].isin([0, 1])
    summary.loc[hit, ["recovered", "diverged"]] = [False, True]
    summary.loc[hit, "diverged_step"] = 0
    summary.loc[hit, ["examples", "examples_lo"]] = 0
    summary.loc[hit, "examples_hi"] = pd.NA
    summary = tables.add_outcomes(summary, curves)
    assert (summary.loc[hit, "outcome"] == "diverged").all()
    row = survival.estimate(survival.prepare(summary, networks))
    row = row[(row["target"] == "L0") & (row["threshold"] == 0.1)].iloc[0]
    assert row["n_diverged"] == 2 and row["n_recovered"] == 1
    assert row["p_recover"] == pytest.approx(1 / 3)
    assert math.isinf(row["median_examples"])


def test_undamaged_cells_are_counted_apart_never_a_cost_of_zero(cells):
    summary, curves, networks = cells
    summary = summary.copy()
    rows = _layer_rows(summary, 0.1)
    summary.loc[rows & (summary["pretrain_seed"] == 0), "damaged_loss"] = summary["threshold_loss"] * 0.999
    summary = tables.add_outcomes(summary, curves)
    est = survival.estimate(survival.prepare(summary, networks))
    row = est[(est["target"] == "L0") & (est["threshold"] == 0.1)].iloc[0]
    assert row["n_not_damaged"] == 1 and row["n_cells"] == 3
    assert row["median_examples"] > 0
    # every network undamaged: no cost at all, not a median of 0
    summary.loc[rows, "damaged_loss"] = summary["threshold_loss"] * 0.999
    summary = tables.add_outcomes(summary, curves)
    est = survival.estimate(survival.prepare(summary, networks))
    row = est[(est["target"] == "L0") & (est["threshold"] == 0.1)].iloc[0]
    assert row["n_not_damaged"] == 3 and math.isnan(row["median_examples"]) and math.isnan(row["p_recover"])
    assert not (survival.estimable(survival.prepare(summary, networks))["status"] == "not_damaged").any()


def test_an_exactly_flat_curve_has_stalled():
    """A curve that does not move at all (e.g. nothing trains) has stalled: no fall, and no noise to hide one."""
    trend = stats.last_doubling([0, 100, 200, 300, 400], [4.2] * 5)
    assert (trend.fall, trend.fall_se, trend.points) == (0.0, 0.0, 3) and not trend.stalled
    assert stats.last_doubling([0, 100, 200, 300, 400, 500, 600, 700, 800], [4.2] * 9).stalled
