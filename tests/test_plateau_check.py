"""The plateau check (pretrain.plateau_check): the kept copy of the lr race trains on past its best checkpoint, to at
least that multiple of the checkpoint's examples before the patience rule may stop it, and records where it ended
and its loss there; the network kept is the best checkpoint either way (``PretrainSummary.off_plateau``)."""

import pandas as pd
import torch
from safetensors.torch import load_file
from test_pretrain_race import EVAL, _pretrain, _tokens

from selfheal import records
from selfheal.heal import job
from selfheal.records import PretrainSummary
from test_frozen_random import GPT2, TINY_RECIPE


def test_the_check_trains_past_a_multiple_of_the_best_and_keeps_the_network(tmp_path):
    tokens = _tokens(tmp_path)
    _, plain, _, out = _pretrain(tmp_path / "plain", {"max_epochs": 30, "patience": 0.5}, tokens=tokens)
    plain_weights = load_file(str(out / "trained" / "model.safetensors"))
    _, checked, curve, out = _pretrain(
        tmp_path / "checked", {"max_epochs": 30, "patience": 0.5, "plateau_check": 3.0}, tokens=tokens
    )
    assert plain.stopped_by == checked.stopped_by == "patience"
    kept = curve[curve["kept"]]
    assert checked.plateau_examples == kept["examples"].max() >= 3 * checked.examples  # on to 3 x its best
    assert checked.plateau_examples > plain.plateau_examples
    assert checked.plateau_val_loss == kept.loc[kept["examples"].idxmax(), "val_loss"] >= checked.final_val_loss
    # the same copies up to their best: the same network
    assert (checked.lr, checked.examples, checked.final_val_loss) == (plain.lr, plain.examples, plain.final_val_loss)
    checked_weights = load_file(str(out / "trained" / "model.safetensors"))
    for name, tensor in plain_weights.items():
        assert torch.equal(tensor, checked_weights[name]), name
    assert not checked.off_plateau(checked.final_val_loss, 0.01)
    assert checked.still_falls(checked.final_val_loss) == checked.final_val_loss - checked.plateau_val_loss <= 0


def test_a_job_makes_a_network_with_its_plateau_check(tmp_path, caplog):
    """The way the workflow pretrains (``heal.job.make_network``), whose network settings leave the retraining out
    of the network's fingerprint: the job writes the summary and the curve of every copy."""
    cfg = {
        **GPT2,
        "pretrain": {"train_sequences": 64, "eval_every_examples": 32, "checkpoint_every_steps": 0, "seed": 0,
                     "max_epochs": 30, "patience": 0.5, "plateau_check": 2.0},
        "recipe": TINY_RECIPE,
        "retrain": {"thresholds": [0.01, 0.05]},
    }  # fmt: skip
    folder = tmp_path / "network"
    job.make_network("scratch", cfg, EVAL, _tokens(tmp_path), None, "inputs", folder, 1)
    summary = records.read(folder / "pretrain.json", PretrainSummary)
    assert summary.plateau_examples >= 2 * summary.examples
    assert set(pd.read_parquet(folder / "pretrain_curve.parquet")["lr"]) == set(TINY_RECIPE["lrs"])
