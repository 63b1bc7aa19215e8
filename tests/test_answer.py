"""The answer tables' verdict columns (``analysis/verdicts.py``) on small hand-built tables with hand-written
expected values; the page's number formats and its Markdown tidy-up; the README headline; the real Snakemake rule
on tables placed as its inputs; a page that cannot answer still renders. The shipped pages are compared with a
re-render from their shipped tables in tests/test_reference_study.py and tests/test_reference_fully_trained.py."""

import math
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
from selfheal.analysis import answer, answer_plots, answer_tables, page, verdicts
from selfheal.analysis.stats import DRIFT_TOLERANCE, cost_unit
from snakemake_helpers import pythonpath

ROOT = Path(__file__).resolve().parents[1]
warnings.filterwarnings("ignore", module="lifelines")
warnings.filterwarnings("ignore", module="autograd")
LINKS = {name: f"plots/{name}.html" for name in answer_plots.FIGURES}
INF, NAN = math.inf, math.nan


@pytest.fixture(scope="module")
def synthetic_page():
    summary, curves, networks = synthetic(thresholds=(0.05,), depth_effect=1.5, seed=0)
    tables = answer_tables.compute(summary, curves, networks)
    return tables, page.markdown(tables, summary, networks, LINKS)


def test_a_median_is_a_cost_a_refusal_not_answered_or_no_cost():
    assert verdicts.median_verdict(0.4, 0) == "recovered"
    assert verdicts.median_verdict(0.0, 0) == "recovered"  # back at the first evaluation
    assert verdicts.median_verdict(NAN, 0) == "not_damaged"
    assert verdicts.median_verdict(INF, 1) == "still_falling"
    assert verdicts.median_verdict(INF, 0) == "refuses"


def _survival(rows):
    columns = [
        "model",
        "target",
        "kind",
        "position",
        "depth",
        "median_fraction",
        "median_fraction_hi",
        "n_still_falling",
    ]
    t = pd.DataFrame(rows, columns=columns)
    return t.assign(
        regime="frozen",
        policy="full",
        init="fresh",
        threshold=0.01,
        pretrain_examples=1000.0,
        median_examples=t["median_fraction"] * 1000,
        median_fraction_lo=t["median_fraction"],
    )


def test_survival_verdicts_name_the_costliest_layer_and_the_cost_over_from_scratch():
    surv = _survival(
        [
            ("a", "L0", "layer", "first", 0, 0.9, 1.2, 0),
            ("a", "L1", "layer", "middle", 1, 0.2, 0.3, 0),
            ("a", "L2", "layer", "last", 2, INF, INF, 0),  # beyond the budget: the costliest
            ("a", "all", "set", "set", NAN, 5.0, 6.0, 0),  # not a single layer: never the costliest
            ("b", "L0", "layer", "first", 0, INF, INF, 2),  # two beyond the budget: the higher upper end is not
            ("b", "L1", "layer", "last", 1, INF, INF, 0),  # decisive (both inf), so the shallower one
            ("c", "L0", "layer", "first", 0, NAN, NAN, 0),  # never damaged: no cost
            ("c", "L1", "layer", "last", 1, 0.1, 0.2, 0),
        ]
    )
    ref = pd.DataFrame(
        {
            "model": ["a", "a", "a", "b", "c"],
            "pretrain_seed": [0, 1, 2, 0, 0],
            "threshold": 0.01,
            "examples": [400.0, 600.0, 10_000.0, NAN, 250.0],  # a's seed 2 is degenerate: left out
            "fraction": [0.4, 0.6, 10.0, NAN, 0.25],
        }
    )
    networks = pd.DataFrame(
        {
            "model": ["a", "a", "a", "b", "c"],
            "pretrain_seed": [0, 1, 2, 0, 0],
            "degenerate": [False, False, True, False, False],
            "source": "scratch",
        }
    )
    out = verdicts.survival_verdicts(surv, verdicts.scratch_means(ref, networks), networks).set_index(
        ["model", "target"]
    )
    assert out["verdict"].to_dict() == {
        ("a", "L0"): "recovered",
        ("a", "L1"): "recovered",
        ("a", "L2"): "refuses",
        ("a", "all"): "recovered",
        ("b", "L0"): "still_falling",
        ("b", "L1"): "refuses",
        ("c", "L0"): "not_damaged",
        ("c", "L1"): "recovered",
    }
    assert set(out.index[out["costliest"]]) == {("a", "L2"), ("b", "L0"), ("c", "L1")}
    assert out.loc[("a", "L0"), "scratch_examples"] == 500.0  # the mean of 400 and 600
    assert out.loc[("a", "L0"), "relative_to_scratch"] == pytest.approx(900 / 500)
    assert out.loc[("c", "L1"), "relative_to_scratch"] == pytest.approx(100 / 250)
    assert math.isnan(out.loc[("b", "L1"), "scratch_examples"])  # its pretraining never reached the loss


def test_a_median_beyond_the_budget_is_back_against_its_control_only_where_that_median_is_finite():
    key = {"model": "m", "regime": "frozen", "policy": "full", "init": "fresh", "threshold": 0.01}
    surv = pd.DataFrame([{**key, "target": t, "median_examples": math.inf} for t in ("L0", "L1", "L2")])
    control = pd.DataFrame(
        [
            {**key, "target": "L0", "median_examples": 5000.0},  # back against the control
            {**key, "target": "L1", "median_examples": math.inf},  # beyond the budget against it too
            {**key, "target": "L2", "threshold": 0.02, "median_examples": 800.0},  # another eps: does not count
        ]
    )
    out = verdicts.back_against_control(surv, control)
    assert out["back_against_control"].tolist() == [True, False, False]


def test_fit_verdicts_read_the_interval_of_the_factor():
    fit = pd.DataFrame(
        {
            "factor_lo": [1.2, 0.2, 0.5, NAN, 1.0],
            "factor_hi": [3.0, 0.8, 2.0, NAN, 4.0],
            "determined": [True, True, True, False, True],
        }
    )
    assert verdicts.fit_verdicts(fit)["verdict"].tolist() == [
        "raises the cost",
        "lowers the cost",
        "no clear effect",
        "not determined",
        "no clear effect",  # an interval that touches 1 includes it
    ]


def test_drift_beyond_the_tolerance_either_way():
    assert DRIFT_TOLERANCE == 0.25
    drift = pd.DataFrame({"drift_worst": [0.003, 0.002, -0.004, 0.0025]})
    assert verdicts.drift_verdicts(drift, 0.01)["beyond_tolerance"].tolist() == [True, False, True, False]


def test_a_network_past_its_minimum_by_more_than_the_tolerance_overfits():
    """past_minimum is in nats: the share of the baseline is what the tolerance (ε_min / 4) bounds."""
    flags = pd.DataFrame({"model": ["a", "a", "b"], "pretrain_seed": [0, 1, 0]})
    networks = flags.assign(past_minimum=[0.012, 0.008, 0.0], baseline_loss=[4.0, 4.0, 2.0])
    out = verdicts.flag_verdicts(flags, networks, 0.01)
    assert out["past_minimum_share"].tolist() == [0.003, 0.002, 0.0]
    assert out["overfit"].tolist() == [True, False, False]


def test_an_aside_row_is_slower_than_scratch_by_its_median_or_its_budget():
    aside = pd.DataFrame(
        {
            "model": ["a"] * 6,
            "threshold": [0.05] * 6,
            "item": ["encoder_swap", "encoder_swap", "donor_swap", "scratch", "reset_all", "encoder_layer"],
            "median": [0.5, INF, INF, 0.4, NAN, INF],
            "median_lo": [0.4, INF, INF, 0.3, NAN, INF],
            "n_still_falling": [0, 2, 0, 0, 0, 0],
            "relative_to_scratch": [1.25, INF, INF, 1.0, NAN, INF],
            "budget_relative_to_scratch": [3.0, 3.0, 0.8, NAN, 3.0, 2.0],
            # the last: stalled short of its baseline, but back within ε of its matched control
            "control_median": [NAN, NAN, NAN, NAN, NAN, 0.3],
        }
    )
    out = verdicts.encoder_decoder_verdicts(aside)
    assert out["slower_than_scratch"].tolist() == [True, True, False, False, False, True]
    assert out["verdict"].tolist() == [
        "recovered",
        "still_falling",
        "refuses",
        "recovered",
        "not_damaged",
        "back_to_control",
    ]


def test_an_aside_row_acts_as_if_the_whole_model_had_been_reset_from_the_lower_end_of_its_interval():
    """Reset-all costs 0.8 [0.6, 1.2] in model a: a row at 0.6 or more (or beyond the budget) acts like it, one at
    0.5 does not; model b has no every-layer reset, so its row has no verdict; neither have scratch and reset_all."""
    aside = pd.DataFrame(
        {
            "model": ["a"] * 6 + ["b"],
            "threshold": [0.05] * 7,
            "item": [
                "reset_all",
                "donor_stitch",
                "all_cross_attention",
                "donor_swap",
                "scratch",
                "encoder_layer",
                "donor_swap",
            ],
            "median": [0.8, 0.5, 0.6, INF, 0.7, NAN, 2.0],
            "median_lo": [0.6, 0.4, 0.5, INF, 0.6, NAN, 1.0],
            "n_still_falling": [0] * 7,
            "relative_to_scratch": [NAN] * 7,
            "budget_relative_to_scratch": [NAN] * 7,
            "control_median": [NAN] * 7,
        }
    )
    got = verdicts.encoder_decoder_verdicts(aside)["like_reset_all"].tolist()
    assert [None if pd.isna(v) else bool(v) for v in got] == [None, False, True, True, None, False, None]


def test_another_lr_is_faster_below_nine_tenths_of_the_chosen_cost_or_where_the_chosen_did_not_recover():
    lr = pd.DataFrame(
        {
            "recovered": [True, True, True, False, True],
            "examples": [80.0, 95.0, 500.0, NAN, NAN],
            "chosen_recovered": [True, True, False, True, True],
            "chosen_examples": [100.0, 100.0, NAN, 100.0, 100.0],
        }
    )
    assert verdicts.lr_verdicts(lr)["faster"].tolist() == [True, False, True, False, False]


def test_a_cell_is_back_against_its_control_where_its_control_crossing_is_finite():
    costs = pd.DataFrame({"control_upper": [100.0, INF, NAN]})
    assert verdicts.network_cost_verdicts(costs)["back_against_control"].tolist() == [True, False, False]


def test_the_cost_unit_is_examples_for_a_model_you_bring():
    rows = pd.DataFrame({"model": ["a", "b"], "pretrain_examples": [1000, 2000]})
    here = pd.DataFrame({"model": ["a", "b", "c"], "source": ["scratch", "scratch", "pretrained"]})
    assert cost_unit(rows, here) == "fraction"  # c is not among the rows
    assert cost_unit(rows, here.assign(source=["scratch", "pretrained", "scratch"])) == "examples"
    assert cost_unit(rows.assign(pretrain_examples=[1000, None]), here) == "examples"  # S x E unknown
    assert cost_unit(rows, rows) == "fraction"  # a table without sources: pretrained here


def test_compute_adds_every_verdict_column(synthetic_page):
    tables, _ = synthetic_page
    for name, columns in (
        (
            "survival",
            [
                "verdict",
                "costliest",
                "scratch_examples",
                "scratch_fraction",
                "relative_to_scratch",
                "back_against_control",
            ],
        ),
        ("against_control", ["verdict", "costliest", "relative_to_scratch"]),
        ("fit", ["verdict"]),
        ("control_drift", ["beyond_tolerance"]),
        ("networks_flags", ["past_minimum_share", "overfit", "source"]),
        ("encoder_decoder", ["verdict", "slower_than_scratch", "like_reset_all"]),
        ("network_costs", ["back_against_control"]),
    ):
        assert set(columns) <= set(tables[name].columns), name
    surv = tables["survival"]
    layers = surv[surv["kind"] == "layer"]
    assert layers.groupby(["model", "regime", "policy", "init", "threshold"])["costliest"].sum().eq(1).all()


def test_number_formats():
    assert [page.num(x) for x in (0.0123, 0.5, 1.234, 12345.6, 0.00123, 0, INF, NAN)] == [
        "0.012", "0.5", "1.23", "12,346", "0.00123", "0", "∞", "n/a"
    ]  # fmt: skip
    assert page.cost(INF) == "> B" and page.cost(NAN) == "not damaged"
    assert page.interval({"m": 0.3, "m_lo": 0.2, "m_hi": INF}, "m") == "0.3 [0.2, > B]"
    assert page.interval({"m": 0.3, "m_lo": 0.3, "m_hi": 0.3}, "m") == "0.3"
    assert page.span([0.2, INF, 0.05]) == "0.05 to 0.2" and page.span([INF]) == ""
    assert page.counted({"last": 2, "first": 3}) == "the first in 3 of 5 models, the last in 2"
    assert page.multiplier(3.0) == "×3" and page.multiplier(0.3333) == "÷3"
    assert page.quoted(["a", "b", "c"]) == "`a`, `b` and `c`"
    assert page.times(2.71, approx=True) == "≈ 2.7 ×" and page.times(INF) == "—"


def test_the_markdown_has_one_blank_line_between_blocks():
    text = "# t\npara\n\n\n| a |\n|---|\n| 1 |\nafter\n- x\n- y\n## h\n"
    assert page._tidy(text) == "# t\n\npara\n\n| a |\n|---|\n| 1 |\n\nafter\n\n- x\n- y\n\n## h\n"


def test_the_html_is_the_markdown_rendered(synthetic_page):
    _, md = synthetic_page
    html = page.html(md)
    assert html.count("<h2>") == md.count("\n## ") and html.count("<table>") == md.count("\n|---")
    assert "<code>answer/survival.parquet</code>" in html


def test_the_synthetic_page_states_the_tables_numbers(synthetic_page):
    """The headline table's per-model range is the span of the survival table's finite single-layer medians."""
    tables, md = synthetic_page
    surv = tables["survival"]
    layers = surv[(surv["kind"] == "layer") & (surv["policy"] == "full") & (surv["init"] == "fresh")]
    head = answer.short(md)
    for model, g in layers.groupby("model"):
        row = next(line for line in head.splitlines() if line.startswith(f"| {model} |"))
        assert f"| {page.span(g['median_fraction'])}" in row
    assert len(md.encode()) < 25_000


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


def test_pages_that_cannot_answer_still_render():
    summary, curves, networks = synthetic(models=(("m", 2, 32),), pretrain_seeds=(0,), seeds=(0,), thresholds=(0.05,))
    only_sets = summary[summary["layer"].isna()]
    tables = answer_tables.compute(only_sets, curves, networks)
    md = page.markdown(tables, only_sets, networks, LINKS)
    assert "no single-layer cells" in answer.short(md)
    censored = summary.copy()
    censored["recovered"] = False
    censored["examples_hi"] = pd.array([pd.NA] * len(censored), dtype="Int64")
    censored["examples_lo"] = censored["budget_examples"]
    from selfheal.analysis import tables as summary_tables

    censored = summary_tables.add_outcomes(censored, curves)
    tables = answer_tables.compute(censored, curves, networks)
    page.markdown(tables, censored, networks, LINKS)
    assert np.isinf(tables["survival"]["median_examples"]).all()
    assert set(tables["survival"]["verdict"]) <= {"refuses", "still_falling"}
    for name, draw in answer_plots.FIGURES.items():  # every figure draws, empty or not
        draw(tables, curves).to_dict()


def test_a_model_you_bring_is_costed_in_examples_and_as_a_share_of_its_own_pretraining():
    """A model not pretrained here (an adapted download): its costs are in examples (``cost_unit``), and where its
    config gives its own pretraining tokens, the headline states its single-layer medians in tokens as a share of
    them (the medians × 64 tokens per example / 2 T, by hand below)."""
    summary, curves, networks = synthetic(models=(("smollm2-135m", 3, 64),), thresholds=(0.05,), seed=5)
    networks["source"] = "pretrained"
    networks["pretraining_tokens"] = pd.array([2 * 10**12] * len(networks), dtype="Int64")
    tables = answer_tables.compute(summary, curves, networks)
    assert (tables["networks_flags"]["source"] == "pretrained").all()
    assert (tables["networks_flags"]["pretraining_tokens"] == 2 * 10**12).all()
    md = page.markdown(tables, summary, networks, LINKS)
    head = answer.short(md)
    layers = tables["survival"][tables["survival"]["kind"] == "layer"]
    finite = layers.loc[np.isfinite(layers["median_examples"]), "median_examples"]
    lo, hi = finite.min() * 64 / 2e12, finite.max() * 64 / 2e12
    share = f"{page.sci(lo)} to {page.sci(hi)}"
    assert share.count("e-") == 2
    assert f"one reset layer needs {share} of its own 2T pretraining tokens within 5 %" in head
    row = next(r for r in head.splitlines() if r.startswith("| smollm2-135m |"))
    assert "| not pretrained here; adaptation: 8,000 sequences × 5 |" in row and f"| {share} |" in row
    assert "(examples" in head and "fraction of S × E" not in head


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


def test_readme_headline_is_regenerated(tmp_path, synthetic_page):
    _, md = synthetic_page
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
    assert page.interval(l1, "median_fraction") in md


def test_load_names_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="results_dir"):
        results.load(tmp_path / "nowhere")


def test_a_readme_with_two_headlines_gets_each_from_its_own_page(tmp_path, synthetic_page):
    """A README that carries the headlines of two pages (each block after the line naming its page) has only the
    named page's block replaced; the other page's block stays as it was."""
    _, md = synthetic_page
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
