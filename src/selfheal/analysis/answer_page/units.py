"""The three units of a cost (fraction of S x E, examples, tokens) and the cost relative to pretraining from scratch
(``pretrain_reference``), or for a brought model relative to its own pretraining tokens.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis.answer_page.view import View, _pretrained_here, _usable
from selfheal.analysis.answer_page.words import _sci
from selfheal.analysis.page import compact, span


def _tokens_per_example(summary: pd.DataFrame, networks: pd.DataFrame, model: str) -> float:
    """Tokens per example (sequence) of a model: its networks' ``context``, else the summary's tokens / examples."""
    if "context" in networks.columns:
        ctx = pd.to_numeric(networks.loc[networks["model"] == model, "context"], errors="coerce").dropna()
        if len(ctx):
            return float(ctx.iloc[0])
    if {"tokens", "examples"} <= set(summary.columns):
        rows = summary[(summary["model"] == model) & (pd.to_numeric(summary["examples"], errors="coerce") > 0)]
        if len(rows):
            return float((rows["tokens"].astype(float) / rows["examples"].astype(float)).median())
    return math.nan


def _scratch_reference(ref: pd.DataFrame, networks: pd.DataFrame, model: str, eps: float) -> dict:
    """The from-scratch reference of a model at one ε: the mean over its usable networks pretrained here of the
    examples (and fraction of S x E) their own pretraining curve needed to first reach baseline x (1 + ε)
    (interpolated, ``pretrain_reference``, the same as summary.parquet's scratch_examples), how many of them
    reached it, and whether any of those crossings is coarse. A model you bring has none (its adaptation to the
    corpus is not pretraining from scratch)."""
    nets = _pretrained_here(_usable(networks))
    nets = nets[nets["model"] == model]
    out = {"examples": math.nan, "fraction": math.nan, "reached": 0, "networks": len(nets), "coarse": False}
    if not len(nets) or not len(ref) or "examples" not in ref.columns:
        return out
    rows = ref[
        (ref["model"] == model) & (ref["threshold"] == eps) & ref["pretrain_seed"].isin(set(nets["pretrain_seed"]))
    ]
    reached = rows[rows["examples"].notna()]
    out["reached"] = len(reached)
    if len(reached):
        out["examples"] = float(reached["examples"].astype(float).mean())
        out["fraction"] = float(reached["fraction"].astype(float).mean())
        out["coarse"] = bool(reached["coarse"].astype(bool).any()) if "coarse" in reached.columns else False
    return out


def _three_units(
    at: pd.DataFrame,
    unit: str,
    model: str,
    eps: float,
    summary: pd.DataFrame,
    networks: pd.DataFrame,
    ref: pd.DataFrame,
) -> dict:
    """The per-layer survival medians of one model at one ε (``at``) in the three units: fraction of S x E,
    examples (and tokens), and relative to the from-scratch run (the median in examples over the mean scratch
    reference of ``_scratch_reference``). Values are spans over the layers, '' where unknown."""
    examples = at["median_examples"].astype(float)
    per_example = _tokens_per_example(summary, networks, model)
    scratch = _scratch_reference(ref, networks, model, eps)
    relative = examples / scratch["examples"] if scratch["examples"] > 0 else examples * math.nan
    return {
        "fraction": span(at["median_fraction"].astype(float)) if unit == "fraction" else "",
        "examples": span(examples),
        "tokens": span(examples * per_example, compact),
        "relative": span(relative),
        "scratch": scratch,
    }


def _scratch_span(v: View, models: list[str], eps: float, unit: str) -> str:
    """The span over models of what pretraining from scratch needed to reach baseline x (1 + ε), in ``unit``."""
    values = [_scratch_reference(v.ref, v.networks, m, eps)[unit] for m in models]
    return span(values)


def _times_scratch_span(v: View, rows: pd.DataFrame, eps: float) -> str:
    """The span of the finite (model, layer) medians as multiples of what their model's pretraining from scratch
    needed to reach the same loss (``_scratch_reference``); '' where no model has one."""
    return span(
        [
            float(r["median_examples"]) / ref
            for _, r in rows.iterrows()
            if (ref := _scratch_reference(v.ref, v.networks, r["model"], eps)["examples"]) > 0
        ]
    )


def _own_pretraining(v: View, model: str) -> float:
    """A brought model's own pretraining tokens (answer/networks_flags.parquet's pretraining_tokens, from the
    config), NaN where not given."""
    if "pretraining_tokens" not in v.flags.columns:
        return math.nan
    values = pd.to_numeric(v.flags.loc[v.flags["model"] == model, "pretraining_tokens"], errors="coerce").dropna()
    return float(values.iloc[0]) if len(values) else math.nan


def _share_span(v: View, at: pd.DataFrame, model: str) -> str:
    """The finite single-layer medians of ``model`` in ``at`` (one ε) in tokens, as a share of its own pretraining
    tokens ('1.2e-6 to 3.4e-6'), '' where unknown."""
    own = _own_pretraining(v, model)
    if not own > 0:
        return ""
    med = at.loc[at["model"] == model, "median_examples"].astype(float)
    tokens = med[np.isfinite(med)] * _tokens_per_example(v.summary, v.networks, model)
    return span(tokens / own, _sci)
