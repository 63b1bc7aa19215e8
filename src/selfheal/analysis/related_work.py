"""What is already known: the published experiments nearest to the question, each with its finding (static
reference facts, not results), how its setting differs from this workflow's, and the number of this grid that can
be set beside it (``comparisons``, read from the answer tables only)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import pandas as pd

from selfheal.analysis import scaling
from selfheal.analysis.page import num, pct


@dataclasses.dataclass(frozen=True)
class Published:
    who: str  # authors, year and title
    finding: str  # what they report, with their numbers
    differs: str  # how their setting differs from this workflow's
    ours: Callable[[dict[str, pd.DataFrame]], str]  # this grid's comparable number, from the answer tables


def _asked(table: pd.DataFrame) -> pd.DataFrame:
    if not len(table):
        return table
    return table[(table["regime"] == "frozen") & (table["policy"] == "full") & (table["init"] == "fresh")]


def _single_layer_costs(t: dict[str, pd.DataFrame]) -> str:
    """The per-layer medians at the smallest and largest ε, in fractions of S x E, and the reset-all control."""
    surv = _asked(t["survival"])
    if not len(surv) or surv["median_fraction"].isna().all():
        return "not determined by this grid (no single-layer cells with a known S × E)"
    parts = []
    for eps in sorted({surv["threshold"].min(), surv["threshold"].max()}):
        at = surv[(surv["threshold"] == eps)]
        layers, every = at[at["kind"] == "layer"], at[at["target"] == "all"]
        med = layers["median_fraction"].astype(float)
        finite = med[np.isfinite(med)]
        reached = (
            f"medians {num(finite.min())} to {num(finite.max())} of S × E"
            if len(finite)
            else "no median within the budget"
        )
        beyond = int(np.isinf(med).sum())  # a group never damaged beyond ε (NaN) has no cost, and is not beyond
        undamaged = int(med.isna().sum())
        every_reached = int(np.isfinite(every["median_fraction"].astype(float)).sum())
        parts.append(
            f"ε = {eps:g}: one layer {reached} ({beyond} of {len(med) - undamaged} layer groups beyond the budget"
            + (f"; {undamaged} never damaged beyond ε" if undamaged else "")
            + "); "
            f"every layer reset: {every_reached} of {len(every)} models within the budget"
        )
    return "; ".join(parts)


def _share_recovered(t: dict[str, pd.DataFrame]) -> str:
    """The share of single-layer cells that got back within ε inside the budget."""
    surv = _asked(t["survival"])
    layers = surv[surv["kind"] == "layer"] if len(surv) else surv
    if not len(layers):
        return "not determined by this grid"
    parts = []
    for eps, g in layers.groupby("threshold", sort=True):  # of the cells the reset damaged beyond ε
        n, rec = int((g["n_cells"] - g["n_not_damaged"]).sum()), int(g["n_recovered"].sum())
        parts.append(f"ε = {eps:g}: {rec} of {n} ({pct(rec / n) if n else 'n/a'})")
    budget = layers["budget_fraction"].dropna()
    within = f" (up to {num(float(budget.max()))} of S × E)" if len(budget) else ""
    return (
        "single-layer cells damaged beyond ε that got back by the end of the budget" + within + ": " + "; ".join(parts)
    )


def _damage_by_position(t: dict[str, pd.DataFrame]) -> str:
    """The loss jump right after a fresh reset (no retraining), first layer against the others."""
    cells = _asked(t["damage_cells"])
    if not len(cells):
        return "not determined by this grid"
    cells = cells.drop_duplicates(["model", "pretrain_seed", "seed", "target"])
    first = cells[cells["depth"] == 0]["damage"].astype(float)
    rest = cells[cells["depth"] > 0]["damage"].astype(float)
    if not len(rest):
        return f"loss right after resetting the first (only) layer: median +{num(first.median())} nats"
    return (
        f"loss right after a fresh reset, no retraining: first layer median +{num(first.median())} nats, "
        f"the other layers +{num(rest.median())} nats"
    )


def _position_effect(t: dict[str, pd.DataFrame]) -> str:
    """The fit's first- and last-layer terms at the smallest ε, named by their labels (each against the middle
    layers, or the first against the last where no network has middle layers; reason codes: ``scaling.REASONS``)."""
    fit = _asked(t["fit"])
    if not len(fit):
        return "not determined by this grid"
    fit = fit[fit["threshold"] == fit["threshold"].min()]
    out = []
    for term in ("first_layer", "last_layer"):
        r = fit[fit["term"] == term]
        if not len(r) or (term == "last_layer" and (fit["label"] == scaling.FIRST_VS_LAST).any()):
            continue  # no middle layers: the first-layer term already compares the first with the last
        r = r.iloc[0]
        words = r["label"]
        if bool(r["determined"]):
            out.append(f"{words}: cost × {num(r['factor'])} [{num(r['factor_lo'])}, {num(r['factor_hi'])}]")
        else:
            out.append(f"{words}: not determined ({scaling.REASONS.get(r['reason'], r['reason'])})")
    return f"ε = {fit['threshold'].min():g}: " + "; ".join(out) if out else "not determined by this grid"


def _not_here(_: dict[str, pd.DataFrame]) -> str:
    return "not measured by the reset grid: the `frozen_random` experiment re-runs it (docs/experiments.md)"


PUBLISHED = [
    Published(
        "Zhang, Bengio & Singer 2019, *Are All Layers Created Equal?*",
        "one layer of a trained image classifier (VGG, ResNet) re-initialised *without retraining*: most layers "
        "are 'robust' to their initial values, the first ones 'critical'; a fresh random draw ruins most layers",
        "no retraining; vision models, test error",
        _damage_by_position,
    ),
    Published(
        "Tamkin et al. 2020, *Investigating Transferability in Pretrained Language Models*",
        "BERT-base layers re-initialised, then the *whole* model finetuned on GLUE: a layer's pretrained weights "
        "help with plenty of finetuning data, little when data are scarce",
        "everything trains; downstream accuracy (the `transfer:` section re-runs their experiments)",
        _position_effect,
    ),
    Published(
        "Gromov et al. 2024, *The Unreasonable Ineffectiveness of the Deeper Layers*; LLM-Streamline "
        "(Chen et al. 2024)",
        "up to half of the deeper layers of open LLMs (Llama-2-70B among them) removed with little loss on "
        "question answering after a small QLoRA 'healing' finetune; LLM-Streamline trains one small layer in a "
        "pruned block's place",
        "layers deleted, not reset; billions of parameters; a fixed healing budget scored by accuracy",
        _share_recovered,
    ),
    Published(
        "Muralidharan et al. 2024 (Minitron), *Compact Language Models via Pruning and Knowledge Distillation*",
        "Nemotron-4 15B pruned to 8B and 4B and retrained by distillation on under 3 % of the original tokens",
        "pruning and distillation, every weight retrained",
        _single_layer_costs,
    ),
    Published(
        "Bogoychev 2021, *Not all parameters are born equal: attention is mostly what you need*",
        "parts of a translation transformer left random and frozen throughout training cost little BLEU "
        "(attention least)",
        "trained from scratch around frozen random parts: no healing",
        _not_here,
    ),
]


def comparisons(tables: dict[str, pd.DataFrame]) -> list[list[str]]:
    """One row per published experiment: who, their finding, how the setting differs, this grid's number."""
    return [[p.who, p.finding, p.differs, p.ours(tables)] for p in PUBLISHED]
