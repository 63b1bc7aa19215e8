"""Pretraining from scratch: E epochs over S sequences, AdamW, warmup + cosine; and the same schedule adapting a
downloaded model to the corpus (every tensor trains, from the downloaded weights) so its baseline is in-domain.

The plateau check (``pretrain.plateau_check``, a multiple of E such as 1.5): the same network (the same θ0, data
order and schedule shape) is pretrained again for that many times E epochs, and its final validation loss is kept
as ``plateau_val_loss``. Under a decaying schedule the last quarter's drop also counts the annealing; a longer run
shows whether more training would still lower the loss (``analysis.tables``: ``off_plateau`` when it is lower by
more than eps_min x baseline / 4). A network at its validation minimum passes too: the longer run overfits.

The pretraining curve (validation loss against examples seen) is the from-scratch reference that every recovery
curve is compared to; for an adapted model, S x E of the adaptation is the unit of the retrain budget.
"""

from __future__ import annotations

import dataclasses
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

WEIGHT_DECAY = 0.1  # AdamW's, on tensors of 2 or more dimensions
GRAD_CLIP = 1.0  # the global gradient norm is clipped to this

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
        weight_decay=WEIGHT_DECAY,
        grad_clip=GRAD_CLIP,
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
        "adapting" if start_dir else "pretraining",
        model_cfg["name"],
        models.parameter_count(model),
        frozen_params,
        frozen_random.label(components),
        S,
        context,
        E,
        max_examples,
    )
    result = _train(model, family, job, train_seqs, trainable, settings, model_cfg["name"], "pretrain")
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
    if start_dir is None and p.get("plateau_check"):
        summary.plateau_examples, summary.plateau_val_loss = _plateau_check(
            model_cfg, job, theta0_dir, train_seqs, trainable, settings, p["plateau_check"]
        )
        log.info(
            "plateau check: %d examples end at val loss %.4f (%+.4f against %d examples)",
            summary.plateau_examples,
            summary.plateau_val_loss,
            summary.plateau_val_loss - final.val_loss,
            max_examples,
        )
        eps_min = min(model_cfg["retrain"]["thresholds"])
        if summary.off_plateau(final.val_loss, eps_min):
            log.warning(
                "not fully trained: the longer run ends %.4f lower, more than eps_min x loss / 4 = %.4f; this "
                "network's cells will leave every estimate (pretrain longer, or on fewer sequences)",
                final.val_loss - summary.plateau_val_loss,
                eps_min * final.val_loss / 4,
            )
    records.write(summary_path, summary)
    if baseline_path:
        evaluation.write_baseline(model_cfg, job, final.val_loss, tokens_path, baseline_path)
    checkpoints.remove(settings)
    log.info("pretraining done: val loss %.4f -> %.4f in %.0fs", summary.initial_val_loss, final.val_loss, final.wall_s)
    return summary


def _train(model, family, job, train_seqs, trainable, settings: Settings, name: str, label: str):
    result = loop.run(model, family, job.objective, train_seqs, job.val_batches, trainable, settings, label=label)
    if result.diverged_step is not None:
        raise RuntimeError(
            f"pretraining {name} diverged (non-finite loss) at step "
            f"{result.diverged_step}: lower pretrain.lr or raise warmup_fraction"
        )
    return result


def _plateau_check(
    model_cfg, job, theta0_dir, train_seqs, trainable, settings: Settings, multiple: float
) -> tuple[int, float]:
    """The same network pretrained for ``multiple`` x its examples (the schedule stretched to the longer run, the
    warm-up the same share of it): (examples, final validation loss). Trains a copy loaded from θ0; the network
    kept is untouched."""
    p = model_cfg["pretrain"]
    setup.seed_everything(p["seed"])  # the same RNG state the pretraining started from
    model = models.load(theta0_dir)
    longer = round(multiple * settings.max_examples)
    check = dataclasses.replace(
        settings,
        max_examples=longer,
        warmup_steps=max(1, round(p["warmup_fraction"] * math.ceil(longer / p["batch_size"]))),
        checkpoint_path=str(Path(settings.checkpoint_path).with_name("plateau.ckpt")),
    )
    result = _train(model, job.family, job, train_seqs, trainable, check, model_cfg["name"], "plateau check")
    checkpoints.remove(check)
    return result.curve[-1].examples, result.curve[-1].val_loss


def _val_at(curve, examples: float) -> float:
    """Validation loss at the evaluation closest to ``examples``."""
    return min(curve, key=lambda p: abs(p.examples - examples)).val_loss
