"""One heal job runs every cell of its unit: per-cell outputs, the same numbers as a cell healed alone, frozen
tensors bit-identical, and finished cells of a killed job kept by its re-run."""

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import CPU, TINY_MODEL, write_trained_and_tokens

from selfheal import layout, models, records
from selfheal.grid import Cell
from selfheal.heal import prefix_cache, reset, staging, unit
from selfheal.training import evaluation, setup
from selfheal.records import CellResult, Damage

PATTERN = "s{seed}/{target}-{policy}-{init}"  # as the workflow lays out a unit (every retrain seed)


@pytest.fixture
def inputs(tmp_path):
    write_trained_and_tokens(tmp_path)
    records.write(tmp_path / "baseline.json", records.Baseline("t", 4.0, 54.6, 32, 16))
    records.write(
        tmp_path / "pretrain.json", records.PretrainSummary("t", "gpt2", 3, 16, 1000, train_sequences=128, epochs=2)
    )
    model_cfg = {
        **TINY_MODEL,
        "hardware": CPU,
        "source": "scratch",
        "pretrain": {"train_sequences": 128, "seed": 0, "max_epochs": 2},
        "recipe": {
            "lrs": [1e-2],  # healing races these (one recipe: pretraining too)
            "max_lr_extensions": 0,
            "batch_size": 16,
            "warmup_steps": 2,
            "weight_decay": 0.0,
        },  # fmt: skip
        "retrain": {
            "eval_every_examples": 32,
            "budget_fraction": 0.5,
            "thresholds": [0.01],
            "checkpoint_every_steps": 0,
        },
    }
    eval_cfg = {"val_sequences": 32, "batch_size": 16}
    return tmp_path, model_cfg, eval_cfg


def _damaged_loss(tmp_path, model_cfg, eval_cfg, cell):
    model = models.load(tmp_path / "trained")
    job = setup.prepare(model, model_cfg, eval_cfg, str(tmp_path / "tokens.safetensors"))
    if cell.target != "none":
        reset.draw(model, job.family, cell.target, cell.policy, cell.init, cell.seed, None)
    return evaluation.evaluate(model, job.family, job.val_batches)


def _run(tmp_path, model_cfg, eval_cfg, cells, out="out"):
    unit.run(
        model_cfg,
        eval_cfg,
        [c.as_dict() for c in cells],
        str(tmp_path / "tokens.safetensors"),
        str(tmp_path / "trained"),
        None,
        str(tmp_path / "baseline.json"),
        str(tmp_path / "pretrain.json"),
        str(tmp_path / out),
        str(tmp_path / "work" / out),
    )
    return {
        c: records.read(tmp_path / out / PATTERN.format(**c.as_dict()) / "recovery.json", CellResult) for c in cells
    }


CELLS = [
    Cell("t", "L0", "full", "fresh", "frozen", 0),
    Cell("t", "L2", "full", "fresh", "frozen", 0),
    Cell("t", "none", "none", "none", "frozen", 0),
]


def test_unit_heals_every_cell_like_a_cell_alone(inputs):
    tmp_path, model_cfg, eval_cfg = inputs
    together = _run(tmp_path, model_cfg, eval_cfg, CELLS)
    assert not list((tmp_path / "work").rglob("retrain.ckpt"))  # finished: no checkpoint left, the cells staged
    # ... with the extension point of each cell that trained to its budget, for a larger budget to continue from (in
    # the folder of each copy of its race: <cell>/race/lr<lr>/)
    extended = {p.parents[2].name for p in (tmp_path / "work").rglob(unit.EXTENSION)}
    assert extended == {
        PATTERN.format(**c.as_dict()).split("/")[1]
        for c in CELLS
        if together[c].trainable_tensors and together[c].settled_examples is None
    }
    assert len(list((tmp_path / "work").rglob("fingerprint.txt"))) == len(CELLS)
    for cell in CELLS:
        folder = tmp_path / "out" / PATTERN.format(**cell.as_dict())
        curve = pd.read_parquet(folder / "curve.parquet")
        damage = records.read(folder / "damage.json", Damage)
        # the damage the unit records is the reset model's loss, measured here apart from the unit: the trained
        # network, the cell's reset drawn on it, evaluated on the validation set
        assert damage.damaged_loss == pytest.approx(_damaged_loss(tmp_path, model_cfg, eval_cfg, cell), rel=1e-6)
        assert together[cell].damaged_loss == damage.damaged_loss == curve["val_loss"].iloc[0]
    trained = _damaged_loss(tmp_path, model_cfg, eval_cfg, CELLS[2])  # the control resets nothing
    assert together[CELLS[2]].damaged_loss == trained
    assert together[CELLS[0]].damaged_loss != trained and together[CELLS[1]].damaged_loss != trained
    assert together[CELLS[1]].prefix_cache_depth == 2  # the layers below L2, from the in-memory cache
    assert together[CELLS[0]].prefix_cache_depth is None  # nothing below layer 0
    # the same cell healed in a job of its own (so another order, no neighbours) gives the same numbers
    alone = _run(tmp_path, model_cfg, eval_cfg, [CELLS[1]], out="alone")[CELLS[1]]

    def numbers(result):
        return [(r.recovered, r.examples, r.steps, r.val_loss) for r in result.recoveries]

    assert numbers(alone) == numbers(together[CELLS[1]])
    assert alone.final_loss == together[CELLS[1]].final_loss


def test_prefix_cache_budget_changes_speed_not_numbers(inputs, monkeypatch):
    tmp_path, model_cfg, eval_cfg = inputs
    cached = _run(tmp_path, model_cfg, eval_cfg, [CELLS[1]], out="cached")[CELLS[1]]
    monkeypatch.setattr(prefix_cache, "PREFIX_CACHE_MB", 0)  # no cache fits: the plain forward
    plain = _run(tmp_path, model_cfg, eval_cfg, [CELLS[1]], out="plain")[CELLS[1]]
    assert cached.prefix_cache_depth == 2 and plain.prefix_cache_depth is None
    assert plain.final_loss == pytest.approx(cached.final_loss, rel=1e-5)


def test_finished_cells_of_a_killed_job_are_kept(inputs):
    tmp_path, model_cfg, eval_cfg = inputs
    _run(tmp_path, model_cfg, eval_cfg, CELLS[:1], out="first")
    # stage the finished cell as a killed job would have left it, then re-run the whole unit
    work = tmp_path / "work" / "again"
    unit_folder = tmp_path / "first"
    first = work / PATTERN.format(**CELLS[0].as_dict())
    first.mkdir(parents=True)
    for name in layout.CELL_FILES:
        (first / name).write_bytes((unit_folder / PATTERN.format(**CELLS[0].as_dict()) / name).read_bytes())
    inputs_list = [str(tmp_path / p) for p in ("tokens.safetensors", "trained", "baseline.json", "pretrain.json")]
    (first / staging.FINGERPRINT).write_text(
        unit._fingerprint(model_cfg, eval_cfg, CELLS[0], staging.digest(inputs_list))
    )
    marker = json.loads((first / "recovery.json").read_text())
    marker["final_loss"] = -1.0  # so the test sees whether the staged record was kept or recomputed
    (first / "recovery.json").write_text(json.dumps(marker))
    again = _run(tmp_path, model_cfg, eval_cfg, CELLS, out="again")
    assert again[CELLS[0]].final_loss == -1.0  # kept, not recomputed
    assert again[CELLS[1]].final_loss > 0

    # a changed setting invalidates the staged cell
    first.mkdir(parents=True, exist_ok=True)
    for name in layout.CELL_FILES:
        (first / name).write_bytes((unit_folder / PATTERN.format(**CELLS[0].as_dict()) / name).read_bytes())
    (first / "recovery.json").write_text(json.dumps(marker))
    (first / staging.FINGERPRINT).write_text(
        unit._fingerprint(model_cfg, eval_cfg, CELLS[0], staging.digest(inputs_list))
    )
    changed = {**model_cfg, "recipe": {**model_cfg["recipe"], "lrs": [1e-3, 5e-3, 3e-2, 1e-1]}}
    assert _run(tmp_path, changed, eval_cfg, CELLS[:1], out="again")[CELLS[0]].final_loss > 0


def test_an_added_retrain_seed_trains_only_its_cells(inputs):
    """The unit is a network and regime: a re-run with one more retrain seed (Snakemake removes the unit's outputs
    first) keeps the finished cells' files as they were and heals only the new seed's."""
    tmp_path, model_cfg, eval_cfg = inputs
    _run(tmp_path, model_cfg, eval_cfg, CELLS[:2])
    out = tmp_path / "out"
    before = {p.relative_to(out): p.stat().st_mtime_ns for p in out.rglob("*.json")}
    shutil.rmtree(out)
    for touched in (tmp_path / "trained" / "model.safetensors", tmp_path / "baseline.json"):
        os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))  # as a cluster's
        # Snakemake touches a finished group job's outputs: new times, same content
    added = [Cell("t", "L0", "full", "fresh", "frozen", 1)]
    results = _run(tmp_path, model_cfg, eval_cfg, CELLS[:2] + added)
    assert {p: (out / p).stat().st_mtime_ns for p in before} == before  # kept, not recomputed
    assert set(p.relative_to(out) for p in out.rglob("*.json")) - set(before) == {
        Path("s1/L0-full-fresh/damage.json"),
        Path("s1/L0-full-fresh/recovery.json"),
    }
    assert results[added[0]].final_loss > 0 and results[added[0]].seed == 1


def test_a_changed_frozen_tensor_is_caught(trained_model):
    import copy

    healed = copy.deepcopy(trained_model)
    unit.check_frozen(healed, trained_model, set())
    with torch.no_grad():
        healed.transformer.h[1].mlp.c_fc.weight[0, 0] += 1e-6
    unit.check_frozen(healed, trained_model, {"transformer.h.1.mlp.c_fc.weight"})  # it trained: allowed
    with pytest.raises(unit.FrozenTensorChanged, match="h.1.mlp.c_fc.weight"):
        unit.check_frozen(healed, trained_model, set())
