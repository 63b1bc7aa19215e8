"""The answer in the asker's terms, its ε and its verdicts, on hand-built tables with hand-written expectations:
the headline table (positions x ε, the median and range over models, the words), N and D per position, which ε the
grid resolves and why, per-stack positions, what an interval is, a refusal read beside the control, and an
out-of-sample check that cannot fail."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from selfheal.analysis import headline, out_of_sample, resolution, survival, verdicts

ASKED = dict(zip(survival.SETTING, survival.ASKED))
INF = math.inf


@pytest.mark.parametrize(
    "median, relative, refuses, words",
    [
        (0.002, 0.01, False, "under 1 %"),
        (0.01, 0.05, False, "about 1 %"),
        (0.03, 0.1, False, "about 1 %"),
        (0.05, 0.2, False, "about 10 %"),
        (0.5, 0.9, False, "about all of S × E"),
        (0.5, 1.2, False, "more than from scratch"),
        (5.0, 0.8, False, "more than S × E"),
        (INF, INF, True, "never"),
        (INF, INF, False, "beyond the budget"),
        (math.nan, math.nan, False, "no cost (not damaged)"),
    ],
)
def test_a_median_is_said_in_the_askers_terms(median, relative, refuses, words):
    assert headline.in_words(median, relative, refuses) == words


def layer_row(model, position, eps, median, lo, hi, *, n_layer=3, d_model=64, verdict=None, relative=0.5, target=None):
    return {
        "model": model,
        "family_kind": "decoder-only",
        "n_layer": n_layer,
        "d_model": d_model,
        "target": target or f"L{position}",
        "kind": survival.LAYER,
        "position": position,
        **ASKED,
        "threshold": eps,
        "pretrain_examples": 1000.0,
        "median_fraction": median,
        "median_fraction_lo": lo,
        "median_fraction_hi": hi,
        "median_examples": median * 1000,
        "median_examples_lo": lo * 1000,
        "median_examples_hi": hi * 1000,
        "verdict": verdict or ("recovered" if math.isfinite(median) else "refuses"),
        "relative_to_scratch": relative,
    }


NETWORKS = pd.DataFrame(
    {"model": ["a", "b", "c"], "source": "scratch", "train_sequences": 100, "epochs": 10, "context": 32}
)


def test_the_headline_is_the_median_and_range_over_models_per_position():
    surv = pd.DataFrame(
        [
            layer_row("a", "first", 0.05, 0.8, 0.7, 0.9, relative=1.5),
            layer_row("b", "first", 0.05, 0.4, 0.3, 0.5, relative=0.9),
            layer_row("c", "first", 0.05, 0.6, 0.5, 0.7, relative=1.1),
            layer_row("a", "last", 0.05, 0.01, 0.008, 0.02),
            layer_row("b", "last", 0.05, INF, INF, INF, relative=INF),
            layer_row("c", "last", 0.05, INF, INF, INF, relative=INF),
        ]
    )
    resolved = pd.DataFrame({"threshold": [0.05], "headline": [True]})
    table = headline.headline(surv, surv.iloc[:0], resolved, NETWORKS, survival.ASKED).set_index("position")
    first, last = table.loc["first"], table.loc["last"]
    assert (first["median"], first["lo"], first["hi"], first["n_models"]) == (0.6, 0.4, 0.8, 3)
    assert first["relative_to_scratch"] == 1.1 and first["words"] == "more than from scratch"
    assert bool(first["resolved"])
    assert math.isinf(last["median"]) and (last["lo"], last["n_beyond"], last["n_refuses"]) == (0.01, 2, 2)
    assert last["words"] == "never"


def test_two_first_layers_of_a_model_count_as_its_median():
    surv = pd.DataFrame(
        [
            layer_row("a", "first", 0.05, 0.2, 0.1, 0.3, target="enc.0"),
            layer_row("a", "first", 0.05, 0.4, 0.3, 0.6, target="dec.0"),
        ]
    )
    table = headline.headline(surv, surv.iloc[:0], pd.DataFrame(), NETWORKS, survival.ASKED)
    assert table["median"].tolist() == pytest.approx([0.3]) and table["n_models"].tolist() == [1]


def test_a_layer_never_damaged_is_left_out_of_its_position_s_cost_and_counted():
    """Two middle layers, one back within ε after 0.004 of S x E, one never damaged beyond ε: the middle costs 0.004
    (not 'not damaged', not a median with a zero), one of its two layers not damaged; a position where no layer was
    damaged has no cost."""
    nan = math.nan
    surv = pd.DataFrame(
        [
            layer_row("a", "middle", 0.1, 0.004, 0.003, 0.005, target="L1", relative=0.01),
            layer_row("a", "middle", 0.1, nan, nan, nan, target="L2", verdict="not_damaged", relative=nan),
            layer_row("a", "last", 0.1, nan, nan, nan, target="L3", verdict="not_damaged", relative=nan),
        ]
    )
    table = headline.headline(surv, surv.iloc[:0], pd.DataFrame(), NETWORKS, survival.ASKED).set_index("position")
    middle, last = table.loc["middle"], table.loc["last"]
    assert (middle["median"], middle["relative_to_scratch"], middle["words"]) == (0.004, 0.01, "about 1 %")
    assert (middle["n_layers"], middle["n_layers_not_damaged"], middle["n_not_damaged"]) == (2, 1, 0)
    assert math.isnan(last["median"]) and last["words"] == "no cost (not damaged)"
    assert (last["n_layers"], last["n_layers_not_damaged"], last["n_not_damaged"]) == (1, 1, 1)


def test_n_and_d_are_judged_per_position():
    surv = pd.DataFrame(
        [
            # N rises 3 -> 4 -> 6: the first layer's cost falls, clear of the ranges; the last layer's rises, but its
            # two ends' network ranges overlap
            layer_row("a", "first", 0.05, 3.0, 2.5, 3.5, n_layer=3),
            layer_row("b", "first", 0.05, 2.0, 1.5, 2.5, n_layer=4),
            layer_row("c", "first", 0.05, 1.0, 0.8, 1.2, n_layer=6),
            layer_row("a", "last", 0.05, 0.1, 0.05, 0.5, n_layer=3),
            layer_row("b", "last", 0.05, 0.2, 0.1, 0.4, n_layer=4),
            layer_row("c", "last", 0.05, 0.3, 0.2, 0.6, n_layer=6),
        ]
    )
    sizes = headline.size_effects(surv, NETWORKS, survival.ASKED)
    n = sizes[sizes["varied"] == "n_layer"].set_index("position")
    assert n.loc["first", "verdict"] == "falls" and (n.loc["first", "model_a"], n.loc["first", "model_b"]) == ("a", "c")
    assert (n.loc["first", "value_a"], n.loc["first", "value_b"]) == (3, 6)
    assert n.loc["last", "verdict"] == "no clear effect" and bool(n.loc["last", "monotone"])
    d = sizes[sizes["varied"] == "d_model"]
    assert d["verdict"].tolist() == ["not determined", "not determined"]
    assert set(d["reason"]) == {"one_level"}


def test_an_eps_is_stated_only_where_validation_and_controls_resolve_it():
    validation = pd.DataFrame(
        {"model": ["a", "b"], "val_sequences_se": [0.004, 0.012], "baseline_loss": [4.0, 4.0]}
    )  # at eps: a needs se <= 0.8 eps, b too: a resolves 1 % (0.008), b from 2 % (0.016)
    drift = pd.DataFrame(
        {
            "model": ["a", "b", "b"],
            "pretrain_seed": [0, 0, 1],
            "regime": "frozen",
            "drift_worst": [0.001, -0.009, 0.02],  # b seed 1 is off its plateau: not read
        }
    )
    networks = pd.DataFrame({"model": ["a", "b", "b"], "pretrain_seed": [0, 0, 1], "off_plateau": [False, False, True]})
    table = resolution.resolved_eps([0.01, 0.02, 0.05], validation, drift, networks, "frozen")
    assert table["headline"].tolist() == [False, False, True]
    assert table["reason"].tolist() == ["controls and validation", "controls", ""]
    assert table["models_unresolved"].tolist() == ["b", "", ""]
    assert table["drift_worst"].tolist() == [-0.009] * 3 and table["drift_bound"].tolist() == pytest.approx(
        [0.0025, 0.005, 0.0125]
    )


def test_positions_are_per_stack():
    rows = pd.DataFrame(
        {
            "kind": survival.LAYER,
            "family_kind": ["encoder-decoder"] * 4 + ["decoder-only"] * 3,
            "stack": ["enc", "enc", "dec", "dec", "", "", ""],
            "layer": [0, 1, 0, 1, 0, 1, 2],
            "depth": [0, 1, 2, 3, 0, 1, 2],
        }
    )
    positions, middles = survival.stack_places(rows, [4, 4, 4, 4, 3, 3, 3])
    assert positions == ["first", "last", "first", "last", "first", "middle", "last"]
    assert middles == [0.0] * 7


@pytest.mark.parametrize("n, kind", [(0, "none"), (1, "none"), (2, "range"), (4, "range"), (5, "bootstrap")])
def test_an_interval_says_what_it_is(n, kind):
    assert survival.interval_kind(n) == kind


def test_a_stall_back_within_its_control_is_not_a_refusal():
    base = {"model": "a", "regime": "frozen", "policy": "full", "init": "fresh", "threshold": 0.01}
    table = pd.DataFrame(
        [{**base, "target": "L0", "verdict": "refuses"}, {**base, "target": "L1", "verdict": "refuses"}]
    )
    control = pd.DataFrame(
        [{**base, "target": "L0", "median_examples": 500.0}, {**base, "target": "L1", "median_examples": INF}]
    )
    out = verdicts.back_against_control(table, control)
    assert out["verdict"].tolist() == ["back_to_control", "refuses"]


def test_an_out_of_sample_prediction_too_wide_to_fail_is_not_informative():
    table = pd.DataFrame(
        {
            "left_out": "largest N",
            "threshold": 0.01,
            "model": ["c", "c"],
            "predicted": [1.0, 1.0],
            "held": pd.array([pd.NA, pd.NA], dtype="boolean"),
            "result": ["not informative", "not informative"],
            "note": "",
        }
    )
    assert out_of_sample.verdicts(table)["verdict"].tolist() == ["not informative"]
    table["held"] = pd.array([True, pd.NA], dtype="boolean")
    table["result"] = ["held", "not informative"]
    said = out_of_sample.verdicts(table).iloc[0]
    assert (said["verdict"], said["held"], said["not_informative"]) == ("held", 1, 1)


def test_the_controls_are_read_where_the_costs_are():
    """A matched control that jumps at the start of its run (+3 % at some evaluation) but is within ε / 4 of the
    baseline where every cell crossed ε resolves that ε; a control 0.6 % off at a crossing of 2 % does not."""
    validation = pd.DataFrame({"model": ["a"], "val_sequences_se": [0.001], "baseline_loss": [4.0]})
    drift = pd.DataFrame({"model": ["a"], "pretrain_seed": [0], "regime": "frozen", "drift_worst": [0.03]})
    networks = pd.DataFrame({"model": ["a"], "pretrain_seed": [0], "off_plateau": [False]})
    base = {"model": "a", "pretrain_seed": 0, "regime": "frozen", "is_control": False, "baseline_loss": 4.0}
    cells = pd.DataFrame(
        [
            # at 2 %: L0's control at 4.024 (+0.6 %, beyond 0.5 %) where L0 crossed; L1's at 4.008 (+0.2 %)
            {**base, "threshold": 0.02, "status": "recovered", "upper": 3000.0, "control_loss": 4.024},
            {**base, "threshold": 0.02, "status": "recovered", "upper": 2000.0, "control_loss": 4.008},
            # at 5 %: +0.6 % and +0.2 % are within 1.25 %; a censored cell's control is not read
            {**base, "threshold": 0.05, "status": "recovered", "upper": 1200.0, "control_loss": 4.024},
            {**base, "threshold": 0.05, "status": "censored", "upper": INF, "control_loss": 4.2},
            # at 10 %: back at the start (upper 0): no crossing to read, so the whole run's +3 % decides (> 2.5 %)
            {**base, "threshold": 0.10, "status": "recovered", "upper": 0.0, "control_loss": 4.0},
        ]
    )
    table = resolution.resolved_eps([0.02, 0.05, 0.10], validation, drift, networks, "frozen", cells)
    assert table["controls_resolve"].tolist() == [False, True, False]
    assert table["crossing_drift"].tolist()[:2] == pytest.approx([0.006, 0.006])
    assert table["n_crossings"].tolist() == [2, 1, 0]
    assert table["reason"].tolist() == ["controls", "", "controls"]


def test_two_sizes_whose_costs_differ_by_less_than_a_crossing_are_no_clear_effect():
    """The last layer is back within 5 % at the same step in both sizes (located to 16 examples), but their networks'
    S x E differ (each its own E), so the fractions differ: 160 / 19,200 = 0.00833 against 192 / 23,200 = 0.00828 —
    ranges apart by 0.00005, less than one crossing's width (16 / 19,200 = 0.00083): no clear effect. The first
    layer's 0.19 against 0.10 is apart by far more."""
    surv = pd.DataFrame(
        [
            layer_row("a", "last", 0.05, 0.00833, 0.00833, 0.00833, n_layer=2),
            layer_row("b", "last", 0.05, 0.00828, 0.00828, 0.00828, n_layer=3),
            layer_row("a", "first", 0.05, 0.19, 0.18, 0.20, n_layer=2),
            layer_row("b", "first", 0.05, 0.10, 0.09, 0.11, n_layer=3),
        ]
    )
    cell = {"kind": survival.LAYER, **ASKED, "threshold": 0.05, "status": "recovered"}
    cells = pd.DataFrame(
        [
            {**cell, "model": "a", "position": "last", "lower": 144.0, "upper": 160.0, "pretrain_examples": 19200.0},
            {**cell, "model": "b", "position": "last", "lower": 176.0, "upper": 192.0, "pretrain_examples": 23200.0},
            {**cell, "model": "a", "position": "first", "lower": 3600.0, "upper": 3648.0, "pretrain_examples": 19200.0},
            {**cell, "model": "b", "position": "first", "lower": 2300.0, "upper": 2320.0, "pretrain_examples": 23200.0},
        ]
    )
    n = headline.size_effects(surv, NETWORKS, survival.ASKED, cells)
    n = n[n["varied"] == "n_layer"].set_index("position")
    assert n.loc["last", "verdict"] == "no clear effect"
    assert n.loc["first", "verdict"] == "falls"
    # without the crossings the two last layers' ranges read as apart
    plain = headline.size_effects(surv, NETWORKS, survival.ASKED).set_index(["varied", "position"])
    assert plain.loc[("n_layer", "last"), "verdict"] == "falls"
