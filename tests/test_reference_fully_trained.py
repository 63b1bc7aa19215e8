"""The fully trained reference run shipped in reference/fully_trained/ (config/fully_trained.yaml, the method at CPU
scale): the grid its config claims, three networks per size that pass the gates or leave the estimates, budgets past
each network's own from-scratch cost, a verdict for every censored cell, controls measured against eps_min / 4, the
lr sensitivity, a page generated from the shipped tables, and its headline in the README. Fast: reads the shipped
files only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from selfheal import results
from selfheal.analysis import answer, answer_plots, page, survival

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "reference" / "fully_trained"
CONFIG = yaml.safe_load((ROOT / "config" / "fully_trained.yaml").read_text())


@pytest.fixture(scope="module")
def run():
    return results.load(RUN)


def test_the_grid_is_the_config_s(run):
    networks, summary = run["networks"], run["summary"]
    assert sorted(networks["model"].unique()) == sorted(m["name"] for m in CONFIG["models"])
    assert (networks.groupby("model")["pretrain_seed"].nunique() == len(CONFIG["pretrain"]["seeds"])).all()
    assert len(CONFIG["pretrain"]["seeds"]) % 2 == 1  # an odd number: a median is one network's value
    assert (networks["train_sequences"] == CONFIG["pretrain"]["train_sequences"]).all()
    assert (networks["epochs"] <= CONFIG["pretrain"]["max_epochs"]).all()
    assert sorted(summary["threshold"].unique()) == sorted(CONFIG["retrain"]["thresholds"])
    layers = summary[summary["target"].str.fullmatch(r"L\d+")]
    assert set(layers["target"]) == {f"L{i}" for i in range(2)}


def test_every_network_passes_the_gates_or_leaves_the_estimates(run):
    networks = run["networks"]
    assert (networks["bigram_margin"] >= 0.1).all() and not networks["degenerate"].any()
    eps_min = min(CONFIG["retrain"]["thresholds"])
    # the plateau check ran for every network: the same network trained 1.5 x E
    assert networks["plateau_val_loss"].notna().all()
    off = networks["plateau_gain"] > eps_min * networks["baseline_loss"] / 4
    assert (networks["off_plateau"] == off).all()
    left_out = set(zip(networks.loc[off, "model"], networks.loc[off, "pretrain_seed"]))
    costs = run["network_costs"]
    assert not left_out & set(zip(costs["model"], costs["pretrain_seed"]))


def test_budgets_reach_past_each_network_s_own_from_scratch_cost(run):
    summary = run["summary"]
    # the reset cells (a matched control runs as long as the cell it is matched with; a no-reset control as long)
    cells = summary[(summary["init"] == "fresh") & summary["scratch_examples"].notna()]
    assert len(cells)
    at_min = cells[cells["threshold"] == cells["threshold"].min()]
    assert (at_min["budget_examples"] >= 1.25 * at_min["scratch_examples"] - 1).all()


def test_every_censored_cell_has_a_verdict_from_its_curve(run):
    summary = run["summary"]
    censored = summary[~summary["recovered"].astype(bool) & (summary["damaged_loss"] > summary["threshold_loss"])]
    assert len(censored)
    assert censored["outcome"].isin(["stalled", "still_falling", "diverged"]).all()
    assert censored["fall_per_doubling"].notna().all()


def test_controls_and_validation_error_are_measured_against_eps_min(run):
    drift = run["control_drift"]
    assert len(drift) == len(run["networks"]) and drift["drift_worst"].notna().all()
    # the worst move is at least as large as any end of a control run
    assert (drift["drift_worst"].abs() >= drift[["drift_min", "drift_max"]].abs().max(axis=1) - 1e-12).all()
    err = run["validation_error"]
    assert err["resolves"].all() and (err["val_sequences_se"] <= err["target_se"]).all()


def test_the_lr_sensitivity_heals_first_and_last_layer_at_three_lrs(run):
    lr = run["lr_sensitivity"]
    assert set(lr["model"]) == set(run["networks"]["model"])
    assert sorted(lr["lr_multiplier"].unique()) == [0.3333, 3.0]  # the x3 and /3 its config set when it ran
    assert set(lr["target"]) == {"L0", "L1"}


def test_the_page_is_generated_from_the_shipped_tables(run):
    md = (RUN / "answer.md").read_text()
    tables = {name: run[name] for name in answer.TABLES}
    tables[answer.LR_SENSITIVITY] = run[answer.LR_SENSITIVITY]
    links = {name: f"plots/{name}.png" for name in answer_plots.FIGURES}
    assert page.markdown(tables, run["summary"], run["networks"], links) == md  # the golden-file check
    # what the README says it shows at eps = 1 %: the last layer back within the budget in every model, the first
    # layer beyond it (and its cells still falling there, not stalled)
    surv = run["survival"]
    layers = surv[(surv["kind"] == survival.LAYER) & (surv["threshold"] == 0.01)].set_index(["model", "target"])
    for model in run["networks"]["model"].unique():
        assert np.isfinite(layers.loc[(model, "L1"), "median_examples"])
        assert np.isinf(layers.loc[(model, "L0"), "median_examples"])
    summary = run["summary"]
    first = summary[(summary["target"] == "L0") & (summary["init"] == "fresh") & (summary["threshold"] == 0.01)]
    assert (first["outcome"] == "still_falling").all()


def test_the_readme_carries_its_headline():
    md = (RUN / "answer.md").read_text()
    readme = (ROOT / "README.md").read_text()
    marker = answer.source_marker("reference/fully_trained/answer.md")
    assert marker in readme and answer.headline(md) in readme[readme.index(marker) :]


def test_the_headline_names_exactly_the_models_whose_controls_move_beyond_eps_min_over_4(run):
    """'How sure?' names a model when its usable networks' matched controls moved more than eps_min / 4 at some
    evaluation (from control_drift, recomputed here from the curves), and no other."""
    curves, networks = run["curves"], run["networks"]
    usable = networks[~networks["off_plateau"] & ~networks["degenerate"]].set_index(["model", "pretrain_seed"])
    controls = curves[(curves["kind"] == "recovery") & (curves["init"] == "trained") & (curves["examples"] > 0)]
    moved = set()
    for (model, seed), g in controls.groupby(["model", "pretrain_seed"]):
        if (model, seed) in usable.index:
            drift = g["val_loss"] / usable.loc[(model, seed), "baseline_loss"] - 1
            moved |= {model} if (drift.abs() > min(CONFIG["retrain"]["thresholds"]) / 4).any() else set()
    short = (RUN / "answer.md").read_text().split("## The answer")[1].split("## 1.")[0]  # the answer in short
    line = next(x for x in short.splitlines() if "How sure?" in x)
    drift = line.split("Retraining alone")[-1].split("lean high")[0]  # its sentence (the lr check's names others)
    named = {m for m in networks["model"].unique() if m in drift}
    assert moved and named == moved, (named, moved)
