"""Which matched no-reset control a cell is read against, and that control's loss around the cell's crossing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from selfheal.grid import TRAINED, matched_control_of


def matched_controls(curves: pd.DataFrame):
    """A function from a summary row to its matched control's curve (sorted by examples), or None: for a reset cell
    in regime ``full`` the network's no-reset control of that regime, else the matched no-reset control (init
    ``trained``) of its regime that ``grid.matched_control_of`` names for its target and policy; in its own retrain
    seed, else the first retrain seed's. A control has none."""
    rec = curves[curves["kind"] == "recovery"]
    controls = {
        key: group.sort_values("examples")
        for key, group in rec[rec["init"] == TRAINED].groupby(
            ["model", "pretrain_seed", "target", "policy", "regime", "seed"]
        )
    }
    full_controls = {
        key: group.sort_values("examples")
        for key, group in rec[(rec["target"] == "none") & (rec["regime"] == "full")].groupby(
            ["model", "pretrain_seed", "seed"]
        )
    }

    def control_of(row):
        if row.init == TRAINED or row.target == "none":
            return None
        if row.regime == "full":
            options = {k: v for k, v in full_controls.items() if k[:2] == (row.model, row.pretrain_seed)}
            curve = options.get((row.model, row.pretrain_seed, row.seed))
        else:
            matched = matched_control_of(row.target, row.policy)
            if matched is None:
                return None
            key = (row.model, row.pretrain_seed, *matched, row.regime)
            options = {k: v for k, v in controls.items() if k[:5] == key}
            curve = options.get(key + (row.seed,))
        return options[min(options)] if curve is None and options else curve

    return control_of


def control_loss_around(rows: pd.DataFrame, curves: pd.DataFrame) -> pd.Series:
    """Per (cell, threshold) row of ``rows`` (summary's columns): its matched control's validation loss around the
    cell's ``examples``, the one of the control's two evaluations bracketing them (the last at or before, the first
    at or after) farther from the baseline; the last one where the control ended before them; null without a
    control. The control is not evaluated where a crossing was located between its evaluations, and a restart's
    jump can lie between them: the step-wise ``control_loss`` then reads the control before it moved."""
    control_of = matched_controls(curves)
    out = []
    for row in rows.itertuples(index=False):
        curve = control_of(row)
        if curve is None or not len(curve) or pd.isna(row.examples):
            out.append(None)
            continue
        examples = curve["examples"].to_numpy(float)
        losses = curve["val_loss"].to_numpy(float)
        before = np.searchsorted(examples, float(row.examples), side="right") - 1
        after = np.searchsorted(examples, float(row.examples), side="left")
        around = [losses[i] for i in (before, after) if 0 <= i < len(losses)]
        out.append(max(around, key=lambda loss: abs(loss - row.baseline_loss)) if around else None)
    return pd.Series(out, index=rows.index, dtype="float64")
