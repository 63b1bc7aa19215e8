"""Retrain-to-threshold: train a reset model until it is back within eps of its baseline validation loss.

Regimes: ``frozen`` (only the reset tensors train; embeddings and the tied LM head stay frozen), ``layer`` (every
tensor of the reset layer(s) trains) and ``full`` (everything trains, as in Tamkin et al. 2020).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from selfheal import grid, records, results_io
from selfheal.grid import Target
from selfheal.heal import thresholds
from selfheal.heal.prefix_cache import PrefixCache
from selfheal.heal.reset import load_reset_model, target_layers
from selfheal.records import Baseline, CellResult, Damage, PretrainSummary
from selfheal.training import checkpoints, loop, setup
from selfheal.training.state import Settings

log = logging.getLogger("selfheal")
REGIMES = ("frozen", "layer", "full")


def trainable_names(model, family, regime: str, target: Target | str, reset_names: list[str]) -> set[str]:
    """frozen: the reset tensors; layer: every tensor of the targeted layer(s) (plus the reset tensors, e.g.
    embeddings); full: everything."""
    target = Target.of(target)
    if regime == "frozen" or (regime == "layer" and target.kind == grid.SWAP_KIND):
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
) -> CellResult:
    """One retrain cell. ``cache_paths``: (train, val) of the frozen-prefix cache at the reset layer's depth,
    when the workflow made one for this cell (see prefix_cache.cache_depth)."""
    r = model_cfg["retrain"]
    setup.seed_everything(cell["seed"], threads)
    target = Target.parse(cell["target"])
    model, family, reset_names = load_reset_model(trained_dir, reset_weights)
    trainable = trainable_names(model, family, cell["regime"], target, reset_names)
    trainable_params = int(sum(p.numel() for n, p in model.named_parameters() if n in trainable))
    baseline = records.read(baseline_path, Baseline).val_loss
    damaged = records.read(damage_path, Damage).damaged_loss
    pre = records.read(pretrain_summary_path, PretrainSummary)
    # S x E: unknown for a downloaded model, whose budget is then counted in the train sequences available here.
    pretrain_examples = pre.pretrain_examples

    job = setup.prepare(model, model_cfg, eval_cfg, tokens_path)
    train_seqs = setup.train_sequences(model_cfg, tokens_path)
    budget_unit = pretrain_examples or train_seqs.shape[0]
    settings = Settings(
        lr=r["lr"],
        batch_size=r["batch_size"],
        weight_decay=r["weight_decay"],
        grad_clip=r["grad_clip"],
        eval_every_examples=r["eval_every_examples"],
        max_examples=round(r["budget_fraction"] * budget_unit),
        warmup_steps=r["warmup_steps"],
        data_seed=cell["seed"],
        hardware=job.hardware,
        checkpoint_path=str(Path(recovery_path).with_name("retrain.ckpt")),
        checkpoint_every_steps=r["checkpoint_every_steps"],
    )
    log.info(
        "retrain %s: %d trainable tensors (%d params), baseline %.4f, damaged %.4f, budget %d examples",
        cell, len(trainable), trainable_params, baseline, damaged, settings.max_examples,
    )
    cache = None
    if cache_paths:
        depth = family.layer(model, target.text).depth
        cache = PrefixCache.open(depth, *cache_paths)
        log.info("using the frozen-prefix cache at depth %d", depth)
    levels = r["thresholds"]
    result = loop.run(
        model, family, job.objective, train_seqs, job.val_batches, trainable, settings,
        should_stop=lambda point: thresholds.all_reached(point.val_loss, baseline, levels),
        label="retrain",
        cache=cache,
    )
    recoveries = thresholds.recoveries(result.curve, baseline, levels)
    log.info("training throughput %.0f tokens/s; evaluation took %.0f%% of the cell's wall time",
             result.train_tokens_per_s, 100 * result.eval_s / max(result.curve[-1].wall_s, 1e-9))
    if result.diverged_step is not None:
        log.warning("cell diverged at step %d: kept in the tables as diverged", result.diverged_step)
    for rec in recoveries:
        log.info("threshold %.3f: %s at %d examples", rec.threshold,
                 "recovered" if rec.recovered else "censored", rec.examples)

    curve = pd.DataFrame([asdict(pt) for pt in result.curve])
    results_io.write_parquet(curve_path, curve)
    layer = family.layer(model, target.text) if target.is_layer else None
    out = CellResult(
        **cell,
        stack=layer.stack if layer else None,
        layer=layer.index if layer else None,
        depth=layer.depth if layer else None,
        arch=pre.arch,
        n_layer=pre.n_layer,
        d_model=pre.d_model,
        pretrain_examples=pretrain_examples,
        budget_examples=settings.max_examples,
        baseline_loss=baseline,
        damaged_loss=damaged,
        final_loss=result.curve[-1].val_loss,
        trainable_tensors=len(trainable),
        trainable_params=trainable_params,
        reset_tensors=len(reset_names),
        recoveries=recoveries,
        diverged_step=result.diverged_step,
        prefix_cache_depth=cache.depth if cache else None,
        train_tokens_per_s=result.train_tokens_per_s,
        eval_share=result.eval_s / result.curve[-1].wall_s if result.curve[-1].wall_s > 0 else 0.0,
    )
    records.write(recovery_path, out)
    checkpoints.remove(settings)
    return out
