"""End to end, the cells no other run makes: init `original` (the layer restored to its step-0 weights, read from the
network's theta0 folder) and the model-level `embeddings` policy, on tests/tiny.yaml's corpus with one small GPT-2.
The recorded damage and CKA floor of an `original` cell are measured again here, outside the workflow: the trained
weights with that layer's step-0 tensors put back, evaluated on the validation set, and the layer's outputs compared
with an n x n-kernel CKA written here (the code computes it in feature space)."""

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import load_file
from snakemake_helpers import ROOT, snakemake

from selfheal import models, records
from selfheal.heal import similarity
from selfheal.training import setup
from selfheal.training.evaluation import evaluate

pytestmark = pytest.mark.e2e

MODEL = {"name": "orig", "n_layer": 2, "d_model": 16, "n_head": 2, "context": 32}


@pytest.fixture(scope="module")
def finished(tmp_path_factory, corpus_seed):
    workdir = tmp_path_factory.mktemp("original")
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    config["models"] = [MODEL]
    config["grid"] = {
        "layers": "all",
        "seeds": [0],
        "inits": ["original"],
        "policies": ["full", "embeddings"],
        "controls": False,
        "matched_controls": "none",
    }
    config["retrain"]["thresholds"] = [0.001]
    configfile = workdir / "config.yaml"
    configfile.write_text(yaml.safe_dump(config))
    corpus_seed(workdir)
    proc = snakemake(workdir, configfile, "results/summary.parquet")  # the table the tests read, not the report
    assert proc.returncode == 0, proc.stderr[-5000:]
    return workdir, config


def _unbiased_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA with the unbiased HSIC (Song et al. 2012) from the n x n kernels."""

    def hsic(k, m):
        n = k.shape[0]
        k, m = k - np.diag(np.diag(k)), m - np.diag(np.diag(m))
        ones = np.ones(n)
        return (
            np.trace(k @ m)
            + ones @ k @ ones * (ones @ m @ ones) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * ones @ k @ m @ ones
        ) / (n * (n - 3))

    k, m = x @ x.T, y @ y.T
    return float(hsic(k, m) / np.sqrt(hsic(k, k) * hsic(m, m)))


def test_original_and_embeddings_cells_are_made(finished):
    workdir, _ = finished
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    assert {(t, p, i) for t, p, i in zip(summary["target"], summary["policy"], summary["init"])} == {
        ("L0", "full", "original"),
        ("L1", "full", "original"),
        ("all", "embeddings", "original"),
    }
    assert (summary["damaged_loss"] > summary["baseline_loss"]).all()  # step-0 weights are damage
    damage = records.read(next((workdir / "results").rglob("all-embeddings-original/damage.json")), records.Damage)
    assert damage.reset_tensors == 2  # the token and position embeddings (tied lm_head is the token one)


def test_an_original_cell_records_the_damage_and_cka_floor_of_its_step0_layer(finished):
    workdir, config = finished
    model_cfg = {**MODEL, "hardware": config["hardware"], "pretrain": {**config["pretrain"], "seed": 0}}
    folder = workdir / "results" / "models" / "orig" / "p0"
    trained = models.load(folder / "trained")
    restored = models.load(folder / "trained")
    theta0 = load_file(str(folder / "theta0" / "model.safetensors"))
    names = [n for n in theta0 if n.startswith("transformer.h.1.")]
    assert names
    with torch.no_grad():
        params = dict(restored.named_parameters())
        for n in names:
            params[n].copy_(theta0[n])
    tokens = workdir / "results" / "corpus" / "bpe" / "tokens.safetensors"
    threads = torch.get_num_threads()
    torch.set_num_threads(config.get("threads", 1))  # as the jobs ran
    try:
        job = setup.prepare(restored, model_cfg, config["eval"], str(tokens))
        damaged = evaluate(restored, job.family, job.val_batches)
        layer = job.family.layer(trained, "L1")
        original = similarity.layer_outputs(trained, job.family, layer, job.val_batches)
        reset = similarity.layer_outputs(restored, job.family, job.family.layer(restored, "L1"), job.val_batches)
    finally:
        torch.set_num_threads(threads)
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    cell = summary[(summary["target"] == "L1") & (summary["init"] == "original")].iloc[0]
    assert cell["damaged_loss"] == pytest.approx(damaged, rel=1e-6)
    floor = _unbiased_cka(original.double().numpy(), reset.double().numpy())
    assert cell["cka_floor"] == pytest.approx(floor, abs=1e-6)
    assert -1 <= cell["cka"] <= 1
    if cell["examples"] == 0:  # within eps of the baseline at once: never trained, so healed is as reset
        assert cell["cka"] == pytest.approx(cell["cka_floor"])
    else:
        assert cell["cka"] != cell["cka_floor"]
    assert pd.isna(summary[summary["policy"] == "embeddings"]["cka"]).all()  # no single layer to compare
