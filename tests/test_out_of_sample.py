"""The out-of-sample check of the scaling claim (analysis/out_of_sample.py): a trend fitted without the largest
size predicts it when the data follow the fitted form, and does not when the largest size departs from it; its
figure draws what the table holds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from answer_helpers import synthetic
from test_figures import check_figure

from selfheal.analysis import answer_plots, out_of_sample, survival

# three depths at one width: "largest size" and "largest N" both leave out n8 (one part); no D axis to leave out
MODELS = (("gpt2-n2-d64", 2, 64), ("gpt2-n4-d64", 4, 64), ("gpt2-n8-d64", 8, 64))
# five networks per size: the prediction for n8 is then informative (under out_of_sample.INFORMATIVE_FACTOR wide)
SIZES = dict(depth_effect=1.0, n_effect=0.5, thresholds=(0.05,), seeds=(0,), pretrain_seeds=(0, 1, 2, 3, 4), seed=4)


def _check(**kw):
    summary, _, networks = synthetic(models=MODELS, budget_fraction=2.0, **SIZES, **kw)
    cells = survival.prepare(summary, networks)
    return out_of_sample.check(cells, survival.estimate(cells), max_resamples=6)


@pytest.fixture(scope="module")
def follows_the_trend():
    return _check()


def test_parts_left_out_and_what_is_fitted(follows_the_trend):
    table = follows_the_trend
    assert set(table["left_out"]) == {"largest size and largest N"}  # one part; D does not vary: nothing to leave out
    assert set(table["model"]) == {"gpt2-n8-d64"} and len(table) == 8  # 8 layers, fitted once
    assert (table["fit_models"] == 2).all() and table["fit_terms"].str.contains("log_n_layer").all()
    assert (table["predicted_lo"] <= table["predicted"]).all() and (table["predicted"] <= table["predicted_hi"]).all()
    assert (table["n_resamples"] > 0).all()


def _grid(models):
    return pd.DataFrame(
        [{"model": f"gpt2-n{n}-d{d}", "n_layer": n, "d_model": d, "n_params": n * d * d} for n, d in models]
    )


def test_parts_that_leave_out_the_same_models_are_one_part_named_by_each():
    depths = out_of_sample.parts(_grid([(2, 64), (4, 64), (8, 64)]))
    assert depths == [("largest size and largest N", ["gpt2-n8-d64"])]
    square = dict(out_of_sample.parts(_grid([(n, d) for n in (2, 4, 8) for d in (32, 64, 128)])))
    assert square == {
        "largest size": ["gpt2-n8-d128"],
        "largest N": ["gpt2-n8-d128", "gpt2-n8-d32", "gpt2-n8-d64"],
        "largest D": ["gpt2-n2-d128", "gpt2-n4-d128", "gpt2-n8-d128"],
    }


def test_a_trend_the_data_follow_holds(follows_the_trend):
    verdicts = out_of_sample.verdicts(follows_the_trend)
    assert (verdicts["verdict"] == "held").all(), verdicts.to_string()


def test_a_largest_size_off_the_trend_does_not_hold():
    summary, _, networks = synthetic(models=MODELS, budget_fraction=200.0, **SIZES)
    # the largest network heals 100x slower than the trend says: every crossing of it moves out by that factor
    # (the prediction from five networks per depth is informative: under ten-fold wide)
    big = summary["model"] == "gpt2-n8-d64"
    budget = int(summary["budget_examples"].iloc[0])
    for column in ("examples", "examples_lo", "examples_hi"):
        moved = (summary.loc[big, column].astype(float) * 100).clip(upper=budget)
        summary.loc[big, column] = moved.round().astype("Int64")
    summary.loc[big, "recovered"] = summary.loc[big, "examples_hi"].astype(float) < budget
    summary.loc[big, "fraction_of_pretrain"] = summary.loc[big, "examples"].astype(float) / summary.loc[
        big, "pretrain_examples"
    ].astype(float)
    cells = survival.prepare(summary, networks)
    table = out_of_sample.check(cells, survival.estimate(cells), max_resamples=6)
    verdicts = out_of_sample.verdicts(table)
    assert (verdicts["verdict"] == "did not hold").all(), table.to_string()


def _drawn(chart) -> list[dict]:
    spec = chart.to_dict()
    return spec["data"]["values"] if "values" in spec.get("data", {}) else next(iter(spec["datasets"].values()))


def test_figure_draws_every_tested_prediction_and_caps_its_axis_near_the_budget(follows_the_trend):
    summary, _, networks = synthetic(models=MODELS, budget_fraction=2.0, **SIZES)
    surv = survival.estimate(survival.prepare(summary, networks))
    table = follows_the_trend.copy()
    # one layer not tested (as a median of 0 is), one measured beyond the budget, one prediction far above it
    table.loc[table.index[0], "held"] = pd.NA
    censored = table.index[1]
    table.loc[censored, ["measured", "measured_hi"]] = np.inf
    table.loc[censored, ["measured_lo", "measured_censored"]] = [2.0, True]
    table.loc[table.index[2], ["predicted", "predicted_hi"]] = [150.0, 300.0]
    chart = answer_plots.out_of_sample(table, surv)
    check_figure(chart, "answer_out_of_sample")
    rows = _drawn(chart)
    tested = table[table["held"].notna()]
    assert len(rows) == 2 * len(tested)  # a predicted and a measured point per tested layer, nothing else
    assert f"{table.loc[table.index[0], 'model']} {table.loc[table.index[0], 'target']}" not in {
        r["layer"] for r in rows if r["panel"] == f"{table.loc[table.index[0], 'left_out']}, ε = 0.05"
    }
    budget = float(surv["budget_fraction"].max())
    assert max(r["hi"] for r in rows) <= 1.25 * budget * (1 + 1e-9)  # the axis ends near the budget, not at 300
    arrow = [r for r in rows if r["status"] == "measured: beyond the budget (↑)"]
    assert len(arrow) == 1 and arrow[0]["value"] == pytest.approx(2.0)
    spec = str(chart.to_dict())
    assert "triangle-up" in spec and "dashed: the retraining budget" in spec


def test_figure_names_the_panels_it_does_not_draw(follows_the_trend):
    summary, _, networks = synthetic(models=MODELS, budget_fraction=2.0, **SIZES)
    surv = survival.estimate(survival.prepare(summary, networks))
    table = pd.concat(
        [follows_the_trend.assign(left_out="largest size"), follows_the_trend.assign(left_out="largest N")],
        ignore_index=True,
    )
    table.loc[table["left_out"] == "largest N", "held"] = pd.NA  # no layer of this part tested
    chart = answer_plots.out_of_sample(table, surv)
    assert {r["panel"] for r in _drawn(chart)} == {"largest size, ε = 0.05"}
    assert "Not drawn: largest N, ε = 0.05 (no layer tested)" in str(chart.to_dict())


def test_a_median_beyond_the_budget_lies_between_the_budget_and_infinity():
    """A censored measured median is known only to be at least the budget: a prediction above the budget agrees
    with it, one below does not."""
    inf = float("inf")
    censored = pd.DataFrame({"median_fraction": [inf], "median_fraction_lo": [inf], "median_fraction_hi": [inf]})
    assert out_of_sample._measured(censored.assign(budget_fraction=0.2), "fraction") == (inf, 0.2, inf)
    within = pd.DataFrame({"median_examples": [0.1], "median_examples_lo": [0.05], "median_examples_hi": [inf]})
    assert out_of_sample._measured(within.assign(budget_examples=0.2), "examples") == (0.1, 0.05, inf)
    assert all(math.isnan(x) for x in out_of_sample._measured(within.iloc[:0], "examples"))  # nothing measured


def test_a_prediction_too_wide_to_fail_is_not_informative():
    """From two networks per depth the extrapolation to n8 is some hundred-fold wide: it cannot fail, so it is
    not informative (never counted as held)."""
    summary, _, networks = synthetic(models=MODELS, budget_fraction=2.0, **{**SIZES, "pretrain_seeds": (0, 1)})
    cells = survival.prepare(summary, networks)
    table = out_of_sample.check(cells, survival.estimate(cells), max_resamples=6)
    wide = table["predicted_hi"] / table["predicted_lo"]
    assert (wide >= out_of_sample.INFORMATIVE_FACTOR).all(), wide.tolist()
    assert set(table["result"]) == {"not informative"} and table["held"].isna().all()
    assert out_of_sample.verdicts(table)["verdict"].tolist() == ["not informative"]
