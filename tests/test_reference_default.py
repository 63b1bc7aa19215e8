"""The default grid's run shipped in reference/default/ (config/config.yaml, `snakemake --cores 2`): the grid its
config claims, every network fully trained by the patience rule and past the gates, the recipe raced with no winner
at an edge, the sizes compared like for like, an ε the page states, and its headline in the README. Fast: reads the
shipped files only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from selfheal import results
from selfheal.analysis import answer, page

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "reference" / "default"
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def run():
    return results.load(RUN)


def test_the_grid_is_the_default_config_s(run):
    networks, summary = run["networks"], run["summary"]
    assert sorted(networks["model"].unique()) == ["gpt2-n2-d32", "gpt2-n3-d32"]
    assert sorted(m["name"] for m in CONFIG["models"]) == ["gpt2-n2-d32", "gpt2-n3-d32"]
    assert (networks.groupby("model")["pretrain_seed"].nunique() == 3).all()
    assert (networks["train_sequences"] == 800).all() and (networks["d_model"] == 32).all()
    assert sorted(summary["threshold"].unique()) == [0.02, 0.05, 0.10]
    assert set(summary.loc[summary["model"] == "gpt2-n3-d32", "target"]) == {"L0", "L1", "L2", "none", "all"}


def test_every_network_is_fully_trained_and_past_the_gates(run):
    networks = run["networks"]
    assert (networks["stopped_by"] == "patience").all()  # each at its validation minimum, not cut by max_epochs
    assert not networks["off_plateau"].any() and not networks["degenerate"].any()
    assert (networks["bigram_margin"] > 0.1).all()
    assert (networks["epochs"] < CONFIG["pretrain"]["max_epochs"]).all()
    assert not networks["lr_at_edge"].any()
    ordering = run["size_ordering"]
    assert len(ordering) == 1 and ordering["varied"].tolist() == ["n_layer"] and ordering["holds"].all()


def test_the_race_winners_lie_inside_the_grid(run):
    cells = run["summary"]
    raced = cells[(cells["init"] == "fresh") & (cells["examples"] > 0)]
    assert len(raced) and not raced["lr_at_edge"].fillna(False).astype(bool).any()


def test_the_page_states_an_answer_and_says_why_not_at_2_and_5_percent(run):
    resolved = run["resolved_eps"].set_index("threshold")
    assert resolved.loc[0.10, "headline"]
    assert not resolved.loc[0.02, "headline"] and resolved.loc[0.02, "reason"] == "controls"
    # the controls are read where the costs are: at the 2 % crossings, beyond 0.5 %; at 5 %, middle and last layers
    # cross before their controls' first evaluation, which reads +1.44 % there (the restart's jump), beyond 1.25 %
    assert abs(resolved.loc[0.02, "crossing_drift"]) > 0.005 and resolved.loc[0.02, "n_crossings"] > 0
    assert not resolved.loc[0.05, "headline"] and resolved.loc[0.05, "reason"] == "controls"
    assert resolved.loc[0.05, "crossing_drift"] == pytest.approx(0.01444, abs=5e-5)
    page = (RUN / "answer.md").read_text()
    assert "**Which ε:** stated 10 %. Not stated: 2 % (where a cell crossed it" in page
    assert "; 5 % (beyond ε / 4 = 1.25 %)." in page


def test_the_readme_carries_its_headline():
    readme = (ROOT / "README.md").read_text()
    block = answer.headline((RUN / "answer.md").read_text())
    assert "<!-- headline of reference/default/answer.md -->" in readme and block in readme


def test_s_x_e_states_the_range_of_its_networks_epochs(run):
    net = pd.Series({"train_sequences": 800, "epochs": 24.0, "source": "scratch"})
    assert page._sxe(net, pd.Series([24.0, 29.0, 27.0])) == "800 × 24–29"  # each network's race found its own E
    assert page._sxe(net, pd.Series([24.0, 24.0])) == "800 × 24"
    assert "| gpt2-n2-d32 | 2 × 32 | 800 × 24–29 |" in (RUN / "answer.md").read_text()
