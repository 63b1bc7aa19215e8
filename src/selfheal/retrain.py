"""Retrain-to-threshold: train a reset model until it is back within eps of its baseline validation loss.

Regimes: ``frozen`` (only the reset tensors train; embeddings and the tied LM head stay frozen), ``layer`` (every
tensor of the reset layer(s) trains) and ``full`` (everything trains, as in Tamkin et al. 2020).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from selfheal import checkpoints, data, metrics, objectives, results_io, train
from selfheal.config import TARGET_SWAP
from selfheal.hardware import Hardware
from selfheal.prefix_cache import PrefixCache
from selfheal.reset import load_reset_model, target_layers

log = logging.getLogger("selfheal")
REGIMES = ("frozen", "layer", "full")


def trainable_names(model, family, regime: str, target: str, reset_names: list[str]) -> set[str]:
    """frozen: the reset tensors; layer: every tensor of the targeted layer(s) (plus the reset tensors, e.g.
    embeddings); full: everything."""
    if regime == "frozen" or (regime == "layer" and target.startswith(TARGET_SWAP)):
        return set(reset_names)
    if regime == "layer":
        layers = target_layers(model, family, target)
        return set(reset_names) | {n for layer in layers for n in family.param_names(model, layer, "full")}
    if regime == "full":
        return {n for n, _ in model.named_parameters()}
    raise ValueError(f"unknown regime {regime!r}; expected one of {REGIMES}")


def retrain_cell(
    model_cfg: dict,
    eval_cfg: dict,
    cell: dict,
    tokens_path: str,
    trained_dir: str,
    reset_weights: str,
    baseline_path: str,
    damage_path: str,
    pretrain_summary_path: str,
    recovery_path: str,
    curve_path: str,
    threads: int = 1,
    cache_paths: tuple[str, str] | None = None,
) -> dict:
    """One retrain cell. ``cache_paths``: (train, val) of the frozen-prefix cache at the reset layer's depth,
    when the workflow made one for this cell (see prefix_cache.cache_depth)."""
    r = model_cfg["retrain"]
    train.seed_everything(cell["seed"], threads)
    model, family, reset_names = load_reset_model(trained_dir, reset_weights)
    trainable = trainable_names(model, family, cell["regime"], cell["target"], reset_names)
    trainable_params = int(sum(p.numel() for n, p in model.named_parameters() if n in trainable))
    baseline = results_io.read_json(baseline_path)["val_loss"]
    damaged = results_io.read_json(damage_path)["damaged_loss"]
    pre = results_io.read_json(pretrain_summary_path)
    # S x E: unknown for a downloaded model, whose budget is then counted in the train sequences available here.
    pretrain_examples = pre["train_sequences"] * pre["epochs"] if pre.get("epochs") else None

    p = model_cfg["pretrain"]
    context = model_cfg["context"]
    train_seqs = data.train_sequences(tokens_path, context, p["train_sequences"], p["seed"])
    val_seqs = data.val_sequences(tokens_path, context, eval_cfg["val_sequences"])
    objective = objectives.for_family(family, data.vocabulary(tokens_path))
    val_batches = objective.val_batches(val_seqs, eval_cfg["batch_size"])
    budget_unit = pretrain_examples or train_seqs.shape[0]
    settings = train.Settings(
        lr=r["lr"],
        batch_size=r["batch_size"],
        weight_decay=r["weight_decay"],
        grad_clip=r["grad_clip"],
        eval_every_examples=r["eval_every_examples"],
        max_examples=round(r["budget_fraction"] * budget_unit),
        warmup_steps=r["warmup_steps"],
        data_seed=cell["seed"],
        hardware=Hardware.from_config(model_cfg.get("hardware")),
        checkpoint_path=str(Path(recovery_path).with_name("retrain.ckpt")),
        checkpoint_every_steps=r["checkpoint_every_steps"],
    )
    log.info(
        "retrain %s: %d trainable tensors (%d params), baseline %.4f, damaged %.4f, budget %d examples",
        cell, len(trainable), trainable_params, baseline, damaged, settings.max_examples,
    )
    cache = None
    if cache_paths:
        depth = family.layer(model, cell["target"]).depth
        cache = PrefixCache.open(depth, *cache_paths)
        log.info("using the frozen-prefix cache at depth %d", depth)
    thresholds = r["thresholds"]
    result = train.run(
        model, family, objective, train_seqs, val_batches, trainable, settings,
        should_stop=lambda point: metrics.all_reached(point.val_loss, baseline, thresholds),
        label="retrain",
        cache=cache,
    )
    recoveries = metrics.recoveries(result.curve, baseline, thresholds)
    log.info("training throughput %.0f tokens/s; evaluation took %.0f%% of the cell's wall time",
             result.train_tokens_per_s, 100 * result.eval_s / max(result.curve[-1].wall_s, 1e-9))
    if result.diverged_step is not None:
        log.warning("cell diverged at step %d: kept in the tables as diverged", result.diverged_step)
    for rec in recoveries:
        log.info("threshold %.3f: %s at %d examples", rec.threshold,
                 "recovered" if rec.recovered else "censored", rec.examples)

    curve = pd.DataFrame([asdict(pt) for pt in result.curve])
    results_io.write_parquet(curve_path, curve)
    layer_ids = {l.id: l for l in family.layers(model)}
    layer = layer_ids.get(cell["target"])
    out = {
        **cell,
        "stack": layer.stack if layer else None,
        "layer": layer.index if layer else None,
        "depth": layer.depth if layer else None,
        "arch": pre["arch"],
        "n_layer": pre["n_layer"],
        "d_model": pre["d_model"],
        "pretrain_examples": pretrain_examples,
        "budget_examples": settings.max_examples,
        "baseline_loss": baseline,
        "damaged_loss": damaged,
        "final_loss": result.curve[-1].val_loss,
        "trainable_tensors": len(trainable),
        "trainable_params": trainable_params,
        "reset_tensors": len(reset_names),
        "recoveries": [asdict(rec) for rec in recoveries],
        "diverged_step": result.diverged_step,
        "prefix_cache_depth": cache.depth if cache else None,
        "train_tokens_per_s": result.train_tokens_per_s,
        "eval_share": result.eval_s / result.curve[-1].wall_s if result.curve[-1].wall_s > 0 else 0.0,
    }
    results_io.write_json(recovery_path, out)
    checkpoints.remove(settings)
    return out
