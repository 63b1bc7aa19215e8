"""The answer page's figures (Altair, HTML + PNG), drawn only from the answer tables and ``curves.parquet``.

Costs span decades and can be exactly 0 (a cell already within eps of its baseline before any training), so every
cost axis is symlog (``plots.cost_axis``): log-like decades with an explicit 0 set apart below the smallest cost,
ticks at 0 and the powers of ten, and a domain computed from the values drawn. A cost not reached within the budget
is drawn as an open triangle at the budget ("beyond the budget"), a lower bound, not a cost. Thresholds eps are
the panel columns.

- ``answer_cost_depth``: median recovery cost (survival estimate, error bar: 95 % cluster-bootstrap interval, its
  upper end at the budget where it is beyond) against relative depth, one colour and line per model (N, D), points
  of different models side by side at the same depth; rows: policy / init / regime.
- ``answer_recovered``: the NPMLE share of cells recovered against examples seen (symlog x, 0 included), one line
  per layer.
- ``answer_curves``: recovery curves against examples seen or the fraction of S x E (symlog x, 0 included), with
  the matched no-reset controls (grey) and pretraining's own curve (black); one panel per model.
- ``answer_effects``: the scaling fit's coefficients on log cost, with intervals and a rule at 0 (terms not
  determined are listed in the answer table, not drawn).
- ``answer_cka``: CKA between the original and the healed layer against L, with the unhealed floor (dashed).
- ``answer_damage_cost``: zero-step damage against cost per cell, censored cells as open triangles at the budget.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from selfheal.analysis import plots

alt.data_transformers.disable_max_rows()

COST_STATUS = ["median reached", "median " + plots.BEYOND]
CELL_STATUS = ["recovered", plots.BEYOND]
# The estimates leave out controls and cells of degenerate networks (survival.estimable): say both reasons.
NO_LAYER_CELLS = ("no single-layer cell to estimate: the grid has none, or every network is flagged degenerate "
                  "(results/answer/networks_flags.parquet)")


def _eps(table: pd.DataFrame) -> pd.DataFrame:
    return table.assign(eps=table["threshold"].map(lambda e: f"ε = {e:g}"))


def _float(column: pd.Series) -> np.ndarray:
    return pd.to_numeric(column, errors="coerce").astype(float).to_numpy()


def _cost_unit(table: pd.DataFrame) -> tuple[str, str, str]:
    """Columns and title: fraction of S x E when known for every row, else examples."""
    if table["median_fraction"].notna().all():
        return "median_fraction", "budget_fraction", "examples to recover / (S × E)"
    return "median_examples", "budget_examples", "examples to recover"


def cost_depth(survival: pd.DataFrame) -> alt.Chart:
    title = "Recovery cost against relative depth (median, 95 % interval over pretrained networks)"
    layers = survival[survival["kind"] == "layer"].copy() if len(survival) else survival
    if not len(layers):
        return plots.empty_chart(title, NO_LAYER_CELLS)
    value, budget, axis = _cost_unit(layers)
    lo, hi = value + "_lo", value + "_hi"
    median, low, high, cap = (_float(layers[c]) for c in (value, lo, hi, budget))
    layers["reached"] = np.isfinite(median)
    # beyond the budget (inf) is drawn at the budget: the point, and an interval end that the budget bounds
    layers["y"] = np.where(np.isfinite(median), median, cap)
    layers["y_lo"] = np.where(np.isfinite(low), low, np.where(np.isnan(low), layers["y"], cap))
    layers["y_hi"] = np.where(np.isfinite(high), high, np.where(np.isnan(high), layers["y"], cap))
    layers["setting"] = layers["policy"] + " / " + layers["init"] + " / " + layers["regime"]
    layers["model (N, D)"] = layers["model"] + " (" + layers["n_layer"].astype(str) + ", " + layers[
        "d_model"].astype(str) + ")"
    layers["status"] = np.where(layers["reached"], COST_STATUS[0], COST_STATUS[1])
    layers["x"] = plots.dodge(layers, "rel_depth", "model (N, D)", 0.025)
    data = _eps(layers)
    scale, y_axis = plots.cost_axis(layers["y"], layers["y_lo"], layers["y_hi"])
    y = alt.Y("y:Q", scale=scale, axis=y_axis, title=axis + " (symlog)")
    color = alt.Color("model (N, D):N", scale=plots.MODELS)
    x = alt.X("x:Q", title="relative depth L / (N − 1)",
              scale=alt.Scale(domain=[min(0.0, float(data["x"].min())) - 0.06, max(1.0, float(data["x"].max())) + 0.06],
                              nice=False, zero=False),
              axis=alt.Axis(values=[0, 0.25, 0.5, 0.75, 1], format=".2~f"))
    tooltip = ["model", "target", "rel_depth", "threshold", "n_cells", "n_censored", "n_not_damaged", value, lo, hi,
               "p_recover"]
    base = alt.Chart()
    line = base.mark_line(strokeWidth=1.2, opacity=0.7).encode(x=x, y=y, color=color)
    bars = base.mark_errorbar(ticks=True).encode(
        x=x, y=alt.Y("y_lo:Q", scale=scale, axis=y_axis, title=""), y2="y_hi:Q", color=color)
    points = plots.status_points(base, x, y, "model (N, D)", "status", COST_STATUS, ["circle", plots.OPEN_TRIANGLE],
                                 None, tooltip, color_scale=plots.MODELS)
    return alt.layer(bars, line, points, data=data).properties(
        width=240, height=220).facet(
        column=alt.Column("eps:N", title="recovered within ε of baseline"),
        row=alt.Row("setting:N", title="policy / init / regime"),
    ).properties(title=title)


def recovered(curves_table: pd.DataFrame) -> alt.Chart:
    title = "Share of cells recovered against examples seen (Turnbull NPMLE), per reset layer"
    table = curves_table[curves_table["kind"] == "layer"] if len(curves_table) else curves_table
    if not len(table):
        return plots.empty_chart(title, NO_LAYER_CELLS)
    data = _eps(table).assign(setting=lambda t: t["policy"] + " / " + t["init"] + " / " + t["regime"])
    scale, axis = plots.cost_axis(data["examples"], headroom=1.0)
    x = alt.X("examples:Q", scale=scale, axis=axis, title="examples seen (symlog)")
    y = alt.Y("recovered_share:Q", title="share of cells recovered", scale=alt.Scale(domain=[0, 1], nice=False),
              axis=alt.Axis(values=[0, 0.25, 0.5, 0.75, 1], format=".2~f"))
    color = alt.Color("target:N", title="reset layer")
    steps = alt.Chart().mark_line(interpolate="step-after").encode(
        x=x, y=y, color=color, detail="setting:N",
        strokeDash=alt.StrokeDash("setting:N", title="policy / init / regime",
                                  legend=alt.Legend(symbolStrokeColor="black")))
    points = alt.Chart().mark_point(filled=True, size=30).encode(
        x=x, y=y, color=color, tooltip=["model", "target", "setting", "threshold", "examples", "recovered_share"])
    return alt.layer(steps, points, data=data).properties(width=220, height=170).facet(
        row=alt.Row("model:N"), column=alt.Column("eps:N", title="within ε of baseline")).properties(title=title)


def log_curves(curves: pd.DataFrame) -> alt.Chart:
    title = ("Recovery curves (symlog x): reset layers (colour), matched no-reset controls (grey dashed), "
             "pretraining (black)")
    rec = curves[(curves["kind"] == "recovery") & curves["layer"].notna()].copy() if len(curves) else curves
    if not len(rec):
        return plots.empty_chart(title, "no single-layer recovery curves in this grid")
    x_col = "fraction_of_pretrain" if curves["fraction_of_pretrain"].notna().all() else "examples"
    pre = curves[curves["kind"] == "pretrain"].copy()
    rec["x"] = _float(rec[x_col])
    pre["x"] = _float(pre[x_col])
    rec["run"] = rec["target"] + " p" + rec["pretrain_seed"].astype(str) + " s" + rec["seed"].astype(str)
    rec["role"] = np.where(rec["init"] == "trained", "matched control", "reset layer")
    pre["run"] = "pretrain p" + pre["pretrain_seed"].astype(str)
    x_title = ("examples seen / (S × E)" if x_col == "fraction_of_pretrain" else "examples seen") + " (symlog)"
    charts = []
    for model in sorted(rec["model"].unique()):
        mine, own_pre = rec[rec["model"] == model], pre[pre["model"] == model]
        x_scale, x_axis = plots.cost_axis(mine["x"], own_pre["x"], headroom=1.0)
        x = alt.X("x:Q", scale=x_scale, axis=x_axis, title=x_title)
        y = alt.Y("val_loss:Q", scale=plots.linear_scale(mine["val_loss"], own_pre["val_loss"]),
                  title="validation loss")
        cells = alt.Chart(mine[mine["role"] == "reset layer"]).mark_line(opacity=0.6).encode(
            x=x, y=y, color=alt.Color("target:N", title="reset layer"), detail="run:N",
            tooltip=["target", "pretrain_seed", "seed", "examples", "val_loss"])
        controls = alt.Chart(mine[mine["role"] == "matched control"]).mark_line(
            color="gray", strokeDash=[3, 2], opacity=0.6).encode(x=x, y=y, detail="run:N")
        pretrain = alt.Chart(own_pre).mark_line(color="black", strokeWidth=2).encode(x=x, y=y, detail="run:N")
        # a run with one evaluation (within eps at 0 examples) has no line to draw: a point instead
        single = mine[(mine["role"] == "reset layer") & (mine.groupby(["role", "run"])["run"].transform("size") == 1)]
        once = alt.Chart(single).mark_point(filled=True, size=40).encode(
            x=x, y=y, color=alt.Color("target:N", title="reset layer"),
            tooltip=["target", "pretrain_seed", "seed", "examples", "val_loss"])
        charts.append(alt.layer(pretrain, controls, cells, once).properties(width=380, height=220, title=model))
    return alt.vconcat(*charts).resolve_scale(x="independent", y="independent").properties(title=title)


def effects(fit: pd.DataFrame) -> alt.Chart:
    title = "Scaling fit: effect on log cost (log-normal AFT, 95 % cluster-bootstrap interval)"
    table = fit[fit["determined"].astype(bool)] if len(fit) else fit
    if not len(table):
        return plots.empty_chart(title, "no term determined by this grid (see results/answer/fit.parquet)")
    data = _eps(table).assign(setting=lambda t: t["policy"] + " / " + t["init"] + " / " + t["regime"])
    scale = plots.linear_scale(data["coef"], data["coef_lo"], data["coef_hi"], zero=True)
    y = alt.Y("label:N", title=None)
    points = alt.Chart().mark_point(filled=True, size=60).encode(
        x=alt.X("coef:Q", title="coefficient on log cost (0: no change)", scale=scale), y=y,
        tooltip=["term", "coef", "coef_lo", "coef_hi", "factor", "n_cells", "n_clusters"])
    bars = alt.Chart().mark_errorbar(ticks=True).encode(x=alt.X("coef_lo:Q", title="", scale=scale), x2="coef_hi:Q",
                                                        y=y)
    zero = alt.Chart().mark_rule(strokeDash=[4, 3], color="gray").encode(x=alt.datum(0, scale=scale))
    return alt.layer(zero, bars, points, data=data).properties(width=240, height=140).facet(
        column=alt.Column("eps:N", title="within ε of baseline"), row=alt.Row("setting:N", title=None),
    ).properties(title=title)


def cka(table: pd.DataFrame) -> alt.Chart:
    title = "Healed-layer similarity: linear CKA with the original layer (dashed: the unhealed, fresh layer)"
    data = table[table["cka"].notna()] if len(table) else table
    if not len(data):
        return plots.empty_chart(title, "no CKA measured (the tables have no cka values)")
    data = _eps(data)
    scale = alt.Scale(domain=plots.linear_domain(data["cka"], data["cka_lo"], data["cka_hi"], data["cka_floor"],
                                                 include=[0, 1], pad=0), nice=False)
    x = alt.X("depth:O", title="reset layer L (depth)", axis=alt.Axis(labelAngle=0))
    color = alt.Color("model:N", scale=plots.MODELS)
    line = alt.Chart().mark_line(point=True).encode(
        x=x, y=alt.Y("cka:Q", title="linear CKA", scale=scale), color=color,
        tooltip=["model", "target", "cka", "cka_lo", "cka_hi", "cka_floor"])
    bars = alt.Chart().mark_errorbar(ticks=True).encode(x=x, y=alt.Y("cka_lo:Q", title="", scale=scale),
                                                        y2="cka_hi:Q", color=color)
    floor = alt.Chart().mark_line(strokeDash=[4, 3]).encode(x=x, y=alt.Y("cka_floor:Q", scale=scale), color=color)
    return alt.layer(bars, line, floor, data=data).properties(width=220, height=180).facet(
        column=alt.Column("eps:N", title="healed to within ε")).properties(title=title)


def damage_cost(cells: pd.DataFrame) -> alt.Chart:
    title = "Zero-step damage against recovery cost, per single-layer cell (open triangles: beyond the budget)"
    data = cells.copy()
    if not len(data):
        return plots.empty_chart(title, NO_LAYER_CELLS)
    data["status"] = np.where(data["recovered"].astype(bool), CELL_STATUS[0], CELL_STATUS[1])
    data = _eps(data)
    scale, axis = plots.cost_axis(data["cost"])
    x = alt.X("damage:Q", title="val loss right after the reset − baseline", scale=plots.linear_scale(data["damage"]))
    y = alt.Y("cost:Q", scale=scale, axis=axis, title="cost (crossing evaluation, or the budget; symlog)")
    tooltip = ["model", "target", "pretrain_seed", "seed", "damage", "cost", "recovered"]
    points = plots.status_points(alt.Chart(data), x, y, "model", "status", CELL_STATUS, ["circle", plots.OPEN_TRIANGLE],
                                 "cell", tooltip, size=50, color_scale=plots.MODELS)
    return points.properties(width=220, height=200).facet(
        column=alt.Column("eps:N", title="within ε of baseline")).properties(title=title)


def out_of_sample(table: pd.DataFrame) -> alt.Chart:
    """Predicted (the fit without the part left out) against measured median cost, per left-out layer: points with
    their 95 % intervals; a measured median beyond the budget is an open triangle at its lower bound, its interval
    drawn up to the top of the axis."""
    title = "Out of sample: the fit's predicted median cost against the measured one, per layer left out"
    data = table[table["predicted"].notna()] if len(table) else table
    if not len(data):
        return plots.empty_chart(title, "no part of the size grid could be left out (answer/out_of_sample.parquet)")
    rows = []
    for _, r in data.iterrows():
        key = {"left_out": r["left_out"], "layer": f"{r['model']} {r['target']}", "threshold": r["threshold"]}
        rows.append({**key, "which": "predicted", "value": r["predicted"], "lo": r["predicted_lo"],
                     "hi": r["predicted_hi"], "status": "predicted"})
        censored = bool(r["measured_censored"])
        rows.append({**key, "which": "measured", "value": r["measured_lo"] if censored else r["measured"],
                     "lo": r["measured_lo"], "hi": r["measured_hi"],
                     "status": "measured: beyond the budget" if censored else "measured"})
    long = _eps(pd.DataFrame(rows))
    scale, axis = plots.cost_axis(long["value"], long["lo"], long["hi"])
    top = scale.domain[1]
    long["hi"] = np.minimum(_float(long["hi"]), top)
    x = alt.X("layer:N", title=None, axis=alt.Axis(labelAngle=-40))
    y = alt.Y("value:Q", scale=scale, axis=axis, title=f"median cost ({data['unit'].iloc[0]}; symlog)")
    statuses = ["predicted", "measured", "measured: beyond the budget"]
    points = plots.status_points(alt.Chart(), alt.X("layer:N", title=None), y, "which", "status", statuses,
                                 ["circle", "square", plots.OPEN_TRIANGLE], None,
                                 ["left_out", "layer", "which", "value", "lo", "hi"], size=45)
    bars = alt.Chart().mark_errorbar(ticks=True).encode(
        x=x, y=alt.Y("lo:Q", scale=scale, axis=axis, title=""), y2="hi:Q", color=alt.Color("which:N"),
        xOffset=alt.XOffset("which:N"))
    points = points.encode(xOffset=alt.XOffset("which:N"))
    return alt.layer(bars, points, data=long).properties(width=260, height=180).facet(
        column=alt.Column("eps:N", title="within ε of baseline"), row=alt.Row("left_out:N", title="left out"),
    ).resolve_scale(x="independent").properties(title=title)


# name (the file under plots/) -> how it is drawn from the answer tables and curves.parquet
FIGURES = {
    "answer_cost_depth": lambda t, curves: cost_depth(t["survival"]),
    "answer_recovered": lambda t, curves: recovered(t["recovered_curves"]),
    "answer_curves": lambda t, curves: log_curves(curves),
    "answer_effects": lambda t, curves: effects(t["fit"]),
    "answer_cka": lambda t, curves: cka(t["cka"]),
    "answer_damage_cost": lambda t, curves: damage_cost(t["damage_cells"]),
    "answer_out_of_sample": lambda t, curves: out_of_sample(t["out_of_sample"]),
}
