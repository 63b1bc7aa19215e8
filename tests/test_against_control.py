"""Each cell's crossing against its matched control (summary.parquet's ``control_examples_lo`` / ``_hi``) and the
single-layer medians from them (``answer/against_control``): with a control that stays at the baseline they are the
crossings against the baseline; with one that the retraining lifts above it they come earlier, and the page sets
them beside the medians against the baseline."""

import warnings

import numpy as np
import pandas as pd
import pytest

from answer_helpers import synthetic
from selfheal.analysis import answer, answer_plots, answer_tables, page, verdicts
from selfheal.analysis import tables as summary_tables
from selfheal.analysis.page import num, signed_pct, span

warnings.filterwarnings("ignore", module="lifelines")
LINKS = {name: f"plots/{name}.html" for name in answer_plots.FIGURES}
MODEL = "gpt2-n2-d64"


def test_a_control_at_its_baseline_gives_the_crossings_against_the_baseline():
    summary, _, _ = synthetic(models=((MODEL, 2, 64),), thresholds=(0.01, 0.1), budget_fraction=0.2, seed=3)
    layers = summary[summary["target"].str.fullmatch(r"L\d") & (summary["init"] == "fresh")]
    recovered = layers[layers["recovered"]]
    censored = layers[~layers["recovered"]]
    assert len(recovered) and len(censored)
    assert (recovered["control_examples_hi"] == recovered["examples_hi"]).all()
    assert (recovered["control_examples_lo"] == recovered["examples_lo"]).all()
    assert censored["control_examples_hi"].isna().all()  # never within: censored at the last shared evaluation
    assert (censored["control_examples_lo"] == censored["budget_examples"]).all()
    controls = summary[(summary["init"] == "trained") | (summary["target"] == "none")]
    assert controls[["control_examples_lo", "control_examples_hi"]].isna().all().all()
    whole_net = summary[summary["target"] == "all"]  # a set target has no matched control
    assert whole_net["control_examples_lo"].isna().all()


def _lifted(lift: float):
    """The synthetic grid with every matched control's loss rising linearly to ``lift`` above the baseline by the
    end of its curve, and the summary's control crossings read again."""
    summary, curves, networks = synthetic(models=((MODEL, 2, 64),), thresholds=(0.01, 0.1), seed=3)
    control = curves["init"].eq("trained")
    end = curves.loc[control, "examples"].max()
    curves.loc[control, "val_loss"] *= 1 + lift * curves.loc[control, "examples"] / end
    summary = summary_tables.add_controls_and_flags(summary, curves, networks)  # the controls' losses read again
    summary = summary_tables.add_control_crossings(summary, curves)
    tables = answer_tables.compute(summary, curves, networks)
    return summary, tables, page.markdown(tables, summary, networks, LINKS), networks


@pytest.fixture(scope="module")
def lifted():
    return _lifted(0.02)


def test_a_lifted_control_brings_the_crossings_earlier(lifted):
    summary, tables, _, _ = lifted
    rows = summary[summary["recovered"] & summary["control_examples_hi"].notna()]
    assert len(rows)
    assert (rows["control_examples_hi"] <= rows["examples_hi"]).all()
    assert (rows["control_examples_hi"] < rows["examples_hi"]).any()
    against = tables["against_control"].set_index(["target", "threshold"])["median_examples"]
    baseline = tables["survival"]
    baseline = baseline[baseline["kind"] == "layer"].set_index(["target", "threshold"])["median_examples"]
    assert len(against) == len(baseline)
    assert (against <= baseline.reindex(against.index)).all()
    assert (against < baseline.reindex(against.index)).any()


def test_the_page_sets_them_beside_the_medians_against_the_baseline(lifted):
    summary, tables, md, _ = lifted
    head = answer.short(md)
    against = tables["against_control"]
    at = against[(against["threshold"] == 0.01) & (against["kind"] == "layer")]["median_fraction"].astype(float)
    assert f"against its matched control one layer needs {span(at[np.isfinite(at)])} of S × E" in head
    # §1 sets each layer's median against its matched control beside the one against the baseline, at ε_min
    costs = md[md.index("## 1. ") : md.index("## 2. ")]
    assert "| model | reset | ε = 0.01 | vs. control | ε = 0.1 |" in costs
    row = next(line for line in costs.splitlines() if line.startswith(f"| {MODEL} | L0 (first) |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    first = against[(against["target"] == "L0") & (against["threshold"] == 0.01)]["median_fraction"].iloc[0]
    assert len(cells) == 5 and cells[3] == page.cost(first)
    every = next(line for line in costs.splitlines() if line.startswith(f"| {MODEL} | every layer |"))
    assert every.split("|")[4].strip() == "—"  # no matched control for resetting every layer


def test_the_costliest_layer_against_the_control_is_its_own_verdict(lifted):
    """against_control.costliest is decided on its own medians: reordering them moves it."""
    _, tables, _, networks = lifted
    against = tables["against_control"]
    layers = against[against["kind"] == "layer"]
    by_eps = layers[layers["costliest"]].groupby("threshold")["target"].apply(list)
    assert all(len(t) == 1 for t in by_eps)
    reordered = against.copy()
    first, last = reordered["target"] == "L0", reordered["target"] == "L1"
    for column in ("median_examples", "median_fraction", "median_fraction_hi"):  # the first now costs the most
        reordered.loc[first, column] = reordered.loc[last, column].to_numpy() * 2
    scratch = verdicts.scratch_means(tables["pretrain_reference"], networks)
    again = verdicts.survival_verdicts(reordered, scratch, networks)
    assert set(again.loc[again["costliest"] & np.isfinite(again["median_fraction"]), "target"]) <= {"L0"}


def test_control_drift_says_when_each_control_first_left_the_bound():
    """answer_tables.control_drift: with the smallest ε, how many of a network's matched controls ever moved beyond
    ± ε_min / 4 (either way) and the median of the examples at which each first did."""
    base = 4.0
    rows = []
    for target, losses in (
        ("L0", [base, base * 1.001, base * 1.003, base * 1.004]),  # leaves at 200
        ("L1", [base, base * 0.999, base * 0.998, base * 0.996]),  # leaves at 400, below the baseline
        ("L2", [base, base * 1.001, base * 1.002, base * 1.001]),  # never
    ):
        for examples, loss in zip((0, 100, 200, 400), losses):
            rows.append(
                {"kind": "recovery", "init": "trained", "model": MODEL, "pretrain_seed": 0, "regime": "frozen"}
                | {"target": target, "policy": "full", "seed": 0, "examples": examples, "val_loss": loss}
            )
    curves = pd.DataFrame(rows)
    networks = pd.DataFrame({"model": [MODEL], "pretrain_seed": [0], "baseline_loss": [base]})
    drift = answer_tables.control_drift(curves, networks, 0.01).iloc[0]
    assert drift["n_controls"] == 3 and drift["n_beyond"] == 2
    assert drift["beyond_examples"] == 300.0  # the median of 200 and 400
    without = answer_tables.control_drift(curves, networks).iloc[0]
    assert pd.isna(without["n_beyond"]) and np.isnan(without["beyond_examples"])


def test_the_caveat_says_when_the_drift_sets_in(lifted):
    _, tables, md, networks = lifted
    drift = tables["control_drift"]
    assert drift["beyond_tolerance"].all()  # lifted 2 %, far past ε_min / 4
    caveat = next(line for line in md.splitlines() if line.startswith("- Retraining alone (the matched"))
    rows = drift.merge(networks[["model", "pretrain_seed", "pretrain_examples"]], on=["model", "pretrain_seed"])
    onset = rows["beyond_examples"] / rows["pretrain_examples"]
    said = f"({int(drift['n_beyond'].sum())} of {int(drift['n_controls'].sum())} controls moved beyond it, after a "
    assert said + f"median {num(float(onset.median()))} of S × E" in caveat


def test_a_control_within_eps_min_over_4_leaves_them_off_the_headline():
    _, tables, md, _ = _lifted(0.001)
    assert len(tables["against_control"])  # measured, and in its table
    assert not tables["control_drift"]["beyond_tolerance"].any()
    assert "against its matched control" not in answer.short(md)


def test_tables_without_the_columns_give_an_empty_table():
    summary, curves, networks = synthetic(models=((MODEL, 2, 64),), thresholds=(0.05,), seed=1)
    old = summary.drop(columns=["control_examples_lo", "control_examples_hi"])
    tables = answer_tables.compute(old, curves, networks)
    assert isinstance(tables["against_control"], pd.DataFrame) and not len(tables["against_control"])
    assert (
        len(tables["network_costs"]) and tables["network_costs"][["control_lower", "control_upper"]].isna().all().all()
    )


def test_a_frozen_encoder_swap_is_read_against_the_retrained_cross_attention():
    """A swap whose encoder stays frozen trains only the cross-attention, so its matched control is the intact
    network's cross-attention (all of it) retrained the same way (``grid.matched_control_of``): its crossings
    against that control, its aside row's control median, and the page's sentence come from that curve; a swap
    whose encoder trains has none."""
    summary, curves, networks = synthetic(
        models=(("bart-n2-d64", 2, 64),), thresholds=(0.01, 0.1), family_kind="encoder-decoder", extra_targets=True
    )
    frozen = {"target": "swap-tinydonor", "policy": "cross_attn"}
    swap = summary["target"] == "swap32"
    summary = pd.concat([summary, summary[swap].assign(**frozen)], ignore_index=True)
    swap_curves = curves[curves["target"] == "swap32"].assign(**frozen)
    # the control: a layer's matched control curve, as every cross-attention's, lifted 5 % by its end
    control = curves[(curves["target"] == "L0") & (curves["init"] == "trained")].assign(
        target="all", policy="cross_attn"
    )
    end = float(control["examples"].max())
    control["val_loss"] *= 1 + 0.05 * control["examples"] / end
    curves = pd.concat([curves, swap_curves, control], ignore_index=True)
    summary = summary_tables.add_control_crossings(
        summary.drop(columns=["control_examples_lo", "control_examples_hi"]), curves
    )

    frozen_rows = summary[summary["target"] == "swap-tinydonor"]
    assert frozen_rows["control_examples_lo"].notna().all()
    assert summary.loc[summary["target"] == "swap32", "control_examples_lo"].isna().all()
    # within (1 + ε) of a control 5 % up comes no later than within (1 + ε) of the baseline
    reached = frozen_rows[frozen_rows["recovered"]]
    assert (reached["control_examples_hi"] <= reached["examples_hi"]).all()

    tables = answer_tables.compute(summary, curves, networks)
    aside = tables["encoder_decoder"]
    row = aside[(aside["item"] == "donor_swap_frozen") & (aside["threshold"] == 0.01)].iloc[0]
    against = tables["against_control"]
    mine = against[(against["target"] == "swap-tinydonor") & (against["threshold"] == 0.01)]
    assert len(mine) == 1 and row["control_median"] == mine[f"median_{row['unit']}"].iloc[0]
    assert row["control_median"] <= row["median"]
    assert aside.loc[aside["item"] == "encoder_swap", "control_median"].isna().all()

    md = page.markdown(tables, summary, networks, LINKS)
    # the single-layer medians against the matched controls leave the swap out
    assert "swap-tinydonor" not in md[md.index("## 1. ") : md.index("## 2. ")]


def test_the_headline_names_each_drifting_model_with_its_worst_move():
    """The headline's drift sentence lists each model whose usable networks' controls moved beyond ε_min / 4
    (control_drift.beyond_tolerance) with its worst move."""
    models = (("gpt2-n2-d64", 2, 64), ("gpt2-n3-d64", 3, 64), ("gpt2-n4-d64", 4, 64))
    summary, curves, networks = synthetic(models=models, thresholds=(0.01, 0.1), seed=3)
    control = curves["init"].eq("trained")
    end = curves.loc[control, "examples"].max()
    lifts = curves["model"].map({"gpt2-n2-d64": 0.006, "gpt2-n3-d64": 0.008, "gpt2-n4-d64": 0.0005})
    curves.loc[control, "val_loss"] *= 1 + lifts[control] * curves.loc[control, "examples"] / end
    summary = summary_tables.add_controls_and_flags(summary, curves, networks)
    summary = summary_tables.add_control_crossings(summary, curves)
    tables = answer_tables.compute(summary, curves, networks)
    drift = tables["control_drift"]
    assert set(drift.loc[drift["beyond_tolerance"], "model"]) == {"gpt2-n2-d64", "gpt2-n3-d64"}
    head = answer.short(page.markdown(tables, summary, networks, LINKS))
    worst = drift.loc[drift["drift_worst"].abs().groupby(drift["model"]).idxmax()].set_index("model")["drift_worst"]
    named = ", ".join(f"{m} {signed_pct(worst[m])}" for m in ("gpt2-n2-d64", "gpt2-n3-d64"))
    assert f"by more than ε_min / 4 = 0.25 % in 2 of 3 models ({named})" in head


def test_a_control_that_jumps_before_the_crossings_does_not_bar_eps_min():
    """Every matched control 1 % above its baseline at its first evaluation after the start, and back after: beyond
    ε_min / 4 = 0.25 % at some evaluation, but not where any cell crossed ε_min, so ε_min is stated and the page says
    the drift came before the costs were read."""
    summary, curves, networks = synthetic(models=((MODEL, 2, 64),), thresholds=(0.01, 0.1), seed=3)
    control = curves["init"].eq("trained")
    first = curves.loc[control & (curves["examples"] > 0), "examples"].min()
    curves.loc[control & (curves["examples"] == first), "val_loss"] *= 1.01
    summary = summary_tables.add_controls_and_flags(summary, curves, networks)
    summary = summary_tables.add_control_crossings(summary, curves)
    crossed = summary[summary["recovered"] & (summary["examples"] > 0) & (summary["init"] == "fresh")]
    assert len(crossed) and (crossed["examples"] > first).all()  # every crossing after the jump
    tables = answer_tables.compute(summary, curves, networks)
    assert tables["control_drift"]["drift_worst"].max() == pytest.approx(0.01, abs=1e-9)
    resolved = tables["resolved_eps"].set_index("threshold")
    assert resolved.loc[0.01, "controls_resolve"] and abs(resolved.loc[0.01, "crossing_drift"]) <= 0.0025
    head = answer.short(page.markdown(tables, summary, networks, LINKS))
    assert (
        "but not where the costs are read: where a cell crossed ε = 1 %, its matched control is within ± 0.25 %" in head
    )
