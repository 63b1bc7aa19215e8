"""Evaluation on the fixed validation set: the baseline of a trained model, the damage right after a reset, and
every periodic evaluation of the training loop use this one function."""

from __future__ import annotations

import logging
import math

import torch
from torch import nn

from safetensors.torch import load_file

from selfheal import models, records
from selfheal.data import ngrams, streams
from selfheal.records import Baseline
from selfheal.training import setup
from selfheal.training.hardware import to_device

log = logging.getLogger("selfheal")


@torch.no_grad()
def evaluate(model: nn.Module, family, val_batches: list[dict], cache=None) -> float:
    """Mean loss over the fixed validation batches, weighted by batch size. With a prefix cache, the frozen
    layers below ``cache.depth`` are read instead of recomputed."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    no_grad_anywhere = family.n_layers(model) + 1
    device = next(model.parameters()).device
    for batch in val_batches:
        n = batch["input_ids"].shape[0]
        batch = to_device(batch, device)
        with torch.autocast(device_type=device.type, enabled=False):  # fp32, whatever the training's precision
            if cache is None:
                loss = family.loss(model, batch, no_grad_anywhere)
            else:
                hidden = cache.val_rows(count, count + n).to(device)
                loss = family.loss(model, batch, no_grad_anywhere, hidden=hidden, from_depth=cache.depth)
        total += loss.item() * n
        count += n
    model.train(was_training)
    return total / count


@torch.no_grad()
def per_sequence(model: nn.Module, family, val_batches: list[dict]) -> torch.Tensor:
    """The mean loss of each validation sequence, a batch at a time (the family's loss ``per_row``: a masked LM
    keeps the masks its batches were made with): paired per-sequence losses of two networks on the same batches
    give the standard error of their difference with correlated tokens counted once."""
    was_training = model.training
    model.eval()
    no_grad_anywhere = family.n_layers(model) + 1
    device = next(model.parameters()).device
    out = []
    for batch in val_batches:
        with torch.autocast(device_type=device.type, enabled=False):  # fp32, whatever the training's precision
            out.append(family.loss(model, to_device(batch, device), no_grad_anywhere, per_row=True).double().cpu())
    model.train(was_training)
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def baseline(
    model_cfg: dict, eval_cfg: dict, tokens_path: str, trained_dir: str, out_path: str, threads: int = 1
) -> Baseline:
    """The baseline of a model trained elsewhere (a downloaded model healed as imported): its validation loss on
    the fixed validation set. Networks trained here write theirs at the end of their training job
    (``write_baseline`` with the last evaluation's loss: the same weights, batches and function)."""
    setup.seed_everything(0, threads)
    job = setup.prepare(models.load(trained_dir), model_cfg, eval_cfg, tokens_path)
    loss = evaluate(job.model, job.family, job.val_batches)
    return write_baseline(model_cfg, job, loss, tokens_path, out_path)


def write_baseline(model_cfg: dict, job: setup.Setup, loss: float, tokens_path: str, out_path: str) -> Baseline:
    """Write ``baselines/{model}/p{seed}.json``: the trained model's validation loss and perplexity, with the
    unigram and interpolated-bigram reference losses of the same validation targets (``ngrams``), the bigram's
    weight and the network's margin over it."""
    ref = ngrams.reference_losses(
        load_file(str(tokens_path))["train"],
        job.val_batches,
        job.family.objective,
        streams.vocabulary(tokens_path)["vocab_size"],
    )
    out = Baseline(
        model=model_cfg["name"],
        val_loss=loss,
        perplexity=math.exp(loss),
        val_sequences=sum(int(b["input_ids"].shape[0]) for b in job.val_batches),
        context=model_cfg["context"],
        pretrain_seed=model_cfg["pretrain"]["seed"],
        unigram_loss=ref.unigram,
        bigram_loss=ref.bigram,
        bigram_weight=ref.bigram_weight,
        bigram_margin=None if ref.bigram is None else ref.bigram - loss,
    )
    records.write(out_path, out)
    log.info(
        "baseline %s (pretrain seed %d): val loss %.4f, perplexity %.2f; unigram %.4f, bigram %s",
        model_cfg["name"],
        out.pretrain_seed,
        loss,
        out.perplexity,
        ref.unigram,
        "-"
        if ref.bigram is None
        else f"{ref.bigram:.4f} (weight {ref.bigram_weight:.4f}, margin {out.bigram_margin:+.4f})",
    )
    return out
