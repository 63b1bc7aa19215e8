"""The judgements the answer page states, as columns of the answer tables (``answer_tables.compute`` adds them;
schemas in docs/outputs.md). Each verdict is decided here once, from the table's own numbers; the page
(``analysis.page`` and its template) only words them.

- ``survival`` and ``against_control``: ``verdict`` (``VERDICTS``: what the median says), ``costliest`` (the
  single layer with the highest median of its model, setting and ε), and the from-scratch reference beside each
  median (``scratch_examples``, ``scratch_fraction``: the mean over the model's usable networks pretrained here of
  what their own pretraining needed to first reach the same loss; ``relative_to_scratch``: the median in examples
  over it).
- ``survival``: ``back_against_control``: the same median against the matched control is finite; a median that
  would refuse is then ``back_to_control`` (a cell refuses only short of both its baseline and its control).
- ``fit``: ``verdict``: the term raises the cost (its interval above 1), lowers it (below 1), has no clear effect
  (the interval includes 1) or is not determined (``reason`` says why).
- ``control_drift``: ``beyond_tolerance``: an intact network retrained alone moved by more than
  ``stats.DRIFT_TOLERANCE`` x ε_min at some evaluation.
- ``networks_flags``: ``past_minimum_share`` (networks.parquet's past_minimum over its baseline loss) and
  ``overfit``: past its own pretraining minimum by more than ``DRIFT_TOLERANCE`` x ε_min of its baseline.
- ``encoder_decoder``: ``verdict`` as survival's (``back_to_control`` where its control median is finite),
  ``like_reset_all`` (``like_reset_all``) and ``slower_than_scratch``: its median (or, beyond the budget, the
  budget) is at least pretraining from scratch to the same loss.
- ``network_costs``: ``back_against_control``: a cell with a matched control got within ε of it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis import survival
from selfheal.analysis.stats import DRIFT_TOLERANCE, cost_unit, flag

# survival's verdict: recovered (a finite median), not_damaged (no cell left the ε band: no cost), and for a median
# beyond the budget still_falling (some of its cells were still falling when the budget ended: not answered),
# back_to_control (its cells stalled short of the baseline, but the same median against the matched control is
# finite: the intact network retrained the same way moved as far, so that is the retraining's drift, not a refusal)
# or refuses (its cells stalled or diverged short of both the baseline and the control)
VERDICTS = ("recovered", "not_damaged", "still_falling", "back_to_control", "refuses")
FIT_VERDICTS = ("raises the cost", "lowers the cost", "no clear effect", "not determined")
GROUP = ["model", "regime", "policy", "init", "threshold"]


def median_verdict(median, n_still_falling) -> str:
    """The verdict of one median (``VERDICTS``)."""
    median = float(median)
    if math.isnan(median):
        return "not_damaged"
    if math.isfinite(median):
        return "recovered"
    return "still_falling" if int(n_still_falling) else "refuses"


def scratch_means(ref: pd.DataFrame, networks: pd.DataFrame) -> pd.DataFrame:
    """Per (model, threshold): the mean over its usable networks pretrained here that reached the loss of the
    examples and fraction of S x E their own pretraining needed (``pretrain_reference``)."""
    nets = networks
    if "degenerate" in nets.columns:
        nets = nets[~flag(nets["degenerate"])]
    if "source" in nets.columns:
        nets = nets[nets["source"].fillna("scratch") == "scratch"]
    if not len(ref):
        return pd.DataFrame(columns=["model", "threshold", "scratch_examples", "scratch_fraction"])
    rows = ref.merge(nets[["model", "pretrain_seed"]], on=["model", "pretrain_seed"])
    rows = rows[rows["examples"].notna()]
    means = rows.groupby(["model", "threshold"], as_index=False).agg(
        scratch_examples=("examples", "mean"), scratch_fraction=("fraction", "mean")
    )
    return means.astype({"scratch_examples": float, "scratch_fraction": float})


def survival_verdicts(table: pd.DataFrame, scratch: pd.DataFrame, networks: pd.DataFrame) -> pd.DataFrame:
    """``verdict``, ``costliest`` and the from-scratch columns of a survival-shaped table."""
    out = table.copy()
    keys = pd.MultiIndex.from_arrays([table["model"], table["threshold"]])
    means = scratch.set_index(["model", "threshold"])
    for column in ("scratch_examples", "scratch_fraction"):
        out[column] = means[column].reindex(keys).to_numpy(dtype=float) if len(means) else math.nan
    unit = cost_unit(table, networks)
    out["verdict"] = [median_verdict(m, f) for m, f in zip(out[f"median_{unit}"], out["n_still_falling"])]
    base = out["scratch_examples"].where(out["scratch_examples"] > 0)
    out["relative_to_scratch"] = (out["median_examples"].astype(float) / base).astype(float)
    out["costliest"] = False
    layers = out[(out["kind"] == survival.LAYER) & out[f"median_{unit}"].notna()]
    for _, g in layers.groupby(GROUP, sort=False):
        order = g.assign(_m=-g[f"median_{unit}"], _h=-g[f"median_{unit}_hi"]).sort_values(["_m", "_h", "depth"])
        out.loc[order.index[0], "costliest"] = True
    return out


SETTING = ["model", "target", "regime", "policy", "init", "threshold"]


def back_against_control(table: pd.DataFrame, control: pd.DataFrame) -> pd.DataFrame:
    """``back_against_control`` on survival's rows: the same median measured against the matched control (the
    intact network retrained the same way) is finite, so a median beyond the budget there is the retraining's own
    drift rather than a layer that does not come back."""
    out = table.copy()
    finite = control.loc[np.isfinite(control["median_examples"].astype(float)), SETTING].drop_duplicates()
    hit = out[SETTING].merge(finite.assign(_hit=True), on=SETTING, how="left")["_hit"]
    out["back_against_control"] = hit.fillna(False).astype(bool).to_numpy()
    if "verdict" in out.columns:
        out.loc[(out["verdict"] == "refuses") & out["back_against_control"], "verdict"] = "back_to_control"
    return out


def fit_verdicts(fit: pd.DataFrame) -> pd.DataFrame:
    out = fit.copy()
    lo, hi = out["factor_lo"].astype(float), out["factor_hi"].astype(float)
    verdict = np.where(lo > 1, FIT_VERDICTS[0], np.where(hi < 1, FIT_VERDICTS[1], FIT_VERDICTS[2]))
    out["verdict"] = np.where(flag(out["determined"]), verdict, FIT_VERDICTS[3]).astype(object)
    return out


def drift_verdicts(drift: pd.DataFrame, eps_min: float | None) -> pd.DataFrame:
    out = drift.copy()
    bound = DRIFT_TOLERANCE * eps_min if eps_min is not None else math.nan
    out["beyond_tolerance"] = (out["drift_worst"].astype(float).abs() > bound).astype(bool)
    return out


def flag_verdicts(flags: pd.DataFrame, networks: pd.DataFrame, eps_min: float | None) -> pd.DataFrame:
    out = flags.drop(columns=["past_minimum_share"], errors="ignore")
    if {"past_minimum", "baseline_loss"} <= set(networks.columns):
        share = networks.assign(past_minimum_share=networks["past_minimum"] / networks["baseline_loss"])
        out = out.merge(
            share[["model", "pretrain_seed", "past_minimum_share"]], on=["model", "pretrain_seed"], how="left"
        )
    else:
        out["past_minimum_share"] = math.nan
    out["past_minimum_share"] = out["past_minimum_share"].astype(float)
    bound = DRIFT_TOLERANCE * eps_min if eps_min is not None else math.nan
    out["overfit"] = (out["past_minimum_share"] > bound).astype(bool)
    return out


def encoder_decoder_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    out = table.copy()
    out["verdict"] = [median_verdict(m, f) for m, f in zip(out["median"], out["n_still_falling"])]
    back = np.isfinite(out["control_median"].astype(float))
    out.loc[(out["verdict"] == "refuses") & back, "verdict"] = "back_to_control"
    spent = np.where(np.isinf(out["median"]), out["budget_relative_to_scratch"], out["relative_to_scratch"])
    out["slower_than_scratch"] = (pd.Series(spent, index=out.index).astype(float) >= 1) & (out["item"] != "scratch")
    out["like_reset_all"] = like_reset_all(out)
    return out


def like_reset_all(table: pd.DataFrame) -> pd.Series:
    """Whether an aside row acts as if the whole model had been reset: its median (inf beyond the budget) is at
    least the lower end of the same model's every-layer reset's interval at the same threshold (the range over the
    networks, or the 95 % interval from five networks on). Null for the ``scratch`` and ``reset_all`` rows and where
    the aside has no every-layer reset."""
    lower = table[table["item"] == "reset_all"].set_index(["model", "threshold"])["median_lo"].astype(float)
    bound = pd.Series(lower.reindex(pd.MultiIndex.from_frame(table[["model", "threshold"]])).to_numpy(), table.index)
    out = (table["median"].astype(float) >= bound).astype("boolean")
    out[bound.isna() | table["item"].isin(("scratch", "reset_all"))] = pd.NA
    return out


def network_cost_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    out = table.copy()
    out["back_against_control"] = np.isfinite(pd.to_numeric(out["control_upper"], errors="coerce").astype(float))
    return out


def add(tables: dict[str, pd.DataFrame], networks: pd.DataFrame, eps_min: float | None) -> dict[str, pd.DataFrame]:
    """Every verdict column, added to the tables ``answer_tables.compute`` built (a new dict)."""
    t = dict(tables)
    scratch = scratch_means(t["pretrain_reference"], networks)
    for name in ("survival", "against_control"):
        t[name] = survival_verdicts(t[name], scratch, networks)
    t["survival"] = back_against_control(t["survival"], t["against_control"])
    t["fit"] = fit_verdicts(t["fit"])
    t["control_drift"] = drift_verdicts(t["control_drift"], eps_min)
    t["networks_flags"] = flag_verdicts(t["networks_flags"], networks, eps_min)
    t["encoder_decoder"] = encoder_decoder_verdicts(t["encoder_decoder"])
    t["network_costs"] = network_cost_verdicts(t["network_costs"])
    return t


LR_FASTER = 0.9  # another lr is faster when it recovers at under this share of the chosen lr's cost (resolution)


def lr_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """``faster`` on the lr-sensitivity table (its own rule's; added where the page reads it): this multiple of
    the lr recovered where the chosen lr did not, or at under ``LR_FASTER`` of its cost."""
    out = table.copy()
    chosen = out["chosen_examples"].astype(float).where(flag(out["chosen_recovered"]), math.inf)
    cost = out["examples"].astype(float)
    out["faster"] = (flag(out["recovered"]) & cost.notna() & (cost < LR_FASTER * chosen)).astype(bool)
    return out
