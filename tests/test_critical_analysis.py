"""The analysis side's scientifically critical functions on small tables built by hand, each expected value worked
out by hand (or by numpy/scipy directly) in the test: the matched control's columns and the ε/2 flag
(``tables.add_controls_and_flags``), the intervals' level, the bootstrap's unit, P(recover) at the budget, the coarse
bracket of a crossing, and the stall rule on a curves table with replayed evaluations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from selfheal.analysis import scaling, stats, survival, tables

# -- tables.add_controls_and_flags ---------------------------------------------------------------------------------------

BASE = 2.0  # every cell's baseline loss; eps_min = 0.01, so the ε/2 line is 2.0 x (1 - 0.005) = 1.99


def _cell(seed, target, init, regime, threshold, examples, pretrain_seed=0, policy="full"):
    return {
        "model": "m",
        "pretrain_seed": pretrain_seed,
        "target": target,
        "policy": policy,
        "init": init,
        "regime": regime,
        "seed": seed,
        "threshold": threshold,
        "examples": examples,
        "baseline_loss": BASE,
    }


def _curve(seed, target, init, regime, points, pretrain_seed=0, policy="full"):
    return [
        {
            "kind": "recovery",
            "model": "m",
            "pretrain_seed": pretrain_seed,
            "target": target,
            "policy": policy,
            "init": init,
            "regime": regime,
            "seed": seed,
            "examples": x,
            "val_loss": y,
            "replay": False,
        }
        for x, y in points
    ]


# L1's matched control (seed 0): above the ε/2 line up to 100 examples, below it from 200 on
CONTROL_L1 = [(0, 2.0), (100, 1.992), (200, 1.985), (400, 1.95)]


@pytest.fixture
def controlled():
    summary = pd.DataFrame(
        [
            # seed 0 of L1: reached eps 0.1 at 100 examples (its control never below 1.99 by then), eps 0.01 at 300
            _cell(0, "L1", "fresh", "layer", 0.01, 300),
            _cell(0, "L1", "fresh", "layer", 0.1, 100),
            # seed 1 of L1 has no control of its own: the first seed's (0), not seed 2's
            _cell(1, "L1", "fresh", "layer", 0.01, 100),
            _cell(1, "L1", "fresh", "layer", 0.1, 100),
            # L2, censored at 400 at both eps: its control went to 1.96 < 1.99, flagged at eps 0.1 too (eps_min's rule)
            _cell(0, "L2", "fresh", "layer", 0.01, 400),
            _cell(0, "L2", "fresh", "layer", 0.1, 400),
            # regime full: the network's no-reset control of regime full
            _cell(0, "L1", "fresh", "full", 0.01, 100),
            _cell(0, "L1", "fresh", "full", 0.1, 100),
            # a control itself has none
            _cell(0, "L1", "trained", "layer", 0.01, 400),
            # a network without any control curve
            _cell(0, "L1", "fresh", "layer", 0.01, 100, pretrain_seed=1),
        ]
    )
    curves = pd.DataFrame(
        _curve(0, "L1", "trained", "layer", CONTROL_L1)
        + _curve(2, "L1", "trained", "layer", [(0, 2.0), (100, 1.5)])
        + _curve(0, "L2", "trained", "layer", [(0, 2.0), (200, 1.995), (400, 1.96)])
        + _curve(0, "none", "fresh", "full", [(0, 2.0), (50, 1.97), (100, 1.999)])
        # the reset cells' own curves (not controls) and a pretraining curve: none of them is read
        + _curve(0, "L1", "fresh", "layer", [(0, 3.0), (100, 1.0)])
        + [{"kind": "pretrain", "model": "m", "pretrain_seed": 0, "examples": 100, "val_loss": 0.5, "replay": False}]
    )
    networks = pd.DataFrame(
        {"model": ["m", "m"], "pretrain_seed": [0, 1], "degenerate": [False, True], "off_plateau": [True, None]}
    )
    return tables.add_controls_and_flags(summary, curves, networks)


def test_the_control_loss_is_the_controls_at_the_cells_examples(controlled):
    nan = math.nan
    expected = [1.985, 1.992, 1.992, 1.992, 1.96, 1.96, 1.999, 1.999, nan, nan]
    assert controlled["control_loss"].dtype == "float64"
    np.testing.assert_array_equal(controlled["control_loss"].to_numpy(), expected)


def test_baseline_not_converged_is_the_controls_dip_below_eps_min_over_2_so_far(controlled):
    # 300 ex: 1.985 < 1.99 seen; 100 ex: the control's later dip is not yet seen; seed 1 reads seed 0's (not seed
    # 2's 1.5); L2: 1.96 < 1.99 at both eps (the rule is eps_min's, not the row's eps: 2 x 0.95 = 1.9 would not
    # flag it); full: 1.97 at 50 examples; a control and a cell without one: never
    expected = [True, False, False, False, True, True, True, True, False, False]
    assert controlled["baseline_not_converged"].tolist() == expected


def test_the_network_flags_reach_every_cell(controlled):
    assert controlled["degenerate"].tolist() == [False] * 9 + [True]
    assert controlled["off_plateau"].tolist() == [True] * 9 + [False]  # a missing flag is False


# -- the intervals are 95 % ones ----------------------------------------------------------------------------------------


def test_a_bootstrap_percentile_interval_is_95_percent():
    values = np.arange(1.0, 41.0)  # 40 equally likely draws: 2.5 % and 97.5 % fall on the 1st and the 39th
    probs = np.full(40, 1 / 40)
    assert survival.LEVEL == 0.95
    assert survival.weighted_interval(values[::-1], probs) == (1.0, 39.0)
    assert survival.weighted_interval(values, probs) == (
        np.quantile(values, 0.025, method="inverted_cdf"),
        np.quantile(values, 0.975, method="inverted_cdf"),
    )
    # unequal probabilities: 0.03 below the first value, so the 2.5 % point is the first; 0.96 up to the third
    assert survival.weighted_interval([5.0, 6.0, 7.0, 8.0], [0.03, 0.47, 0.46, 0.04]) == (5.0, 8.0)


def test_the_fit_interval_is_a_95_percent_t_interval():
    # two clusters in one stratum: refits 1 and 3 with equal weight around the estimate 2: sd 1, scaled by
    # sqrt(k / (k - 1)) = sqrt(2); t quantile 0.975 with 1 degree of freedom = 12.7062047...
    lo, hi, bias, se = scaling._normal_interval(2.0, [1.0, 3.0], [0.5, 0.5], [["a", "b"]])
    assert se == pytest.approx(math.sqrt(2), rel=1e-12)
    assert bias == 0.0
    assert hi == pytest.approx(2.0 + 12.706204736174707 * math.sqrt(2), rel=1e-9)
    assert lo == pytest.approx(2.0 - 12.706204736174707 * math.sqrt(2), rel=1e-9)


# -- survival.estimate: the bootstrap's unit and P(recover) at the budget ----------------------------------------------


def _summary_row(pretrain_seed, seed, lo, hi, *, budget=400, threshold=0.01, layer=1):
    recovered = hi is not None
    return {
        "model": "m",
        "pretrain_seed": pretrain_seed,
        "arch": "gpt2",
        "n_layer": 3,
        "d_model": 16,
        "target": f"L{layer}",
        "stack": "",
        "layer": layer,
        "depth": layer,
        "policy": "full",
        "init": "fresh",
        "regime": "layer",
        "seed": seed,
        "threshold": threshold,
        "recovered": recovered,
        "diverged": False,
        "examples_lo": lo,
        "examples_hi": hi,
        "baseline_loss": 2.0,
        "damaged_loss": 3.0,
        "final_loss": 2.0 if recovered else 2.5,
        "threshold_loss": 2.0 * (1 + threshold),
        "budget_examples": budget,
        "pretrain_examples": 1000,
        "baseline_not_converged": False,
        "outcome": "recovered" if recovered else "stalled",
    }


def _networks(seeds):
    return pd.DataFrame(
        {
            "model": "m",
            "pretrain_seed": list(seeds),
            "family_kind": "decoder-only",
            "n_params": 1000,
            "degenerate": False,
            "off_plateau": False,
        }
    )


def _estimate(rows, seeds):
    summary = pd.DataFrame(rows)
    for column in ("examples_lo", "examples_hi"):
        summary[column] = summary[column].astype("Int64")
    return survival.estimate(survival.prepare(summary, _networks(seeds)))


def test_the_bootstrap_resamples_networks_not_retrain_seeds():
    """Two networks, two retrain seeds each: network 0's cells cross at 100 examples, network 1's at 200. Resampling
    the networks (3 distinct draws: {0, 0} with probability 1/4, {0, 1} 1/2, {1, 1} 1/4) gives medians 100, 100 and
    200: the interval is [100, 200]. Resampling the retrain seeds would keep both networks in every draw (median 100
    each time)."""
    rows = [_summary_row(0, s, 50, 100) for s in (0, 1)] + [_summary_row(1, s, 150, 200) for s in (0, 1)]
    est = _estimate(rows, [0, 1]).iloc[0]
    assert est["interval_over"] == "pretrain_seed"
    assert est["n_resamples"] == 3 and est["n_clusters"] == 2
    assert est["median_examples"] == 100.0
    assert (est["median_examples_lo"], est["median_examples_hi"]) == (100.0, 200.0)
    assert (est["median_fraction_lo"], est["median_fraction_hi"]) == (0.1, 0.2)


def test_the_damage_cost_bootstrap_resamples_networks_too():
    """The rank correlation's interval: two networks of one model, two retrain seeds each, resampled as networks
    (3 distinct draws), as the fit's refits are (``scaling._units``)."""
    rows = []
    for ps in (0, 1):
        for seed in (0, 1):
            row = _summary_row(ps, seed, 100 * (2 * ps + seed), 100 * (2 * ps + seed + 1))
            row["damaged_loss"] = 3.0 + 0.1 * (2 * ps + seed)
            rows.append(row)
    summary = pd.DataFrame(rows)
    for column in ("examples_lo", "examples_hi"):
        summary[column] = summary[column].astype("Int64")
    out = scaling.damage_cost(survival.prepare(summary, _networks([0, 1]))).iloc[0]
    assert out["rho"] == pytest.approx(1.0)  # damage and cost in the same order
    assert (out["interval_over"], out["n_resamples"], out["n_clusters"]) == ("pretrain_seed", 3, 2)


def test_one_network_resamples_its_retrain_seeds():
    rows = [_summary_row(0, 0, 50, 100), _summary_row(0, 1, 150, 200)]
    est = _estimate(rows, [0]).iloc[0]
    assert est["interval_over"] == "seed" and est["n_resamples"] == 3


def test_a_recovery_exactly_at_the_budget_counts_in_p_recover():
    """Four cells of one network, budget 400: one crosses between 300 and 400 (at the budget itself), one between 100
    and 200, two are censored at 400. P(recover within the budget) = 2 / 4."""
    rows = [
        _summary_row(0, 0, 300, 400),
        _summary_row(0, 1, 100, 200),
        _summary_row(0, 2, 400, None),
        _summary_row(0, 3, 400, None),
    ]
    est = _estimate(rows, [0]).iloc[0]
    assert (est["n_recovered"], est["n_censored"]) == (2, 2)
    assert est["p_recover"] == pytest.approx(0.5, abs=1e-9)
    assert est["median_examples"] == 400.0  # half recovered by the evaluation at 400
    # the bootstrap draws keep the budget's recoveries too: the draw of seeds {0, 0, 1, 1} recovers them all
    assert est["p_recover_hi"] == pytest.approx(1.0, abs=1e-9)


def test_a_crossing_at_an_evaluation_and_a_bracket_starting_there_do_not_share_it():
    """Two networks' cells: one crosses in (100, 200], the other in (200, 300] (its loss at 200 still above). Half
    have recovered by 200: the median is 200. Fitted as closed intervals, both would sit at 200 and the median read
    300."""
    est = _estimate([_summary_row(0, 0, 100, 200), _summary_row(1, 0, 200, 300)], [0, 1]).iloc[0]
    assert est["median_examples"] == 200.0
    assert (est["median_examples_lo"], est["median_examples_hi"]) == (200.0, 300.0)


# -- the coarse bracket: wider than 10 % of the interpolated crossing ---------------------------------------------------


@pytest.mark.parametrize(
    "value, coarse",
    [
        (1100.0, False),  # bracket 105 wide, 10 % of 1100 = 110: fine (10 % of the bracket's low end, 100, is not)
        (1010.0, True),  # 10 % of 1010 = 101 < 105: coarse (10 % of the high end, 110.5, would not be)
    ],
)
def test_a_bracket_is_coarse_by_its_width_over_the_interpolated_crossing(value, coarse):
    x, y = [0, 1000, 1105], [4.0, 3.0, 2.0]
    level = 3.0 - (value - 1000) / 105  # the straight line between (1000, 3) and (1105, 2) reaches it at value
    crossing = stats.first_crossing(x, y, level)
    assert crossing.examples == pytest.approx(value, rel=1e-12)
    assert (crossing.examples_lo, crossing.examples_hi) == (1000, 1105)
    assert crossing.coarse is coarse


def test_the_scratch_columns_carry_the_coarse_flag():
    curves = pd.DataFrame(
        {
            "kind": "pretrain",
            "model": "m",
            "pretrain_seed": 0,
            "examples": [0, 1000, 1105],
            "val_loss": [4.0, 3.0, 2.0],
        }
    )
    summary = pd.DataFrame(
        {
            "model": "m",
            "pretrain_seed": 0,
            "threshold_loss": [3.0 - 100 / 105, 3.0 - 10 / 105],
            "examples": [500, 500],
            "examples_lo": pd.array([400, 400], dtype="Int64"),
            "examples_hi": pd.array([500, 500], dtype="Int64"),
        }
    )
    networks = pd.DataFrame({"model": ["m"], "pretrain_seed": [0], "source": ["scratch"]})
    out = tables.add_scratch_reference(summary, curves, networks)
    assert out["scratch_coarse"].tolist() == [False, True]
    np.testing.assert_allclose(out["scratch_examples"], [1100.0, 1010.0], rtol=1e-12)
    np.testing.assert_allclose(out["relative_to_scratch"], [500 / 1100, 500 / 1010], rtol=1e-12)


# -- the analysis' stall verdict reads the regular evaluations only ------------------------------------------------------


def test_add_outcomes_leaves_replayed_evaluations_out_of_the_stall_rule():
    regular = [1000, 1200, 1400, 1600, 1800, 2000]
    losses = [3.0 - 0.2 * np.log2(x / 1000) + w for x, w in zip(regular, [1e-3, -1e-3] * 3)]
    replays = [(1100, 4.0), (1300, 2.0), (1500, 4.0), (1700, 2.0), (1900, 4.0)]
    keys = {"model": "m", "pretrain_seed": 0, "target": "L1", "policy": "full", "init": "fresh", "regime": "layer"}
    curves = pd.DataFrame(
        [
            {"kind": "recovery", **keys, "seed": 0, "examples": x, "val_loss": y, "replay": False}
            for x, y in zip(regular, losses)
        ]
        + [{"kind": "recovery", **keys, "seed": 0, "examples": x, "val_loss": y, "replay": True} for x, y in replays]
    )
    summary = pd.DataFrame(
        [{**keys, "seed": 0, "damaged_loss": 3.5, "threshold_loss": 2.02, "recovered": False, "diverged": False}]
    )
    out = tables.add_outcomes(summary, curves).iloc[0]
    slope, _ = np.polyfit(np.log2(regular), losses, 1)
    assert out["outcome"] == "still_falling"
    assert out["fall_per_doubling"] == pytest.approx(-slope, rel=1e-9)
