"""Which ε the grid resolves (``answer/resolved_eps.parquet``, schema in docs/outputs.md): the headline states a cost
only at an ε that the validation set and the matched controls can both tell apart from noise.

Per ε of the grid:

- **the validation set resolves it** for a model when the median standard error of a cell's (cell − baseline) loss
  difference on the fixed validation set (``validation_error``'s ``val_sequences_se``) is at most ε × baseline / 5
  (``SE_SHARE``): a crossing of ε is then five standard errors from the baseline;
- **the controls resolve it** when, at every crossing of ε (the examples a cost is read at: a cell's ``examples``,
  on the networks the estimates keep, in the asker's regime, cells back within ε after some training), the cell's
  matched control (the intact network retrained the same way) is within ε × ``DRIFT_TOLERANCE`` of the baseline
  (``crossing_drift``: the control's loss around the crossing / ``baseline_loss`` − 1, the largest in absolute
  value; around: of the control's two evaluations bracketing the crossing, the one farther from the baseline,
  ``controls.control_loss_around``, since a crossing located between them reads the control at neither): the
  retraining alone has then moved the network by less than a quarter of ε where the cost is read. Where no cell
  crossed ε there is no cost for the drift to move, and the whole run's largest move decides (``drift_worst``, from
  ``control_drift``: every evaluation of every matched control), as it does for a grid without matched controls'
  losses;
- ``headline``: both; ``reason`` names what fails (``REASONS``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis.stats import DRIFT_TOLERANCE, typed

SE_SHARE = 0.2  # the validation set resolves ε when its standard error is at most this share of ε x baseline
REASONS = ("", "controls", "validation", "controls and validation")
COLUMNS = [
    "threshold",
    "drift_bound",
    "drift_worst",
    "drift_model",
    "crossing_drift",
    "crossing_model",
    "n_crossings",
    "controls_resolve",
    "n_models",
    "models_unresolved",
    "validation_resolves",
    "headline",
    "reason",
]


def resolved_eps(
    thresholds,
    validation: pd.DataFrame,
    drift: pd.DataFrame,
    networks: pd.DataFrame,
    regime: str | None = None,
    cells: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per ε (COLUMNS). ``validation``: the ``validation_error`` table; ``drift``: ``control_drift``'s,
    read for the networks of ``networks`` the estimates keep (neither degenerate nor off their plateau) in
    ``regime`` (every regime when None or absent); ``cells``: ``survival.prepare``'s rows (status, lower, upper,
    is_control, baseline_loss, and control_loss_around where given, else control_loss), whose crossings the drift
    is read at."""
    usable = networks
    for name in ("degenerate", "off_plateau"):
        if name in usable.columns:
            usable = usable[~usable[name].astype("boolean").fillna(False).astype(bool)]
    kept = drift.merge(usable[["model", "pretrain_seed"]].drop_duplicates(), on=["model", "pretrain_seed"])
    if regime is not None and (kept["regime"] == regime).any():
        kept = kept[kept["regime"] == regime]
    kept = kept.dropna(subset=["drift_worst"])
    worst = kept.loc[kept["drift_worst"].abs().idxmax()] if len(kept) else None
    crossings = _crossings(cells, usable, regime)
    out = []
    for eps in sorted(float(e) for e in thresholds):
        bound = DRIFT_TOLERANCE * eps
        at = crossings[np.isclose(crossings["threshold"].astype(float), eps)]
        at_worst = at.loc[at["crossing_drift"].abs().idxmax()] if len(at) else None
        if at_worst is not None:
            controls = abs(float(at_worst["crossing_drift"])) <= bound
        else:
            controls = worst is None or abs(float(worst["drift_worst"])) <= bound
        se = validation["val_sequences_se"].astype(float)
        target = SE_SHARE * eps * validation["baseline_loss"].astype(float)
        unresolved = validation.loc[~(se <= target), "model"].astype(str).tolist()  # NaN: not measured, unresolved
        valid = not unresolved
        out.append(
            {
                "threshold": eps,
                "drift_bound": bound,
                "drift_worst": float(worst["drift_worst"]) if worst is not None else math.nan,
                "drift_model": str(worst["model"]) if worst is not None else "",
                "crossing_drift": float(at_worst["crossing_drift"]) if at_worst is not None else math.nan,
                "crossing_model": str(at_worst["model"]) if at_worst is not None else "",
                "n_crossings": len(at),
                "controls_resolve": bool(controls),
                "n_models": len(validation),
                "models_unresolved": ", ".join(unresolved),
                "validation_resolves": valid,
                "headline": bool(controls and valid),
                "reason": REASONS[(not controls) + 2 * (not valid)],
            }
        )
    return typed(
        pd.DataFrame(out, columns=COLUMNS),
        float64=["threshold", "drift_bound", "drift_worst", "crossing_drift"],
        object=["drift_model", "crossing_model", "models_unresolved", "reason"],
        int64=["n_models", "n_crossings"],
        bool=["controls_resolve", "validation_resolves", "headline"],
    )


def _crossings(cells: pd.DataFrame | None, usable: pd.DataFrame, regime: str | None) -> pd.DataFrame:
    """The (cell, ε) rows back within ε after some training, on the ``usable`` networks, in ``regime`` where it has
    cells, with their matched control's loss there: ``crossing_drift`` = control_loss / baseline_loss − 1."""
    columns = ["model", "threshold", "crossing_drift"]
    if cells is None or not len(cells) or "control_loss" not in cells.columns:
        return pd.DataFrame(columns=columns)
    rows = cells.merge(usable[["model", "pretrain_seed"]].drop_duplicates(), on=["model", "pretrain_seed"])
    if regime is not None and (rows["regime"] == regime).any():
        rows = rows[rows["regime"] == regime]
    read = "control_loss_around" if "control_loss_around" in rows.columns else "control_loss"
    rows = rows[
        (rows["status"] == "recovered")
        & (rows["upper"].astype(float) > 0)
        & ~rows["is_control"].astype(bool)
        & rows[read].notna()
    ]
    drift = rows[read].astype(float) / rows["baseline_loss"].astype(float) - 1
    return pd.DataFrame({"model": rows["model"], "threshold": rows["threshold"], "crossing_drift": drift})[columns]
