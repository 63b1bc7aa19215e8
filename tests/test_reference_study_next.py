"""The finished part of the reference study being re-run (config/study_next.yaml), shipped in
reference/study_next/finished/ (read with partial: networks): it names exactly the models and networks it leaves out,
every network it reads passes the gates with three networks per model once those left out are counted, every budget passes the from-scratch cost, the page is what
the shipped tables make, and the README carries its headline. Fast: reads the shipped files only. When the study
ships whole to reference/study/, reference/study_next/ship/test_reference_study.py replaces this file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from selfheal import results
from selfheal.analysis import answer, answer_page, answer_plots

ROOT = Path(__file__).resolve().parents[1]
FINISHED = ROOT / "reference" / "study_next" / "finished"
EPS = 0.01


@pytest.fixture(scope="module")
def study():
    return results.load(FINISHED)


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load((ROOT / "config" / "study_next.yaml").read_text())


def test_it_reads_the_finished_models_and_names_the_rest(study, config):
    assert set(results.TABLES) | set(answer.TABLES) | {answer.LEFT_OUT} <= set(study)
    names = [m["name"] for m in config["models"]]
    read = set(study["networks"]["model"])
    left_out = study[answer.LEFT_OUT]
    not_read = set(left_out.loc[left_out["part"] == "model", "model"])
    assert read.isdisjoint(not_read) and read | not_read == set(names)
    assert set(study["summary"]["model"]) <= read
    head = answer.headline((FINISHED / "answer.md").read_text())
    assert all(f"`{m}`" in head for m in not_read)  # the headline names every model it leaves out
    networks = left_out[left_out["part"].str.startswith("network ")]
    for model, g in networks.groupby("model"):  # and every network left out of a model it reads
        assert model in read and f"`{model}` {' and '.join(g['part'].str.removeprefix('network '))}" in head


def test_every_network_read_passes_the_gates_three_per_model(study):
    networks = study["networks"]
    flagged = networks[networks["degenerate"].astype(bool) | networks["off_plateau"].astype(bool)]
    assert flagged.empty, flagged[["model", "pretrain_seed", "degenerate_reason", "plateau_gain"]]
    assert (networks["bigram_margin"] > 0.1).all() and networks["plateau_examples"].notna().all()
    healed = networks[networks["model"].isin(set(study["summary"]["model"]))]
    left_out = study[answer.LEFT_OUT]
    unfinished = left_out[left_out["part"].str.startswith("network ")].groupby("model").size()
    read = healed.groupby("model")["pretrain_seed"].nunique()
    assert (read + unfinished.reindex(read.index, fill_value=0) == 3).all(), read  # three each, some not finished yet


def test_budgets_pass_each_networks_from_scratch_cost(study):
    summary = study["summary"]
    cells = summary[(summary["threshold"] == EPS) & (summary["init"] != "trained") & (summary["target"] != "none")]
    assert len(cells) and cells["scratch_examples"].notna().all()
    assert (cells["budget_examples"] > cells["scratch_examples"]).all()


def test_the_page_is_generated_from_the_shipped_tables(study):
    page = (FINISHED / "answer.md").read_text()
    tables = {name: study[name] for name in [*answer.TABLES, answer.LEFT_OUT, answer.LR_SENSITIVITY] if name in study}
    links = {name: f"plots/{name}.png" for name in answer_plots.FIGURES}
    assert answer_page.page(tables, study["summary"], study["networks"], links).markdown() == page
    for link in re.findall(r"\]\((plots/[^)]+)\)", page):
        assert link.endswith(".png") and (FINISHED / link).is_file(), link
    assert sum(p.stat().st_size for p in FINISHED.rglob("*") if p.is_file()) < 8 * 2**20


def test_readme_headline_is_its_page_headline():
    page = (FINISHED / "answer.md").read_text()
    text = (ROOT / "README.md").read_text()
    marker = answer.source_marker("reference/study_next/finished/answer.md")
    assert marker in text and answer.headline(page) in text[text.index(marker) :]
