"""The retraining budget of one network: how many examples a cell may train before it counts as censored
(docs/configuration.md, ``retrain.budget_*``; docs/method.md, budgets).

It is a multiple of one of three units, recorded in every cell's ``CellResult.budget_unit``: ``scratch_cost``, the
fewest examples any copy of the network's own raced pretraining needed to first reach baseline x (1 + eps_min)
(``retrain.budget_scratch``, for a network pretrained from scratch here); ``pretrain_examples``, S x E of its
pretraining or adaptation, E the epochs to its best checkpoint (``retrain.budget_fraction``, and
``budget_scratch`` where there is no from-scratch curve); ``train_sequences`` for
a downloaded model healed as downloaded. ``retrain.stop_stalled`` is a multiple of the same unit. The budget is
computed once per heal unit (``of``); the budget keys and the stall stop are not part of a cell's staged settings
(``grid.NOT_COVERED``): a cell staged under another budget is kept or continued (``heal.unit``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from selfheal.heal.thresholds import copies, fewest_crossing, threshold_loss
from selfheal.records import PretrainSummary

KEYS = ("budget_fraction", "budget_scratch")  # the retrain keys that set the budget
STOP_KEY = "stop_stalled"  # the retrain key of the stall stop
SCRATCH_COST, PRETRAIN_EXAMPLES, TRAIN_SEQUENCES = "scratch_cost", "pretrain_examples", "train_sequences"
SCRATCH_SOURCE = "scratch"  # a network whose pretraining curve is a from-scratch run


@dataclass(frozen=True)
class Budget:
    examples: int  # the budget: round(multiple x unit_examples)
    unit: str  # SCRATCH_COST, PRETRAIN_EXAMPLES or TRAIN_SEQUENCES
    unit_examples: float  # the unit, in examples
    multiple: float  # the config's budget_scratch or budget_fraction
    scratch_examples: float | None  # the from-scratch cost (None where there is no from-scratch curve)
    stop_examples: int | None = None  # from here on a stalled cell stops: round(stop_stalled x unit_examples)


def scratch_cost(curve: pd.DataFrame, baseline: float, eps_min: float) -> float | None:
    """The fewest examples any copy of a raced pretraining (the curve's columns examples, val_loss and lr) needed
    to first reach baseline x (1 + eps_min), interpolated (``thresholds.fewest_crossing``); None when no copy does,
    or one reaches it at its first evaluation (no cost to scale)."""
    crossing = fewest_crossing(copies(curve), threshold_loss(baseline, eps_min))
    return crossing.examples if math.isfinite(crossing.examples) and crossing.examples > 0 else None


def of(
    retrain_cfg: dict, pre: PretrainSummary, baseline: float, curve_path: str | None, train_sequences: int
) -> Budget:
    """The budget of a network (module docstring): ``pre`` its pretraining record, ``baseline`` its baseline loss,
    ``curve_path`` its pretraining curve (None where it has none), ``train_sequences`` the train sequences
    available here (the unit of a downloaded model healed as downloaded)."""
    scratch = None
    if pre.source == SCRATCH_SOURCE and curve_path and Path(curve_path).is_file():
        scratch = scratch_cost(pd.read_parquet(curve_path), baseline, min(retrain_cfg["thresholds"]))
    multiple = retrain_cfg.get("budget_scratch")
    if multiple is not None and scratch is not None:
        unit, size = SCRATCH_COST, scratch
    else:
        multiple = retrain_cfg["budget_fraction"] if multiple is None else multiple
        unit, size = (
            (PRETRAIN_EXAMPLES, pre.pretrain_examples) if pre.pretrain_examples else (TRAIN_SEQUENCES, train_sequences)
        )
    stop = retrain_cfg.get(STOP_KEY)
    return Budget(
        round(multiple * size), unit, float(size), float(multiple), scratch, round(stop * size) if stop else None
    )


def run_examples(budget: Budget, is_control: bool, control_examples: int | None) -> int:
    """How long one cell trains at most: the budget; a matched no-reset control as long as the longest of the cells
    it is matched with (``control_examples``), at most the budget."""
    return min(budget.examples, control_examples or 0) if is_control else budget.examples


STAMP = "budget.txt"  # in a staged cell's folder: the budget keys it was last trained or kept under


def stamp(model_cfg: dict) -> str:
    """The budget keys of a network's settings, as the text of a staged cell's ``STAMP``."""
    return json.dumps({k: model_cfg["retrain"].get(k) for k in KEYS}, sort_keys=True)
