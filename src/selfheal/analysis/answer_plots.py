"""The answer page's figures (Altair, HTML + PNG), drawn only from the answer tables and ``curves.parquet``.

- ``answer_cost_depth``: median recovery cost (survival estimate, 95 % cluster-bootstrap interval) against relative
  depth, one line per model (N, D); medians not reached within the budget drawn as triangles at the budget.
- ``answer_recovered``: the NPMLE share of cells recovered against examples seen (log x), one line per layer.
- ``answer_curves``: recovery curves on a log x axis, with the matched no-reset controls (grey) and pretraining's own
  curve (black).
- ``answer_effects``: the scaling fit's coefficients on log cost, with intervals (terms not determined are listed
  in the answer table, not drawn).
- ``answer_cka``: CKA between the original and the healed layer against L, with the unhealed floor.
- ``answer_damage_cost``: zero-step damage against cost per cell, censored cells at the budget as triangles.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from selfheal.analysis import plots

alt.data_transformers.disable_max_rows()


def _eps(table: pd.DataFrame) -> pd.DataFrame:
    return table.assign(eps=table["threshold"].map(lambda e: f"ε = {e:g}"))


def _cost_unit(table: pd.DataFrame) -> tuple[str, str, str]:
    """Columns and title: fraction of S x E when known for every row, else examples."""
    if table["median_fraction"].notna().all():
        return "median_fraction", "budget_fraction", "examples to recover / (S × E)"
    return "median_examples", "budget_examples", "examples to recover"


def cost_depth(survival: pd.DataFrame) -> alt.Chart:
    title = "Recovery cost against relative depth (median, 95 % interval over pretrained networks)"
    layers = survival[survival["kind"] == "layer"].copy() if len(survival) else survival
    if not len(layers):
        return plots.empty_chart(title, "no single-layer cells in this grid")
    value, budget, axis = _cost_unit(layers)
    lo, hi = value + "_lo", value + "_hi"
    layers["reached"] = np.isfinite(layers[value])
    layers["y"] = np.where(layers["reached"], layers[value], layers[budget])
    layers["y_lo"] = layers[lo].clip(lower=1e-6)
    layers["y_hi"] = np.where(np.isfinite(layers[hi]), layers[hi], layers[budget])
    layers["y"] = layers["y"].clip(lower=1e-6)
    layers["setting"] = layers["policy"] + " / " + layers["init"] + " / " + layers["regime"]
    layers["model (N, D)"] = layers["model"] + " (" + layers["n_layer"].astype(str) + ", " + layers[
        "d_model"].astype(str) + ")"
    layers["status"] = np.where(layers["reached"], "median reached", "median beyond the budget")
    data = _eps(layers)
    y = alt.Y("y:Q", scale=alt.Scale(type="log"), title=axis)
    color = alt.Color("model (N, D):N")
    x = alt.X("rel_depth:Q", title="relative depth L / (N − 1)", scale=alt.Scale(domain=[0, 1]))
    base = alt.Chart()
    line = base.mark_line().encode(x=x, y=y, color=color)
    points = base.mark_point(filled=True, size=60).encode(
        x=x, y=y, color=color,
        shape=alt.Shape("status:N", scale=alt.Scale(domain=["median reached", "median beyond the budget"],
                                                    range=["circle", "triangle-up"])),
        tooltip=["model", "target", "threshold", "n_cells", "n_censored", value, lo, hi, "p_recover"])
    bars = base.mark_errorbar().encode(x=x, y=alt.Y("y_lo:Q", scale=alt.Scale(type="log"), title=""), y2="y_hi:Q",
                                       color=color)
    return alt.layer(bars, line, points, data=data).properties(width=220, height=200).facet(
        column=alt.Column("eps:N", title="recovered within ε of baseline"),
        row=alt.Row("setting:N", title="policy / init / regime"),
    ).properties(title=title)


def recovered(curves_table: pd.DataFrame) -> alt.Chart:
    title = "Share of cells recovered against examples seen (Turnbull NPMLE), per reset layer"
    table = curves_table[(curves_table["kind"] == "layer") & (curves_table["examples"] > 0)] if len(
        curves_table) else curves_table
    if not len(table):
        return plots.empty_chart(title, "no single-layer cells recovered after the first evaluation")
    data = _eps(table).assign(setting=lambda t: t["policy"] + " / " + t["init"] + " / " + t["regime"])
    return alt.Chart(data).mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("examples:Q", scale=alt.Scale(type="log"), title="examples seen (log)"),
        y=alt.Y("recovered_share:Q", title="share of cells recovered", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("target:N", title="reset layer"),
        strokeDash=alt.StrokeDash("setting:N", title="policy / init / regime"),
        tooltip=["model", "target", "threshold", "examples", "recovered_share"],
    ).properties(width=200, height=170).facet(
        row=alt.Row("model:N"), column=alt.Column("eps:N", title="within ε of baseline")).properties(title=title)


def log_curves(curves: pd.DataFrame) -> alt.Chart:
    title = "Recovery curves (log x): reset layers (colour), matched no-reset controls (grey), pretraining (black)"
    rec = curves[(curves["kind"] == "recovery") & curves["layer"].notna()].copy() if len(curves) else curves
    if not len(rec):
        return plots.empty_chart(title, "no single-layer recovery curves in this grid")
    x_col = "fraction_of_pretrain" if curves["fraction_of_pretrain"].notna().all() else "examples"
    pre = curves[curves["kind"] == "pretrain"].copy()
    positive = pd.concat([rec[x_col], pre[x_col]])
    floor = float(positive[positive > 0].min()) / 2 if (positive > 0).any() else 1e-6
    rec["x"] = rec[x_col].clip(lower=floor)
    pre["x"] = pre[x_col].clip(lower=floor)
    rec["run"] = rec["target"] + " p" + rec["pretrain_seed"].astype(str) + " s" + rec["seed"].astype(str)
    rec["role"] = np.where(rec["init"] == "trained", "matched control", "reset layer")
    pre["run"] = "pretrain p" + pre["pretrain_seed"].astype(str)
    x = alt.X("x:Q", scale=alt.Scale(type="log"), title=f"{x_col.replace('_', ' ')} (log; 0 drawn at the left edge)")
    y = alt.Y("val_loss:Q", scale=alt.Scale(zero=False), title="validation loss")
    charts = []
    for model in sorted(rec["model"].unique()):
        cells = alt.Chart(rec[(rec["model"] == model) & (rec["role"] == "reset layer")]).mark_line(opacity=0.6).encode(
            x=x, y=y, color=alt.Color("target:N", title="reset layer"), detail="run:N",
            tooltip=["target", "pretrain_seed", "seed", "examples", "val_loss"])
        controls = alt.Chart(rec[(rec["model"] == model) & (rec["role"] == "matched control")]).mark_line(
            color="gray", strokeDash=[3, 2], opacity=0.6).encode(x=x, y=y, detail="run:N")
        pretrain = alt.Chart(pre[pre["model"] == model]).mark_line(color="black", strokeWidth=2).encode(
            x=x, y=y, detail="run:N")
        charts.append(alt.layer(pretrain, controls, cells).properties(width=380, height=220, title=model))
    return alt.vconcat(*charts).properties(title=title)


def effects(fit: pd.DataFrame) -> alt.Chart:
    title = "Scaling fit: effect on log cost (log-normal AFT, 95 % cluster-bootstrap interval)"
    table = fit[fit["determined"]] if len(fit) else fit
    if not len(table):
        return plots.empty_chart(title, "no term determined by this grid (see results/answer/fit.parquet)")
    data = _eps(table).assign(setting=lambda t: t["policy"] + " / " + t["init"] + " / " + t["regime"])
    y = alt.Y("label:N", title=None)
    points = alt.Chart().mark_point(filled=True, size=60).encode(
        x=alt.X("coef:Q", title="coefficient on log cost (0: no change)"), y=y,
        tooltip=["term", "coef", "coef_lo", "coef_hi", "factor", "n_cells", "n_clusters"])
    bars = alt.Chart().mark_errorbar().encode(x=alt.X("coef_lo:Q", title=""), x2="coef_hi:Q", y=y)
    zero = alt.Chart().mark_rule(strokeDash=[4, 3], color="gray").encode(x=alt.datum(0))
    return alt.layer(zero, bars, points, data=data).properties(width=220, height=140).facet(
        column=alt.Column("eps:N", title="within ε of baseline"), row=alt.Row("setting:N", title=None),
    ).properties(title=title)


def cka(table: pd.DataFrame) -> alt.Chart:
    title = "Healed-layer similarity: linear CKA with the original layer (dashed: the unhealed, fresh layer)"
    data = table[table["cka"].notna()] if len(table) else table
    if not len(data):
        return plots.empty_chart(title, "no CKA measured (the tables have no cka values)")
    data = _eps(data)
    x = alt.X("depth:O", title="reset layer L (depth)", axis=alt.Axis(labelAngle=0))
    color = alt.Color("model:N")
    line = alt.Chart().mark_line(point=True).encode(x=x, y=alt.Y("cka:Q", title="linear CKA", scale=alt.Scale(
        domain=[0, 1])), color=color, tooltip=["model", "target", "cka", "cka_lo", "cka_hi", "cka_floor"])
    bars = alt.Chart().mark_errorbar().encode(x=x, y=alt.Y("cka_lo:Q", title=""), y2="cka_hi:Q", color=color)
    floor = alt.Chart().mark_line(strokeDash=[4, 3]).encode(x=x, y="cka_floor:Q", color=color)
    return alt.layer(bars, line, floor, data=data).properties(width=220, height=180).facet(
        column=alt.Column("eps:N", title="healed to within ε")).properties(title=title)


def damage_cost(cells: pd.DataFrame) -> alt.Chart:
    title = "Zero-step damage against recovery cost, per single-layer cell (triangles: censored at the budget)"
    data = cells.copy()
    if not len(data):
        return plots.empty_chart(title, "no single-layer cells in this grid")
    data["status"] = np.where(data["recovered"], "recovered", "censored (≥ budget)")
    data = _eps(data)
    return alt.Chart(data).mark_point(filled=True, size=45).encode(
        x=alt.X("damage:Q", title="val loss right after the reset − baseline"),
        y=alt.Y("cost:Q", scale=alt.Scale(type="log"), title="cost (crossing evaluation, or budget if censored)"),
        color=alt.Color("model:N"),
        shape=alt.Shape("status:N", scale=alt.Scale(domain=["recovered", "censored (≥ budget)"],
                                                    range=["circle", "triangle-up"])),
        tooltip=["model", "target", "pretrain_seed", "seed", "damage", "cost", "recovered"],
    ).properties(width=200, height=180).facet(column=alt.Column("eps:N", title="within ε of baseline")).properties(
        title=title)


# name (the file under plots/) -> how it is drawn from the answer tables and curves.parquet
FIGURES = {
    "answer_cost_depth": lambda t, curves: cost_depth(t["survival"]),
    "answer_recovered": lambda t, curves: recovered(t["recovered_curves"]),
    "answer_curves": lambda t, curves: log_curves(curves),
    "answer_effects": lambda t, curves: effects(t["fit"]),
    "answer_cka": lambda t, curves: cka(t["cka"]),
    "answer_damage_cost": lambda t, curves: damage_cost(t["damage_cells"]),
}
