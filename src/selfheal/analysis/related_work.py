"""What is already known: the published experiments nearest to the question, each with its finding in short (static
reference facts, not results; the full finding and how each setting differs from this workflow's:
docs/experiments.md, "What is already known"), and the number of this grid that can be set beside it
(``comparisons``, read from the answer tables only)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import pandas as pd

from selfheal.analysis import scaling
from selfheal.analysis.formats import num, pct
from selfheal.analysis.survival import in_setting


@dataclasses.dataclass(frozen=True)
class Published:
    who: str  # authors, year and title
    finding: str  # what they report, in short (in full, with how their setting differs: docs/experiments.md)
    ours: Callable[[dict[str, pd.DataFrame]], str]  # this grid's comparable number, from the answer tables


def _single_layer_costs(t: dict[str, pd.DataFrame]) -> str:
    """The per-layer medians at the smallest ε (the asker's; the others: §1), in fractions of S x E, and the
    reset-all control."""
    surv = in_setting(t["survival"])
    if not len(surv) or surv["median_fraction"].isna().all():
        return "not determined by this grid (no single-layer cells with a known S × E)"
    eps = surv["threshold"].min()
    at = surv[(surv["threshold"] == eps)]
    layers, every = at[at["kind"] == "layer"], at[at["target"] == "all"]
    med = layers["median_fraction"].astype(float)
    finite = med[np.isfinite(med)]
    reached = (
        f"medians {num(finite.min())} to {num(finite.max())} of S × E" if len(finite) else "no median within the budget"
    )
    beyond = int(np.isinf(med).sum())  # a group never damaged beyond ε (NaN) has no cost, and is not beyond
    undamaged = int(med.isna().sum())
    every_reached = int(np.isfinite(every["median_fraction"].astype(float)).sum())
    return (
        f"ε = {eps:g}: one layer {reached} ({beyond} of {len(med) - undamaged} layer groups beyond the budget"
        + (f"; {undamaged} never damaged beyond ε" if undamaged else "")
        + f"), every layer reset within it in {every_reached} of {len(every)} models"
    )


def _share_recovered(t: dict[str, pd.DataFrame]) -> str:
    """The share of single-layer cells that got back within ε inside the budget."""
    surv = in_setting(t["survival"])
    layers = surv[surv["kind"] == "layer"] if len(surv) else surv
    if not len(layers):
        return "not determined by this grid"
    parts = []
    ends = {layers["threshold"].min(), layers["threshold"].max()}  # as the page's tables: the smallest and largest ε
    for eps, g in layers[layers["threshold"].isin(ends)].groupby("threshold", sort=True):  # the cells damaged beyond ε
        n, rec = int((g["n_cells"] - g["n_not_damaged"]).sum()), int(g["n_recovered"].sum())
        parts.append(f"ε = {eps:g}: {rec} of {n} ({pct(rec / n) if n else 'n/a'})")
    budget = layers["budget_fraction"].dropna()
    within = f" (up to {num(float(budget.max()))} of S × E)" if len(budget) else ""
    return "single-layer cells damaged beyond ε and back within the budget" + within + ": " + "; ".join(parts)


def _damage_by_position(t: dict[str, pd.DataFrame]) -> str:
    """The loss jump right after a fresh reset (no retraining), first layer against the others."""
    cells = in_setting(t["damage_cells"])
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
    fit = in_setting(t["fit"])
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
            out.append(f"{words}: × {num(r['factor'])} [{num(r['factor_lo'])}, {num(r['factor_hi'])}]")
        else:
            out.append(f"{words}: not determined ({scaling.REASONS.get(r['reason'], r['reason'])})")
    return f"ε = {fit['threshold'].min():g}: " + "; ".join(out) if out else "not determined by this grid"


def _not_here(_: dict[str, pd.DataFrame]) -> str:
    return "not measured by the reset grid: the `frozen_random` experiment re-runs it (docs/experiments.md)"


PUBLISHED = [
    Published(
        "Zhang, Bengio & Singer 2019",
        "a trained image classifier's layer re-initialised, no retraining: the first layers 'critical', most "
        "others 'robust'",
        _damage_by_position,
    ),
    Published(
        "Tamkin et al. 2020",
        "BERT layers re-initialised, the whole model finetuned: pretrained weights matter with plenty of data",
        _position_effect,
    ),
    Published(
        "Gromov et al. 2024; Chen et al. 2024 (LLM-Streamline)",
        "up to half of an LLM's deeper layers removed, then 'healed' by a small finetune",
        _share_recovered,
    ),
    Published(
        "Muralidharan et al. 2024 (Minitron)",
        "a 15B model pruned to 8B and 4B, retrained on under 3 % of its tokens",
        _single_layer_costs,
    ),
    Published("Bogoychev 2021", "random frozen parts of a translation transformer cost little BLEU", _not_here),
]


def comparisons(tables: dict[str, pd.DataFrame]) -> list[list[str]]:
    """One row per published experiment: who, their finding in short, this grid's number."""
    return [[p.who, p.finding, p.ours(tables)] for p in PUBLISHED]
