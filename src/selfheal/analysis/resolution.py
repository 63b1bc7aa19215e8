"""Which ε the grid resolves (``answer/resolved_eps.parquet``, schema in docs/outputs.md): the headline states a cost
only at an ε that the validation set and the matched controls can both tell apart from noise.

Per ε of the grid:

- **the validation set resolves it** for a model when the median standard error of a cell's (cell − baseline) loss
  difference on the fixed validation set (``validation_error``'s ``val_sequences_se``) is at most ε × baseline / 5
  (``SE_SHARE``): a crossing of ε is then five standard errors from the baseline;
- **the controls resolve it** when no matched control (the intact network retrained the same way, on the networks
  the estimates keep, in the asker's regime) moved by more than ε × ``DRIFT_TOLERANCE`` at any evaluation
  (``control_drift``'s ``drift_worst``): the retraining alone then moves a network by less than a quarter of ε;
- ``headline``: both; ``reason`` names what fails (``REASONS``).
"""

from __future__ import annotations

import math

import pandas as pd

from selfheal.analysis.stats import DRIFT_TOLERANCE, typed

SE_SHARE = 0.2  # the validation set resolves ε when its standard error is at most this share of ε x baseline
REASONS = ("", "controls", "validation", "controls and validation")
COLUMNS = [
    "threshold",
    "drift_bound",
    "drift_worst",
    "drift_model",
    "controls_resolve",
    "n_models",
    "models_unresolved",
    "validation_resolves",
    "headline",
    "reason",
]


def resolved_eps(
    thresholds, validation: pd.DataFrame, drift: pd.DataFrame, networks: pd.DataFrame, regime: str | None = None
) -> pd.DataFrame:
    """One row per ε (COLUMNS). ``validation``: the ``validation_error`` table; ``drift``: ``control_drift``'s,
    read for the networks of ``networks`` the estimates keep (neither degenerate nor off their plateau) in
    ``regime`` (every regime when None or absent)."""
    usable = networks
    for name in ("degenerate", "off_plateau"):
        if name in usable.columns:
            usable = usable[~usable[name].astype("boolean").fillna(False).astype(bool)]
    kept = drift.merge(usable[["model", "pretrain_seed"]].drop_duplicates(), on=["model", "pretrain_seed"])
    if regime is not None and (kept["regime"] == regime).any():
        kept = kept[kept["regime"] == regime]
    kept = kept.dropna(subset=["drift_worst"])
    worst = kept.loc[kept["drift_worst"].abs().idxmax()] if len(kept) else None
    out = []
    for eps in sorted(float(e) for e in thresholds):
        bound = DRIFT_TOLERANCE * eps
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
        float64=["threshold", "drift_bound", "drift_worst"],
        object=["drift_model", "models_unresolved", "reason"],
        int64=["n_models"],
        bool=["controls_resolve", "validation_resolves", "headline"],
    )
