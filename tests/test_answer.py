"""The answer page and tables: two different synthetic grids give different numbers and verdicts; grids that cannot
answer (one network, everything censored, no layer cells) still give a page that says so; the real Snakemake rule
runs on tables placed as its inputs; selfheal.results.load reads them back."""

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
from selfheal.analysis import answer, answer_page, answer_plots, answer_tables
from selfheal.analysis import tables as summary_tables

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


# The page's numbers are read back as numbers and compared with the tables' (not with strings made by the page's own
# formatters): shown to 3 significant digits or 3 decimals, counts with a k / M / B suffix.
NUMBER = r"-?[0-9][0-9,]*(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?[kMB]?"


def _value(text: str) -> float:
    scale = {"k": 1e3, "M": 1e6, "B": 1e9}.get(text[-1], 1.0)
    return float(text.rstrip("kMB").replace(",", "")) * scale


def _shows(text: str, value: float) -> bool:
    """Whether ``text`` shows ``value`` (to the page's rounding) among its numbers."""
    return any(abs(_value(x) - value) <= 5e-3 * abs(value) + 5e-4 for x in re.findall(NUMBER, text))


def _cost_shown(row: str) -> tuple[float, float, float]:
    """The first 'value [lo, hi]' of a table row."""
    match = re.search(rf"\| ({NUMBER}) \[({NUMBER}), ({NUMBER})\]", row)
    assert match, row
    return tuple(_value(x) for x in match.groups())


def _assert_cost(row: str, surv_row: pd.Series, unit: str = "fraction") -> None:
    want = [surv_row[f"median_{unit}"], surv_row[f"median_{unit}_lo"], surv_row[f"median_{unit}_hi"]]
    assert all(np.isfinite(want)), want
    assert _cost_shown(row) == pytest.approx(want, rel=5e-3, abs=5e-4), (row, want)


@pytest.fixture(scope="module")
def deeper_costs_more():
    return _page(depth_effect=1.5, seed=0)


@pytest.fixture(scope="module")
def deeper_costs_less():
    return _page(depth_effect=-3.0, seed=0, degenerate=(("gpt2-n2-d64", 1),), off_plateau=(("gpt2-n4-d64", 0),))


def test_page_numbers_and_verdicts_follow_the_tables(deeper_costs_more, deeper_costs_less):
    (more_tables, more), (less_tables, less) = deeper_costs_more, deeper_costs_less
    depth_line = "relative depth L / (N - 1), 0 to 1"
    verdict_more = next(line for line in more.splitlines() if depth_line in line and line.startswith("| regime"))
    verdict_less = next(line for line in less.splitlines() if depth_line in line and line.startswith("| regime"))
    assert "raises the cost" in verdict_more and "lowers the cost" in verdict_less
    # the page's numbers are the tables' numbers
    fit = more_tables["fit"].set_index("term").loc["rel_depth"]
    assert fit["coef"] > 0.5 and _shows(verdict_more, fit["coef"]), (fit["coef"], verdict_more)
    assert _shows(verdict_more, fit["coef_lo"]) and _shows(verdict_more, fit["coef_hi"])
    surv = more_tables["survival"]
    l3 = surv[(surv["model"] == "gpt2-n4-d64") & (surv["target"] == "L3")].iloc[0]
    _assert_cost(_row(more, "gpt2-n4-d64", "L3"), l3)
    assert _row(more, "gpt2-n4-d64", "L3") != _row(less, "gpt2-n4-d64", "L3")
    l0_more = float(re.search(r"\| ([0-9.]+) \[", _row(more, "gpt2-n4-d64", "L0")).group(1))
    l3_more = float(re.search(r"\| ([0-9.]+) \[", _row(more, "gpt2-n4-d64", "L3")).group(1))
    assert l3_more > l0_more
    # undetermined factors are said so, never zero
    assert "log D (width) | — | — | not determined by this grid: it does not vary" in more
    assert "Not determined by this grid (no such model): encoder-only, encoder-decoder" in more
    # caveats: the degenerate network is listed and left out, the off-plateau one flagged, few clusters said
    assert "gpt2-n2-d64 pretraining seed 1 is **degenerate**" in less and "degenerate" not in more.split("## 7.")[1]
    assert "still improving at the end of pretraining" in less
    assert "wide and rough" in more
    n2 = less_tables["survival"]
    assert (n2[n2["model"] == "gpt2-n2-d64"]["n_clusters"] == 1).all()
    for section in range(1, 9):
        assert f"## {section}. " in more
    assert "Tamkin et al. 2020" in more and "Gromov et al. 2024" in more


def test_page_states_the_cost_in_three_units(deeper_costs_more):
    tables, md = deeper_costs_more
    surv = tables["survival"]
    layers = surv[(surv["model"] == "gpt2-n4-d64") & (surv["kind"] == "layer") & (surv["threshold"] == 0.05)]
    ref = tables["pretrain_reference"]
    scratch = ref[(ref["model"] == "gpt2-n4-d64") & (ref["threshold"] == 0.05)]["examples"].mean()
    finite = layers[np.isfinite(layers["median_examples"])]
    low = finite.loc[finite["median_examples"].idxmin()]
    line = next(row for row in md.splitlines() if row.startswith("| gpt2-n4-d64 | 0.05 |"))  # §1's units table
    # fraction of S x E, examples, tokens (64 per example), x what pretraining needed: all from the tables
    cells = [c.strip() for c in line.split("|")[1:-1]]
    shown = [_value(re.match(NUMBER, c).group(0)) for c in cells[2:6]]  # each column's 'low to high'
    want = [low["median_fraction"], low["median_examples"], low["median_examples"] * 64,
            low["median_examples"] / scratch]
    assert shown == pytest.approx(want, rel=5e-3, abs=5e-4), (line, want)
    assert " (rough) " in line  # the pretraining curve's evaluations are 4,000 examples apart
    row = next(r for r in answer.headline(md).splitlines() if r.startswith("| gpt2-n4-d64 (decoder-only) |"))
    assert row.count("|") == 8  # the headline's per-model table: model, N, D, S x E, one ε here, reset-all, relative
    assert "| model | ε | fraction of S × E | examples | tokens | × pretraining from scratch |" in md
    assert "survival median in examples divided by the mean" in md  # the page says how the relative unit is made
    assert ref["coarse"].all() and ref["examples"].notna().all()


# Columns the synthetic tables leave empty on purpose: no synthetic cell diverges, and a curve's train loss is not
# read by the answer statistics.
EMPTY_IN_SYNTHETIC = {"diverged_step", "train_loss"}


def test_synthetic_tables_follow_the_real_schema():
    """The synthetic tables the answer tests run on have the columns of the real summary, curves and networks
    tables (analysis/tables.py), in order, each with values: a column added to a real table and not given values in
    tests/answer_helpers.py fails here."""
    from selfheal.analysis import tables

    summary, curves, networks = synthetic(extra_targets=True, seed=8)
    for name, table, columns in (("summary", summary, tables.SUMMARY_COLUMNS), ("curves", curves, tables.CURVE_COLUMNS),
                                 ("networks", networks, tables.NETWORK_COLUMNS)):
        assert list(table.columns) == columns, name
        empty = [c for c in columns if table[c].isna().all() and c not in EMPTY_IN_SYNTHETIC]
        assert not empty, f"tests/answer_helpers.py gives the {name} table's columns {empty} no values"
    assert summary["scratch_examples"].notna().any() and summary["relative_to_scratch"].notna().any()
    assert set(curves["replay"]) == {False}


def test_size_ordering_on_a_toy_networks_table():
    networks = toy_networks({
        ("n2d32", 2, 32): [4.50, 4.40], ("n2d64", 2, 64): [4.20, 4.25],  # D at N = 2: falls 0.225 > spread 0.1
        ("n4d32", 4, 32): [4.50, 4.52],  # N at D = 32: rises 0.06 < spread 0.1
        ("n4d64", 4, 64): [4.25, 4.45],  # D at N = 4: falls 0.16 < spread 0.2; N at D = 64: rises 0.125 < 0.2
        ("n8d16", 8, 16): [3.0],  # differs from every other model in both N and D: in no pair
    })
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
    mixed = pd.concat([toy_networks({("a", 2, 32): [4.0]}), toy_networks({("b", 4, 32): [4.1]}, arch="llama"),
                       toy_networks({("c", 2, 64): [3.9]}, source="pretrained")])
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
    assert "n2d32 → n2d64 (D 32 → 64): 4.450 → 4.225, difference -0.225 (spread 0.100 over 2 seeds): holds" in md
    assert "n4d32 → n4d64 (D 32 → 64)" in md
    assert "does not hold: it does not fall by more than the seed spread" in md
    assert ("n4d64 seed 1: loss 4.450, unigram 5.500, bigram 4.800 (λ = 0.6), margin over the bigram +0.350 nats; "
            "S = 8,000, E = 5 (40,000 examples, 2.56M tokens)") in md
    assert "at fixed N the baseline falls with D in 1 of 2 pairs" in answer.headline(md)


def test_degenerate_reason_reaches_the_caveats(deeper_costs_less):
    tables, md = deeper_costs_less
    flags = tables["networks_flags"].set_index(["model", "pretrain_seed"])
    assert flags.loc[("gpt2-n2-d64", 1), "degenerate_reason"] == "reset_all_harmless"
    assert flags.loc[("gpt2-n4-d64", 0), "degenerate_reason"] == ""
    assert ("gpt2-n2-d64 pretraining seed 1 is **degenerate** (resetting every layer did less damage than ε_min)"
            in md)


@pytest.mark.parametrize("factor,words", [(1.04, "the same retraining raised the intact network's loss by as much "
                                                  "as 4.00 %"),
                                          (0.96, "as much as 4.00 % below: a recovery to within an ε near that drift "
                                                 "is partly further training")])
def test_the_control_drift_caveat_says_which_way_the_loss_moved(factor, words):
    summary, curves, networks = synthetic(thresholds=(0.05,), off_plateau=(("gpt2-n4-d64", 0),), seed=0)
    ends = curves["init"].eq("trained") & curves["model"].eq("gpt2-n4-d64") & curves["pretrain_seed"].eq(0)
    last = ends & (curves["examples"] == curves.loc[ends, "examples"].max())
    base = networks.set_index(["model", "pretrain_seed"]).loc[("gpt2-n4-d64", 0), "baseline_loss"]
    curves.loc[last, "val_loss"] = base * factor
    md = answer_page.page(answer_tables.compute(summary, curves, networks), summary, networks, LINKS).markdown()
    line = next(x for x in md.splitlines() if x.startswith("- gpt2-n4-d64 pretraining seed 0 was still improving"))
    assert words in line, line


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
    assert "none reached" in md and "not fitted: every cell censored" in md
    assert np.isinf(tables["survival"]["median_examples"]).all()
    for name, draw in answer_plots.FIGURES.items():  # every figure draws, empty or not
        draw(tables, curves).to_dict()


def test_readme_headline_is_regenerated(tmp_path, deeper_costs_more):
    _, md = deeper_costs_more
    page = tmp_path / "answer.md"
    page.write_text(md)
    readme = tmp_path / "README.md"
    stale = "a stale headline"
    readme.write_text(f"# x\n\n## The answer\n\n{answer.HEADLINE[0]}\n{stale}\n{answer.HEADLINE[1]}\n\n## next\n")
    subprocess.run([sys.executable, "-m", "selfheal.analysis.answer", "--readme", str(page), str(readme)], check=True,
                   cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    text = readme.read_text()
    assert stale not in text and answer.headline(md) in text and text.endswith("## next\n")


@pytest.mark.e2e
def test_answer_rule_runs_on_tables_placed_as_inputs(tmp_path):
    summary, curves, networks = synthetic(models=(("gpt2-n2-d64", 2, 64),), thresholds=(0.05,), seed=7)
    folder = tmp_path / "results"
    folder.mkdir()
    for name, table in (("summary", summary), ("curves", curves), ("networks", networks)):
        table.to_parquet(folder / f"{name}.parquet")
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--cores", "1", "--allowed-rules", "answer", "--", "results/answer.md"]
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
    _assert_cost(_row(md, "gpt2-n2-d64", "L1"), l1)


def test_load_names_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="results_dir"):
        results.load(tmp_path / "nowhere")
