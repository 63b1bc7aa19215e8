"""The lr-sensitivity check (retrain.lr_sensitivity; selfheal.heal.lr_sensitivity, analysis.lr_sensitivity, the
answer page's sentence): which cells it heals again, that it leaves the grid's settings alone, the sentence, and a
real Snakemake run of tests/tiny.yaml's tinyB with the key set (tinyA's resets are not damaged beyond ε in the tiny
run, so only tinyB's one layer shows a cost that an lr can move)."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from selfheal import config, grid
from selfheal.analysis import page, verdicts
from selfheal.heal import lr_sensitivity

ROOT = Path(__file__).resolve().parents[1]
MULTIPLIERS = [3.0, 0.3333]


def _config(policies=("mlp", "full"), **retrain) -> dict:
    raw = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    raw["models"][0].pop("frozen_random")
    raw["models"][0]["n_layer"] = 3
    raw["pretrain"]["seeds"] = [4, 2]
    raw["grid"].update(seeds=[7, 1], policies=list(policies), inits=["fresh", "original"], regimes=["layer", "frozen"])
    raw["retrain"].update(retrain)
    return config.resolve(raw)


def test_cells_are_the_first_and_last_layer_of_the_first_network_and_the_grids_first_settings():
    cfg = _config(lr_sensitivity=MULTIPLIERS)
    tiny_a, tiny_b = cfg["models"]
    first = {"policy": "mlp", "init": "fresh", "regime": "layer", "seed": 7, "pretrain_seed": 4}
    assert lr_sensitivity.cells(cfg, tiny_a) == [
        grid.Cell("tinyA", "L0", **first),
        grid.Cell("tinyA", "L2", **first),
    ]
    assert lr_sensitivity.cells(cfg, tiny_b) == [grid.Cell("tinyB", "L0", **first)]  # one layer: one cell
    assert set(lr_sensitivity.cells(cfg, tiny_a)) <= set(grid.cells(cfg))  # each has its cost at the chosen lr
    off = _config()
    assert lr_sensitivity.cells(off, off["models"][0]) == []  # off by default


def test_further_targets_join_the_two_layers_and_a_target_without_a_cell_is_refused():
    """retrain.lr_sensitivity_targets adds cells of the first network in the grid's first settings (here the
    reset-all control, beside the first and last layer); it changes no network's settings; a target the grid makes
    no such cell of is refused before any job, naming the key and the targets there are."""
    cfg = _config(("full", "mlp"), lr_sensitivity=MULTIPLIERS, lr_sensitivity_targets=["all"])
    tiny_a = cfg["models"][0]
    first = {"policy": "full", "init": "fresh", "regime": "layer", "seed": 7, "pretrain_seed": 4}
    assert lr_sensitivity.cells(cfg, tiny_a) == [
        grid.Cell("tinyA", "L0", **first),
        grid.Cell("tinyA", "L2", **first),
        grid.Cell("tinyA", "all", **first),
    ]
    assert grid.network_config(tiny_a, 4) == grid.network_config(_config(("full", "mlp"))["models"][0], 4)
    with pytest.raises(config.ConfigError) as err:
        _config(("full", "mlp"), lr_sensitivity=MULTIPLIERS, lr_sensitivity_targets=["all", "swap32"])
    assert err.value.key == "retrain.lr_sensitivity_targets[1]" and "'swap32' is no target of 'tinyA'" in str(err.value)
    assert "L0, L1, L2, all" in str(err.value)


def test_a_further_target_is_judged_as_the_layers_are():
    table = pd.DataFrame(
        _rows("L3", 3, 0.2, [(3.0, 0.1)])
        + _rows("L0", 0, 0.31, [(3.0, 0.25)])
        + _rows("swap-d64", None, None, [(3.0, 0.8)])
    )
    at = verdicts.lr_verdicts(table)
    assert at[at["threshold"] == 0.01].set_index("target")["faster"].to_dict() == {
        "L3": True,  # 0.1 against 0.2
        "L0": True,  # 0.25 against 0.31: under 0.9 of it
        "swap-d64": True,  # recovered where the chosen lr did not
    }


def test_the_key_changes_no_network_or_cell_settings():
    """A network's settings (every job's param, every staged cell's fingerprint) are the same with the key on or
    off, and so are the grid's cells: turning it on re-runs no cell."""
    on, off = _config(lr_sensitivity=MULTIPLIERS), _config()
    assert on["models"][0]["retrain"]["lr_sensitivity"] == MULTIPLIERS
    for m_on, m_off in zip(on["models"], off["models"], strict=True):
        assert grid.network_config(m_on, 4) == grid.network_config(m_off, 4)
    assert grid.cells(on) == grid.cells(off)


def _rows(target, depth, chosen, runs) -> list[dict]:
    """Rows of the lr-sensitivity table at eps 0.01 (and a 0.05 row that the sentence must not use)."""
    out = []
    for multiplier, fraction in runs:
        for eps, f in ((0.01, fraction), (0.05, 0.001)):
            out.append(
                {
                    "model": "m",
                    "target": target,
                    "depth": depth,
                    "threshold": eps,
                    "lr_multiplier": multiplier,
                    "chosen_lr": 0.002,
                    "recovered": f is not None,
                    "fraction_of_pretrain": f,
                    "examples": None if f is None else int(f * 1000),
                    "chosen_recovered": chosen is not None,
                    "chosen_fraction_of_pretrain": chosen if eps == 0.01 else 0.001,
                    "chosen_examples": None if chosen is None else int(chosen * 1000),
                }
            )
    return out


def test_each_multiple_is_judged_against_the_chosen_lr():
    table = pd.DataFrame(
        _rows("L3", 3, 0.2, [(3.0, None), (0.3333, 0.5)]) + _rows("L0", 0, 0.31, [(3.0, 0.25), (0.3333, 0.52)])
    )
    at = verdicts.lr_verdicts(table)
    at = at[at["threshold"] == 0.01].set_index(["target", "lr_multiplier"])["faster"]
    assert at.to_dict() == {("L3", 3.0): False, ("L3", 0.3333): False, ("L0", 3.0): True, ("L0", 0.3333): False}


def test_a_faster_lr_only_beyond_the_crossings_resolution():
    """A multiple that recovers where the chosen lr did not, or at under 0.9 of its cost, is faster; one within
    the resolution of a crossing (0.30 against 0.31) is not."""
    close = verdicts.lr_verdicts(pd.DataFrame(_rows("L0", 0, 0.31, [(3.0, 0.30), (0.3333, 0.52)])))
    assert not close.loc[close["threshold"] == 0.01, "faster"].any()
    censored = verdicts.lr_verdicts(pd.DataFrame(_rows("L0", 0, None, [(3.0, 0.9), (0.3333, None)])))
    assert censored.loc[censored["threshold"] == 0.01, "faster"].tolist() == [True, False]
    neither = verdicts.lr_verdicts(pd.DataFrame(_rows("L0", 0, None, [(3.0, None), (0.3333, None)])))
    assert not neither.loc[neither["threshold"] == 0.01, "faster"].any()


# ---- a real run -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lr_run(tmp_path_factory, corpus_seed):
    """tests/tiny.yaml's tinyB (one layer) with retrain.lr_sensitivity, run by the real workflow; and the same
    config without the key, beside it."""
    from snakemake_helpers import snakemake

    workdir = tmp_path_factory.mktemp("lr")
    raw = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    raw["models"] = [m for m in raw["models"] if m["name"] == "tinyB"]
    off = workdir / "off.yaml"
    off.write_text(yaml.safe_dump(raw))
    raw["models"][0]["retrain"] = {"lr_sensitivity": MULTIPLIERS}
    on = workdir / "config.yaml"
    on.write_text(yaml.safe_dump(raw))
    corpus_seed(workdir)
    proc = snakemake(workdir, on)
    assert proc.returncode == 0, proc.stderr[-5000:]
    return workdir, on, off


@pytest.mark.e2e
def test_the_table_has_each_run_beside_the_grids_cost(lr_run):
    workdir, _, _ = lr_run
    results = workdir / "results"
    table = pd.read_parquet(results / "answer" / "lr_sensitivity.parquet")
    summary = pd.read_parquet(results / "summary.parquet")
    thresholds = [0.01, 0.02, 0.05, 0.1]  # tests/tiny.yaml's (the defaults)
    assert sorted(zip(table["target"], table["lr_multiplier"], table["threshold"])) == sorted(
        ("L0", m, e) for m in MULTIPLIERS for e in thresholds
    )
    assert (table["lr"] == 0.01 * table["lr_multiplier"]).all() and (table["chosen_lr"] == 0.01).all()
    for _, r in table.iterrows():
        run = results / "lr_sensitivity" / "tinyB" / f"x{r['lr_multiplier']:g}" / "p0" / "frozen" / "s0"
        record = json.loads((run / "L0-full-fresh" / "recovery.json").read_text())
        (rec,) = [x for x in record["recoveries"] if x["threshold"] == r["threshold"]]
        assert (bool(r["recovered"]), r["examples_lo"]) == (rec["recovered"], rec["examples_lo"])
        assert record["budget_examples"] == r["budget_examples"]
        grid_row = summary[
            (summary["target"] == "L0") & (summary["init"] == "fresh") & (summary["threshold"] == r["threshold"])
        ].iloc[0]
        assert bool(r["chosen_recovered"]) == bool(grid_row["recovered"])
        assert r["chosen_examples"] == grid_row["examples"]
        assert grid_row["budget_examples"] == r["budget_examples"]  # the same budget as the grid's cell
        if r["recovered"] and grid_row["recovered"] and grid_row["examples"] > 0:
            assert r["ratio"] == pytest.approx(rec["examples"] / grid_row["examples"])
        else:  # censored, or not damaged beyond eps at the chosen lr (a cost of 0): no ratio
            assert pd.isna(r["ratio"])
    # the lr-sensitivity runs are no rows of the grid's tables
    assert len(summary) == 4 * 4 and not summary["target"].isna().any()


@pytest.mark.e2e
def test_each_run_trained_at_its_own_lr(lr_run):
    """The same reset (damage bit for bit the grid cell's), then a different descent at each lr; a smaller lr moves
    the loss less in the first evaluation interval."""
    workdir, _, _ = lr_run
    results = workdir / "results"
    cell = "p0/frozen/s0/L0-full-fresh"
    base = pd.read_parquet(results / "cells" / "tinyB" / cell / "curve.parquet")
    runs = {
        m: pd.read_parquet(results / "lr_sensitivity" / "tinyB" / f"x{m:g}" / cell / "curve.parquet")
        for m in MULTIPLIERS
    }
    damage = json.loads((results / "cells" / "tinyB" / cell / "damage.json").read_text())["damaged_loss"]
    first = {}
    for m, curve in runs.items():
        assert curve["val_loss"].iloc[0] == base["val_loss"].iloc[0] == damage
        at = curve[curve["replay"].eq(False) & (curve["examples"] == 64)]["val_loss"].iloc[0]
        first[m] = at
    chosen = base[base["replay"].eq(False) & (base["examples"] == 64)]["val_loss"].iloc[0]
    assert len({first[3.0], first[0.3333], chosen}) == 3
    assert damage - first[0.3333] < damage - chosen  # a third of the lr: less of the damage undone at first


@pytest.mark.e2e
def test_the_page_says_the_tables_numbers(lr_run):
    workdir, _, _ = lr_run
    results = workdir / "results"
    table = verdicts.lr_verdicts(pd.read_parquet(results / "answer" / "lr_sensitivity.parquet"))
    md = (results / "answer.md").read_text()
    (line,) = [x for x in md.splitlines() if x.startswith("| tinyB | L0 |")]
    at = table[table["threshold"] == 0.01].set_index("lr_multiplier")
    chosen = at.loc[3.0, "chosen_fraction_of_pretrain"] if at.loc[3.0, "chosen_recovered"] else float("inf")
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2] == f"{page.cost(chosen)} (lr 0.01)"
    for cell, k in zip(cells[3:5], (0.3333, 3.0)):
        value = at.loc[k, "fraction_of_pretrain"] if at.loc[k, "recovered"] else float("inf")
        assert cell == page.cost(value)
    assert cells[5] == ("yes" if at["faster"].any() else "no")


@pytest.mark.e2e
def test_turning_the_key_off_reruns_no_cell(lr_run):
    """Without the key the same folder's grid is up to date: only the answer (its input list changed) would run."""
    from snakemake_helpers import snakemake

    workdir, _, off = lr_run
    proc = snakemake(workdir, off, "-n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rules = set(re.findall(r"^(?:local)?rule (\w+):", proc.stdout + proc.stderr, re.M))
    assert rules <= {"answer", "all"}, rules


def test_nothing_on_the_page_when_the_check_is_off():
    """No table (the key off: the answer rule gets none) or an empty one: no lr block on the page; a table: its
    block."""
    from answer_helpers import synthetic
    from selfheal.analysis import answer_plots, answer_tables

    summary, curves, networks = synthetic(models=(("m", 2, 64),), thresholds=(0.01,), seed=3)
    tables = answer_tables.compute(summary, curves, networks)
    links = {name: f"plots/{name}.png" for name in answer_plots.FIGURES}
    rows = pd.DataFrame(_rows("L0", 0, 0.31, [(3.0, 0.25)])).assign(pretrain_examples=1000)
    for extra, shown in (({}, False), ({"lr_sensitivity": rows.iloc[:0]}, False), ({"lr_sensitivity": rows}, True)):
        md = page.markdown({**tables, **extra}, summary, networks, links)
        assert ("How much the retraining lr matters" in md) == shown


@pytest.mark.e2e
def test_the_lr_check_heals_a_donor_swap(tmp_path, corpus_seed):
    """retrain.lr_sensitivity_targets naming a donor swap: the real workflow's lr job waits for the donor's network
    and heals the swap with the donor's trained encoder (without it the reset refuses), beside the two layers; adding
    the swap to a check already run keeps the two layers' runs (the donor is only the swap's input)."""
    from snakemake_helpers import snakemake

    raw = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    bart = {"arch": "bart", "n_layer": 1, "n_dec_layer": 1, "n_head": 2, "context": 32}
    raw["models"] = [
        {"name": "tinyBart", "d_model": 32, **bart, "retrain": {"lr_sensitivity": [3.0]}},
        {"name": "tinyBart16", "d_model": 16, "heal": False, **bart},
    ]
    raw["grid"]["encoder_swap"] = ["tinyBart16"]
    corpus_seed(tmp_path)
    run = tmp_path / "results" / "lr_sensitivity" / "tinyBart" / "x3" / "p0" / "frozen" / "s0"
    before = {}
    for targets in ([], ["swap-tinyBart16"]):
        raw["models"][0]["retrain"]["lr_sensitivity_targets"] = targets
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(raw))
        proc = snakemake(tmp_path, tmp_path / "config.yaml", "results/lr_sensitivity/tinyBart")
        assert proc.returncode == 0, proc.stderr[-5000:]
        if not targets:
            before = {p.name: (p / "curve.parquet").read_bytes() for p in run.iterdir()}
    log = (tmp_path / "results" / "logs" / "tinyBart" / "lr_sensitivity.log").read_text()
    assert log.count("finished in an earlier run of this job: kept") == 2, log[-3000:]
    assert {name: (run / name / "curve.parquet").read_bytes() for name in before} == before
    assert sorted(p.name for p in run.iterdir()) == [
        "dec.0-full-fresh",
        "enc.0-full-fresh",
        "swap-tinyBart16-full-fresh",
    ]
    swap = json.loads((run / "swap-tinyBart16-full-fresh" / "recovery.json").read_text())
    assert swap["target"] == "swap-tinyBart16" and swap["damaged_loss"] > 0
