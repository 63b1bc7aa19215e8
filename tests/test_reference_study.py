"""The reference study shipped in reference/study/ (config/study.yaml, docs/study.md), under the method of
docs/method.md: the grid it claims (depths 3, 4, 6 at width 64, the data axis, BART and its donors), three networks
per model that pass every gate, budgets past each network's from-scratch cost, a verdict for every censored cell,
the first layer's effect and the out-of-sample check at ε = 0.01, the encoder-decoder aside with the asker's swaps,
and the README's headline copied from its page. Fast: reads the shipped files only.

``SELFHEAL_STUDY`` points the tests at another results folder (a study still running, read by the same rules)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from selfheal import results
from selfheal.analysis import answer, answer_plots, out_of_sample, page

ROOT = Path(__file__).resolve().parents[1]
STUDY = Path(os.environ.get("SELFHEAL_STUDY", ROOT / "reference" / "study"))
EPS = 0.01


@pytest.fixture(scope="module")
def study():
    return results.load(STUDY)


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load((ROOT / "config" / "study.yaml").read_text())


def test_every_table_is_shipped_and_small(study):
    assert set(results.TABLES) | set(answer.TABLES) <= set(study)
    size = sum(p.stat().st_size for p in STUDY.rglob("*") if p.is_file())
    assert size < 8 * 2**20, f"the study is {size / 2**20:.1f} MB"
    page = (STUDY / "answer.md").read_text()
    for link in re.findall(r"\]\((plots/[^)]+)\)", page):
        assert link.endswith(".png") and (STUDY / link).is_file(), link


def test_the_grid_is_the_documented_one(study, config):
    networks = study["networks"]
    assert set(networks["model"]) == {m["name"] for m in config["models"]}
    healed = [m["name"] for m in config["models"] if m.get("heal", True)]
    per_model = networks.groupby("model")["pretrain_seed"].nunique()
    assert (per_model[healed] == 3).all(), per_model  # three networks per model: a median is the middle one
    gpt2 = networks[networks["arch"] == "gpt2"]
    shared = gpt2[gpt2["train_sequences"] == gpt2["train_sequences"].max()]
    assert shared["n_layer"].nunique() >= 3  # depths 3, 4 and 6
    assert shared[["train_sequences", "epochs", "context"]].drop_duplicates().shape[0] == 1  # one S, E, context
    assert gpt2[["train_sequences", "epochs"]].drop_duplicates().shape[0] >= 2  # the data axis
    assert "bart" in set(networks["arch"])


def test_every_network_passes_the_gates(study):
    networks = study["networks"]
    flagged = networks[networks["degenerate"].astype(bool) | networks["off_plateau"].astype(bool)]
    assert flagged.empty, flagged[["model", "pretrain_seed", "degenerate_reason", "plateau_gain"]]
    assert (networks["bigram_margin"] > 0.1).all()
    assert networks["plateau_examples"].notna().all()  # each checked by training it 1.5 x E


def test_budgets_pass_each_networks_from_scratch_cost(study):
    """At ε = 0.01 every reset cell's budget is past what its network's own pretraining needed to reach the same
    loss, so "as slow as from scratch" is told apart from "never"."""
    summary = study["summary"]
    cells = summary[(summary["threshold"] == EPS) & (summary["init"] != "trained") & (summary["target"] != "none")]
    assert len(cells) and cells["scratch_examples"].notna().all()
    assert (cells["budget_examples"] > cells["scratch_examples"]).all()


def test_at_the_askers_eps_nearly_every_median_has_an_answer(study):
    """No more than 10 % of the (model, layer) medians at ε = 0.01 end without an answer: a finite cost or a stall
    by the rule, not "still falling at the budget"."""
    surv = study["survival"]
    layers = surv[(surv["kind"] == "layer") & (surv["threshold"] == EPS) & (surv["regime"] == "frozen")]
    layers = layers[(layers["policy"] == "full") & (layers["init"] == "fresh")]
    unanswered = int((layers["verdict"] == "still_falling").sum())
    assert len(layers) and unanswered <= 0.1 * len(layers), layers[np.isinf(layers["median_examples"])]


def test_the_first_layers_effect_is_determined_at_the_askers_eps(study):
    fit = study["fit"]
    first = fit[(fit["term"] == "first_layer") & (fit["threshold"] == EPS) & (fit["policy"] == "full")]
    assert len(first) and first["determined"].all(), first[["reason", "note"]]


def test_the_first_layer_verdict_agrees_with_the_per_layer_medians(study):
    """Where the fit says the first layer raises the cost, each model whose cells it reads has its first layer's
    median above the median of its middle layers' medians: the verdict does not reverse the per-layer numbers."""
    fit = study["fit"]
    first = fit[(fit["term"] == "first_layer") & (fit["policy"] == "full") & fit["determined"]]
    surv = study["survival"]
    layers = surv[(surv["kind"] == "layer") & (surv["policy"] == "full") & (surv["init"] == "fresh")]
    layers = layers[layers["family_kind"] == "decoder-only"]  # the fit leaves the encoder-decoder cells out
    checked = 0
    for eps in first.loc[first["factor_lo"] > 1, "threshold"]:
        at = layers[layers["threshold"] == eps]
        for model, rows in at.groupby("model"):
            middle = rows[rows["position"] == "middle"]["median_examples"]
            head = rows[rows["position"] == "first"]["median_examples"]
            assert len(head) == 1 and len(middle), model
            assert head.iloc[0] > middle.median(), (eps, model, head.iloc[0], middle.tolist())
            checked += 1
    assert checked  # at ε = 0.01 the first layer raises the cost (the headline says so)


def test_every_censored_cell_has_a_verdict_on_the_page(study):
    """Each single-layer cell not back within ε = 0.01 is listed in §2 with its verdict."""
    costs = study["network_costs"]
    layers = costs[(costs["threshold"] == EPS) & (costs["kind"] == "layer")]
    not_back = ["stalled", "still_falling", "diverged"]
    censored = layers[layers["outcome"].isin(not_back)]
    assert layers["outcome"].isin(["recovered", "not_damaged", *not_back]).all()
    md = (STUDY / "answer.md").read_text()
    section = md[md.index("## 2.") : md.index("## 3.")]
    for _, r in censored.iterrows():
        row = f"| {r['model']} | {r['target']} ({r['position']}) | seed {int(r['pretrain_seed'])}"
        assert row in section, row


def test_out_of_sample_check_is_run_and_its_verdicts_stated(study):
    table = study["out_of_sample"]
    assert any("largest N" in part for part in set(table["left_out"]))
    md = (STUDY / "answer.md").read_text()
    for _, r in out_of_sample.verdicts(table).iterrows():
        line = next(x for x in md.splitlines() if x.startswith(f"- {r['left_out']} ({r['models']}): "))
        assert f"**{r['verdict']}** at ε = " in line


def test_the_aside_has_the_askers_swaps_and_every_comparison(study):
    aside = study["encoder_decoder"]
    at = aside[aside["threshold"] == EPS]
    assert {
        "encoder_layer",
        "decoder_layer",
        "cross_attention",
        "all_cross_attention",
        "donor_swap",
        "donor_swap_gated",
        "donor_swap_frozen",
        "donor_swap_frozen_gated",
        "encoder_swap",
        "encoder_swap_gated",
        "reset_all",
        "scratch",
    } <= set(at["item"])
    networks = study["networks"].drop_duplicates("model").set_index("model")["d_model"]
    donors = {t[len("swap-") :] for t in at["target"] if t.startswith("swap-")}
    width = networks[at["model"].iloc[0]]
    assert any(networks[d] < width for d in donors) and any(networks[d] > width for d in donors)
    swaps = at[at["item"].str.contains("swap")]
    assert (swaps["budget_relative_to_scratch"] > 1).all()  # past the from-scratch cost
    frozen = swaps[swaps["item"].str.startswith("donor_swap_frozen")]
    assert frozen["control_median"].notna().all()  # read against the retrained cross-attention too
    head = (STUDY / "answer.md").read_text().split("## The answer")[1].split("## 1.")[0]  # the answer in short
    swaps_slower = int(swaps["slower_than_scratch"].sum())  # the verdict column the headline states
    assert f"**The encoder swap** in {at['model'].iloc[0]}: {swaps_slower} of {len(swaps)} swaps are slower" in head


def test_the_page_is_generated_from_the_shipped_tables_and_short(study):
    """The golden-file check: the shipped page is the template rendered over the shipped tables."""
    md = (STUDY / "answer.md").read_text()
    tables = {name: study[name] for name in [*answer.TABLES, answer.LR_SENSITIVITY] if name in study}
    links = {name: f"plots/{name}.png" for name in answer_plots.FIGURES}
    assert page.markdown(tables, study["summary"], study["networks"], links) == md
    head = answer.headline(md)
    assert len(head.splitlines()) < 40
    assert len(md.encode()) < 25_000  # it reads in minutes


def test_readme_headline_is_the_study_page_headline():
    page = (STUDY / "answer.md").read_text()
    assert answer.headline(page) in (ROOT / "README.md").read_text()
