"""Probing (Tamkin et al. 2020): the pretrained encoder stays frozen; the mean-pooled hidden states after each of
its k = 0 .. N layers (k = 0: the embeddings) feed a linear classifier, trained on the trial's examples and scored
on the test split. Probe k is the dashed reference of the incremental plot: how much of the task layers 0..k-1
already solve without finetuning."""

from __future__ import annotations

import logging
import math
import warnings

import pandas as pd
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, matthews_corrcoef
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from selfheal import models, results_io
from selfheal.experiments.transfer import data
from selfheal.training import setup
from selfheal.training.hardware import Hardware, to_device

log = logging.getLogger("selfheal")


@torch.no_grad()
def pooled_features(model, batches: list[dict], hw: Hardware, device) -> list[torch.Tensor]:
    """Per layer k = 0 .. N, the [examples, width] mean over each sequence's real (unpadded) tokens."""
    model.eval()
    per_layer: list[list[torch.Tensor]] = []
    for batch in batches:
        batch = to_device({k: v for k, v in batch.items() if k != "labels"}, device)
        with hw.autocast(device):
            hidden = model(**batch, output_hidden_states=True).hidden_states
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = [(h.float() * mask).sum(1) / mask.sum(1) for h in hidden]
        if not per_layer:
            per_layer = [[] for _ in pooled]
        for k, p in enumerate(pooled):
            per_layer[k].append(p.cpu())
    return [torch.cat(chunks) for chunks in per_layer]


def fit_linear(x: torch.Tensor, y: torch.Tensor, l2: float, max_iter: int) -> Pipeline:
    """Multinomial logistic regression (scikit-learn, L-BFGS) on standardised features. The objective is the mean
    cross-entropy plus ``l2`` x the squared weights of all K class vectors (the intercept is not penalised), i.e.
    scikit-learn's ``C = 1 / (2 n l2)``; for two classes scikit-learn fits one vector w = W1 - W0 whose squared norm
    is twice the symmetric K = 2 solution's, hence ``C = 1 / (n l2)``. ``l2 = 0`` is the unpenalised fit.
    Deterministic."""
    binary = len(torch.unique(y)) == 2
    c = math.inf if l2 == 0 else 1.0 / ((1 if binary else 2) * len(y) * l2)
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter))
    with warnings.catch_warnings():  # a probe stopped at max_iter is what the config asked for
        warnings.simplefilter("ignore", ConvergenceWarning)
        return probe.fit(x.double().numpy(), y.numpy())


def predict_linear(x: torch.Tensor, probe: Pipeline) -> list[int]:
    return probe.predict(x.double().numpy()).tolist()


def run(
    settings: dict,
    probe: dict,
    task: str,
    size: int,
    trial: int,
    model_dir: str,
    train_path: str,
    test_path: str,
    out_path: str,
    hardware: dict | None = None,
    threads: int = 1,
) -> pd.DataFrame:
    import transformers

    setup.seed_everything(trial, threads)
    pool, test = pd.read_parquet(train_path), pd.read_parquet(test_path)
    examples = data.subsample(pool, size, trial)
    test = data.test_subset(test, settings["test_examples"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    models.check_safetensors(model_dir)
    model = transformers.AutoModel.from_pretrained(model_dir, use_safetensors=True, trust_remote_code=False)
    hw = Hardware.from_config(hardware)
    device = hw.prepare(model)
    bs, length = settings["eval_batch_size"], settings["max_length"]
    train_x = pooled_features(model, data.batches(tokenizer, data.encode(tokenizer, examples, length), bs), hw, device)
    test_x = pooled_features(model, data.batches(tokenizer, data.encode(tokenizer, test, length), bs), hw, device)
    y = torch.tensor(examples["label"].tolist())
    truth = test["label"].tolist()
    rows = []
    for k, (xtr, xte) in enumerate(zip(train_x, test_x, strict=True)):
        predictions = predict_linear(xte, fit_linear(xtr, y, probe["l2"], probe["max_iter"]))
        rows.append(
            {
                "task": task,
                "size": size,
                "trial": trial,
                "layer": k,
                "test_examples": len(truth),
                "accuracy": float(accuracy_score(truth, predictions)),
                "mcc": float(matthews_corrcoef(truth, predictions)),
            }
        )
        log.info(
            "probe %s n=%d trial %d layer %d: accuracy %.4f MCC %.4f",
            task,
            size,
            trial,
            k,
            rows[-1]["accuracy"],
            rows[-1]["mcc"],
        )
    table = pd.DataFrame(rows)
    results_io.write_parquet(out_path, table)
    return table
