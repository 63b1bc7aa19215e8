"""Does the scaling fit predict a size it was not fitted on? The censoring-aware fit of ``scaling`` is refitted on
the size grid without one part of it, and the per-layer median cost it predicts for the part left out is set
against the measured one.

The size grid is the single-layer cells, in the asker's setting (frozen, full, fresh), of the networks of the most
common family that share the most common (S, E): the data axis and the other families are left out, so only N, D
and the layer's position vary. Three parts are left out in turn (when the grid has more than one level of what is
left out): the largest model by parameters (``largest size``), every model of the largest N (``largest N``) and
every model of the largest D (``largest D``). Parts that leave out the same models are one part, named by all of
them (``largest size and largest N`` when the largest network is the only one of the largest N).

Per left-out model, layer and threshold:

- **predicted**: the fit's median, exp(b · x) (a log-normal AFT model's median is exp of its location), in the
  fit's unit; its interval is the bootstrap's normal interval on the log scale over the same refits on resampled
  networks as ``scaling.fit`` (``scaling.refits``), so it covers network-to-network variation of the fitted sizes.
- **measured**: the layer's survival median (``survival.estimate``: Turnbull NPMLE, cluster-bootstrap interval) on
  the left-out networks; inf when the median lies beyond the budget (censored), its interval then [budget, inf].
- **informative**: the prediction interval is narrower than ``INFORMATIVE_FACTOR`` (its upper end over its lower
  end): a prediction wider than that cannot fail, so it is ``not informative`` rather than held.
- **held**: the two intervals overlap (a censored median's reaches from the budget to inf). A layer whose measured
  median is 0 (most of its cells within eps before any training) is not tested (held null): the fit models the
  cost of cells that needed training, as ``scaling`` says; nor is a layer of a kind whose cells left the fit
  (``scaling.Refits.covers``: e.g. every first-layer cell of the fitted sizes beyond the budget). ``result`` per layer:
  held, did not hold, not informative, not tested. A part's verdict is ``held`` when every informative layer held
  (at least one), ``did not hold`` when one did not, ``not informative`` when none was; a fit that could not be
  made says why.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis import scaling, survival
from selfheal.analysis.stats import budget_column, typed

INFORMATIVE_FACTOR = 10.0  # a prediction interval this many times wide (upper over lower end) or wider says nothing
RESULTS = ("held", "did not hold", "not informative", "not tested")

COLUMNS = [
    "left_out",
    "model",
    "n_layer",
    "d_model",
    "n_params",
    "target",
    "depth",
    "threshold",
    "unit",
    "predicted",
    "predicted_lo",
    "predicted_hi",
    "measured",
    "measured_lo",
    "measured_hi",
    "measured_censored",
    "held",
    "informative",
    "result",
    "fit_models",
    "fit_cells",
    "fit_terms",
    "n_resamples",
    "note",
]


def size_grid(cells: pd.DataFrame) -> pd.DataFrame:
    """The size grid (the module docstring)."""
    rows = survival.estimable(cells)
    rows = survival.in_setting(rows[rows["kind"] == survival.LAYER])
    if not len(rows):
        return rows
    networks = rows.drop_duplicates(survival.CLUSTER)
    family = networks["family_kind"].astype(str).value_counts().idxmax()
    rows = rows[rows["family_kind"].astype(str) == family]
    data = [c for c in ("train_sequences", "epochs") if c in rows and rows[c].notna().all()]
    if data:
        keys = rows.drop_duplicates(survival.CLUSTER)[data].astype(float).apply(tuple, axis=1)
        common = keys.value_counts().idxmax()
        rows = rows[rows[data].astype(float).apply(tuple, axis=1) == common]
    return rows


def parts(grid: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """(name, models left out) for each part the grid can leave out and still vary what is left out."""
    models = grid.drop_duplicates("model")[["model", "n_layer", "d_model", "n_params"]]
    out = []
    if len(models) > 2:
        out.append(("largest size", [str(models.loc[models["n_params"].astype(float).idxmax(), "model"])]))
    for name, column in (("largest N", "n_layer"), ("largest D", "d_model")):
        levels = sorted(models[column].astype(int).unique())
        if len(levels) > 2:
            out.append((name, sorted(models.loc[models[column].astype(int) == levels[-1], "model"].astype(str))))
    merged: dict[tuple[str, ...], list[str]] = {}
    for name, left in out:
        merged.setdefault(tuple(left), []).append(name)
    return [(" and ".join(names), list(left)) for left, names in merged.items()]


def _measured(rows: pd.DataFrame, unit: str) -> tuple[float, float, float]:
    """The measured median in ``unit`` (``rows``: its survival row; none: NaN) and its interval; a bound beyond the
    budget is known only to be at least the budget, so its lower end is the budget (a censored median's interval is
    [budget, inf])."""
    if not len(rows):
        return math.nan, math.nan, math.nan
    value, low, high = (float(rows[f"median_{unit}{end}"].iloc[0]) for end in ("", "_lo", "_hi"))
    return value, float(rows[budget_column(unit)].iloc[0]) if np.isinf(low) else low, high


def check(
    cells: pd.DataFrame, survival_table: pd.DataFrame, max_resamples: int = scaling.MAX_FIT_RESAMPLES, workers: int = 1
) -> pd.DataFrame:
    """The out-of-sample table (COLUMNS): one row per left-out part, model, layer and threshold."""
    grid = size_grid(cells)
    out = []
    for name, left in parts(grid):
        train, test = grid[~grid["model"].isin(left)], grid[grid["model"].isin(left)]
        for threshold, fit_rows in train.groupby("threshold", sort=True):
            with scaling._pool(workers) as pool:
                fitted = scaling.refits(fit_rows, max_resamples, pool)
            test_rows = test[test["threshold"] == threshold].drop_duplicates(["model", "target"])
            for _, cell in test_rows.sort_values(["model", "depth"]).iterrows():
                row = {
                    "left_out": name,
                    "model": cell["model"],
                    "n_layer": int(cell["n_layer"]),
                    "d_model": int(cell["d_model"]),
                    "n_params": float(cell["n_params"]),
                    "target": cell["target"],
                    "depth": int(cell["depth"]),
                    "threshold": float(threshold),
                    "unit": fitted.unit,
                    "fit_models": len(fit_rows["model"].unique()),
                    "fit_cells": len(fitted.rows),
                    "fit_terms": ", ".join(fitted.terms),
                    "n_resamples": len(fitted.draws),
                    "note": fitted.note,
                }
                measured = survival.in_setting(
                    survival_table[
                        (survival_table["model"] == cell["model"])
                        & (survival_table["target"] == cell["target"])
                        & (survival_table["threshold"] == threshold)
                    ]
                )
                m, m_lo, m_hi = _measured(measured, fitted.unit)
                row.update(measured=m, measured_lo=m_lo, measured_hi=m_hi, measured_censored=bool(np.isinf(m)))
                if fitted.point is None:
                    row.update(
                        predicted=math.nan,
                        predicted_lo=math.nan,
                        predicted_hi=math.nan,
                        held=pd.NA,
                        informative=pd.NA,
                        result="not tested",
                    )
                else:
                    p, p_lo, p_hi = fitted.predict(cell)
                    overlap = p_lo <= m_hi and m_lo <= p_hi  # a censored median: [budget, inf]
                    # a median of 0: within eps untrained, nothing to predict; a layer whose cells left the fit
                    # (scaling.refits: every one censored) is outside what it speaks for
                    tested = not math.isnan(m) and m > 0 and fitted.covers(cell)
                    informative = bool(p_lo > 0 and p_hi < INFORMATIVE_FACTOR * p_lo)
                    held = bool(overlap) if tested and informative else pd.NA
                    row.update(
                        predicted=p,
                        predicted_lo=p_lo,
                        predicted_hi=p_hi,
                        held=held,
                        informative=informative if tested else pd.NA,
                        result=(
                            "not tested"
                            if not tested
                            else "not informative"
                            if not informative
                            else "held"
                            if overlap
                            else "did not hold"
                        ),
                    )
                out.append(row)
    return typed(
        pd.DataFrame(out, columns=COLUMNS),
        float=[
            "predicted",
            "predicted_lo",
            "predicted_hi",
            "measured",
            "measured_lo",
            "measured_hi",
            "threshold",
            "n_params",
        ],
        boolean=["held", "informative"],
        bool=["measured_censored"],
        object=["result"],
    )


def verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """Per left-out part and threshold: how many of its informative layers held, and the verdict (held / did not
    hold / not informative / not tested / not fitted)."""
    rows = []
    for (name, threshold), part in table.groupby(["left_out", "threshold"], sort=False):
        known = part["held"].dropna()
        results = part["result"] if "result" in part.columns else pd.Series(dtype=object)
        verdict = (
            "not fitted"
            if part["predicted"].isna().all()
            else "held"
            if len(known) and bool(known.all())
            else "did not hold"
            if len(known)
            else "not informative"
            if (results == "not informative").any()
            else "not tested"
        )
        rows.append(
            {
                "left_out": name,
                "threshold": float(threshold),
                "models": ", ".join(part["model"].unique()),
                "layers": len(known),
                "held": int(known.sum()),
                "not_informative": int((results == "not informative").sum()),
                "verdict": verdict,
                "note": part["note"].iloc[0],
            }
        )
    return pd.DataFrame(
        rows, columns=["left_out", "threshold", "models", "layers", "held", "not_informative", "verdict", "note"]
    )
