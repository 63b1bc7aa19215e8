"""Retrain-to-threshold: train a reset model until it is back within eps of its baseline validation loss.

Regimes: ``frozen`` (only the reset tensors train; embeddings and the tied LM head stay frozen), ``layer`` (every
tensor of the reset layer(s) trains) and ``full`` (everything trains, as in Tamkin et al. 2020).
"""

from __future__ import annotations

import logging
from dataclasses import asdict

import pandas as pd

from selfheal import grid
from selfheal.grid import Cell, Target
from selfheal.heal import budget as budgets
from selfheal.heal import stall, thresholds
from selfheal.heal.budget import Budget
from selfheal.heal.prefix_cache import PrefixCache
from selfheal.heal.reset import target_layers
from selfheal.records import CellResult, PretrainSummary
from selfheal.training import loop, setup
from selfheal.training.state import Settings

log = logging.getLogger("selfheal")
REGIMES = ("frozen", "layer", "full")
WEIGHT_DECAY = 0.0  # the retraining decays no weight
GRAD_CLIP = 1.0  # the global gradient norm is clipped to this (as in pretraining)
# Largest relative width (hi - lo) / hi of a located crossing (or one step): a wider evaluation interval that
# crosses a threshold is narrowed by evaluating its kept steps (training.loop, ``resolution``)
RESOLUTION = thresholds.RESOLUTION


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


def retrain(
    model,
    family,
    job: setup.Setup,
    train_seqs,
    model_cfg: dict,
    cell: Cell,
    reset_names: list[str],
    baseline: float,
    damaged: float,
    pre: PretrainSummary,
    cache: PrefixCache | None = None,
    checkpoint_path: str | None = None,
    control_examples: int | None = None,
    budget: Budget | None = None,
    extension_path: str | None = None,
) -> tuple[CellResult, pd.DataFrame]:
    """Retrain one reset cell (``model`` holds the reset) until every threshold is met, the budget runs out
    (``budget``: the network's, ``heal.budget``; by default ``retrain.budget_fraction`` x S x E) or, from
    ``budget.stop_examples`` on, its curve has stalled (``heal.stall``). Returns the cell's
    record and its recovery curve; the caller removes ``checkpoint_path`` once it has written them.
    ``extension_path``: the cell's extension point (``loop.run``), continued when it lies within the budget.

    A matched no-reset control (``Cell.is_matched_control``) does not stop at a threshold (it starts at the baseline): it
    trains for ``control_examples`` (the longest run of the cells it is matched with), at most the budget, on the
    same data order and evaluation schedule."""
    r = model_cfg["retrain"]
    target = Target.parse(cell.target)
    trainable = trainable_names(model, family, cell.regime, target, reset_names)
    trainable_params = int(sum(p.numel() for n, p in model.named_parameters() if n in trainable))
    pretrain_examples = pre.pretrain_examples  # S x E (None for a downloaded model)
    budget = budget or budgets.of(r, pre, baseline, None, train_seqs.shape[0])
    control = cell.is_matched_control
    settings = Settings(
        lr=r["lr"],
        batch_size=r["batch_size"],
        weight_decay=WEIGHT_DECAY,
        grad_clip=GRAD_CLIP,
        eval_every_examples=r["eval_every_examples"],
        max_examples=budgets.run_examples(budget, control, control_examples),
        warmup_steps=r["warmup_steps"],
        optimizer=r["optimizer"],
        data_seed=cell.seed,
        hardware=job.hardware,
        checkpoint_path=checkpoint_path,
        checkpoint_every_steps=r["checkpoint_every_steps"],
        extension_path=extension_path,
    )
    log.info(
        "retrain %s: %d trainable tensors (%d params), baseline %.4f, damaged %.4f, %s %d examples (%g x %s)%s",
        cell.as_dict(),
        len(trainable),
        trainable_params,
        baseline,
        damaged,
        "trains for" if control else "budget",
        settings.max_examples,
        budget.multiple,
        budget.unit,
        f", from the prefix cache at depth {cache.depth}" if cache else "",
    )
    levels = r["thresholds"]

    def should_stop(curve) -> bool:  # every threshold met, or stalled from budget.stop_examples on
        if control:
            return False
        point = curve[-1]
        if thresholds.all_reached(point.val_loss, baseline, levels):
            return True
        stop = budget.stop_examples
        return stop is not None and point.examples >= stop and stall.of_curve(curve).stalled

    result = loop.run(
        model,
        family,
        job.objective,
        train_seqs,
        job.val_batches,
        trainable,
        settings,
        should_stop=should_stop,
        label="control" if control else "retrain",
        cache=cache,
        levels=[] if control else [thresholds.threshold_loss(baseline, eps) for eps in levels],
        resolution=RESOLUTION,
        start_loss=damaged,
    )
    recoveries = thresholds.recoveries(result.curve, baseline, levels)
    reached = all(rec.recovered for rec in recoveries)
    log.info(
        "training throughput %.0f tokens/s; evaluation took %.0f%% of the cell's wall time",
        result.train_tokens_per_s,
        100 * result.eval_s / max(result.wall_s, 1e-9),
    )
    if result.diverged_step is not None:
        log.warning("cell diverged at step %d: kept in the tables as diverged", result.diverged_step)
    for rec in recoveries:
        log.info(
            "threshold %.3f: %s at %d examples",
            rec.threshold,
            "recovered" if rec.recovered else "censored",
            rec.examples,
        )

    layer = family.layer(model, target.text) if target.is_layer else None
    out = CellResult(
        **cell.as_dict(),
        stack=layer.stack if layer else None,
        layer=layer.index if layer else None,
        depth=layer.depth if layer else None,
        arch=pre.arch,
        n_layer=pre.n_layer,
        d_model=pre.d_model,
        pretrain_examples=pretrain_examples,
        budget_examples=settings.max_examples,
        budget_unit=budget.unit,
        budget_multiple=budget.multiple,
        scratch_cost=budget.scratch_examples,
        settled_examples=result.settled_at,
        stop_examples=budget.stop_examples,
        stalled_examples=result.settled_at if result.settled_at is not None and not reached else None,
        baseline_loss=baseline,
        damaged_loss=damaged,
        final_loss=max(result.curve, key=lambda p: p.examples).val_loss,
        trainable_tensors=len(trainable),
        trainable_params=trainable_params,
        reset_tensors=len(reset_names),
        recoveries=recoveries,
        diverged_step=result.diverged_step,
        prefix_cache_depth=cache.depth if cache else None,
        train_tokens_per_s=result.train_tokens_per_s,
        eval_share=result.eval_s / wall if (wall := result.wall_s) > 0 else 0.0,
        replay_share=result.replay_s / wall if wall > 0 else 0.0,
        n_params=int(sum(p.numel() for p in model.parameters())),
    )
    return out, pd.DataFrame([asdict(pt) for pt in result.curve])
