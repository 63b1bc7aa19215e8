"""The retraining budget (heal/budget.py): its unit (the network's own from-scratch cost, S x E, or the train
sequences), and a raised budget continuing the staged cells that had not crossed from their extension points, to
the numbers of a run given the larger budget from the start."""

import math

import pandas as pd
import pytest
from conftest import CPU, TINY_MODEL, write_trained_and_tokens

from selfheal import grid, records, results_io
from selfheal.grid import Cell
from selfheal.heal import budget, unit
from selfheal.records import CellResult, PretrainSummary

RETRAIN = {"budget_fraction": 0.2, "budget_scratch": None, "thresholds": [0.05, 0.01]}
# a pretraining curve: baseline 4.0 (its last evaluation); 4.0 x 1.01 = 4.04 is first reached between 1000 (4.2) and
# 2000 (4.0): at 1800 examples, interpolated
CURVE = pd.DataFrame({"examples": [0, 1000, 2000, 3000], "val_loss": [6.0, 4.2, 4.0, 4.0]})
PRE = PretrainSummary("m", "gpt2", 2, 16, 100, train_sequences=1000, epochs=3)


def test_the_budget_unit(tmp_path):
    curve = tmp_path / "pretrain_curve.parquet"
    results_io.write_parquet(curve, CURVE)
    assert budget.scratch_cost(CURVE, 4.0, 0.01) == pytest.approx(1800.0)
    assert budget.scratch_cost(CURVE, 4.0, 0.6) is None  # reached at the first evaluation: no cost to scale
    # budget_fraction: a fraction of S x E; the from-scratch cost is recorded all the same
    b = budget.of(RETRAIN, PRE, 4.0, str(curve), 500)
    assert (b.examples, b.unit, b.multiple, b.scratch_examples) == (600, "pretrain_examples", 0.2, pytest.approx(1800))
    # budget_scratch: a multiple of the from-scratch cost at eps_min (0.01, not the first threshold listed)
    b = budget.of({**RETRAIN, "budget_scratch": 1.25}, PRE, 4.0, str(curve), 500)
    assert (b.examples, b.unit, b.unit_examples) == (2250, "scratch_cost", pytest.approx(1800))
    # no from-scratch curve: an adapted model (its curve is an adaptation), or none at all -> S x E
    adapted = PretrainSummary("m", "gpt2", 2, 16, 100, train_sequences=1000, epochs=3, source="pretrained")
    for pre, path in ((adapted, str(curve)), (PRE, None), (PRE, str(tmp_path / "missing.parquet"))):
        b = budget.of({**RETRAIN, "budget_scratch": 1.25}, pre, 4.0, path, 500)
        assert (b.examples, b.unit) == (3750, "pretrain_examples")
    assert budget.of({**RETRAIN, "budget_scratch": 1.25}, adapted, 4.0, str(curve), 500).scratch_examples is None
    # a downloaded model healed as downloaded: S x E unknown, the train sequences here
    downloaded = PretrainSummary("m", "gpt2", 2, 16, 100, source="pretrained")
    b = budget.of({**RETRAIN, "budget_scratch": 2.0}, downloaded, 4.0, None, 500)
    assert (b.examples, b.unit) == (1000, "train_sequences")
    assert budget.run_examples(b, is_control=True, control_examples=300) == 300
    assert budget.run_examples(b, is_control=True, control_examples=None) == 0
    assert budget.run_examples(b, is_control=False, control_examples=300) == 1000
    cfg = {"name": "m", "retrain": {**RETRAIN, "eval_every_examples": 64}, "recipe": {"lrs": [1.0]}}
    assert grid.covered("cell", cfg) == {
        "name": "m",
        "retrain": {"thresholds": [0.05, 0.01], "eval_every_examples": 64},
        "recipe": {"lrs": [1.0]},
    }


# -- a raised budget continues the cells that had not crossed ---------------------------------------------------

PATTERN = "s{seed}/{target}-{policy}-{init}"
CELLS = [
    Cell("t", "L0", "full", "fresh", "frozen", 0),
    Cell("t", "L2", "full", "fresh", "frozen", 0),
    Cell("t", "L0", "full", "trained", "frozen", 0),
    Cell("t", "L2", "full", "trained", "frozen", 0),
]
TIMING = ("wall_s",)  # the only columns that differ between identical runs
RECORD_TIMING = ("train_tokens_per_s", "eval_share", "replay_share")


@pytest.fixture
def inputs(tmp_path):
    write_trained_and_tokens(tmp_path)
    records.write(tmp_path / "baseline.json", records.Baseline("t", 4.0, 54.6, 32, 16))
    records.write(tmp_path / "pretrain.json", PretrainSummary("t", "gpt2", 3, 16, 1000, train_sequences=128, epochs=2))
    # eval every 40 examples in batches of 16 (at 48, 80, 120 or 128, ...); budgets 0.47 x 256 = 120 (its last
    # batch, 112-120, is cut short and reaches 120: an evaluation the larger run makes at 128 instead) and
    # 0.7 x 256 = 179
    model_cfg = {
        **TINY_MODEL,
        "hardware": CPU,  # the two runs are compared number for number
        "source": "scratch",
        "pretrain": {"train_sequences": 128, "seed": 0, "max_epochs": 2},
        "recipe": {
            "lrs": [1e-2, 3e-2],  # healing races these (one recipe: pretraining too)
            "max_lr_extensions": 0,
            "batch_size": 16,
            "warmup_steps": 2,
            "weight_decay": 0.0,
        },  # fmt: skip
        "retrain": {
            "eval_every_examples": 40,
            "budget_fraction": 0.47,
            "thresholds": [0.01],
            "checkpoint_every_steps": 0,
            "prefix_cache_mb": 100,
            "resolution": 0.1,
        },
    }
    return tmp_path, model_cfg, {"val_sequences": 32, "batch_size": 16}


def _run(tmp_path, model_cfg, eval_cfg, out):
    unit.run(
        model_cfg,
        eval_cfg,
        [c.as_dict() for c in CELLS],
        str(tmp_path / "tokens.safetensors"),
        str(tmp_path / "trained"),
        None,
        str(tmp_path / "baseline.json"),
        str(tmp_path / "pretrain.json"),
        str(tmp_path / out),
        str(tmp_path / "work" / out),
    )
    folder = {c: tmp_path / out / PATTERN.format(**c.as_dict()) for c in CELLS}
    return (
        {c: records.read(f / "recovery.json", CellResult) for c, f in folder.items()},
        {c: pd.read_parquet(f / "curve.parquet").drop(columns=list(TIMING)) for c, f in folder.items()},
    )


def _numbers(result: CellResult) -> dict:
    record = {k: v for k, v in result.__dict__.items() if k not in RECORD_TIMING}
    record["recoveries"] = [{k: v for k, v in r.__dict__.items() if k != "wall_s"} for r in result.recoveries]
    return record


def test_a_raised_budget_continues_to_the_numbers_of_the_larger_run(inputs, caplog):
    tmp_path, model_cfg, eval_cfg = inputs
    larger = {**model_cfg, "retrain": {**model_cfg["retrain"], "budget_fraction": 0.7}}
    short, _ = _run(tmp_path, model_cfg, eval_cfg, "extended")
    assert all(r.settled_examples is None and r.budget_examples == 120 for r in short.values())  # censored
    assert short[CELLS[1]].prefix_cache_depth == 2  # L2 from the prefix cache (its extension point says so too)
    caplog.clear()
    with caplog.at_level("INFO", logger="selfheal"):
        extended, extended_curves = _run(tmp_path, larger, eval_cfg, "extended")  # the same work folder
    continued = [r.getMessage() for r in caplog.records if "continues a run with a smaller budget" in r.getMessage()]
    # each copy of each race continues, and each control whose cell's primary lr is the same (else it trains anew)
    copies = sum(2 if not c.is_matched_control else short[c].lr == extended[c].lr for c in CELLS)
    assert len(continued) == copies and all("(80 examples)" in m for m in continued)  # the last regular one
    fresh, fresh_curves = _run(tmp_path, larger, eval_cfg, "fresh")
    for cell in CELLS:
        assert _numbers(extended[cell]) == _numbers(fresh[cell]), cell
        pd.testing.assert_frame_equal(extended_curves[cell], fresh_curves[cell], check_exact=True)
        assert extended[cell].budget_examples == 179 if not cell.is_matched_control else True
    # the controls train as long as the longest cell they are matched with, under the larger budget too, and at
    # its primary copy's lr
    for control, matched in ((CELLS[2], CELLS[0]), (CELLS[3], CELLS[1])):
        assert extended_curves[control]["examples"].max() == extended_curves[matched]["examples"].max()
        assert extended[control].lr == extended[matched].lr and extended[matched].lrs == [1e-2, 3e-2]
    # a lowered budget within the last regular evaluation continues from it; below it, the cell trains anew
    lowered = {**model_cfg, "retrain": {**model_cfg["retrain"], "budget_fraction": 0.2}}  # 51 examples
    again, again_curves = _run(tmp_path, lowered, eval_cfg, "extended")
    alone, alone_curves = _run(tmp_path, lowered, eval_cfg, "lowered")
    for cell in CELLS:
        assert _numbers(again[cell]) == _numbers(alone[cell]), cell
        pd.testing.assert_frame_equal(again_curves[cell], alone_curves[cell], check_exact=True)
    assert math.isfinite(alone[CELLS[0]].final_loss)


def test_a_stalled_cell_stops_and_a_raised_budget_keeps_it(inputs, caplog):
    """retrain.stop_stalled: from stop_stalled x S x E on, a cell whose curve has stalled (heal.stall) stops at that
    evaluation; the stop does not depend on the budget, so a raised budget keeps the cell, and another stop trains
    it anew. Its matched control stops with it; the survival table censors it at the budget."""
    from selfheal.analysis import survival, tables

    tmp_path, model_cfg, eval_cfg = inputs
    # lr 1e-12: nothing moves, so every curve is flat (stalled once its last doubling holds 4 evaluations); an
    # evaluation after every batch of 16; the rule applies from 0.2 x 256 = 51 examples on: it stops at 96
    # (48, 64, 80, 96 in its last doubling)
    flat = {"eval_every_examples": 16, "budget_fraction": 0.7, "stop_stalled": 0.2}
    cfg = {**model_cfg, "retrain": {**model_cfg["retrain"], **flat}, "recipe": {**model_cfg["recipe"], "lrs": [1e-12]}}
    stopped, curves = _run(tmp_path, cfg, eval_cfg, "stopped")
    for cell in CELLS:
        assert curves[cell]["examples"].max() == 96, cell
        if not cell.is_matched_control:
            r = stopped[cell]
            assert (r.stalled_examples, r.settled_examples, r.stop_examples) == (96, 96, 51)
            assert r.budget_examples == 179 and not r.recoveries[0].recovered
    # a raised budget: the same run (kept, not trained again)
    caplog.clear()
    with caplog.at_level("INFO", logger="selfheal"):
        raised, raised_curves = _run(
            tmp_path, {**cfg, "retrain": {**cfg["retrain"], "budget_fraction": 1.0}}, eval_cfg, "stopped"
        )
    assert sum("kept" in r.getMessage() for r in caplog.records) == len(CELLS)
    assert raised[CELLS[0]].budget_examples == 256 and raised[CELLS[0]].stalled_examples == 96
    # another stop: trained anew, to the stop it gives (from 0.5 x 256 = 128 on: 128, the first with 4 points)
    later, later_curves = _run(
        tmp_path, {**cfg, "retrain": {**cfg["retrain"], "stop_stalled": 0.5}}, eval_cfg, "stopped"
    )
    assert later[CELLS[0]].stalled_examples == 128 and later_curves[CELLS[2]]["examples"].max() == 128
    # the tables: stalled, censored at the budget, not where it stopped
    paths = [str(tmp_path / "stopped" / PATTERN.format(**c.as_dict()) / "recovery.json") for c in CELLS]
    summary = tables.summary_table(paths)
    curve_rows = []
    for c in CELLS:
        frame = later_curves[c].assign(kind="control" if c.is_matched_control else "recovery", **c.as_dict())
        curve_rows.append(frame.assign(wall_s=0.0))
    summary = tables.add_outcomes(summary, pd.concat(curve_rows))
    rows = summary[summary["init"] == "fresh"]
    assert list(rows["outcome"]) == ["stalled", "stalled"]
    assert list(rows["stalled_examples"]) == [128, 128]
    networks = pd.DataFrame(
        {"model": ["t"], "pretrain_seed": [0], "family_kind": ["decoder"], "n_params": [1], "degenerate": [False]}
    ).assign(off_plateau=False)
    table = survival.prepare(rows, networks)
    assert list(table["lower"]) == [179.0, 179.0] and list(table["status"]) == ["censored", "censored"]


def test_the_plateau_gate_is_one_rule_and_a_heal_job_warns_of_a_network_off_it(inputs, caplog):
    """``PretrainSummary.off_plateau`` is the gate (networks.parquet's off_plateau): the plateau check's gain, else
    the last quarter's drop, above eps_min x loss / 4. A job healing such a network's cells says, before training,
    that they will leave every estimate."""
    on = PretrainSummary("t", "gpt2", 3, 16, 1000, train_sequences=128, epochs=2, plateau_val_loss=3.995)
    off = PretrainSummary("t", "gpt2", 3, 16, 1000, train_sequences=128, epochs=2, plateau_val_loss=3.98)
    assert not on.off_plateau(4.0, 0.01) and off.off_plateau(4.0, 0.01)  # gate: 0.01 x 4.0 / 4 = 0.01
    assert off.still_falls(4.0) == pytest.approx(0.02)
    falling = PretrainSummary("t", "gpt2", 3, 16, 1000, train_sequences=128, epochs=2, last_quarter_val_drop=0.2)
    assert falling.off_plateau(4.0, 0.01) and not PretrainSummary("t", "gpt2", 3, 16, 1000).off_plateau(4.0, 0.01)
    tmp_path, model_cfg, eval_cfg = inputs
    records.write(tmp_path / "pretrain.json", off)
    cfg = {**model_cfg, "retrain": {**model_cfg["retrain"], "budget_fraction": 0.1}}
    with caplog.at_level("WARNING", logger="selfheal"):
        _run(tmp_path, cfg, eval_cfg, "off")
    assert any(
        "is not fully trained" in r.getMessage() and "leave every estimate" in r.getMessage() for r in caplog.records
    )
