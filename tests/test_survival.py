"""Survival estimates and the scaling fit on synthetic tables with known structure (tests/answer_helpers.py)."""

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from answer_helpers import SXE, synthetic
from selfheal.analysis import scaling, survival

warnings.filterwarnings("ignore", module="lifelines")
warnings.filterwarnings("ignore", module="autograd")


@pytest.fixture(scope="module")
def steep():
    summary, curves, networks = synthetic(depth_effect=2.0, seed=1)
    return survival.prepare(summary, networks)


@pytest.fixture(scope="module")
def flat():
    summary, curves, networks = synthetic(depth_effect=0.0, seed=1)
    return survival.prepare(summary, networks)


def test_prepare_marks_controls_intervals_and_positions(steep):
    controls = steep[steep["is_control"]]
    assert set(controls["init"]) | set(controls["target"]) >= {"trained", "none"}
    layer = steep[(steep["model"] == "gpt2-n4-d64") & ~steep["is_control"] & (steep["kind"] == "layer")]
    assert dict(zip(layer["target"], layer["position"])) == {
        "L0": "first",
        "L1": "middle",
        "L2": "middle",
        "L3": "last",
    }
    assert sorted(layer["rel_depth"].unique()) == pytest.approx([0, 1 / 3, 2 / 3, 1])
    # the depth fit's place among the middle layers: the first and last at 0, the middle ones centred on 0
    middle = dict(zip(layer["target"], layer["middle_depth"]))
    assert middle == {"L0": 0.0, "L1": -0.5, "L2": 0.5, "L3": 0.0}
    assert [survival.middle_depth(d, 3) for d in range(3)] == [0.0, 0.0, 0.0]  # one middle layer: no trend in it
    assert [survival.middle_depth(d, 6) for d in range(6)] == pytest.approx([0, -0.5, -0.5 / 3, 0.5 / 3, 0.5, 0])
    rec = steep[steep["status"] == "recovered"]
    # every recovered row's interval is its bracket [examples_lo, examples_hi], of a positive width: a row within
    # eps at its first evaluation (the controls here) is not damaged, never a recovery at 0
    assert (rec["lower"] == rec["examples_lo"].astype(float)).all()
    assert (rec["upper"] == rec["examples_hi"].astype(float)).all()
    assert len(rec) and (rec["lower"] < rec["upper"]).all()
    undamaged = steep[steep["status"] == "not_damaged"]
    assert len(undamaged) and undamaged["is_control"].all()
    assert (undamaged["damaged_loss"] <= undamaged["threshold_loss"]).all()
    cen = steep[steep["status"] == "censored"]
    assert len(cen) and np.isinf(cen["upper"]).all() and (cen["lower"] == cen["budget_examples"]).all()


def test_estimates_leave_out_controls_and_degenerate_networks():
    summary, curves, networks = synthetic(degenerate=(("gpt2-n4-d64", 1),), seed=2)
    est = survival.estimate(survival.prepare(summary, networks))
    assert not set(est["init"]) & {"trained", "none"} and "none" not in set(est["target"])
    n4 = est[est["model"] == "gpt2-n4-d64"]
    assert (n4["n_clusters"] == 1).all() and (n4["n_cells"] == 2).all()  # one network left, two retrain seeds
    assert (n4["interval_over"] == "seed").all()  # its interval cannot cover between-network variation


def test_median_and_p_recover_follow_the_censoring(steep):
    est = survival.estimate(steep)
    for _, row in est.iterrows():
        assert row["n_cells"] == row["n_recovered"] + row["n_censored"] + row["n_diverged"] + row["n_not_damaged"]
        assert row["n_censored"] == row["n_stalled"] + row["n_still_falling"]
        assert row["p_recover"] == pytest.approx(row["n_recovered"] / (row["n_cells"] - row["n_not_damaged"]))
        assert row["p_recover_lo"] <= row["p_recover"] <= row["p_recover_hi"]
        if row["n_recovered"] * 2 < row["n_cells"]:  # most cells never recovered: the median is beyond the budget
            assert math.isinf(row["median_examples"])
        else:
            assert row["median_examples"] <= row["budget_examples"]
            assert row["median_fraction"] == pytest.approx(row["median_examples"] / SXE)
            assert row["median_examples_lo"] <= row["median_examples"] <= row["median_examples_hi"]
    # the reset-all control of the synthetic tables is censored at eps = 1 % in every cell
    allc = est[(est["target"] == "all") & (est["threshold"] == 0.01)]
    assert len(allc) and np.isinf(allc["median_examples"]).all() and (allc["p_recover"] == 0).all()


def test_all_censored_and_all_at_zero_groups_do_not_crash():
    summary, curves, networks = synthetic(seed=3)
    cells = survival.prepare(summary, networks)
    cells.loc[:, "upper"] = np.inf
    cells.loc[:, "status"] = "censored"
    est = survival.estimate(cells)
    assert np.isinf(est["median_examples"]).all() and (est["p_recover"] == 0).all()
    censored_fit = scaling.fit(cells[cells["threshold"] == 0.05], max_resamples=2)
    fitted_terms = censored_fit[~censored_fit["note"].str.contains("does not vary")]
    assert len(fitted_terms) and (fitted_terms["note"] == "not fitted: every cell censored").all()
    assert censored_fit["coef"].isna().all() and not censored_fit["determined"].any()
    cells.loc[:, "lower"], cells.loc[:, "upper"], cells.loc[:, "status"] = 0.0, 0.0, "recovered"
    est = survival.estimate(cells)
    assert (est["median_examples"] == 0).all() and (est["p_recover"] == 1).all()
    fit = scaling.fit(cells[cells["threshold"] == 0.05], max_resamples=2)
    # every cell cost nothing: all are left out of the fit (a log-cost model cannot hold a cost of 0), none claimed
    assert len(fit) == 7 and (fit["n_cells"] == 0).all() and fit["coef"].isna().all()
    assert fit["note"].str.contains("24 cell\\(s\\) within eps before any training left out").all()


def test_a_repeated_npmle_is_lifelines_fit_bit_for_bit_and_not_shared():
    """The Turnbull fit of intervals already fitted (same intervals, weights and order) comes from the first fit:
    the same numbers as lifelines' own fit of them, zero-weight rows dropped and exact zeros read back as 0, in a
    Series of the caller's own (changing it changes no later fit); other weights or order are fitted anew."""
    import lifelines

    lower = np.array([0.0, 2048.0, 4096.0, 4096.0, 8192.0])
    upper = np.array([0.0, 4096.0, 6144.0, np.inf, np.inf])
    weights = np.array([1, 2, 1, 0, 1])
    fitter = lifelines.KaplanMeierFitter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        keep = weights > 0
        # each interval open below: (2048, 4096] and (4096, 6144] do not share 4096 (lifelines fits closed ones)
        opened = np.where(lower > 0, lower + survival.OPEN_BELOW, lower)[keep]
        fitter.fit_interval_censoring(opened, np.where(upper[keep] == 0, 0.5, upper[keep]), weights=weights[keep])
    expected = fitter.survival_function_["NPMLE_estimate_lower"]
    index = np.where(np.isin(expected.index, opened[opened > 0]), expected.index - survival.OPEN_BELOW, expected.index)
    expected.index = np.where(index == 0.5, 0.0, index)
    expected = expected.groupby(level=0).min()
    first = survival._npmle(lower, upper, weights)
    pd.testing.assert_series_equal(first, expected, check_exact=True)
    first.iloc[:] = -1.0  # the caller's copy
    again = survival._npmle(lower.copy(), upper.copy(), weights.copy())
    pd.testing.assert_series_equal(again, expected, check_exact=True)
    reweighted = survival._npmle(lower, upper, np.array([1, 1, 1, 0, 1]))
    assert survival._median(reweighted) != survival._median(again) or not reweighted.equals(again)


def _at_one_cost(cells: pd.DataFrame, networks) -> pd.DataFrame:
    """``cells`` with every single-layer reset cell of the given (model, pretrain seed) networks recovered at
    exactly 1,000 examples (a zero-width interval): no spread of log cost at all there."""
    out = cells.copy()
    chosen = (
        (~out["is_control"])
        & (out["kind"] == "layer")
        & pd.Series([(m, p) in networks for m, p in zip(out["model"], out["pretrain_seed"])], index=out.index)
    )
    out.loc[chosen, ["lower", "upper"]] = 1000.0
    out.loc[chosen, "status"] = "recovered"
    return out


def test_a_fit_that_cannot_converge_is_reported_not_fitted(steep):
    """Every cell at one exact cost: the log-normal scale has no maximum (it shrinks to 0) and lifelines fails; the
    fit says so for every term and claims no number."""
    cells = steep[steep["threshold"] == 0.05]
    everywhere = {(m, p) for m, p in zip(cells["model"], cells["pretrain_seed"])}
    fit = scaling.fit(_at_one_cost(cells, everywhere), max_resamples=4)
    varied = fit[~fit["note"].str.contains("does not vary")]
    assert set(varied["term"]) == {"first_layer", "last_layer", "middle_depth", "log_n_layer"}
    assert (varied["note"] == "not fitted: the model did not converge on this grid").all()
    assert fit["coef"].isna().all() and not fit["determined"].any() and (fit["n_resamples"] == 0).all()


def test_refits_that_fail_are_counted_and_left_out(steep):
    """Pretraining seed 0's cells all at one cost: the fit converges, and of the 9 resamples of 2 networks in each of
    2 models the one that draws seed 0 twice in both has nothing to fit; it is counted as failed, not used."""
    cells = steep[steep["threshold"] == 0.05]
    fit = scaling.fit(_at_one_cost(cells, {("gpt2-n2-d64", 0), ("gpt2-n4-d64", 0)}), max_resamples=15)
    first = fit[fit["term"] == "first_layer"].iloc[0]
    assert first["determined"] and first["coef_lo"] < first["coef"] < first["coef_hi"]
    assert (fit["n_failed"] == 1).all() and (fit["n_resamples"] == 8).all()


def test_refits_that_wander_make_a_term_unstable(steep, flat):
    """The steep grid's fit with refits that centre elsewhere (the flat grid's, whose depth effect is near 0): the
    last-layer term is reported unstable with no number; with its own refits it is determined."""
    steep_rows = scaling._layer_cells(steep[steep["threshold"] == 0.05])
    flat_rows = scaling._layer_cells(flat[flat["threshold"] == 0.05])
    own = scaling.refits(steep_rows, max_resamples=6)
    elsewhere = scaling.refits(flat_rows, max_resamples=6)
    base = {"regime": "frozen", "policy": "full", "init": "fresh", "threshold": 0.05}
    steady = {r["term"]: r for r in scaling._coefficients(base, own)}
    assert steady["last_layer"]["determined"] and steady["last_layer"]["coef"] > 0.6
    wandering = dataclasses.replace(own, draws=elsewhere.draws, probs=elsewhere.probs)
    rows = {r["term"]: r for r in scaling._coefficients(base, wandering)}
    assert not rows["last_layer"]["determined"] and "coef" not in rows["last_layer"]
    assert "not determined: unstable" in rows["last_layer"]["note"]
    assert f"gives {steady['last_layer']['coef']:.3g}" in rows["last_layer"]["note"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3))
def test_cluster_resamples_are_a_distribution(sizes):
    strata = [[(s, u) for u in range(n)] for s, n in enumerate(sizes)]
    draws = survival.cluster_resamples(strata, max_resamples=200)
    assert sum(p for _, p in draws) == pytest.approx(1.0)
    for weights, _ in draws:
        for s, n in enumerate(sizes):  # every stratum keeps its size
            assert sum(c for (stratum, _), c in weights.items() if stratum == s) == n


def test_fit_recovers_the_depth_effect_and_reports_undetermined_terms(steep, flat):
    # two thresholds and a few bootstrap draws: each AFT fit takes about a second on a busy CPU
    fit_steep = scaling.fit(steep[steep["threshold"].isin([0.01, 0.05])], max_resamples=4)
    fit_flat = scaling.fit(flat[flat["threshold"].isin([0.01, 0.05])], max_resamples=4, workers=2)
    # the bootstrap refits in two processes give the numbers of the serial fit (checked on one threshold)
    serial = scaling.fit(flat[flat["threshold"] == 0.05], max_resamples=4)
    pd.testing.assert_frame_equal(fit_flat[fit_flat["threshold"] == 0.05].reset_index(drop=True), serial)
    for fit in (fit_steep, fit_flat):
        d = fit[fit["term"] == "log_d_model"]
        assert (~d["determined"]).all() and d["note"].str.contains("not determined by this grid").all()
        assert d["coef"].isna().all()  # never reported as zero
        assert fit[fit["term"] == "log_n_layer"]["determined"].all()
        assert (fit["n_clusters"] == 4).all()

    # log cost rises by 2 from the first layer to the last in the steep grid: the first layer is 1 below the middle
    # layers' mean, the last 1 above, and the middle layers of N = 4 (at 1/3 and 2/3) 2/3 apart; 0 in the flat one
    def term(fit, name):
        rows = fit[fit["term"] == name]
        assert len(rows) == 2 and rows["determined"].all(), rows
        return rows

    first_steep, first_flat = term(fit_steep, "first_layer"), term(fit_flat, "first_layer")
    assert (first_steep["coef"] < -0.5).all() and (first_steep["coef_hi"] < 0).all()
    assert (first_flat["coef"].abs() < 0.5).all()
    assert (first_steep["coef"].to_numpy() < first_flat["coef"].to_numpy() - 0.5).all()
    middle_steep, middle_flat = term(fit_steep, "middle_depth"), term(fit_flat, "middle_depth")
    assert (middle_steep["coef"] > 0.3).all() and (middle_steep["coef_lo"] > 0).all()
    assert (middle_flat["coef"].abs() < 0.3).all()
    last = fit_steep[(fit_steep["term"] == "last_layer") & (fit_steep["threshold"] == 0.05)].iloc[0]
    assert last["determined"] and last["coef"] > 0.6 and last["coef_lo"] > 0


def test_a_family_trained_on_other_data_is_not_compared_through_the_data_trend(steep):
    cells = steep[steep["threshold"] == 0.05].copy()
    other = cells["model"] == "gpt2-n2-d64"
    cells.loc[other, "family_kind"] = "encoder-only"
    apart = cells.copy()
    apart.loc[other, "epochs"] = apart.loc[other, "epochs"] * 8  # the only network trained 8x as long
    fit = scaling.fit(apart, max_resamples=2)
    family = fit[fit["term"] == "family[encoder-only]"].iloc[0]
    assert not family["determined"] and "shares S × E" in family["note"] and "left out of this fit" in family["note"]
    assert (fit["n_cells"] < int((apart["target"].str.startswith("L") & (apart["init"] == "fresh")).sum())).all()
    shared = scaling.fit(cells, max_resamples=2)  # same S and E: the family is compared (here: confounded with N)
    assert not shared[shared["term"] == "family[encoder-only]"]["note"].str.contains("shares S × E").any()


def test_terms_that_only_censored_cells_bound_together_are_unbounded():
    # E = 1 networks (some recovered), E = 2 networks of the same family all censored, and E = 2 networks of another
    # family recovered: log E can rise for free while the family term absorbs it for the other family
    ln2, inf = math.log(2), math.inf
    x = pd.DataFrame(
        {"log_epochs": [0, 0, 0, 0, ln2, ln2, ln2, ln2], "family[b]": [0, 0, 0, 0, 0, 0, 1, 1]}, dtype=float
    )
    upper = np.array([0.05, 0.1, inf, 0.08, inf, inf, 0.1, 0.12])
    assert sorted(scaling._unbounded(x, upper)) == ["family[b]", "log_epochs"]
    upper[4] = 0.15  # one E = 2 network of the first family recovers: the likelihood has a maximum
    assert scaling._unbounded(x, upper) == []
    upper[4] = inf  # without the other family, the single-term case (every E = 2 cell censored) is caught too
    assert scaling._unbounded(x[["log_epochs"]].iloc[:6], upper[:6]) == ["log_epochs"]


def test_one_model_one_network_grid():
    summary, curves, networks = synthetic(
        models=(("m", 3, 32),), pretrain_seeds=(0,), seeds=(0,), thresholds=(0.05,), seed=4
    )
    cells = survival.prepare(summary, networks)
    fit = scaling.fit(cells)
    n = fit[fit["term"] == "log_n_layer"]
    assert (~n["determined"]).all()
    assert (fit["n_resamples"] == 0).all()  # nothing to resample: no interval claimed
    dc = scaling.damage_cost(cells)
    assert len(dc) and (dc["n_resamples"] == 0).all()


@pytest.mark.parametrize("sign", [1, -1])
def test_damage_cost_rank_correlation_follows_the_damage(steep, sign):
    """Damage made a monotone function of each cell's cost (censored cells costliest): rho is near +1, or near -1
    for the reversed damage, with an interval on that side of zero; a shuffled damage gives neither."""
    cells = steep.copy()
    cost = cells["upper"].where(np.isfinite(cells["upper"]), 10 * cells["budget_examples"] + cells["lower"])
    cells["damage"] = sign * (cost + 1e-3 * cells["lower"])
    dc = scaling.damage_cost(cells)
    assert len(dc) == 4  # one per threshold
    ok = dc[dc["rho"].notna()]
    assert len(ok) == 4 and ((ok["rho_lo"] <= ok["rho"]) & (ok["rho"] <= ok["rho_hi"])).all()
    assert (sign * ok["rho"] > 0.9).all(), ok[["threshold", "rho"]]
    assert (sign * ok["rho_lo" if sign > 0 else "rho_hi"] > 0).all(), ok[["threshold", "rho_lo", "rho_hi"]]
    cells["damage"] = np.random.default_rng(0).permutation(cells["damage"].to_numpy())
    shuffled = scaling.damage_cost(cells)
    assert (shuffled["rho"].abs() < 0.6).all(), shuffled[["threshold", "rho"]]


def test_missing_columns_name_the_table():
    summary, curves, networks = synthetic(seed=5)
    with pytest.raises(ValueError, match="summary.parquet lacks the columns \\['examples_lo'\\]"):
        survival.prepare(summary.drop(columns=["examples_lo"]), networks)
    with pytest.raises(ValueError, match="networks.parquet"):
        survival.prepare(summary, pd.DataFrame({"model": []}))


def plain_problems(cells: pd.DataFrame):
    """Per threshold of the single-layer cells of ``cells`` (the default setting's): the design of the terms the
    grid identifies, the cost bounds and the cluster keys and strata, before ``scaling.refits`` leaves out any
    term's cells (the problem ``scaling._aft`` solves in a plain grid)."""
    layers = scaling._layer_cells(cells)
    for eps in sorted(layers["threshold"].unique()):
        rows = layers[layers["threshold"] == eps]
        rows = rows[rows["upper"].to_numpy(float) != 0]
        x = scaling._design(rows)
        kept, _ = scaling.identifiable(x)
        lower, upper = scaling._bounds(rows, scaling.cost_unit(rows))
        _, strata, keys = scaling._units(rows)
        yield float(eps), x[kept], lower, upper, strata, keys


def log_likelihood(params: pd.Series, x: pd.DataFrame, lower, upper, weights=None) -> float:
    """The total (weighted) log-likelihood of the log-normal AFT at ``params`` (lifelines' names, as
    ``scaling._aft`` returns them), as lifelines' ``log_likelihood_`` counts it: two fits of the same cells compare
    by it."""
    terms = sorted(x.columns)
    w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=float)
    keep = w > 0
    lo, hi = np.asarray(lower, dtype=float)[keep], np.asarray(upper, dtype=float)[keep]
    design = np.column_stack([x[terms].to_numpy(float)[keep], np.ones(int(keep.sum()))])
    theta = np.array([float(params[("mu_", t)]) for t in terms] + [float(params[("mu_", "Intercept")])])
    theta = np.append(theta, float(params[("sigma_", "Intercept")]))
    with np.errstate(divide="ignore"):
        log_lo, log_hi = np.log(lo), np.log(hi)
    exact = np.isfinite(log_lo) & (lo == hi)
    value, _ = scaling._log_likelihood(theta, design, log_lo, log_hi, exact, w[keep])
    return value * float(w[keep].sum())


@pytest.mark.parametrize("case", [{}, {"budget_fraction": 0.05}, {"pretrain_seeds": (0,), "seeds": (0, 1, 2)}])
def test_the_aft_fit_is_lifelines_log_normal_aft(case):
    """scaling._aft (written here for speed) gives lifelines' LogNormalAFTFitter's parameters, names and order, on
    interval- and right-censored costs at every ε, unweighted from its own start and weighted (a bootstrap draw)
    from the full fit's."""
    from lifelines import LogNormalAFTFitter

    summary, _, networks = synthetic(models=(("a", 2, 64), ("b", 4, 64), ("c", 2, 128)), n_effect=-0.5, **case)
    compared = 0
    for eps, x, lower, upper, strata, keys in plain_problems(survival.prepare(summary, networks)):
        draw = survival.cluster_resamples(strata, 4)[-1][0]  # a resample that repeats some networks
        weights = scaling._weights(keys, draw)
        ours = scaling._aft(x, lower, upper)
        again = scaling._aft(x, lower, upper, weights, ours)
        data = x.assign(_lo=lower, _hi=upper, _w=weights)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = LogNormalAFTFitter().fit_interval_censoring(data.drop(columns="_w"), "_lo", "_hi")
            theirs, theirs_ll = fitted.params_, fitted.log_likelihood_
            drawn = LogNormalAFTFitter().fit_interval_censoring(data[weights > 0], "_lo", "_hi", weights_col="_w")
        assert list(ours.index) == list(theirs.index) and list(again.index) == list(theirs.index)
        # the same maximum (lifelines' log_likelihood_ at its own optimum); where the maximum is a point, its place
        full = log_likelihood(ours, x, lower, upper)
        assert full == pytest.approx(theirs_ll, abs=1e-4) and full >= log_likelihood(theirs, x, lower, upper) - 1e-6
        drawn_ll = log_likelihood(again, x, lower, upper, weights)
        assert drawn_ll == pytest.approx(drawn.log_likelihood_, abs=1e-4), eps
        if not case:  # every cost bounded on both sides by enough cells: one maximum
            assert np.allclose(ours.to_numpy(), theirs.to_numpy(), atol=1e-4), (eps, ours - theirs)
            assert np.allclose(again.to_numpy(), drawn.params_.to_numpy(), atol=1e-4), (eps, again - drawn.params_)
        compared += 1
    assert compared == 4
