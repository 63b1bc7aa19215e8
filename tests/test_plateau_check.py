"""The plateau check (pretrain.plateau_check): the same network pretrained 1.5 x as long, from the same theta0 and
data order, leaves the network kept untouched, records where the longer run ends, and says in the log when the
network is not fully trained by the gate (``PretrainSummary.off_plateau``)."""

import pytest
import torch
from safetensors.torch import load_file
from test_frozen_random import GPT2, TINY_PRETRAIN, _tokens, pretrain_tiny

from selfheal import records
from selfheal.heal import job
from selfheal.records import PretrainSummary

PRETRAIN = {**TINY_PRETRAIN, "epochs": 2, "min_lr_fraction": 0.0}


def _pretrain(tmp_path, name, check):
    cfg = {**GPT2, "pretrain": {**PRETRAIN, "plateau_check": check}, "retrain": {"thresholds": [0.01, 0.05]}}
    out = tmp_path / name
    summary = pretrain_tiny(cfg, _tokens(tmp_path), out)
    return summary, load_file(str(out / "trained" / "model.safetensors"))


def test_the_plateau_check_leaves_the_network_and_says_when_it_is_not_trained(tmp_path, caplog):
    plain, plain_weights = _pretrain(tmp_path, "plain", None)
    with caplog.at_level("INFO", logger="selfheal"):
        checked, checked_weights = _pretrain(tmp_path, "checked", 1.5)
    assert plain.plateau_val_loss is None and plain.plateau_examples is None
    assert checked.plateau_examples == round(1.5 * 64 * 2)
    assert checked.final_val_loss == plain.final_val_loss
    for name, tensor in plain_weights.items():  # the check trains a copy: the network kept is the same
        assert torch.equal(tensor, checked_weights[name]), name
    off = checked.off_plateau(checked.final_val_loss, 0.01)
    assert off == (checked.final_val_loss - checked.plateau_val_loss > 0.01 * checked.final_val_loss / 4)
    warned = any("not fully trained" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert warned == off and off  # two epochs of 64 sequences: the longer run is lower
    assert checked.still_falls(checked.final_val_loss) == pytest.approx(
        checked.final_val_loss - checked.plateau_val_loss
    )


def test_a_job_makes_a_network_with_its_plateau_check(tmp_path, caplog):
    """The way the workflow pretrains (``heal.job.make_network``), whose network settings leave the retraining out
    of the network's fingerprint: the check still reads the thresholds, and the job writes the summary."""
    cfg = {**GPT2, "pretrain": {**PRETRAIN, "seed": 0, "plateau_check": 1.5}, "retrain": {"thresholds": [0.01, 0.05]}}
    folder = tmp_path / "network"
    with caplog.at_level("INFO", logger="selfheal"):
        job.make_network(
            "scratch", cfg, {"val_sequences": 8, "batch_size": 8}, _tokens(tmp_path), None, "inputs", folder, 1
        )
    summary = records.read(folder / "pretrain.json", PretrainSummary)
    assert summary.plateau_examples == round(1.5 * 64 * 2)
    assert any("not fully trained" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
