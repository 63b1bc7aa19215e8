"""The reference study shipped in reference/study/ (config/study.yaml, docs/study.md): the grid it claims, networks
that pass the gates, the out-of-sample check and the encoder-decoder aside, and the README's headline copied from
its page. Fast: reads the shipped files only."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from selfheal import results
from selfheal.analysis import answer, out_of_sample

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "reference" / "study"


@pytest.fixture(scope="module")
def study():
    return results.load(STUDY)


def test_every_table_is_shipped_and_small(study):
    assert set(study) == set(results.TABLES) | set(answer.TABLES)
    size = sum(p.stat().st_size for p in STUDY.rglob("*") if p.is_file())
    assert size < 8 * 2 ** 20, f"reference/study is {size / 2 ** 20:.1f} MB"
    page = (STUDY / "answer.md").read_text()
    for link in re.findall(r"\]\((plots/[^)]+)\)", page):
        assert link.endswith(".png") and (STUDY / link).is_file(), link


def test_the_grid_is_the_documented_one(study):
    networks = study["networks"]
    config = yaml.safe_load((ROOT / "config" / "study.yaml").read_text())
    assert set(networks["model"]) == {m["name"] for m in config["models"]}
    gpt2 = networks[(networks["arch"] == "gpt2") & (networks["train_sequences"] == networks["train_sequences"].max())
                    & (networks["epochs"] == 1)]
    assert gpt2["n_layer"].nunique() >= 3 and gpt2["d_model"].nunique() >= 3
    assert (networks.groupby("model")["pretrain_seed"].nunique() == 2).all()
    # the data axis: at one size, at least two (S, E) regimes besides the grid's
    data = networks[(networks["n_layer"] == 2) & (networks["d_model"] == 64) & (networks["arch"] == "gpt2")]
    assert data[["train_sequences", "epochs"]].drop_duplicates().shape[0] >= 3
    assert {"bert", "bart"} <= set(networks["arch"])
    # the sizes of the N x D grid share S, E and context
    assert gpt2[["train_sequences", "epochs", "context"]].drop_duplicates().shape[0] == 1


def test_every_network_passes_the_gates(study):
    networks = study["networks"]
    flagged = networks[networks["degenerate"].astype(bool)]
    assert flagged.empty, flagged[["model", "pretrain_seed", "degenerate_reason"]]
    assert (networks["bigram_margin"] > 0.1).all()
    off = networks[networks["off_plateau"].astype(bool) & ~networks["degenerate"].astype(bool)]
    drift = study["control_drift"]
    # an off-plateau network of the first pretraining seed has matched-control evidence of how far training moves it
    first = off[off["pretrain_seed"] == 0]
    assert set(zip(first["model"], first["pretrain_seed"])) <= set(zip(drift["model"], drift["pretrain_seed"]))


def test_the_two_pretraining_seeds_agree(study):
    spread = study["networks"].groupby("model")["baseline_loss"].agg(lambda v: v.max() - v.min())
    assert {"gpt2", "bart", "bert"} <= set(study["networks"]["arch"])
    assert (spread < 0.1).all(), spread[spread >= 0.1]


def test_out_of_sample_check_covers_the_largest_size_n_and_d(study):
    table = study["out_of_sample"]
    assert {"largest size", "largest N", "largest D"} <= set(table["left_out"])
    networks = study["networks"]
    largest = networks[networks["arch"] == "gpt2"].sort_values("n_params").iloc[-1]["model"]
    assert set(table[table["left_out"] == "largest size"]["model"]) == {largest}
    fitted = table[table["predicted"].notna()]
    assert len(fitted) and (fitted["predicted_lo"] <= fitted["predicted"]).all()
    assert (fitted["predicted"] <= fitted["predicted_hi"]).all()
    page = (STUDY / "answer.md").read_text()
    for _, r in out_of_sample.verdicts(table).iterrows():
        assert r["verdict"] in ("held", "did not hold", "not tested", "not fitted")
        assert f"| {r['left_out']} | {r['models']} | {r['threshold']:g} | {r['held']} of {r['layers']} |" in page


def test_the_encoder_decoder_aside_has_every_part(study):
    aside = study["encoder_decoder"]
    items = set(aside["item"])
    assert {"encoder_layer", "decoder_layer", "cross_attention", "all_cross_attention", "encoder_swap", "reset_all",
            "scratch"} <= items
    layers = aside[aside["item"] != "scratch"]
    finite = layers[np.isfinite(layers["median"])]
    assert (finite["median_lo"] <= finite["median"]).all() and (finite["median"] <= finite["median_hi"]).all()


def test_readme_headline_is_the_study_page_headline():
    page = (STUDY / "answer.md").read_text()
    assert answer.headline(page) in (ROOT / "README.md").read_text()


def test_families_are_compared_only_at_shared_training(study):
    fit = study["fit"]
    bert = fit[fit["term"] == "family[encoder-only]"]
    assert len(bert) and (~bert["determined"]).all() and bert["note"].str.contains("shares S × E").all()
    bart = fit[fit["term"] == "family[encoder-decoder]"]
    assert not bart["note"].fillna("").str.contains("shares S × E").any()
