"""The answer page and tables: two different synthetic grids give different numbers and verdicts; grids that cannot
answer (one network, everything censored, no layer cells) still give a page that says so; the real Snakemake rule
runs on tables placed as its inputs; selfheal.results.load reads them back."""

import math
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from answer_helpers import synthetic, toy_networks
from conftest import assert_drawn_png
from selfheal import results
from selfheal.analysis import answer, answer_page, answer_plots, answer_tables, scaling, survival
from selfheal.analysis import tables as summary_tables
from selfheal.analysis.page import compact, num, span
from snakemake_helpers import pythonpath

ROOT = Path(__file__).resolve().parents[1]
warnings.filterwarnings("ignore", module="lifelines")
warnings.filterwarnings("ignore", module="autograd")
LINKS = {name: f"plots/{name}.html" for name in answer_plots.FIGURES}


def _page(**kwargs):
    summary, curves, networks = synthetic(thresholds=(0.05,), **kwargs)
    tables = answer_tables.compute(summary, curves, networks)
    return tables, answer_page.page(tables, summary, networks, LINKS).markdown()


def _row(md: str, model: str, reset: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {model}") and f"| {reset}" in line)


@pytest.fixture(scope="module")
def deeper_costs_more():
    return _page(depth_effect=1.5, seed=0)


@pytest.fixture(scope="module")
def deeper_costs_less():
    return _page(depth_effect=-3.0, seed=0, degenerate=(("gpt2-n2-d64", 1),), off_plateau=(("gpt2-n4-d64", 0),))


def _fit_row(md: str, eps: str, term: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {eps} | {term} |"))


def test_page_numbers_and_verdicts_follow_the_tables(deeper_costs_more, deeper_costs_less):
    (more_tables, more), (less_tables, less) = deeper_costs_more, deeper_costs_less
    # cost rising with depth: the last layer costs more than the middle layers; falling: less
    verdict_more, verdict_less = _fit_row(more, "0.05", "last layer"), _fit_row(less, "0.05", "last layer")
    assert "raises the cost" in verdict_more and "lowers the cost" in verdict_less
    assert "lowers the cost" in _fit_row(less, "0.05", "depth among the middle layers")
    # the page's numbers are the tables' numbers
    fit = more_tables["fit"].set_index("term").loc["last_layer"]
    assert f"× {num(fit['factor'])} [{num(fit['factor_lo'])}, {num(fit['factor_hi'])}]" in verdict_more
    assert "the last layer raises the cost (× " in answer.headline(more)
    assert "the first layer raises the cost (× " in answer.headline(less)
    assert "the last layer lowers the cost (× " in answer.headline(less)
    surv = more_tables["survival"]
    l3 = surv[(surv["model"] == "gpt2-n4-d64") & (surv["target"] == "L3")].iloc[0]
    assert answer_page.words._cost(l3, "fraction") in _row(more, "gpt2-n4-d64", "L3")
    assert _row(more, "gpt2-n4-d64", "L3") != _row(less, "gpt2-n4-d64", "L3")
    l0_more = float(re.search(r"\| ([0-9.]+)( \[|$| \|)", _row(more, "gpt2-n4-d64", "L0")).group(1))
    l3_more = float(re.search(r"\| ([0-9.]+)( \[|$| \|)", _row(more, "gpt2-n4-d64", "L3")).group(1))
    assert l3_more > l0_more
    # undetermined factors are said so, never zero; the page branches on the reason code, not the note's words
    assert "- log D (ε = 0.05); log S (ε = 0.05); log E (ε = 0.05): the grid does not vary it" in more
    assert "D is not determined (the grid does not vary it)" in answer.headline(more)
    assert set(more_tables["fit"]["reason"]) <= set(scaling.REASONS) | {""}
    assert "Not determined by this grid (no such model): encoder-only, encoder-decoder" in more
    # caveats: the degenerate network is listed and left out, the off-plateau one flagged, few clusters said
    assert "gpt2-n2-d64 pretraining seed 1 is **degenerate**" in less and "degenerate" not in more.split("## 8.")[1]
    assert "still improving at the end of pretraining" in less
    assert "read directions, not digits" in more
    n2 = less_tables["survival"]
    assert (n2[n2["model"] == "gpt2-n2-d64"]["n_clusters"] == 1).all()
    for section in range(1, 10):
        assert f"## {section}. " in more
    assert "Tamkin et al. 2020" in more and "Gromov et al. 2024" in more
    tamkin = next(line for line in more.splitlines() if line.startswith("| Tamkin et al. 2020"))
    assert "the first layer (vs. the middle layers)" in tamkin and "the last layer (vs. the middle layers)" in tamkin


@pytest.fixture(scope="module")
def only_the_first_layer_is_costly():
    """Every layer heals alike (no depth trend) except the first, which costs e^5 times more: every first-layer cell
    is beyond the budget, at three depths N."""
    summary, curves, networks = synthetic(
        depth_effect=0.0,
        first_layer_effect=5.0,
        thresholds=(0.05,),
        seed=1,
        models=(("gpt2-n2-d64", 2, 64), ("gpt2-n3-d64", 3, 64), ("gpt2-n4-d64", 4, 64)),
    )
    tables = answer_tables.compute(summary, curves, networks)
    return tables, answer_page.page(tables, summary, networks, LINKS).markdown()


def test_a_censored_first_layer_does_not_make_deeper_layers_cheaper(only_the_first_layer_is_costly):
    """The first-layer term is not determined (every such cell censored): its cells leave the fit, so the other
    terms are fitted on the other layers and do not absorb the first layer's cost (kept in, their lower bounds would
    lift the intercept and make the other layers seem costlier or cheaper than they are)."""
    tables, md = only_the_first_layer_is_costly
    surv = tables["survival"]
    first = surv[(surv["kind"] == "layer") & (surv["position"] == "first")]
    assert np.isinf(first["median_fraction"]).all()  # the grid: every first layer beyond the budget
    fit = tables["fit"].set_index("term")
    assert not fit.loc["first_layer", "determined"] and fit.loc["first_layer", "reason"] == "censored"
    for term in ("last_layer", "middle_depth"):
        other = fit.loc[term]
        assert other["determined"] and "first_layer" in other["left_out"].split(",")
        assert other["n_cells"] == int(surv[(surv["kind"] == "layer") & (surv["position"] != "first")]["n_cells"].sum())
        assert other["coef_lo"] < 0 < other["coef_hi"], other  # no effect among the other layers, as generated
    head = answer.headline(md)
    position = next(line for line in head.splitlines() if "Does the position of L matter?" in line)
    assert "lowers the cost" not in position and "raises the cost" not in position
    assert "no clear effect" in _fit_row(md, "0.05", "last layer")
    assert "the costliest layer is the first in 3 of 3 models" in position
    assert "the first layer beyond the budget in every model" in position  # (not again as 3 of 3 first layers)
    assert "first layers, 0 of" not in position
    how = next(line for line in head.splitlines() if "How much data?" in line)
    assert "more than the budget (" in how and "(budget " not in how  # the budget is given once
    assert "the first layer is not determined (every cell that would measure it is beyond the budget" in position
    assert "no clear effect of the last layer or of depth among the middle layers" in position
    # the same cells left every fit: said once under the table, not in a column
    assert not _fit_row(md, "0.05", "last layer").endswith("| first layer |")
    assert "Cells left out of every fit above: first layer." in md


def test_the_position_answer_gives_the_medians_by_position(deeper_costs_more, only_the_first_layer_is_costly):
    """At the asker's ε the position bullet opens with the single-layer medians of each position (first, middle,
    last layers) over the models, each with its multiples of the from-scratch cost, as the survival table has them,
    and how many lie beyond the budget (there, a position every median of which does is said to)."""
    summary, curves, networks = synthetic(
        depth_effect=0.0,
        first_layer_effect=1.8,  # the first layer beyond the budget in one model of three
        thresholds=(0.05,),
        seed=0,
        models=(("gpt2-n2-d64", 2, 64), ("gpt2-n3-d64", 3, 64), ("gpt2-n4-d64", 4, 64)),
    )
    tables = answer_tables.compute(summary, curves, networks)
    some_beyond = tables, answer_page.page(tables, summary, networks, LINKS).markdown()
    for (tables, md), eps in ((deeper_costs_more, 0.05), (only_the_first_layer_is_costly, 0.05), (some_beyond, 0.05)):
        position = next(line for line in answer.headline(md).splitlines() if "Does the position of L matter?" in line)
        surv = tables["survival"]
        at = surv[(surv["kind"] == "layer") & (surv["threshold"] == eps)]
        ref = tables["pretrain_reference"]
        scratch = ref[ref["threshold"] == eps].groupby("model")["examples"].mean()
        assert "At ε = 5 %, by position (median of S × E, and × what pretraining from scratch needed): " in position
        for where, name in (("first", "the first layer"), ("middle", "the middle layers"), ("last", "the last layer")):
            rows = at[at["position"] == where]
            finite = rows[np.isfinite(rows["median_fraction"])]
            if not len(finite):
                assert f"{name} beyond the budget in every model" in position
                continue
            times = finite["median_examples"] / finite["model"].map(scratch)
            said = f"{name} {span(finite['median_fraction'])} ({span(times)} ×)"
            beyond = int(np.isinf(rows["median_fraction"]).sum())
            assert said + (f", beyond the budget in {beyond} of {len(rows)} models" if beyond else "") in position
    assert ", beyond the budget in 1 of 3 models" in next(
        line for line in answer.headline(some_beyond[1]).splitlines() if "Does the position" in line
    )


def test_the_answer_opens_the_page_in_sentences(deeper_costs_more):
    tables, md = deeper_costs_more
    head = answer.headline(md)
    assert md.index("## The answer") < md.index("## 1.")
    bullets = [line for line in head.splitlines() if line.startswith("- **")]
    assert [b.split("**")[1] for b in bullets] == [
        "How much data?",
        "Does it ever refuse?",
        "Does the position of L matter?",
        "Do N and D matter?",
        "The encoder swap:",
        "How sure?",
    ]
    surv = tables["survival"]
    layers = surv[(surv["kind"] == "layer") & (surv["threshold"] == 0.05)]
    finite = layers["median_fraction"][np.isfinite(layers["median_fraction"])]
    assert f"one reset layer needs a median {span(finite)} of S × E" in bullets[0] and " to " in span(finite)
    ref = tables["pretrain_reference"]
    scratch = ref[ref["threshold"] == 0.05].groupby("model")["fraction"].mean()
    assert f"pretraining from scratch needed {span(scratch)} of S × E" in bullets[0]
    scratch_examples = ref[ref["threshold"] == 0.05].groupby("model")["examples"].mean()
    times = layers["median_examples"] / layers["model"].map(scratch_examples)
    said = f"of S × E ({span(times[np.isfinite(times)])} × what pretraining from scratch needed"
    assert said + ")" in bullets[0] or said + "; budget " in bullets[0]
    assert ") (budget" not in bullets[0]  # the budget shares the multiple's parenthesis
    # censored is not refusal: only stalled cells refuse; still-falling ones are counted as not answered
    stalled, falling = int(layers["n_stalled"].sum()), int(layers["n_still_falling"].sum())
    damaged = int((layers["n_cells"] - layers["n_not_damaged"]).sum())
    if stalled or falling:
        assert f"Within 5 %: {stalled} of {damaged} damaged cells stalled" in bullets[1]
        assert f"{falling} {'was' if falling == 1 else 'were'} still falling when the budget ran out" in bullets[1]
    else:
        assert "Within 5 %: every damaged cell got back within the budget." in bullets[1]
    # a grid where some cells stall and others are still falling says both, with the tables' counts
    summary, curves, networks = synthetic(thresholds=(0.05,), depth_effect=1.5, seed=0)
    stalling = summary.copy()
    hit = (stalling["target"] == "L0") & (stalling["init"] == "fresh")
    stalling.loc[hit, ["recovered"]] = False
    stalling.loc[hit, "examples_hi"] = pd.NA
    curves_flat = curves.copy()
    rec = (curves_flat["kind"] == "recovery") & (curves_flat["target"] == "L0") & (curves_flat["init"] == "fresh")
    flat = rec & (curves_flat["pretrain_seed"] == 0)
    curves_flat.loc[flat, "val_loss"] = 4.4 + 0.001 * np.sin(curves_flat.loc[flat, "examples"].to_numpy(float))
    stalling = summary_tables.add_outcomes(stalling, curves_flat)
    t2 = answer_tables.compute(stalling, curves_flat, networks)
    rows = t2["survival"]
    rows = rows[(rows["kind"] == "layer") & (rows["threshold"] == 0.05)]
    n_stalled, n_falling = int(rows["n_stalled"].sum()), int(rows["n_still_falling"].sum())
    assert n_stalled > 0
    md2 = answer_page.page(t2, stalling, networks, LINKS).markdown()
    refuse = next(line for line in answer.headline(md2).splitlines() if "Does it ever refuse?" in line)
    assert f"Within 5 %: {n_stalled} of " in refuse and f"{n_falling} were still falling" in refuse
    assert "not determined (this grid has no encoder-decoder model" in bullets[4]
    assert len(head.splitlines()) < 40


def test_page_states_the_cost_in_three_units(deeper_costs_more):
    tables, md = deeper_costs_more
    surv = tables["survival"]
    layers = surv[(surv["model"] == "gpt2-n4-d64") & (surv["kind"] == "layer") & (surv["threshold"] == 0.05)]
    ref = tables["pretrain_reference"]
    scratch = ref[(ref["model"] == "gpt2-n4-d64") & (ref["threshold"] == 0.05)]
    finite = layers[np.isfinite(layers["median_examples"])]
    low = finite.loc[finite["median_examples"].idxmin()]
    line = next(
        row
        for row in md.splitlines()
        if row.startswith("| gpt2-n4-d64 | ") and " to " in row and "×" not in row and "(" not in row
    )  # §1's units table
    # examples (64 tokens each), and x what pretraining needed in the answer's per-model table: all from the tables
    assert f"| {num(low['median_examples'])} to " in line and "(64 tokens each)" in md
    row = next(r for r in answer.headline(md).splitlines() if r.startswith("| gpt2-n4-d64 |"))
    assert f"({num(low['median_examples'] / scratch['examples'].mean())} to " in row.split(" | ")[3]
    # the fraction of S x E: §1's per-layer table and the answer's per-model table
    assert f"| {num(low['median_fraction'])}" in _row(md, "gpt2-n4-d64", low["target"])
    row = next(r for r in answer.headline(md).splitlines() if r.startswith("| gpt2-n4-d64 |"))
    assert row.count("|") == 7  # model, N x D, S x E, one ε here: one layer and from scratch beside it, reset-all
    assert row.split(" | ")[4] == num(scratch["fraction"].mean())
    assert "| model | examples, ε = 0.05 |" in md
    assert "baseline × (1 + ε), the mean over the model's networks" in md  # the page says how × from scratch is made
    assert ref["coarse"].all() and ref["examples"].notna().all()


def test_size_ordering_on_a_toy_networks_table():
    networks = toy_networks(
        {
            ("n2d32", 2, 32): [4.50, 4.40],
            ("n2d64", 2, 64): [4.20, 4.25],  # D at N = 2: falls 0.225 > spread 0.1
            ("n4d32", 4, 32): [4.50, 4.52],  # N at D = 32: rises 0.06 < spread 0.1
            ("n4d64", 4, 64): [4.25, 4.45],  # D at N = 4: falls 0.16 < spread 0.2; N at D = 64: rises 0.125 < 0.2
            ("n8d16", 8, 16): [3.0],  # differs from every other model in both N and D: in no pair
        }
    )
    order = answer_tables.size_ordering(networks)
    assert list(order.columns) == answer_tables.SIZE_ORDERING_COLUMNS
    rows = {(r.model_a, r.model_b): r for r in order.itertuples()}
    assert set(rows) == {("n2d32", "n2d64"), ("n4d32", "n4d64"), ("n2d32", "n4d32"), ("n2d64", "n4d64")}
    d = rows[("n2d32", "n2d64")]
    assert (d.varied, d.value_a, d.value_b, d.n_seeds) == ("d_model", 32, 64, 2)
    assert (d.mean_loss_a, d.mean_loss_b) == pytest.approx((4.45, 4.225))
    assert d.difference == pytest.approx(-0.225) and d.seed_spread == pytest.approx(0.1) and d.holds
    assert not rows[("n4d32", "n4d64")].holds  # falls by 0.16, within the spread 0.2 of n4d64
    assert rows[("n2d32", "n4d32")].varied == "n_layer" and rows[("n2d32", "n4d32")].holds
    n = rows[("n2d64", "n4d64")]  # rises by 0.125, within the spread 0.2: holds (no rise beyond the seeds)
    assert n.difference == pytest.approx(0.125) and n.seed_spread == pytest.approx(0.2) and n.holds
    # a rise beyond the spread fails; one seed: spread 0; another family or source is never paired
    rising = answer_tables.size_ordering(toy_networks({("a", 2, 32): [4.0], ("b", 4, 32): [4.1]}))
    assert rising["seed_spread"].tolist() == [0.0] and not rising["holds"].iloc[0] and rising["n_seeds"].iloc[0] == 1
    mixed = pd.concat(
        [
            toy_networks({("a", 2, 32): [4.0]}),
            toy_networks({("b", 4, 32): [4.1]}, arch="llama"),
            toy_networks({("c", 2, 64): [3.9]}, source="pretrained"),
        ]
    )
    assert answer_tables.size_ordering(mixed).empty and answer_tables.size_ordering(networks.iloc[:0]).empty
    # nor a model trained on other data or for longer (one thing at a time)
    longer = toy_networks({("a", 2, 32): [4.0], ("b", 4, 32): [4.1], ("c", 2, 64): [3.9]})
    longer.loc[longer["model"] == "b", "epochs"] = 2
    longer.loc[longer["model"] == "c", "train_sequences"] = 7
    assert answer_tables.size_ordering(longer).empty
    # the page lists every pair with its numbers, and a line per network
    summary, curves, _ = synthetic(models=(("gpt2-n2-d64", 2, 64),), thresholds=(0.05,), seed=3)
    tables = {**answer_tables.compute(summary, curves, networks), "size_ordering": order}
    md = answer_page.page(tables, summary, networks, LINKS).markdown()
    assert "at fixed N it falls with D in 1 of 2 pairs; at fixed D it does not rise with N in 2 of 2 pairs" in md
    assert (
        "Pairs where it does not hold (smaller → larger; mean loss; difference; seed spread): n4d32 → n4d64: "
        "4.510 → 4.350, -0.160, 0.200" in md
    )
    assert "n2d32 → n2d64" not in md  # a pair that holds is in the table only
    assert "| n4d64 | 4.250, 4.450 | +0.550, +0.350 |" in md


def test_degenerate_reason_reaches_the_caveats(deeper_costs_less):
    tables, md = deeper_costs_less
    flags = tables["networks_flags"].set_index(["model", "pretrain_seed"])
    assert flags.loc[("gpt2-n2-d64", 1), "degenerate_reason"] == "reset_all_harmless"
    assert flags.loc[("gpt2-n4-d64", 0), "degenerate_reason"] == ""
    assert "gpt2-n2-d64 pretraining seed 1 is **degenerate** (resetting every layer did less damage than ε_min)" in md


@pytest.mark.parametrize(
    "factor,words",
    [
        (1.04, "raised: the retraining itself raised the intact network's loss"),
        (0.96, "lowered: training alone lowered the intact network's loss"),
    ],
)
def test_the_control_drift_caveat_says_which_way_the_loss_moved(factor, words):
    summary, curves, networks = synthetic(thresholds=(0.05,), off_plateau=(("gpt2-n4-d64", 0),), seed=0)
    ends = curves["init"].eq("trained") & curves["model"].eq("gpt2-n4-d64") & curves["pretrain_seed"].eq(0)
    last = ends & (curves["examples"] == curves.loc[ends, "examples"].max())
    base = networks.set_index(["model", "pretrain_seed"]).loc[("gpt2-n4-d64", 0), "baseline_loss"]
    curves.loc[last, "val_loss"] = base * factor
    tables = answer_tables.compute(summary, curves, networks)
    md = answer_page.page(tables, summary, networks, LINKS).markdown()
    assert words in md
    row = next(x for x in md.splitlines() if x.startswith("| gpt2-n4-d64 seed 0 |"))
    flags = tables["networks_flags"].set_index(["model", "pretrain_seed"]).loc[("gpt2-n4-d64", 0)]
    assert row == (
        f"| gpt2-n4-d64 seed 0 | {'+' if factor > 1 else '-'}4.00 % | {words.split(':')[0]} | "
        f"{flags['n_baseline_not_converged']} of {flags['n_rows']} |"
    ), row


# Columns the synthetic tables leave empty on purpose: no synthetic cell diverges, a curve's train loss is not
# read by the answer statistics, and the synthetic networks are pretrained here (no pretraining elsewhere to count).
EMPTY_IN_SYNTHETIC = {
    "diverged_step",
    "train_loss",
    "pretraining_tokens",
    "stalled_examples",
}  # no cell diverges or stops early


def test_synthetic_tables_follow_the_real_schema():
    """The synthetic tables the answer tests run on have the columns of the real summary, curves and networks
    tables (analysis/tables.py), in order, each with values: a column added to a real table and not given values in
    tests/answer_helpers.py fails here."""
    from selfheal.analysis import tables

    summary, curves, networks = synthetic(extra_targets=True, seed=8)
    for name, table, columns in (
        ("summary", summary, tables.SUMMARY_COLUMNS),
        ("curves", curves, tables.CURVE_COLUMNS),
        ("networks", networks, tables.NETWORK_COLUMNS),
    ):
        assert list(table.columns) == columns, name
        empty = [c for c in columns if table[c].isna().all() and c not in EMPTY_IN_SYNTHETIC]
        assert not empty, f"tests/answer_helpers.py gives the {name} table's columns {empty} no values"
    assert summary["scratch_examples"].notna().any() and summary["relative_to_scratch"].notna().any()
    assert set(curves["replay"]) == {False}


def test_pages_that_cannot_answer_say_so():
    summary, curves, networks = synthetic(models=(("m", 2, 32),), pretrain_seeds=(0,), seeds=(0,), thresholds=(0.05,))
    only_sets = summary[summary["layer"].isna()]
    tables = answer_tables.compute(only_sets, curves, networks)
    md = answer_page.page(tables, only_sets, networks, LINKS).markdown()
    assert "no single-layer cells" in md and "do **not** cover the variation between" in md
    censored = summary.copy()
    censored["recovered"] = False
    censored["examples_hi"] = pd.array([pd.NA] * len(censored), dtype="Int64")
    censored["examples_lo"] = censored["budget_examples"]
    censored = summary_tables.add_outcomes(censored, curves)
    tables = answer_tables.compute(censored, curves, networks)
    md = answer_page.page(tables, censored, networks, LINKS).markdown()
    assert "more than the budget for every layer" in md and "every cell is beyond the budget" in md
    assert np.isinf(tables["survival"]["median_examples"]).all()
    for name, draw in answer_plots.FIGURES.items():  # every figure draws, empty or not
        draw(tables, curves).to_dict()


def test_a_model_you_bring_is_described_as_what_it_is():
    """A model not pretrained here (an adapted download, as config/pretrained.yaml's): its costs are in examples
    and tokens, and as a share of its own pretraining tokens where its config gives them (networks.parquet's
    pretraining_tokens, carried into answer/networks_flags.parquet); its adaptation is called adaptation, never
    S × E or pretraining from scratch."""
    summary, curves, networks = synthetic(models=(("smollm2-135m", 3, 64),), thresholds=(0.05,), seed=5)
    networks["source"] = "pretrained"
    without = answer_page.page(answer_tables.compute(summary, curves, networks), summary, networks, LINKS).markdown()
    networks["pretraining_tokens"] = pd.array([2 * 10**12] * len(networks), dtype="Int64")
    tables = answer_tables.compute(summary, curves, networks)
    assert (tables["networks_flags"]["pretraining_tokens"] == 2 * 10**12).all()
    md = answer_page.page(tables, summary, networks, LINKS).markdown()
    head = answer.headline(md)
    how_much = next(line for line in head.splitlines() if "How much data?" in line)
    layers = tables["survival"][tables["survival"]["kind"] == "layer"]
    finite = layers["median_examples"][np.isfinite(layers["median_examples"])]
    assert f"a median {span(finite)} examples ({span(finite * 64, compact)} tokens)" in how_much
    share = span(finite * 64 / 2e12, answer_page.words._sci)  # the single-layer medians' tokens over its own 2 T
    assert share.count("e-") == 2, share
    assert (
        "Not pretrained here: smollm2-135m (adaptation: 8,000 sequences × 5; one reset layer needs "
        f"{share} of its own 2T pretraining tokens within 5 %); its costs are in examples and tokens, and its "
        "adaptation to the corpus is counted as adaptation" in how_much
    )
    row = next(r for r in head.splitlines() if r.startswith("| smollm2-135m |"))
    assert "| not pretrained here; adaptation: 8,000 sequences × 5 |" in row and f"| {share} |" in row
    assert row.split(" | ")[4] == share  # beside the one-layer cost at that ε
    assert "(examples)" in md and "(fraction of S × E)" not in md
    units = md.split("## 1. ")[1].split("\n## ")[0]
    assert f"| smollm2-135m | {span(finite)} | {share} |" in units
    for page in (md, without):  # the page about it (all but the related work) never says S × E or from scratch
        about = page.split("## 9. What is already known")[0]
        assert "S × E" not in about and "scratch" not in about, about
    assert "pretraining tokens" not in answer.headline(without)  # no share where the config gives no count


def test_answer_help_says_whole_sentences():
    run = subprocess.run(
        [sys.executable, "-m", "selfheal.analysis.answer", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"},
    )
    description = " ".join(run.stdout.split("\n\n")[1].split())
    assert description.startswith("The answer:") and description.endswith("is what the ``answer`` rule runs.")


def test_readme_headline_is_regenerated(tmp_path, deeper_costs_more):
    _, md = deeper_costs_more
    page = tmp_path / "answer.md"
    page.write_text(md)
    readme = tmp_path / "README.md"
    stale = "a stale headline"
    readme.write_text(f"# x\n\n## The answer\n\n{answer.HEADLINE[0]}\n{stale}\n{answer.HEADLINE[1]}\n\n## next\n")
    subprocess.run(
        [sys.executable, "-m", "selfheal.analysis.answer", "--readme", str(page), str(readme)],
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"},
    )
    text = readme.read_text()
    assert stale not in text and answer.headline(md) in text and text.endswith("## next\n")


@pytest.mark.e2e
def test_answer_rule_runs_on_tables_placed_as_inputs(tmp_path):
    summary, curves, networks = synthetic(models=(("gpt2-n2-d64", 2, 64),), thresholds=(0.05,), seed=7)
    folder = tmp_path / "results"
    folder.mkdir()
    for name, table in (("summary", summary), ("curves", curves), ("networks", networks)):
        table.to_parquet(folder / f"{name}.parquet")
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--cores",
        "1",
        "--allowed-rules",
        "answer",
        "--",
        "results/answer.md",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = results.load(folder)
    assert set(answer.TABLES) | {"summary", "curves", "networks"} <= set(loaded)
    assert (folder / "answer.html").read_text().count("<h2>") >= 9
    for name in answer_plots.FIGURES:
        assert_drawn_png(folder / "plots" / f"{name}.png")
    md = (folder / "answer.md").read_text()
    surv = loaded["survival"]
    l1 = surv[surv["target"] == "L1"].iloc[0]
    assert answer_page.words._cost(l1, "fraction") in md


def test_load_names_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="results_dir"):
        results.load(tmp_path / "nowhere")


def test_a_layer_never_damaged_beyond_eps_is_not_beyond_the_budget():
    """A (model, layer) whose every cell stayed within ε after the reset has no cost: the page says "not damaged",
    never "> B" (beyond the budget), and the opening sentence does not count it among the censored pairs."""
    summary, curves, networks = synthetic(thresholds=(0.05,), depth_effect=1.5, seed=0)
    hit = (summary["model"] == "gpt2-n2-d64") & (summary["target"] == "L1") & (summary["init"] == "fresh")
    summary.loc[hit, "damaged_loss"] = summary.loc[hit, "threshold_loss"] * 0.999
    summary.loc[hit, ["examples", "examples_lo", "examples_hi"]] = 0
    summary.loc[hit, "recovered"] = True
    summary = summary_tables.add_outcomes(summary.drop(columns=["outcome"], errors="ignore"), curves)
    assert (summary.loc[hit, "outcome"] == "not_damaged").all()
    tables = answer_tables.compute(summary, curves, networks)
    surv = tables["survival"]
    row = surv[(surv["model"] == "gpt2-n2-d64") & (surv["target"] == "L1") & (surv["kind"] == "layer")]
    assert row["median_examples"].isna().all()  # no cost: neither a number nor inf
    md = answer_page.page(tables, summary, networks, LINKS).markdown()
    line = next(x for x in md.splitlines() if x.startswith("| gpt2-n2-d64 |"))
    assert "1 not damaged" in line and "> B" not in line.split("|")[4], line
    sentence = next(x for x in answer.headline(md).splitlines() if "How much data?" in x)
    pairs = len(surv[(surv["kind"] == "layer") & (surv["threshold"] == 0.05) & (surv["regime"] == "frozen")])
    assert f"(1 of {pairs} pairs were never damaged beyond it: no cost)" in sentence, sentence
    # the per-layer table of section 1 says so too, not 'n/a [n/a, n/a]'
    section = md.split("## 1.")[1].split("## 2.")[0]
    layer_row = next(x for x in section.splitlines() if x.startswith("| gpt2-n2-d64 | L1 "))
    assert layer_row.split("|")[3].strip() == "not damaged" and "n/a" not in layer_row, layer_row


def test_an_aside_reset_never_damaged_beyond_eps_says_so():
    """A reset of the encoder-decoder aside whose cells all stayed within ε has no cost: its cell reads "not damaged
    beyond ε", not "n/a [n/a, n/a]"; one with some such cells counts them beside its median."""
    row = dict.fromkeys(answer_tables.ENCODER_DECODER_COLUMNS, 0)
    row.update(item="cross_attention", unit="fraction", budget=1.0, budget_relative_to_scratch=1.5)
    row.update(control_median=np.nan, control_relative_to_scratch=np.nan)  # no matched control
    undamaged = pd.Series(
        {
            **row,
            "median": np.nan,
            "median_lo": np.nan,
            "median_hi": np.nan,
            "n_cells": 3,
            "n_not_damaged": 3,
            "relative_to_scratch": np.nan,
        }
    )
    assert answer_page.aside._aside_cost(undamaged) == "not damaged beyond ε (no cost)"
    some = pd.Series(
        {
            **row,
            "median": 0.2,
            "median_lo": 0.1,
            "median_hi": 0.3,
            "n_cells": 3,
            "n_not_damaged": 1,
            "relative_to_scratch": 0.25,
        }
    )
    text = answer_page.aside._aside_cost(some)
    assert "n/a" not in text and text.endswith("1 of 3 not damaged beyond ε"), text
    # against its matched control: said where it differs, not repeated where it is the same number
    differs = pd.Series({**some, "n_not_damaged": 0, "control_median": 0.15, "control_relative_to_scratch": 0.19})
    assert answer_page.aside._aside_cost(differs).endswith("; vs. control 0.19 ×")
    same = pd.Series({**differs, "control_median": 0.2, "control_relative_to_scratch": 0.25})
    assert "vs. control" not in answer_page.aside._aside_cost(same)
    # in the aside's unit: × from scratch, its interval only at the smallest ε; a median beyond the budget is the
    # budget's multiple, with the interval's finite end where there is one
    assert answer_page.aside._aside_cost(pd.Series({**same, "n_not_damaged": 0})).startswith("0.25 × [0.125, 0.375]")
    assert answer_page.aside._aside_cost(pd.Series({**same, "n_not_damaged": 0}), first=False) == "0.25 ×"
    beyond = pd.Series(
        {
            **same,
            "n_not_damaged": 0,
            "median": np.inf,
            "median_hi": np.inf,
            "relative_to_scratch": np.inf,
            "budget": 0.8,
            "budget_relative_to_scratch": 1.0,
            "n_censored": 2,
            "n_still_falling": 2,
            "n_stalled": 0,
            "projected_relative": np.nan,
        }
    )
    assert answer_page.aside._aside_cost(beyond).startswith("> 1 × [0.125, > B]")
    assert answer_page.aside._aside_cost(beyond, first=False).startswith("> 1 ×, 2 of 3 censored (still falling)")


def test_a_readme_with_two_headlines_gets_each_from_its_own_page(tmp_path, deeper_costs_more):
    """A README that carries the headlines of two pages (each block after the line naming its page) has only the
    named page's block replaced; the other page's block stays as it was."""
    _, md = deeper_costs_more
    page = tmp_path / "b.md"
    page.write_text(md)
    first = f"{answer.HEADLINE[0]}\nthe first page's headline\n{answer.HEADLINE[1]}"
    stale = f"{answer.HEADLINE[0]}\na stale headline\n{answer.HEADLINE[1]}"
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{first}\n\ntext\n\n{answer.source_marker(str(page))}\n\n{stale}\n\n## next\n")
    answer.update_readme(str(page), str(readme))
    text = readme.read_text()
    assert first in text and "a stale headline" not in text
    assert text.index(answer.source_marker(str(page))) < text.index(answer.headline(md))


def test_families_compare_in_their_own_from_scratch_unit():
    """Two families on their own S × E: §5 states each family's first and last layer at the smallest ε as a
    multiple of that model's own from-scratch cost (the survival median in examples over its pretraining's
    crossing), with the fraction of S × E beside it; a grid of one family has no such table."""
    parts = [
        synthetic(models=(("gpt2-n2-d64", 2, 64),), thresholds=(0.02, 0.05), seed=1),
        synthetic(models=(("bert-n3-d64", 3, 64),), thresholds=(0.02, 0.05), family_kind="encoder-only", seed=2),
    ]
    summary, curves, networks = (pd.concat([parts[0][i], parts[1][i]], ignore_index=True) for i in range(3))
    tables = answer_tables.compute(summary, curves, networks)
    section = answer_page.page(tables, summary, networks, LINKS).markdown().split("## 5. ")[1].split("\n## ")[0]
    surv, ref = tables["survival"], tables["pretrain_reference"]
    for model, kind, first, last in (
        ("gpt2-n2-d64", "decoder-only", "L0", "L1"),
        ("bert-n3-d64", "encoder-only", "L0", "L2"),
    ):
        row = next(line for line in section.splitlines() if line.startswith(f"| {model} | {kind} |"))
        scratch = ref[(ref["model"] == model) & (ref["threshold"] == 0.02)]["examples"].astype(float).mean()
        for target, cell in zip((first, last), row.strip("|").split("|")[3:5]):
            med = surv[
                (surv["model"] == model)
                & (surv["target"] == target)
                & (surv["threshold"] == 0.02)
                & (surv["regime"] == "frozen")
                & (surv["policy"] == "full")
                & (surv["init"] == "fresh")
            ].iloc[0]
            if cell.strip() == answer_page.words.BEYOND:
                assert np.isinf(float(med["median_examples"])), (model, target)
                continue
            times, fraction = re.match(r" *([0-9.]+) \(([0-9.]+)\)", cell).groups()
            assert float(times) == pytest.approx(float(med["median_examples"]) / scratch, rel=0.01), (model, target)
            assert float(fraction) == pytest.approx(float(med["median_fraction"]), rel=0.01), (model, target)
    one = synthetic(models=(("gpt2-n2-d64", 2, 64),), thresholds=(0.02,), seed=1)
    alone = answer_page.page(answer_tables.compute(*one), *one[::2], LINKS).markdown().split("## 5. ")[1]
    assert "as a multiple of pretraining the same model" not in alone.split("\n## ")[0]


def test_a_donor_is_no_size_of_the_answer_and_no_model_of_its_intervals():
    """A model pretrained only as an encoder donor (``heal: false``: networks, no cells) is listed with the networks
    but is not one of the sizes the answer names, and its single network does not make the page say that some
    model's intervals resample retrain seeds only."""
    summary, curves, networks = synthetic(
        thresholds=(0.05,),
        d_effect=0.5,
        models=(("gpt2-n2-d64", 2, 64), ("gpt2-n2-d96", 2, 96), ("gpt2-n4-d64", 4, 64)),
    )
    donor = networks[networks["model"] == "gpt2-n2-d96"].iloc[[0]].assign(model="donor-d48", d_model=48, n_layer=6)
    with_donor = pd.concat([networks, donor], ignore_index=True)
    tables = answer_tables.compute(summary, curves, with_donor)
    head = answer.headline(answer_page.page(tables, summary, with_donor, LINKS).markdown())
    sizes = next(line for line in head.splitlines() if line.startswith("- **Do N and D matter?**"))
    assert "Larger N (2, 4)" in sizes and "larger D (64, 96)" in sizes, sizes
    sure = next(line for line in head.splitlines() if line.startswith("- **How sure?**"))
    assert "single pretrained network" not in sure and "only 2 per model" in sure, sure


def test_an_encoder_decoder_model_left_out_is_named_not_called_absent():
    """A grid whose encoder-decoder networks all leave the estimates (off their plateau) does have such a model:
    the aside and the swap line say why it is not determined, not that the grid has none."""
    networks = pd.DataFrame(
        {
            "model": ["bart-n2-d64"] * 3 + ["gpt2-n2-d64"] * 3,
            "family_kind": ["encoder-decoder"] * 3 + ["decoder-only"] * 3,
            "off_plateau": [True, True, False, False, False, False],
            "degenerate": [False, False, True, False, False, False],
        }
    )
    why = answer_page.aside._no_aside(networks)
    assert why == "every network of the encoder-decoder model `bart-n2-d64` is left out of the estimates " + (
        "(not fully trained or degenerate: §8)"
    )
    usable = networks.assign(degenerate=False)  # the third network stays: the grid made no aside cell of it
    assert answer_page.aside._no_aside(usable) == "the encoder-decoder model `bart-n2-d64` has no cell in the estimates"
    assert answer_page.aside._no_aside(networks[networks["model"] == "gpt2-n2-d64"]) == ""  # none in the grid
    assert answer_page.aside._no_aside(networks.iloc[:0]) == ""


def test_a_fit_with_no_more_settings_than_coefficients_is_not_read():
    """One model of three layers: the first- and last-layer terms meet three layer positions, so the fit has
    as many coefficients as settings and would restate the per-layer costs with intervals only the network spread
    sets. It is reported as not determined (saturated), and the page says so instead of a depth verdict; with two
    models (test_survival's grids) the same terms are fitted."""
    summary, curves, networks = synthetic(
        models=(("gpt2-n3-d64", 3, 64),), pretrain_seeds=(0, 1, 2), seeds=(0,), thresholds=(0.05,), depth_effect=1.5
    )
    tables = answer_tables.compute(summary, curves, networks)
    fit = tables["fit"].set_index("term")
    assert fit.loc["first_layer", "reason"] == "saturated" and not fit.loc["first_layer", "determined"]
    assert "one model, whose 3 layer positions meet 3 coefficients" in fit.loc["first_layer", "note"]
    assert fit.loc["middle_depth", "reason"] == "not_varied"  # one middle layer: no depth among them
    headline = answer.headline(answer_page.page(tables, summary, networks, LINKS).markdown())
    assert "The depth fit at ε = 5 % is not made (one model, with no more layer positions" in headline


def test_terms_not_determined_for_one_reason_are_said_once():
    said = answer_page.position._not_determined(
        [("the first layer", "confounded"), ("the last layer", "confounded"), ("the middle depth", "unbounded")]
    )
    assert said == [
        "the first layer and the last layer are not determined (the grid confounds them with another term)",
        "the middle depth is not determined (every cell that would bound it is beyond the budget (its coefficient "
        "is unbounded))",
    ]
    both = answer_page.position._not_determined([("a", "unbounded"), ("b", "unbounded")])
    assert both == [
        "a and b are not determined (every cell that would bound them is beyond the budget (their coefficients "
        "are unbounded))"
    ]


def test_the_networks_table_says_how_far_each_network_ended_past_its_minimum():
    """Per seed, from networks.parquet's past_minimum, and how many networks with a pretraining curve passed it by
    more than eps_min / 4; a network without a curve (a downloaded model) reads n/a and is not counted."""
    summary, curves, networks = synthetic(thresholds=(0.05,), seed=0)
    networks.loc[0, "past_minimum"] = 0.05 * networks.loc[0, "baseline_loss"]  # 5 %: past 0.05 / 4
    networks.loc[1, "past_minimum"] = None
    md = answer_page.page(answer_tables.compute(summary, curves, networks), summary, networks, LINKS).markdown()
    known = networks["past_minimum"].notna().sum()
    assert f"1 of {known} networks by more than ε_min / 4 = 1.25 %" in md
    table = md.split("| model | loss per seed | margin per seed | past its minimum per seed |")[1]
    first = networks.sort_values(["model", "pretrain_seed"]).iloc[0]
    assert (networks.loc[0, "model"], networks.loc[0, "pretrain_seed"]) == (first["model"], first["pretrain_seed"])
    assert networks.loc[1, "model"] == first["model"]  # its second seed
    row = next(line for line in table.splitlines() if line.startswith(f"| {first['model']} |"))
    assert "| 5.00 %, n/a" in row


def test_a_data_axis_of_overfit_networks_is_said_beside_the_s_and_e_terms():
    """Where one data regime's networks all ended past their validation minimum by more than eps_min / 4 and apart
    from the other regime's, §4 says the log S and log E terms measure that overfitting too; where the regimes'
    spans overlap, or the grid has one regime, it says nothing."""
    summary, curves, networks = synthetic(thresholds=(0.05,), seed=0)
    axis = networks["model"] == "gpt2-n4-d64"
    sequences = int(networks.loc[~axis, "train_sequences"].iloc[0])
    networks.loc[axis, "train_sequences"] = sequences // 2
    networks["past_minimum"] = np.where(axis, [0.02, 0.03] * 2, 0.004) * networks["baseline_loss"]

    def sentence(nets):
        md = answer_page.page(answer_tables.compute(summary, curves, nets), summary, nets, LINKS).markdown()
        section = md.split("## 4.")[1].split("### The networks")[0]
        return next((line for line in section.splitlines() if line.startswith("The data axis")), None)

    said = sentence(networks)
    epochs = int(networks["epochs"].iloc[0])
    assert f"(by S × E): {sequences // 2:,} × {epochs}: 2.00 % to 3.00 % above their validation minimum" in said
    assert f", {sequences:,} × {epochs}: 0.40 %." in said
    overlapping = networks.assign(past_minimum=np.where(axis, 0.02, [0.004, 0.025] * 2) * networks["baseline_loss"])
    assert sentence(overlapping) is None
    assert sentence(networks.assign(train_sequences=sequences)) is None  # one regime: no data axis


def _aside_rows(model, rows):
    """An encoder_decoder table from (item, target, policy, init, {eps: (median, budget, stalled, falling)})."""
    out = []
    for item, target, policy, init, by_eps in rows:
        for eps, (median, budget, stalled, falling) in by_eps.items():
            censored = stalled + falling
            out.append(
                {
                    "model": model,
                    "threshold": eps,
                    "item": item,
                    "what": item,
                    "target": target,
                    "policy": policy,
                    "init": init,
                    "unit": "fraction",
                    "median": median,
                    "median_lo": median,
                    "median_hi": median,
                    "budget": budget,
                    "n_cells": 3,
                    "n_censored": censored,
                    "n_stalled": stalled,
                    "n_still_falling": falling,
                    "n_not_damaged": 0,
                    "relative_to_scratch": median / 0.8 if item != "scratch" else 1.0,
                    "budget_relative_to_scratch": budget / 0.8,
                }
            )
    return pd.DataFrame(out, columns=answer_tables.ENCODER_DECODER_COLUMNS)


def _swap_lr_rows(fractions):
    """The lr check's rows of bart's swap `swap-wide` at ε = 1 %, at ×3 and ÷3: its cost (NaN: not back)."""
    return pd.DataFrame(
        {
            "model": ["bart"] * 2,
            "target": ["swap-wide"] * 2,
            "threshold": [0.01] * 2,
            "lr_multiplier": [3.0, 0.3333],
            "recovered": [not math.isnan(f) for f in fractions],
            "fraction_of_pretrain": fractions,
        }
    )


def test_the_swap_answer_says_each_swap_against_from_scratch_with_its_verdict():
    """The headline's swap sentence, from the aside table alone: whether any swap is back within the smallest ε by
    its budget (as × from scratch), each swap by donor (its width against the model's, narrower first) with what it
    reached, a censored swap's verdict (stalled: it refuses; still falling: not answered), and whether the closed
    gate heals faster, swap by swap at the smallest ε either reaches."""
    from types import SimpleNamespace

    inf = math.inf
    aside = _aside_rows(
        "bart",
        [
            ("scratch", "", "", "", {0.01: (0.8, math.nan, 0, 0), 0.05: (0.5, math.nan, 0, 0)}),
            ("donor_swap", "swap-wide", "full", "fresh", {0.01: (inf, 2.0, 0, 3), 0.05: (1.2, 2.0, 0, 0)}),
            ("donor_swap_gated", "swap-wide", "full", "zero_out", {0.01: (inf, 2.0, 0, 3), 0.05: (0.6, 2.0, 0, 0)}),
            ("donor_swap_frozen", "swap-wide", "cross_attn", "fresh", {0.01: (inf, 2.0, 3, 0), 0.05: (inf, 2.0, 2, 1)}),
            ("donor_swap", "swap-x-narrow", "full", "fresh", {0.01: (inf, 2.0, 1, 2), 0.05: (inf, 2.0, 1, 2)}),
            ("encoder_swap", "swap96", "full", "fresh", {0.01: (1.6, 2.0, 0, 0), 0.05: (0.9, 2.0, 0, 0)}),
            ("encoder_swap_gated", "swap96", "full", "zero_out", {0.01: (inf, 2.0, 0, 3), 0.05: (inf, 2.0, 0, 3)}),
            ("reset_all", "all", "full", "fresh", {0.01: (inf, 2.0, 0, 3), 0.05: (1.0, 2.0, 0, 0)}),
        ],
    )
    networks = pd.DataFrame({"model": ["bart", "wide", "x-narrow"], "d_model": [96, 128, 64]})
    wide = (aside["target"] == "swap-wide") & (aside["policy"] == "full") & (aside["init"] == "fresh")
    aside.loc[wide & (aside["threshold"] == 0.01), "projected_relative"] = 4.44  # its last rate of fall's guess
    view = SimpleNamespace(tables={"encoder_decoder": aside}, networks=networks, healed=networks)
    said = answer_page.aside._swap_answer(view)
    assert said.startswith("**The encoder swap.** In bart, the fastest swap is back within 1 % of the old loss at 2 × ")
    assert "(0.8 of S × E): no swap is faster than pretraining the model from scratch. " in said
    narrow = said.index("x-narrow's trained encoder (width 64, narrower), trainable: not back within 1 % by 2.5 × ")
    wide = said.index(
        "wide's trained encoder (width 128, wider), trainable: not back within 1 % by 2.5 × (still falling, ≈ 4.4 × "
        "at its last rate of fall), within 5 % at 1.5 ×; frozen: "
    )
    frozen = said.index("frozen: not back within 1 % by 2.5 × (stalled), nor within 5 %")  # the same donor's
    fresh = said.index("a fresh encoder of width 96: back within 1 % at 2 ×")
    assert narrow < wide < frozen < fresh
    assert "(1 stalled, 2 still falling), nor within 5 %" in said
    assert (
        "Every layer reset instead (the embeddings kept), with the same retraining: not back within 1 % by 2.5 × "
        in said
    )
    assert "by 2.5 × (still falling), within 5 % at 1.25 ×" in said
    # gated against ungated: the wide donor's at 5 % (0.6 < 1.2), the fresh encoder's at 1 % (inf > 1.6)
    assert "faster in 1, slower in 1 of the 2 swaps measured both ways" in said
    # nothing back at the smallest ε: the budget, not a cost, leads
    none = aside.assign(median=np.where(aside["threshold"] == 0.01, inf, aside["median"]))
    none["relative_to_scratch"] = none["median"] / 0.8
    none.loc[none["item"] == "scratch", ["median", "relative_to_scratch"]] = [0.8, 1.0]
    said = answer_page.aside._swap_answer(SimpleNamespace(tables={"encoder_decoder": none}, networks=networks))
    assert "In bart, no swapped encoder is back within 1 % of the old loss in 2.5 × what pretraining" in said
    assert "(0.8 of S × E), so every swap is slower than pretraining the model from scratch; ≈ r ×" in said
    # the fastest swap under 1 × from scratch: faster; a budget that ends before 1 × cannot tell
    fast = aside.assign(relative_to_scratch=np.where(aside["target"] == "swap96", 0.7, aside["relative_to_scratch"]))
    fast_said = answer_page.aside._swap_answer(SimpleNamespace(tables={"encoder_decoder": fast}, networks=networks))
    assert (
        "at 0.7 × what pretraining from scratch needed (0.8 of S × E): faster than pretraining the model" in fast_said
    )
    short = none.assign(budget_relative_to_scratch=0.6)
    short_said = answer_page.aside._swap_answer(SimpleNamespace(tables={"encoder_decoder": short}, networks=networks))
    assert "(a budget shorter than pretraining from scratch: it cannot tell slower from never)" in short_said
    assert "slower than pretraining" not in short_said
    # which the swaps then do not repeat: each starts with what its cells did
    assert "(width 128, wider), trainable: still falling (≈ 4.4 ×), within 5 % at" in said
    assert "; ≈ r ×: where a still-falling swap's last rate of fall would reach 1 %" in said
    assert (
        "frozen: stalled, not even within 5 %" in said
        and "x-narrow's trained encoder (width 64, narrower), trainable: 1 " in said
    )
    # the lr check on a swap (retrain.lr_sensitivity_targets) is said with it, × from scratch
    lr = _swap_lr_rows([1.2, math.nan])
    with_lr = answer_page.aside._swap_answer(
        SimpleNamespace(tables={"encoder_decoder": aside, "lr_sensitivity": lr}, networks=networks)
    )
    assert (
        "The lr check on `swap-wide` (its trainable swap): at ×3 the retraining lr, back within 1 % at 1.5 × from "
        "scratch; at ÷3 the retraining lr, not back within 1 % by the budget"
    ) in with_lr
    assert "The lr check" not in said
    # the aside's table gives the same verdicts
    row = aside[(aside["item"] == "donor_swap_frozen") & (aside["threshold"] == 0.01)].iloc[0]
    assert answer_page.aside._aside_cost(row) == "> 2.5 × (stalled)"
    projected = {"n_stalled": 0, "n_still_falling": 1, "projected_relative": 3.26}
    assert answer_page.aside._aside_cost(pd.Series({**row, **projected})) == "> 2.5 × (≈ 3.3 ×)"


def test_the_size_grid_is_the_most_common_family_s():
    """§4 and the headline list the N and D the fit varies: the most common family's networks. Another family's
    one size (here a BART of 6 layers, width 96) is named apart, not counted as a level of N or D."""
    gpt = synthetic(models=(("gpt2-n2-d64", 2, 64), ("gpt2-n4-d64", 4, 64)), thresholds=(0.05,), seed=3)
    bart = synthetic(models=(("bart-n3-d96", 6, 96),), thresholds=(0.05,), family_kind="encoder-decoder", seed=4)
    summary, curves, networks = (pd.concat([a, b], ignore_index=True) for a, b in zip(gpt, bart))
    md = answer_page.page(answer_tables.compute(summary, curves, networks), summary, networks, LINKS).markdown()
    section = md.split("## 4. ")[1]
    assert "The size grid (decoder-only, the most common family): N 2, 4; D 64." in section
    assert "Other families (N × D): bart-n3-d96 (6 × 96)." in section
    sizes = next(line for line in answer.headline(md).splitlines() if line.startswith("- **Do N and D matter?**"))
    only_bart = "D is not determined (the size grid does not vary it; only another family's networks differ in it)"
    assert "Larger N (2, 4)" in sizes and only_bart in sizes, sizes
    # the BART trained on another S x E: left out of the fit (D not varied there), said the same way
    networks.loc[networks["model"] == "bart-n3-d96", "train_sequences"] = 999
    tables = answer_tables.compute(summary, curves, networks)
    fit = tables["fit"].set_index("term")
    assert fit.loc["log_d_model", "reason"] == "not_varied", fit["reason"]
    md = answer_page.page(tables, summary, networks, LINKS).markdown()
    sizes = next(line for line in answer.headline(md).splitlines() if line.startswith("- **Do N and D matter?**"))
    assert only_bart in sizes, sizes


def test_the_size_answer_says_when_the_sizes_reach_the_same_loss():
    """When every pair of depths ends apart by no more than its networks' spread, the N answer says that the
    depths reach one loss (a deeper network is not a better-fitting one); when the deepest fits better by more
    than that spread, it does not."""
    models = (("gpt2-n2-d64", 2, 64), ("gpt2-n4-d64", 4, 64), ("gpt2-n8-d64", 8, 64))
    summary, curves, networks = synthetic(models=models, thresholds=(0.05,), seed=3)
    networks["baseline_loss"] = 4.0 + 0.01 * networks["pretrain_seed"] + 0.004 * networks["n_layer"] / 8

    def sizes(nets):
        md = answer_page.page(answer_tables.compute(summary, curves, nets), summary, nets, LINKS).markdown()
        return next(line for line in answer.headline(md).splitlines() if line.startswith("- **Do N and D matter?**"))

    means = networks.groupby("model")["baseline_loss"].mean()
    said = sizes(networks)
    assert (
        f"and the depths reach the same validation loss (means {means.min():.3f} to {means.max():.3f} nats" in said
    ), said
    assert "a deeper network here is not a better-fitting one; D is not determined" in said
    better = networks.copy()
    better.loc[better["model"] == "gpt2-n8-d64", "baseline_loss"] -= 0.2  # the deepest fits S better
    assert "reach the same validation loss" not in sizes(better)


def test_a_still_falling_cell_is_projected_at_its_last_rate_of_fall():
    """answer_tables.projected_examples: a cell back within ε costs its crossing; one still falling at its budget is
    projected to where its fall over the last doubling of examples would take it (end examples x 2^(gap / fall));
    one that stalled or diverged never gets there; one never damaged has no cost."""
    cells = pd.DataFrame(
        {
            "outcome": ["recovered", "still_falling", "still_falling", "stalled", "diverged", "not_damaged"],
            "examples": [500.0, 1000.0, 1000.0, 1000.0, 300.0, 0.0],
            "final_loss": [1.0, 1.03, 1.011, 1.05, 9.0, 0.99],
            "threshold_loss": [1.01] * 6,
            "fall_per_doubling": [math.nan, 0.01, 0.002, 0.0001, math.nan, math.nan],
        }
    )
    got = answer_tables.projected_examples(cells).tolist()
    assert got[0] == 500.0 and got[1] == pytest.approx(4000.0) and got[2] == pytest.approx(1000.0 * 2**0.5)
    assert math.isinf(got[3]) and math.isinf(got[4]) and math.isnan(got[5])
    assert answer_tables._lower_median(np.array([3.0, math.inf])) == 3.0  # with two networks, the faster one


def test_the_aside_projects_a_swap_still_falling_from_its_cells():
    """The aside's projected cost of a row beyond its budget: the lower median over its networks' cells of where each
    one's last rate of fall would reach ε (computed here from summary.parquet's columns by the formula), as a
    fraction of S × E and over the from-scratch cost; a row that got back has none."""
    summary, curves, networks = synthetic(
        models=(("bart", 4, 64),),
        extra_targets=True,
        family_kind="encoder-decoder",
        thresholds=(0.01, 0.05),
        budget_fraction=0.05,
        seed=2,
    )
    aside = answer_tables.compute(summary, curves, networks)["encoder_decoder"]
    row = aside[(aside["item"] == "encoder_swap") & (aside["threshold"] == 0.01)].iloc[0]
    cells = summary[(summary["target"] == "swap32") & (summary["threshold"] == 0.01)]
    assert math.isinf(row["median"]) and (cells["outcome"] == "still_falling").all()
    guess = cells["examples"] * 2 ** ((cells["final_loss"] - cells["threshold_loss"]) / cells["fall_per_doubling"])
    values = sorted(guess / cells["pretrain_examples"])
    assert row["projected"] == pytest.approx(values[(len(values) - 1) // 2])
    scratch = aside[(aside["item"] == "scratch") & (aside["threshold"] == 0.01)]["median"].iloc[0]
    assert row["projected_relative"] == pytest.approx(row["projected"] / scratch)
    assert aside[np.isfinite(aside["median"])]["projected"].isna().all()


def test_related_work_counts_only_cells_the_reset_damaged():
    """The related-work rows' counts: a layer group never damaged beyond ε has no cost, so it is neither beyond the
    budget nor a cell that failed to get back (at ε = 0.1 here: one group of two cells undamaged, the rest back)."""
    from selfheal.analysis import related_work

    def group(target, eps, median, n_cells, n_recovered, n_not_damaged, kind="layer"):
        return {
            "model": "m",
            "target": target,
            "kind": kind,
            "regime": "frozen",
            "policy": "full",
            "init": "fresh",
            "threshold": eps,
            "median_fraction": median,
            "n_cells": n_cells,
            "n_recovered": n_recovered,
            "n_not_damaged": n_not_damaged,
            "budget_fraction": 2.0,
        }

    surv = pd.DataFrame(
        [
            group("L0", 0.01, math.inf, 2, 0, 0),
            group("L1", 0.01, 0.3, 2, 2, 0),
            group("L0", 0.1, 0.2, 2, 2, 0),
            group("L1", 0.1, math.nan, 2, 0, 2),
            group("all", 0.01, math.inf, 2, 0, 0, kind="all"),
            group("all", 0.1, 0.5, 2, 2, 0, kind="all"),
        ]
    )
    tables = {"survival": surv}
    shares = related_work._share_recovered(tables)
    assert "ε = 0.01: 2 of 4 (50 %)" in shares and "ε = 0.1: 2 of 2 (100 %)" in shares
    costs = related_work._single_layer_costs(tables)
    assert "ε = 0.01: " in costs and "(1 of 2 layer groups beyond the budget)" in costs and "ε = 0.1" not in costs
    # at the smallest ε a group never damaged beyond it has no cost: counted apart, not as beyond the budget
    undamaged = surv.assign(threshold=surv["threshold"].replace({0.01: 0.5, 0.1: 0.01}))
    costs = related_work._single_layer_costs({"survival": undamaged})
    assert "(0 of 1 layer groups beyond the budget; 1 never damaged beyond ε)" in costs


def test_each_median_is_a_cost_a_refusal_not_answered_or_no_cost():
    """answer_page.refusal.median_answers: a (model, layer) median beyond the budget refuses when its cells stalled (or
    diverged) at least as often as they were still falling, and is not answered otherwise; one never damaged has
    no cost. §2 says how the grid's medians end at the smallest and the largest ε."""
    inf, nan = float("inf"), float("nan")
    medians = pd.DataFrame(
        {
            "median_examples": [100.0, inf, inf, inf, nan],
            "n_stalled": [0, 2, 1, 0, 0],
            "n_diverged": [0, 0, 0, 1, 0],
            "n_still_falling": [0, 1, 2, 1, 0],
        }
    )
    assert answer_page.refusal.median_answers(medians) == {
        "finite": 1,
        "refuses": 2,
        "not_answered": 1,
        "not_damaged": 1,
    }
    summary, curves, networks = synthetic(thresholds=(0.01, 0.1), budget_fraction=0.05, seed=5)
    tables = answer_tables.compute(summary, curves, networks)
    section = answer_page.page(tables, summary, networks, LINKS).markdown().split("## 2.")[1].split("## 3.")[0]
    surv = tables["survival"]
    counts = {}
    for eps in (0.01, 0.1):
        at = surv[(surv["kind"] == "layer") & (surv["threshold"] == eps) & (surv["init"] == "fresh")]
        at = at[(at["regime"] == "frozen") & (at["policy"] == "full")]
        counts[eps] = n = answer_page.refusal.median_answers(at)
        assert sum(n.values()) == len(at)
        said = f"at ε = {answer_page.words._eps_words(eps)}, {n['finite']} of {len(at)} finite"
        said += f", {n['not_answered']} not answered (beyond the budget, still falling)"
        assert said in section, (said, section)
    assert counts[0.1]["finite"] and counts[0.1]["not_answered"]  # this short budget: some back, some still falling


@pytest.mark.parametrize(
    "refuses, words",
    [(1, "19 of 20 finite, 1 refuses (beyond the budget, stalled)"), (2, "18 of 20 finite, 2 refuse (beyond")],
)
def test_the_medians_that_refuse_are_counted_in_words(refuses, words):
    n = {"finite": 20 - refuses, "refuses": refuses, "not_answered": 0, "not_damaged": 0}
    assert answer_page.refusal._median_answer_words(n, 20).startswith(words)


def test_single_layers_still_falling_are_projected_in_the_refusal_sentence():
    """The headline's refusal bullet: the damaged single-layer cells still falling at their budget, where their last
    rate of fall would reach ε, over their network's own from-scratch cost (summary's scratch_examples), to two
    digits, as network_costs.parquet holds them; computed here from the summary's columns by the formula."""
    summary, curves, networks = synthetic(thresholds=(0.01,), budget_fraction=0.05, seed=5)
    tables = answer_tables.compute(summary, curves, networks)
    refuse = next(
        line
        for line in answer.headline(answer_page.page(tables, summary, networks, LINKS).markdown()).splitlines()
        if "Does it ever refuse?" in line
    )
    cells = summary[(summary["outcome"] == "still_falling") & summary["layer"].notna() & (summary["init"] == "fresh")]
    assert len(cells) > 1
    guess = cells["examples"] * 2 ** ((cells["final_loss"] - cells["threshold_loss"]) / cells["fall_per_doubling"])
    rel = guess / cells["scratch_examples"]
    costs = tables["network_costs"]  # the page states them from this table: each cell's, as the formula gives
    mine = costs[(costs["outcome"] == "still_falling") & (costs["kind"] == "layer") & (costs["init"] == "fresh")]
    assert sorted(mine["projected_relative"]) == pytest.approx(sorted(rel))
    assert sorted(mine["projected"]) == pytest.approx(sorted(guess))
    words = span(rel, answer_page.words._two_digits)
    assert (
        f"{len(cells)} were still falling when the budget ran out (not answered: the budget ended first; at their "
        in refuse
    )
    assert f"last rate of fall, about {words} × what pretraining from scratch needed)" in refuse, refuse


@pytest.mark.parametrize("seed,merged", [(0, True), (1, False)])
def test_a_position_verdict_the_same_at_both_eps_is_said_once_with_each_factor(seed, merged):
    """Where the fit's position verdicts read the same at ε = 1 % and 10 % (seed 0 of the synthetic grid), the
    headline says them once, with both ε's factors; where they differ (seed 1: depth among the middle layers lowers
    the cost at 1 % only), the asker's ε's, and that §3 has the other. Each factor said is the fit table's."""
    summary, curves, networks = synthetic(
        depth_effect=0.0,
        first_layer_effect=2.0,
        thresholds=(0.01, 0.1),
        seed=seed,
        budget_fraction=2.0,
        models=(("gpt2-n2-d64", 2, 64), ("gpt2-n3-d64", 3, 64), ("gpt2-n4-d64", 4, 64)),
        pretrain_seeds=(0, 1, 2),
    )
    tables = answer_tables.compute(summary, curves, networks)
    head = answer.headline(answer_page.page(tables, summary, networks, LINKS).markdown())
    position = next(line for line in head.splitlines() if "Does the position of L matter?" in line)
    assert "At ε = 1 % and 10 %, the costliest layer is the first in 3 of 3 models" in position
    fit = tables["fit"].set_index(["threshold", "term"])
    factors = [answer_page.fit._factor(fit.loc[(eps, "first_layer")]) for eps in (0.01, 0.1)]
    if merged:
        assert position.count("In the fit") == 1 and position.count("no clear effect of the last layer") == 1
        assert (
            f"In the fit at ε = 1 % and 10 %, the first layer raises the cost ({factors[0]} at ε = 1 %, "
            f"{factors[1]} at ε = 10 %, against the middle layers)" in position
        )
    else:
        assert "In the fit at ε = 1 %, the first layer raises the cost" in position
        assert "In the fit at ε = 10 %" not in position and "; at ε = 10 % it reads otherwise (§3)." in position
        assert f"({factors[0]} against the middle layers)" in position and factors[1] not in position
        assert "depth among the middle layers lowers the cost" in position


def test_every_single_layer_cell_not_back_is_listed_with_its_verdict():
    """§2 lists each single-layer cell not back within the smallest ε (network_costs.parquet): its verdict (stalled
    or still falling), how far above its baseline it ended, where its retraining ended and, still falling, its
    projection, the last two over its network's from-scratch cost; the counts table splits stalled from still
    falling."""
    summary, curves, networks = synthetic(thresholds=(0.01, 0.1), budget_fraction=0.05, seed=5)
    fresh = (summary["init"] == "fresh") & summary["layer"].notna()
    # one cell the stall rule stopped halfway: its row says so, and where it stopped
    stalled = summary[fresh & (summary["outcome"] == "still_falling") & (summary["threshold"] == 0.01)].index[0]
    same = (
        summary[["model", "pretrain_seed", "target", "init", "seed"]]
        == summary.loc[stalled, ["model", "pretrain_seed", "target", "init", "seed"]]
    ).all(axis=1)
    summary.loc[same & (summary["outcome"] == "still_falling"), "outcome"] = "stalled"
    summary.loc[same, "examples"] = summary.loc[same, "budget_examples"] // 2
    # and it got within ε of its matched control (the intact network retrained the same way) two evaluations on
    at_min = same & (summary["threshold"] == 0.01)
    summary.loc[at_min, "control_examples_hi"] = summary.loc[at_min, "control_examples_lo"] + 2000
    tables = answer_tables.compute(summary, curves, networks)
    md = answer_page.page(tables, summary, networks, LINKS).markdown()
    section = md[md.index("## 2.") : md.index("## 3.")]
    costs = tables["network_costs"]
    listed = costs[
        (costs["kind"] == "layer") & (costs["threshold"] == 0.01) & ~costs["outcome"].isin(["recovered", "not_damaged"])
    ]
    cells = summary[fresh & (summary["threshold"] == 0.01) & ~summary["recovered"].astype(bool)]
    assert len(listed) == len(cells) > 2 and (listed["outcome"] == "stalled").sum() == 1
    rows = [line for line in section.splitlines() if line.startswith("| gpt2-")]
    assert len(rows) == len(listed)
    for r in listed.itertuples():
        mine = (cells["model"] == r.model) & (cells["pretrain_seed"] == r.pretrain_seed) & (cells["seed"] == r.seed)
        cell = cells[mine & (cells["target"] == r.target)].iloc[0]
        verdict = answer_page.refusal.NOT_BACK_WORDS[r.outcome]
        ended = answer_page.words._two_digits(cell["examples"] / cell["scratch_examples"])
        gap = f"{100 * (cell['final_loss'] / cell['baseline_loss'] - 1):+.2f} %"
        network = f"seed {r.pretrain_seed}, reset seed {r.seed}"  # two reset seeds per network here
        row = f"| {r.model} | {r.target} ({r.position}) | {network} | {verdict} | {gap} | {ended} × |"
        assert any(line.startswith(row) for line in rows), (row, [x for x in rows if r.target in x and r.model in x])
        line = next(line for line in rows if line.startswith(row))
        if pd.isna(cell["control_examples_lo"]):  # no matched control (not the first reset seed)
            assert line.endswith("| — |") and np.isnan(r.control_upper)
        elif pd.isna(cell["control_examples_hi"]):
            assert line.endswith("| not back |") and np.isinf(r.control_upper)
        else:
            at = answer_page.words._two_digits(cell["control_examples_hi"] / cell["scratch_examples"])
            assert line.endswith(f"| back at {at} × |") and r.control_upper == cell["control_examples_hi"]
        if r.outcome == "stalled":
            assert ended == answer_page.words._two_digits(cell["budget_examples"] // 2 / cell["scratch_examples"])
    assert set(listed["outcome"]) == {"stalled", "still_falling"}
    surv = tables["survival"]
    beyond = surv[(surv["threshold"] == 0.01) & (surv["init"] == "fresh") & np.isinf(surv["median_fraction"])]
    assert len(beyond)
    costs_section = md[md.index("## 1.") : md.index("## 2.")]
    for r in beyond.itertuples():  # §1 says how many of a median's cells beyond the budget stalled, how many fell
        counts = ", ".join(f"{n} {w}" for n, w in ((r.n_stalled, "stalled"), (r.n_still_falling, "still falling")) if n)
        label = "every layer" if r.target == "all" else f"{r.target} ({r.position})"
        assert f"| {r.model} | {label} | > B ({counts}) |" in costs_section, (label, counts)
    refuse = next(line for line in answer.headline(md).splitlines() if "Does it ever refuse?" in line)
    stalled_control = listed.loc[listed["outcome"] == "stalled", "control_upper"]
    assert np.isfinite(stalled_control).all()
    assert "(it refuses, by the stall rule; but it got within 1 % of its matched control, the intact" in refuse
    # the counts: the headline's (one setting: §2 has no table of its own), one stalled, the rest still falling
    assert "The (model, layer) medians of §1 (the cells: the answer above;" in section
    assert f"; {len(listed) - 1} were still falling when the budget ran out" in refuse


@pytest.mark.parametrize(
    "stalled,counts,words",
    [
        (
            1,
            (1, 1),
            "; but it got within 1 % of its matched control, the intact network retrained the same way: the "
            "retraining's own drift accounts for its gap",
        ),
        (3, (3, 3), "; but all of them got within 1 % of their matched control"),
        (3, (2, 3), "; but 2 of them got within 1 % of their matched control"),
        (5, (3, 3), "; but all 3 with a matched control got within 1 % of it"),
        (
            5,
            (1, 3),
            "; but 1 of the 3 with a matched control got within 1 % of it, the intact network retrained the "
            "same way: the retraining's own drift accounts for its gap",
        ),
        (5, (0, 3), ""),
        (5, None, ""),
    ],
)
def test_stalled_cells_within_eps_of_their_matched_control_are_said_so(stalled, counts, words):
    """The refusal sentence: of the stalled cells, those that got within ε of their matched control (the intact
    network retrained the same way) are counted, said apart from the stall verdict; none back, nothing is said."""
    got = answer_page.refusal._near_control(0.01, stalled, counts)
    assert got.startswith(words) if words else got == ""


def test_the_control_clause_is_explained_once_per_sentence():
    """Stalled and still-falling cells both back within ε of their matched controls: the refusal sentence explains
    the matched control once (at the stalled cells) and only counts the still-falling ones."""
    rows = pd.DataFrame(
        [{"threshold": 0.01, "n_cells": 10, "n_not_damaged": 0, "n_diverged": 0, "n_stalled": 2, "n_still_falling": 1}]
    )
    control = {"stalled": {0.01: (2, 2)}, "still_falling": {0.01: (1, 1)}}
    said = answer_page.refusal._refusal_answer(rows, [0.01], {0.01: "about 3 ×"}, control)
    assert said.count("the intact network retrained the same way") == 1, said
    assert (
        "(they refuse, by the stall rule; but all of them got within 1 % of their matched control, the intact" in said
    )
    assert "about 3 × what pretraining from scratch needed; but it got within 1 % of its matched control)." in said
    alone = answer_page.refusal._refusal_answer(rows, [0.01], {}, {"still_falling": {0.01: (1, 1)}})
    assert "; but it got within 1 % of its matched control, the intact network retrained the same way: the " in alone


def test_the_scale_of_a_grid_of_one_size_is_one_number():
    one = _page(models=(("gpt2-n3-d64", 3, 64),))[1]
    (scale,) = [line for line in one.splitlines() if "Scale of this grid" in line]
    assert " to " not in scale.split(";")[0]  # "N parameters, T pretraining tokens", not "N to N"
    two = _page()[1]
    (scale,) = [line for line in two.splitlines() if "Scale of this grid" in line]
    assert " to " in scale.split(";")[0]


def test_refusals_keep_their_table_where_several_single_layer_settings_are_read():
    """With one single-layer setting the headline's refusal sentence counts its cells and §2 points there; with two
    (here the same cells read again under a second policy) §2 sets them side by side, one row per policy and ε."""
    summary, curves, networks = synthetic(thresholds=(0.01, 0.1), seed=3)
    one = answer_page.page(answer_tables.compute(summary, curves, networks), summary, networks, LINKS).markdown()
    section = one[one.index("## 2.") : one.index("## 3.")]
    assert "(the cells: the answer above; every ε: " in section and "| policy | ε |" not in section
    layers = summary["target"].str.fullmatch(r"L\d")
    again = pd.concat([summary, summary[layers].assign(policy="attn")], ignore_index=True)
    curves2 = pd.concat([curves, curves[curves["target"].str.fullmatch(r"L\d")].assign(policy="attn")])
    two = answer_page.page(answer_tables.compute(again, curves2, networks), again, networks, LINKS).markdown()
    section = two[two.index("## 2.") : two.index("## 3.")]
    assert "| policy | ε | cells |" in section
    assert {
        line.split(" | ")[0]
        for line in section.splitlines()
        if line.startswith("| full | ") or line.startswith("| attn | ")
    } == {"| full", "| attn"}


def test_the_short_answer_says_back_the_sentences_below_it(deeper_costs_more):
    """The headline opens with a paragraph a reader can say back: the single-layer medians' range at the asker's ε
    (and × from scratch), how many pairs do not get back, the costliest layer, N and D, the swap. Each clause is the
    one its sub-question's sentence gives, so the two cannot disagree."""
    from types import SimpleNamespace

    tables, md = deeper_costs_more
    head = answer.headline(md)
    short = next(line for line in head.splitlines() if line.startswith("**In short**"))
    assert head.index("**In short**") < head.index("- **How much data?**")  # first, before the detail
    layers = tables["survival"][tables["survival"]["kind"] == "layer"]
    med = layers["median_fraction"].astype(float)
    finite = med[np.isfinite(med)]
    assert f"after a median {num(finite.min())} to {num(finite.max())} of S × E (" in short
    how_much = next(line for line in head.splitlines() if line.startswith("- **How much data?**"))
    assert f"a median {num(finite.min())} to {num(finite.max())} of S × E" in how_much  # the same numbers
    costliest = re.search(r"the costliest layer is [^.]*", head.split("**In short**")[1].split("\n")[0], re.I)
    position = next(line for line in head.splitlines() if line.startswith("- **Does the position of L matter?**"))
    assert costliest and costliest.group(0).lower() in position.lower()
    assert "D: not determined." in short and len(short.split()) < 120  # said back in a breath, not a page
    assert "encoder swap" not in short  # no encoder-decoder here: nothing to say of a swap
    # the swap's clause, from the aside table: slower when none is back by a budget past the from-scratch cost
    inf = math.inf
    none = _aside_rows("bart", [("donor_swap", "swap-wide", "full", "fresh", {0.01: (inf, 2.0, 0, 3)})])
    networks = pd.DataFrame({"model": ["bart", "wide"], "d_model": [96, 128]})
    clause = answer_page.aside._swap_short(SimpleNamespace(tables={"encoder_decoder": none}, networks=networks))
    assert (
        clause
        == "the encoder swap in bart is slower than pretraining it from scratch (no swap back by 2.5 × that cost)"
    )
    back = none.assign(relative_to_scratch=0.75)
    clause = answer_page.aside._swap_short(SimpleNamespace(tables={"encoder_decoder": back}, networks=networks))
    assert "faster than pretraining it from scratch (its fastest swap: 0.75 × that cost)" in clause
    # beside it, every layer reset with the same retraining: how much of the swap's cost is the retraining's own
    every = _aside_rows("bart", [("reset_all", "all", "full", "fresh", {0.01: (inf, 2.0, 0, 3)})])
    slow = pd.concat([none, every])
    clause = answer_page.aside._swap_short(SimpleNamespace(tables={"encoder_decoder": slow}, networks=networks))
    assert clause.endswith("(no swap back by 2.5 × that cost), as is resetting every layer with the same retraining")
    quick = pd.concat([none, every.assign(relative_to_scratch=1.5)])
    clause = answer_page.aside._swap_short(SimpleNamespace(tables={"encoder_decoder": quick}, networks=networks))
    assert clause.endswith("; resetting every layer with the same retraining takes 1.5 ×")
    # the lr check on a swap says whether the verdict is the lr's: none back at another lr, or the fastest that is
    scratch = _aside_rows("bart", [("scratch", "scratch", "", "", {0.01: (0.8, 0.8, 0, 0)})])
    lr = _swap_lr_rows([math.nan, math.nan])
    tables = {"encoder_decoder": pd.concat([slow, scratch]), "lr_sensitivity": lr}
    clause = answer_page.aside._swap_short(SimpleNamespace(tables=tables, networks=networks))
    assert clause.endswith(
        "(no swap back by 2.5 × that cost, nor at ×3 or ÷3 the lr on its first network), as is resetting every "
        "layer with the same retraining"
    )
    tables["lr_sensitivity"] = _swap_lr_rows([0.4, math.nan])
    clause = answer_page.aside._swap_short(SimpleNamespace(tables=tables, networks=networks))
    assert (
        "(no swap back by 2.5 × that cost; at ×3 the lr, `swap-wide` on its first network is back at 0.5 ×)" in clause
    )


def test_the_short_answer_says_when_a_stall_is_the_retrainings_drift():
    """A pair that refuses (its cells stalled short of ε) is said to be within ε of its matched control only when
    every stalled cell got there: then the gap to the baseline is what retraining alone adds."""
    from types import SimpleNamespace

    def cells(*uppers):
        return pd.DataFrame(
            {
                "kind": survival.LAYER,
                "outcome": "stalled",
                "threshold": 0.01,
                "control_upper": list(uppers),
                "regime": "frozen",
                "policy": "full",
                "init": "fresh",
            }
        )

    setting = ("frozen", "full", "fresh")
    drift = answer_page.short._drift_only
    assert drift(SimpleNamespace(tables={"network_costs": cells(1200.0, 800.0)}), setting, 0.01)
    assert not drift(SimpleNamespace(tables={"network_costs": cells(1200.0, math.inf)}), setting, 0.01)
    assert not drift(SimpleNamespace(tables={"network_costs": cells(math.nan)}), setting, 0.01)  # no control
    assert not drift(SimpleNamespace(tables={}), setting, 0.01)


@pytest.mark.parametrize(
    "refuses, drift_only, words",
    [
        (1, True, "1 refuses (stalled short of 1 %, though within 1 % of its matched control)"),
        (3, True, "3 refuse (stalled short of 1 %, though within 1 % of their matched control)"),
        (2, False, "2 refuse (stalled short of 1 %)"),
    ],
)
def test_the_short_answer_names_the_eps_a_refusal_falls_short_of(refuses, drift_only, words):
    assert answer_page.short._refuse_words(refuses, "1 %", drift_only) == words


def test_the_short_answer_where_nothing_is_back_says_how_many_pairs_are_not():
    """A budget too short for any layer: the short answer says none is back, and of how many pairs each verdict is;
    with one model the costliest layer is named without '1 of 1 models'."""
    summary, curves, networks = synthetic(thresholds=(0.01, 0.1), budget_fraction=0.01, seed=2)
    tables = answer_tables.compute(summary, curves, networks)
    short = next(
        l for l in answer_page.page(tables, summary, networks, LINKS).markdown().splitlines() if "In short" in l
    )
    at = tables["survival"][(tables["survival"]["kind"] == "layer") & (tables["survival"]["threshold"] == 0.01)]
    counts = answer_page.refusal.median_answers(at)
    assert "No reset layer is back within 1 % of its old validation loss by the end of the budget; " in short
    assert f"of the {len(at) - counts['not_damaged']} (model, layer) pairs" in short
    assert answer_page.position._costliest_words({"last": 1}, 1) == "the costliest layer is the last"
    assert answer_page.position._costliest_words({"first": 2, "last": 1}, 3).endswith(
        "first in 2 of 3 models, the last in 1"
    )


def test_how_sure_names_a_model_read_with_a_single_network():
    """A model read with one pretrained network (a study still running, read network by network) is named: its
    intervals cover retrain seeds only. The others' intervals are said as before, with their counts."""
    sentence = answer_page.view._clusters_sentence

    def nets(**per_model):
        rows = [(m, s) for m, n in per_model.items() for s in range(n)]
        return pd.DataFrame(rows, columns=["model", "pretrain_seed"]).assign(degenerate=False, off_plateau=False)

    mixed = sentence(nets(bart=1, gpt=3, other=3))
    assert mixed.startswith("`bart` has a single pretrained network here: its intervals resample retrain seeds only")
    assert "The other models' intervals (95 %) resample the pretrained networks, only 3 per model" in mixed
    assert sentence(nets(a=1, b=1, c=2)).startswith("Each of `a`, `b` has a single pretrained network here")
    assert sentence(nets(a=1, b=1)).startswith("Every model has a single pretrained network here")
    assert sentence(nets(a=2, b=3)) == (
        "Intervals (95 %) resample the pretrained networks, only 2 to 3 per model: read directions, not digits. "
        "With two, a median is the faster network's cost."
    )
