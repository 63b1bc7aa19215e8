"""End to end for the other families: encoder-only (BERT, masked LM), encoder-decoder (BART, denoising) with the
cross-attention wipe, the encoder swap and frozen-random variants, and a model the user brings from a local folder.
Their finished run is the session's shared one (tests/conftest.py), which also holds tests/tiny.yaml's GPT-2 models
(tests/test_workflow.py)."""

import json
import math

import pandas as pd
import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def finished(tiny_run):
    workdir, _ = tiny_run
    return workdir


def test_every_family_has_its_cells(finished):
    summary = pd.read_parquet(finished / "results" / "summary.parquet")
    cells = summary.drop_duplicates(["model", "target", "policy"])
    got = {(r.model, r.target, r.policy) for r in cells.itertuples()}
    assert {
        ("tinyBert", "L0", "full"),
        ("tinyBert", "L1", "full"),
        ("tinyBert", "all", "full"),
        ("tinyBert", "none", "none"),
    } == {g for g in got if g[0] == "tinyBert"}
    assert {
        ("tinyBart", "enc.0", "full"),
        ("tinyBart", "dec.0", "full"),
        ("tinyBart", "dec.0", "cross_attn"),
        ("tinyBart", "all", "cross_attn"),
        ("tinyBart", "all", "full"),
        ("tinyBart", "swap16", "full"),
        ("tinyBart", "swap-tinyBart16", "full"),
        ("tinyBart", "swap-tinyBart16", "cross_attn"),
        ("tinyBart", "swap-tinyBart16", "stitch"),
        ("tinyBart", "none", "none"),
    } == {g for g in got if g[0] == "tinyBart"}
    assert "tinyBart16" not in set(summary.model)  # a donor (heal: false) has networks but no cells
    swaps = summary[summary.target.str.startswith("swap")].drop_duplicates(["target", "policy", "init"])
    # each swap with the gate open and closed, and the donor's encoder stitched in (its map drawn fresh)
    assert len(swaps) == 7 and set(swaps.init) == {"fresh", "zero_out"}
    assert swaps.loc[swaps.policy == "stitch", "init"].tolist() == ["fresh"]
    assert {
        ("myLlama", "L0", "full"),
        ("myLlama", "L1", "full"),
        ("myLlama", "all", "full"),
        ("myLlama", "none", "none"),
    } == {g for g in got if g[0] == "myLlama"}
    assert set(summary.loc[summary.model == "tinyBart", "stack"].dropna()) == {"enc", "dec"}
    assert list(summary.loc[(summary.model == "tinyBart") & (summary.target == "dec.0"), "depth"].unique()) == [1]


def test_controls_and_damage_per_family(finished):
    summary = pd.read_parquet(finished / "results" / "summary.parquet")
    none = summary[summary.target == "none"]
    assert none.recovered.all() and (none.examples == 0).all()
    resets = summary[~summary.target.isin(["none"]) & (summary.init != "trained")]
    assert (resets.damaged_loss != resets.baseline_loss).all()
    matched = summary[summary.init == "trained"]  # the matched no-reset controls: nothing was reset
    assert len(matched) and (matched.damaged_loss == matched.baseline_loss).all()


def test_a_downloaded_model_is_adapted_before_healing(finished):
    """By default a downloaded model is adapted to the corpus first (every tensor trains, S x E of the adaptation
    is the budget unit); with adapt: false it is healed as downloaded and has no fraction of S x E."""
    summary = pd.read_parquet(finished / "results" / "summary.parquet")
    adapted = json.loads((finished / "results" / "models" / "myLlama" / "p0" / "pretrain.json").read_text())
    assert adapted["source"] == "pretrained" and adapted["lrs"] == [3e-3, 1e-2, 3e-2, 1e-1]  # its race
    assert adapted["examples"] == round(adapted["train_sequences"] * adapted["epochs"]) <= 512  # its best checkpoint
    assert adapted["final_val_loss"] < adapted["initial_val_loss"]
    imported = json.loads((finished / "results" / "pretrained" / "myLlama" / "pretrain.json").read_text())
    assert imported["epochs"] is None and imported["arch"] == "llama"
    baseline = json.loads((finished / "results" / "baselines" / "myLlama" / "p0.json").read_text())
    assert baseline["val_loss"] == adapted["final_val_loss"]  # the cells heal the adapted network
    mine = summary[summary.model == "myLlama"]
    assert (mine.pretrain_examples == adapted["examples"]).all() and mine.fraction_of_pretrain.notna().all()
    assert (mine.tokens == mine.examples * 16).all()
    as_is = summary[summary.model == "asIs"]
    assert as_is.fraction_of_pretrain.isna().all() and as_is.pretrain_examples.isna().all()
    trained = [p for p in (finished / "results" / "models" / "asIs").rglob("*") if p.is_file()]
    assert all(p.name.startswith(".snakemake") for p in trained)  # healed as downloaded: nothing trained here
    assert (finished / "results" / "corpus" / "myLlama" / "tokens.safetensors").is_file()  # its own tokenizer
    # asIs is read from myLlama's checkpoint: it trains on myLlama's streams, tokenized once
    assert not (finished / "results" / "corpus" / "asIs").exists()
    assert not (finished / "results" / "logs" / "tokenize-asIs.log").exists()
    networks = pd.read_parquet(finished / "results" / "networks.parquet").set_index("model")
    assert (
        networks.loc["myLlama", "source"] == "pretrained"
        and networks.loc["tinyBart", "family_kind"] == "encoder-decoder"
    )
    assert networks.loc["tinyBert", "family_kind"] == "encoder-only" and networks.loc["myLlama", "bigram_loss"] > 0
    assert networks.loc["tinyBert", "bigram_loss"] > 0  # a masked LM's bigram: the original token before a target


def test_a_brought_models_costs_as_a_share_of_its_own_pretraining(finished):
    """myLlama's config gives its own pretraining tokens: networks.parquet and answer/networks_flags.parquet carry
    the count (null for asIs, which gives none, and for every model pretrained here), and the answer states each
    single-layer median in tokens as a share of it, computed here from the cells' tokens (one network and one
    retrain seed: a layer's median is its one cell's crossing). The page about it never calls its adaptation S × E
    or pretraining from scratch."""
    from conftest import MY_LLAMA_PRETRAINING_TOKENS as OWN

    from selfheal.analysis import answer, answer_plots, answer_tables, page
    from selfheal.analysis.page import compact, span

    results = finished / "results"
    summary, curves = pd.read_parquet(results / "summary.parquet"), pd.read_parquet(results / "curves.parquet")
    networks = pd.read_parquet(results / "networks.parquet")
    counts = networks.set_index("model")["pretraining_tokens"]
    assert list(counts.dropna().items()) == [("myLlama", OWN)], counts
    flags = pd.read_parquet(results / "answer" / "networks_flags.parquet").set_index("model")["pretraining_tokens"]
    assert list(flags.dropna().items()) == [("myLlama", OWN)], flags
    # the page of myLlama alone, its network kept (the tiny networks are flagged degenerate, and off their plateau)
    mine = summary[summary.model == "myLlama"].assign(degenerate=False, off_plateau=False)
    nets = networks[networks.model == "myLlama"].assign(degenerate=False, off_plateau=False)
    tables = answer_tables.compute(mine, curves[curves.model == "myLlama"], nets)
    links = {name: f"plots/{name}.html" for name in answer_plots.FIGURES}
    md = page.markdown(tables, mine, nets, links)
    head = answer.short(md)
    layers = mine[mine.layer.notna() & (mine.regime == "frozen") & (mine.policy == "full") & (mine.init == "fresh")]
    stated = 0
    for eps in (layers.threshold.min(), layers.threshold.max()):
        at = layers[(layers.threshold == eps) & layers.recovered & (layers.damaged_loss > layers.threshold_loss)]
        share = span(at["tokens"] / OWN, page.sci)
        if share:
            row = next(r for r in head.splitlines() if r.startswith("| myLlama |"))
            assert f"| {share} |" in row, eps  # beside the one-layer cost at that ε
            stated += 1
    assert stated, head
    assert f"of its own {compact(OWN)} pretraining tokens within" in head
    written = (results / "answer.md").read_text().splitlines()
    assert not [line for line in written if "myLlama" in line and ("S × E" in line or "scratch" in line)]


def test_masked_lm_validation_is_shared_by_all_cells(finished):
    summary = pd.read_parquet(finished / "results" / "summary.parquet")
    bert = summary[summary.model == "tinyBert"]
    assert bert.baseline_loss.nunique() == 1
    # the no-reset control scores exactly the baseline: same fixed masks in the baseline job and the cell
    assert (bert[bert.target == "none"].damaged_loss == bert.baseline_loss.iloc[0]).all()


def test_plots_include_every_family(finished):
    """The recovery-cost figure's data holds every family's cells that have a cost: one point per cell and threshold
    of each model; a cell never damaged beyond ε has none (most of the tiny networks' resets stay within ε)."""
    html = (finished / "results" / "plots" / "recovery_examples.html").read_text()
    summary = pd.read_parquet(finished / "results" / "summary.parquet")
    drawn = 0
    for model in ("tinyBert", "tinyBart", "myLlama"):
        mine = summary[(summary.model == model) & summary.layer.notna() & (summary.init == "fresh")]
        rows = mine[mine.outcome != "not_damaged"]
        points = html.count(f'"model":"{model}"') + html.count(f'"model": "{model}"')
        assert len(mine) and points >= len(rows), model
        drawn += len(rows) > 0
    assert drawn  # some family's cells have a cost here, and every such cell is in the figure


def test_encoder_decoder_tables_hold_the_bart_cells_numbers(finished):
    """The encoder-decoder tables on the tiny BART run (one network, one retrain seed), its network kept (the tiny
    networks are flagged degenerate, and the workflow's answer/encoder_decoder.parquet leaves them out): each item's
    median is its one cell's crossing (the evaluation that saw it) as a fraction of S × E, or beyond the budget where
    it never crossed; the scratch row is the network's own pretraining crossing of the same loss. The page's aside
    shows them."""
    from selfheal.analysis import answer_plots, answer_tables, page

    results = finished / "results"
    summary = pd.read_parquet(results / "summary.parquet")
    curves, networks = pd.read_parquet(results / "curves.parquet"), pd.read_parquet(results / "networks.parquet")
    written = pd.read_parquet(results / "answer" / "encoder_decoder.parquet")
    flags = networks.set_index("model").loc["tinyBart", ["degenerate", "off_plateau"]]
    flagged = bool(flags.any())
    assert ("tinyBart" in set(written["model"])) != flagged  # a flagged network is left out of the estimates
    kept = answer_tables.compute(  # (cut by max_epochs, the tiny networks are off their plateau too)
        summary.assign(degenerate=False, off_plateau=False),
        curves,
        networks.assign(degenerate=False, off_plateau=False),
    )
    aside = kept["encoder_decoder"]
    bart = summary[(summary.model == "tinyBart") & (summary.regime == "frozen")]
    items = {
        "encoder_layer": ("enc.0", "full", "fresh"),
        "decoder_layer": ("dec.0", "full", "fresh"),
        "cross_attention": ("dec.0", "cross_attn", "fresh"),
        "all_cross_attention": ("all", "cross_attn", "fresh"),
        "donor_swap": ("swap-tinyBart16", "full", "fresh"),
        "donor_swap_gated": ("swap-tinyBart16", "full", "zero_out"),
        "donor_swap_frozen": ("swap-tinyBart16", "cross_attn", "fresh"),
        "donor_swap_frozen_gated": ("swap-tinyBart16", "cross_attn", "zero_out"),
        "donor_stitch": ("swap-tinyBart16", "stitch", "fresh"),
        "encoder_swap": ("swap16", "full", "fresh"),
        "encoder_swap_gated": ("swap16", "full", "zero_out"),
        "reset_all": ("all", "full", "fresh"),
    }
    assert set(aside["model"]) == {"tinyBart"} and set(aside["threshold"]) == set(bart["threshold"])
    for eps, rows in aside.groupby("threshold"):
        assert set(rows["item"]) == set(items) | {"scratch"}, eps
        scratch_median = rows[rows["item"] == "scratch"]["median"].iloc[0]
        for item, (target, policy, init) in items.items():
            got = rows[rows["item"] == item].iloc[0]
            pick = (bart.target == target) & (bart.policy == policy) & (bart.init == init) & (bart.threshold == eps)
            cell = bart[pick].iloc[0]
            assert (got["target"], got["policy"], got["init"], got["unit"], got["n_cells"]) == (
                target,
                policy,
                init,
                "fraction",
                1,
            )
            if math.isfinite(got["median"]) and math.isfinite(scratch_median):
                assert got["relative_to_scratch"] == pytest.approx(got["median"] / scratch_median)
            if cell["damaged_loss"] <= cell["threshold_loss"]:  # within eps before any training: no cost at all
                assert math.isnan(got["median"]), (eps, item, got["median"])
            else:
                want = cell["examples"] / cell["pretrain_examples"] if cell["recovered"] else math.inf
                assert got["median"] == pytest.approx(want), (eps, item, got["median"], want)
            assert got["n_censored"] == int(not cell["recovered"]), (eps, item)
            assert got["budget"] == pytest.approx(cell["budget_examples"] / cell["pretrain_examples"])
        scratch = rows[rows["item"] == "scratch"].iloc[0]
        crossing = bart[bart.threshold == eps]["scratch_examples"].iloc[0] / bart["pretrain_examples"].iloc[0]
        assert scratch["median"] == pytest.approx(crossing if not math.isnan(crossing) else math.inf), eps
    links = {name: f"plots/{name}.html" for name in answer_plots.FIGURES}
    md = page.markdown(kept, summary.assign(degenerate=False), networks.assign(degenerate=False), links)
    section = md.split("## 6. ")[1].split("\n## ")[0]
    # the aside's resets side by side: one encoder and one decoder layer too; the cross_attn policy only here
    assert (
        "| one encoder layer (`enc.0`) |" in section and "| one decoder layer's cross-attention (`dec.0`) |" in section
    )
    costs = md.split("## 1. ")[1].split("\n## ")[0]
    assert "policy `cross_attn`" not in costs
    assert (
        section.startswith("The encoder-decoder aside: tinyBart")
        and "cross-attention" in section
        and "pretraining from scratch" in section
    )
    assert (
        "tinyBart16's trained encoder, frozen" in section and "tinyBart16's trained encoder, frozen, gated" in section
    )
    # the headline's swap sentence names the donor by the width the networks table gives it
    from selfheal.analysis import answer

    # which of the aside's resets act as if the whole model had been reset, by the verdict column
    as_if = next(line for line in md.splitlines() if line.startswith("- **As if the whole model had been reset?**"))
    at = aside[aside["threshold"] == aside["threshold"].min()]
    for r in at[at["like_reset_all"].notna()].itertuples():
        assert r.what in (as_if.split(" Less: ")[0] if r.like_reset_all else as_if.split(" Less: ")[1]), r.what
    swap = next(line for line in answer.short(md).splitlines() if line.startswith("- **The encoder swap** in"))
    swaps = aside[aside["item"].str.contains("swap") & (aside["threshold"] == aside["threshold"].min())]
    assert f"in tinyBart: {int(swaps['slower_than_scratch'].sum())} of {len(swaps)} swaps are slower" in swap
    # its figure: each swap's, the wipe's and every layer's curves, x in units of the from-scratch cost (a cell's
    # curve ends at its budget over that cost, as the table says), checked as every figure is
    from test_figures import check_figure

    chart = answer_plots.aside_curves(curves, kept["pretrain_reference"], aside)
    check_figure(chart, "answer_aside")
    drawn = [row for data in chart.to_dict()["datasets"].values() for row in data if "what" in row]
    assert {r["what"] for r in drawn} == {
        "tinyBart16's encoder, trainable",
        "tinyBart16's encoder, frozen",
        "tinyBart16's encoder, stitched in",
        "a fresh encoder",
        "all cross-attention",
        "every layer",
    }
    assert {r["gated"] for r in drawn} == {"gated", "not gated"}
    first = aside[aside["threshold"] == aside["threshold"].min()].set_index(["item"])
    frozen = [r["x"] for r in drawn if r["what"] == "tinyBart16's encoder, frozen" and r["gated"] == "not gated"]
    row = first.loc["donor_swap_frozen"]
    if math.isfinite(row["budget_relative_to_scratch"]) and math.isinf(row["median"]):  # ran to its budget
        assert max(frozen) == pytest.approx(row["budget_relative_to_scratch"], rel=0.02)


def test_a_donor_swap_takes_the_donors_trained_encoder(finished):
    """The donor tinyBart16 is pretrained (its network, baseline and gates in networks.parquet) and never healed;
    tinyBart's swap-tinyBart16 cells start from its trained encoder: frozen (cross_attn) they train only the
    wiped cross-attention, trained (full) also the donor's encoder, whose tensors outnumber the cross-attention's;
    with the gate closed (zero_out) the decoder starts without the encoder, so the swapped-in encoder does not move
    the damaged loss: the two gated cells start at the same loss (the fresh ones draw their own cross-attention)."""
    results = finished / "results"
    networks = pd.read_parquet(results / "networks.parquet").set_index("model")
    assert networks.loc["tinyBart16", "d_model"] == 16 and networks.loc["tinyBart16", "baseline_loss"] > 0
    assert (results / "models" / "tinyBart16" / "p0" / "trained").is_dir()
    summary = pd.read_parquet(results / "summary.parquet")
    donor = summary[(summary.target == "swap-tinyBart16") & (summary.threshold == summary.threshold.min())]
    cells = donor.set_index(["policy", "init"])
    assert cells.loc[("full", "fresh"), "trainable_params"] > cells.loc[("cross_attn", "fresh"), "trainable_params"]
    assert cells.loc[("full", "zero_out"), "damaged_loss"] == cells.loc[("cross_attn", "zero_out"), "damaged_loss"]
    assert cells.loc[("full", "fresh"), "damaged_loss"] != cells.loc[("full", "zero_out"), "damaged_loss"]
    # stitched in: only the 16 -> 32 linear map trains (its weight and bias), the cross-attention kept
    assert cells.loc[("stitch", "fresh"), "trainable_params"] == 16 * 32 + 32
    log = (results / "logs" / "tinyBart" / "p0" / "network.log").read_text()
    assert "swap-tinyBart16" in log


def test_frozen_random_for_the_encoder_decoder(finished):
    table = pd.read_parquet(finished / "results" / "frozen_random.parquet")
    table = table[table["base_model"] == "tinyBart"]  # tinyA's rows: tests/test_workflow.py
    assert list(zip(table["model"], table["frozen"])) == [
        ("tinyBart", "none"),
        ("tinyBart.frozen-attention", "attention"),
        ("tinyBart.frozen-embeddings-ffn", "embeddings+ffn"),
    ]
    assert (table["arch"] == "bart").all()
    assert (table["trainable_params"] + table["frozen_params"]).nunique() == 1
    assert (finished / "results" / "plots" / "frozen_random.png").is_file()


def test_a_frozen_encoder_swap_is_matched_with_the_retrained_cross_attention(finished):
    """The intact BART with all of its cross-attention retrained (all-cross_attn-trained) is the matched control of
    the swaps whose donor encoder stays frozen: it trains as long as the longest of them and of the cross-attention
    wipe, and their crossings against it are in summary.parquet; a swap whose encoder trains has none."""
    summary = pd.read_parquet(finished / "results" / "summary.parquet")
    curves = pd.read_parquet(finished / "results" / "curves.parquet")
    bart = summary[summary.model == "tinyBart"]
    frozen = bart[bart.target.str.startswith("swap") & (bart.policy == "cross_attn")]
    assert len(frozen) and frozen["control_examples_lo"].notna().all()
    assert bart.loc[bart.target.str.startswith("swap") & (bart.policy == "full"), "control_examples_lo"].isna().all()
    rec = curves[(curves.model == "tinyBart") & (curves.kind == "recovery")]
    for seed, net in rec.groupby("pretrain_seed"):
        control = net[(net.target == "all") & (net.policy == "cross_attn") & (net.init == "trained")]
        matched = net[
            ((net.target == "all") | net.target.str.startswith("swap-"))
            & (net.policy == "cross_attn")
            & (net.init != "trained")
        ]
        assert len(control), seed
        assert control.examples.max() == matched.groupby(["target", "init"]).examples.max().max(), seed
