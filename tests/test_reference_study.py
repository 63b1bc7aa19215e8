"""The reference study shipped in reference/study/ (config/study.yaml, docs/study.md): the grid it claims, networks
that pass the gates, the out-of-sample check and the encoder-decoder aside (the README carries the headline of the
re-run's finished part instead: tests/test_reference_study_next.py). Fast: reads the shipped files only."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from selfheal import results
from selfheal.analysis import answer, answer_page, answer_plots, out_of_sample

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "reference" / "study"
# The shipped study was measured before "fully trained" became a gate (pretrain.plateau_check): every network is
# off its plateau, so none enters the estimates. These tests hold for a study that answers; strict, so they must
# be switched back on when config/study.yaml is re-run under the gate and shipped.
NOT_ANSWERED = pytest.mark.xfail(
    strict=True,
    reason="the shipped study's networks are all off their plateau: it "
    "is re-run under the plateau gate before it answers",
)


@pytest.fixture(scope="module")
def study():
    return results.load(STUDY)


def test_every_table_is_shipped_and_small(study):
    assert set(study) == set(results.TABLES) | set(answer.TABLES)
    size = sum(p.stat().st_size for p in STUDY.rglob("*") if p.is_file())
    assert size < 8 * 2**20, f"reference/study is {size / 2**20:.1f} MB"
    page = (STUDY / "answer.md").read_text()
    for link in re.findall(r"\]\((plots/[^)]+)\)", page):
        assert link.endswith(".png") and (STUDY / link).is_file(), link


def test_the_grid_is_the_documented_one(study):
    networks = study["networks"]
    config = yaml.safe_load((ROOT / "config" / "study.yaml").read_text())
    assert set(networks["model"]) == {m["name"] for m in config["models"]}
    gpt2 = networks[
        (networks["arch"] == "gpt2")
        & (networks["train_sequences"] == networks["train_sequences"].max())
        & (networks["epochs"] == 1)
    ]
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


@NOT_ANSWERED
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
        line = next(x for x in page.splitlines() if x.startswith(f"- {r['left_out']} ({r['models']}): "))
        assert f"**{r['verdict']}** at ε = " in line and f"{r['threshold']:g}" in line


@NOT_ANSWERED
def test_the_encoder_decoder_aside_has_every_part(study):
    aside = study["encoder_decoder"]
    items = set(aside["item"])
    assert {
        "encoder_layer",
        "decoder_layer",
        "cross_attention",
        "all_cross_attention",
        "encoder_swap",
        "reset_all",
        "scratch",
    } <= items
    layers = aside[aside["item"] != "scratch"]
    finite = layers[np.isfinite(layers["median"])]
    assert (finite["median_lo"] <= finite["median"]).all() and (finite["median"] <= finite["median_hi"]).all()


def test_the_page_is_generated_from_the_shipped_tables_and_short(study):
    """Every number on the shipped page comes from the shipped tables: the page the code writes from them is the
    shipped page, byte for byte; and it reads in minutes (under 25 KB)."""
    page = (STUDY / "answer.md").read_text()
    tables = {name: study[name] for name in answer.TABLES}
    links = {name: f"plots/{name}.png" for name in answer_plots.FIGURES}
    assert answer_page.page(tables, study["summary"], study["networks"], links).markdown() == page
    assert len(page.encode()) < 25_000
    head = answer.headline(page)
    assert len(head.splitlines()) < 40


def test_networks_off_their_plateau_leave_every_estimate(study):
    """A network that more training would still improve is not fully trained: its cells enter no estimate, and a
    page whose every network is such says so instead of answering."""
    networks = study["networks"]
    off = networks["off_plateau"].astype(bool)
    assert off.all()
    assert study["survival"].empty and study["fit"].empty and study["network_costs"].empty
    head = answer.headline((STUDY / "answer.md").read_text())
    assert f"**Not answered by this grid.** {int(off.sum())} of {len(networks)} networks are off their plateau" in head
    # the outcomes are still recorded per cell: censored ones say whether they were still falling
    summary = study["summary"]
    censored = summary[summary["outcome"].isin(["stalled", "still_falling"])]
    assert len(censored) and censored["fall_per_doubling"].notna().all()


@NOT_ANSWERED
def test_the_depth_verdict_does_not_reverse_the_per_layer_numbers(study):
    """Where every first-layer cell is beyond the budget, the depth trend is fitted without them and the page says
    so; it never says that deeper layers lower the cost while the first layer is the costliest."""
    fit = study["fit"]
    asked = fit[(fit["policy"] == "full") & (fit["term"] == "rel_depth")]
    first = fit[(fit["policy"] == "full") & (fit["term"] == "first_layer")].set_index("threshold")
    for _, r in asked.iterrows():
        if first.loc[r["threshold"], "reason"] == "censored":
            assert "first_layer" in r["left_out"].split(",")
    head = answer.headline((STUDY / "answer.md").read_text())
    position = next(line for line in head.splitlines() if "Does the position of L matter?" in line)
    assert "relative depth: lowers the cost" not in position
    assert "along the layers other than the first layer" in position


@NOT_ANSWERED
def test_families_are_compared_only_at_shared_training(study):
    fit = study["fit"]
    bert = fit[fit["term"] == "family[encoder-only]"]
    assert len(bert) and (~bert["determined"]).all() and bert["note"].str.contains("shares S × E").all()
    bart = fit[fit["term"] == "family[encoder-decoder]"]
    assert not bart["note"].fillna("").str.contains("shares S × E").any()
