"""Pretraining from scratch: E epochs over S sequences, AdamW, warmup + cosine; and the same schedule adapting a
downloaded model to the corpus (every tensor trains, from the downloaded weights) so its baseline is in-domain.

The pretraining curve (validation loss against examples seen) is the from-scratch reference that every recovery
curve is compared to; for an adapted model, S x E of the adaptation is the unit of the retrain budget.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from selfheal import models, records, results_io
from selfheal.data import streams
from selfheal.experiments import frozen_random
from selfheal.records import PretrainSummary
from selfheal.training import checkpoints, evaluation, loop, setup
from selfheal.training.state import Settings

log = logging.getLogger("selfheal")


def pretrain(
    model_cfg: dict,
    eval_cfg: dict,
    tokens_path: str,
    theta0_dir: str | None,
    trained_dir: str,
    curve_path: str,
    summary_path: str,
    threads: int = 1,
    start_dir: str | None = None,
    baseline_path: str | None = None,
) -> PretrainSummary:
    """Pretrain one network (``model_cfg`` with its ``pretrain.seed``) from its step-0 weights, saved to
    ``theta0_dir``; or, with ``start_dir`` (a downloaded model's folder), adapt that model with the same schedule.
    With ``baseline_path``, the trained network's baseline is written there too: the last evaluation is the
    baseline (the trained weights on the fixed validation batches), so no separate job evaluates it again."""
    p = model_cfg["pretrain"]
    setup.seed_everything(p["seed"], threads)
    if start_dir is None:
        model = models.build(model_cfg, streams.vocabulary(tokens_path), seed=p["seed"])
        models.save(model, theta0_dir)
    else:
        model = models.load(start_dir)
    job = setup.prepare(model, model_cfg, eval_cfg, tokens_path)
    family = job.family
    context = model_cfg["context"]
    train_seqs = setup.train_sequences(model_cfg, tokens_path)
    S, E = train_seqs.shape[0], p["epochs"]
    max_examples = S * E
    settings = Settings(
        lr=p["lr"],
        batch_size=p["batch_size"],
        weight_decay=p["weight_decay"],
        grad_clip=p["grad_clip"],
        eval_every_examples=p["eval_every_examples"],
        max_examples=max_examples,
        warmup_steps=max(1, round(p["warmup_fraction"] * math.ceil(max_examples / p["batch_size"]))),
        cosine=True,
        min_lr_fraction=p["min_lr_fraction"],
        data_seed=p["seed"],
        hardware=job.hardware,
        checkpoint_path=str(Path(summary_path).with_name("pretrain.ckpt")),
        checkpoint_every_steps=p["checkpoint_every_steps"],
    )
    # Frozen-random variants (frozen_random.py): the frozen tensors stay at θ0 bit for bit, since loop.run leaves
    # them out of the optimizer (no update, no weight decay) and turns their gradients off.
    components = model_cfg.get("frozen_components") or []
    frozen = set(frozen_random.frozen_names(family, model, components)) if components else set()
    params = dict(model.named_parameters())
    trainable = set(params) - frozen
    frozen_params = sum(params[n].numel() for n in frozen)
    log.info(
        "%s %s: %d params (%d frozen at init: %s), S=%d sequences of %d tokens, E=%d epochs (%d examples)",
        "adapting" if start_dir else "pretraining", model_cfg["name"], models.parameter_count(model), frozen_params, frozen_random.label(components), S,
        context, E, max_examples,
    )
    result = loop.run(model, family, job.objective, train_seqs, job.val_batches, trainable, settings, label="pretrain")
    if result.diverged_step is not None:
        raise RuntimeError(f"pretraining {model_cfg['name']} diverged (non-finite loss) at step "
                           f"{result.diverged_step}: lower pretrain.lr or raise warmup_fraction")
    models.save(model, trained_dir)
    curve = pd.DataFrame([asdict(pt) for pt in result.curve])
    results_io.write_parquet(curve_path, curve)
    final = result.curve[-1]
    summary = PretrainSummary(
        model=model_cfg["name"],
        arch=model_cfg["arch"],
        n_layer=family.n_layers(model),
        d_model=models.width(model),
        n_head=models.heads(model),
        source="pretrained" if start_dir else "scratch",
        name_or_path=model_cfg.get("name_or_path"),
        pretrain_seed=p["seed"],
        context=context,
        params=models.parameter_count(model),
        trainable_params=models.parameter_count(model) - frozen_params,
        frozen_params=frozen_params,
        frozen_components=components,
        base_model=model_cfg.get("base_model", model_cfg["name"]),
        train_sequences=S,
        epochs=E,
        examples=final.examples,
        tokens=final.tokens,
        steps=final.steps,
        wall_s=final.wall_s,
        initial_val_loss=result.curve[0].val_loss,
        final_val_loss=final.val_loss,
        last_quarter_val_drop=_val_at(result.curve, 0.75 * max_examples) - final.val_loss,
    )
    records.write(summary_path, summary)
    if baseline_path:
        evaluation.write_baseline(model_cfg, job, final.val_loss, tokens_path, baseline_path)
    checkpoints.remove(settings)
    log.info("pretraining done: val loss %.4f -> %.4f in %.0fs", summary.initial_val_loss, final.val_loss,
             final.wall_s)
    return summary


def _val_at(curve, examples: float) -> float:
    """Validation loss at the evaluation closest to ``examples``."""
    return min(curve, key=lambda p: abs(p.examples - examples)).val_loss
