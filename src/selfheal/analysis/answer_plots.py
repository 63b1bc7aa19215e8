"""The answer page's figures (Altair, HTML + PNG), drawn only from the answer tables and ``curves.parquet``: one
function each (``FIGURES``, the file names under plots/), whose docstring says what it draws.

Costs span decades and can be exactly 0 (a cell already within eps of its baseline before any training), so a cost
axis is symlog (``plots.cost_axis``): log-like decades with an explicit 0 set apart below the smallest cost, ticks
at 0 and the powers of ten, and a domain computed from the values drawn; where nothing drawn is 0 (the medians of
``answer_cost_depth``) it is a plain log axis. A cost not reached within the budget is drawn as an open triangle at
the budget ("beyond the budget"), a lower bound, not a cost. Thresholds ε are the panels. A figure of one setting
draws the asker's where the grid has it (a layer's curves under another policy, such as the aside's
cross-attention, are not drawn there).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis import plots, stats
from selfheal.analysis.stats import UNIT_WORDS, budget_column, cost_unit
from selfheal.analysis.survival import ASKED, in_setting
from selfheal.lazy import Module

alt = Module("altair")  # imported when a figure is drawn: the Snakefile reads FIGURES at every start


COST_STATUS = ["median reached", "median " + plots.BEYOND]
CELL_STATUS = ["recovered", plots.BEYOND]
# The estimates leave out controls and cells of degenerate networks (survival.estimable): say both reasons.
NO_LAYER_CELLS = (
    "no single-layer cell to estimate: the grid has none, or every network is flagged degenerate or "
    "off its plateau (answer/networks_flags.parquet, beside this figure's folder)"
)
NOT_DAMAGED = "no layer was damaged beyond ε in this setting: there is no cost to draw"


def _float(column: pd.Series) -> np.ndarray:
    return pd.to_numeric(column, errors="coerce").astype(float).to_numpy()


def _asked(table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows of the asker's setting (regime frozen, policy full, init fresh), else of the first setting found,
    and its words; the other settings are in the answer tables and on the page."""
    settings = sorted(set(zip(table["regime"], table["policy"], table["init"])), key=lambda s: (s != ASKED, s))
    regime, policy, init = settings[0]
    return in_setting(table, settings[0]), f"regime {regime}, policy {policy}, init {init}"


def _inside_dodge(table: pd.DataFrame, by: str, width: float) -> np.ndarray:
    """Relative depth shifted per ``by`` group so that groups at the same depth sit side by side, ``width`` apart,
    and never outside [0, 1]: at 0 they go right, at 1 left, elsewhere both ways."""
    groups = sorted(table[by].dropna().unique())
    index = table[by].map({g: i for i, g in enumerate(groups)}).astype(float).to_numpy()
    depth = table["rel_depth"].astype(float).to_numpy()
    centred = (index - (len(groups) - 1) / 2) * width
    return np.clip(
        np.where(depth <= 0, index * width, np.where(depth >= 1, -index * width, depth * 0 + centred)) + depth, 0.0, 1.0
    )


def cost_depth(survival: pd.DataFrame, networks: pd.DataFrame | None = None) -> alt.Chart:
    """The median recovery cost (survival estimate, error bar: its interval, ``interval_kind``: the range over the
    networks below 5 of them, whose upper end is at the budget where it is beyond) against relative depth, one colour and line per model (N, D), points of different models
    side by side at the same depth; one panel per ε, two to a row. ``networks``: their source (``networks_flags``),
    for the unit; None: the rows' own columns."""
    layers = survival[survival["kind"] == "layer"].copy() if len(survival) else survival
    kinds = set(layers["interval_kind"].dropna()) if "interval_kind" in layers.columns else set()
    # the error bars are what survival.interval_kind says they are: a 95 % bootstrap interval only from 5 networks
    bars = (
        "95 % bootstrap interval" if kinds == {"bootstrap"} else "range" if kinds <= {"range", "none"} else "interval"
    )
    title = f"Recovery cost against relative depth (median, error bar: its {bars} over the pretrained networks)"
    if not len(layers):
        return plots.empty_chart(title, NO_LAYER_CELLS)
    layers, setting = _asked(layers)
    layers = layers.copy()
    unit = cost_unit(layers, layers if networks is None else networks)
    value, budget = f"median_{unit}", budget_column(unit)
    lo, hi = value + "_lo", value + "_hi"
    # a layer whose cells were never damaged beyond ε has no cost (a NaN median): not drawn, neither as a cost nor
    # as beyond the budget
    layers = layers[~np.isnan(_float(layers[value]))].copy()
    if not len(layers):
        return plots.empty_chart(title, NOT_DAMAGED)
    median, low, high, cap = (_float(layers[c]) for c in (value, lo, hi, budget))
    layers["reached"] = np.isfinite(median)
    # beyond the budget (inf) is drawn at the budget: the point, and an interval end that the budget bounds
    layers["y"] = np.where(np.isfinite(median), median, cap)
    layers["y_lo"] = np.where(np.isfinite(low), low, np.where(np.isnan(low), layers["y"], cap))
    layers["y_hi"] = np.where(np.isfinite(high), high, np.where(np.isnan(high), layers["y"], cap))
    layers["model (N, D)"] = (
        layers["model"] + " (" + layers["n_layer"].astype(str) + ", " + layers["d_model"].astype(str) + ")"
    )
    layers["status"] = np.where(layers["reached"], COST_STATUS[0], COST_STATUS[1])
    layers["x"] = _inside_dodge(layers, "model (N, D)", 0.007)
    data = plots.eps_column(layers)
    scale, y_axis = plots.cost_axis(layers["y"], layers["y_lo"], layers["y_hi"], zero=False)
    y = alt.Y("y:Q", scale=scale, axis=y_axis, title=plots.unit_title(unit) + f" ({scale.type})")
    color = alt.Color("model (N, D):N", scale=plots.model_scale())
    x = alt.X(
        "x:Q",
        title="relative depth L / (N − 1)",
        scale=alt.Scale(domain=[0.0, 1.0], nice=False, zero=False),
        axis=alt.Axis(values=[0, 0.25, 0.5, 0.75, 1], format=".2~f"),
    )
    tooltip = [
        "model",
        "target",
        "rel_depth",
        "threshold",
        "n_cells",
        "n_censored",
        "n_not_damaged",
        value,
        lo,
        hi,
        "p_recover",
    ]
    base = alt.Chart()
    line = base.mark_line(strokeWidth=1.6, opacity=0.9).encode(x=x, y=y, color=color)
    bars = plots.errorbar(base, x, "y_lo", "y_hi", scale, y_axis, color=color)
    points = plots.status_points(
        base, x, y, "model (N, D)", COST_STATUS, tooltip=tooltip, color_scale=plots.model_scale(), label_limit=600
    )
    chart = plots.by_eps(
        alt.layer(bars, line, points, data=data),
        280,
        200,
        alt.TitleParams(title, subtitle=[setting], fontSize=15, subtitleFontSize=13),
        "recovered within ε of baseline",
        columns=2,
    )
    return (
        chart.configure_axis(labelFontSize=13, titleFontSize=13)
        .configure_header(labelFontSize=13, titleFontSize=13)
        .configure_legend(labelFontSize=13, titleFontSize=13, orient="bottom", columns=2)
    )


def depth_color() -> alt.Color:
    """Layers coloured by relative depth on [0, 1]."""
    return alt.Color(
        "rel_depth:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]), title="relative depth L / (N − 1)"
    )


def recovered(curves_table: pd.DataFrame) -> alt.Chart:
    """One panel per ε: the share of a layer's cells back within ε against the data retrained on, one thin step
    line per (model, layer), coloured by the layer's relative depth (0: the first layer, 1: the last)."""
    title = "Share of cells back within ε against retraining data (Turnbull NPMLE), one line per model and layer"
    table = curves_table[curves_table["kind"] == "layer"] if len(curves_table) else curves_table
    if not len(table):
        return plots.empty_chart(title, NO_LAYER_CELLS)
    table, setting = _asked(table)
    data = plots.eps_column(table).assign(line=lambda t: t["model"] + " " + t["target"])
    x_col = "fraction" if data["fraction"].notna().all() else "examples"
    scale, axis = plots.cost_axis(data[x_col], headroom=1.0)
    x = alt.X(
        f"{x_col}:Q",
        scale=scale,
        axis=axis,
        title=plots.unit_title(x_col, "examples") + " (symlog)",  # retrained on: the title
    )
    y = alt.Y(
        "recovered_share:Q",
        title="share of cells back within ε",
        scale=alt.Scale(domain=[0, 1], nice=False),
        axis=alt.Axis(values=[0, 0.25, 0.5, 0.75, 1], format=".2~f"),
    )
    steps = (
        alt.Chart()
        .mark_line(interpolate="step-after", strokeWidth=1.2, opacity=0.55)
        .encode(
            x=x,
            y=y,
            color=depth_color(),
            detail="line:N",
            tooltip=["model", "target", "rel_depth", "threshold", x_col, "recovered_share"],
        )
    )
    return plots.by_eps(alt.layer(steps, data=data), 190, 170, f"{title}; {setting}", "back within ε of the baseline")


GAP_FLOOR = 1e-3  # the recovery curves' gap axis starts here: a loss at or below baseline x (1 + 0.1 %) sits on it


def _gap_y(*tables: pd.DataFrame) -> alt.Y:
    """The recovery curves' gap axis: log, from GAP_FLOOR to a 1-2-5 top above the largest gap of ``tables``,
    ticks at the powers of ten, as percentages."""
    top = plots.nice_up(max(float(t["gap"].max()) if len(t) else 0.0 for t in tables) * 1.2)
    return alt.Y(
        "gap:Q",
        scale=alt.Scale(type="log", domain=[GAP_FLOOR, top], nice=False),
        axis=alt.Axis(values=plots.decade_ticks(GAP_FLOOR, top), format="~%"),
        title="val loss / baseline − 1 (log)",
    )


def _eps_levels(thresholds: pd.Series, y: alt.Y, left: alt.X) -> tuple[alt.Chart, alt.Chart]:
    """The ε levels on the gap axis: dashed rules, each labelled at ``left`` (the panel's x = 0)."""
    levels = pd.DataFrame({"gap": sorted(thresholds.astype(float).unique())})
    levels["label"] = levels["gap"].map(lambda e: f"ε = {100 * e:g} %")
    rules = alt.Chart(levels).mark_rule(strokeDash=[4, 3], color="#555").encode(y=y)
    labels = (
        alt.Chart(levels)
        .mark_text(align="left", dx=2, dy=-5, fontSize=9, color="#555")
        .encode(y=y, x=left, text="label:N")
    )
    return rules, labels


def _gap(table: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """``table``'s curves with ``gap``, val loss / its network's baseline (``pretrain_reference``) − 1, at least
    GAP_FLOOR."""
    baselines = reference.drop_duplicates(["model", "pretrain_seed"])[["model", "pretrain_seed", "baseline_loss"]]
    out = table.merge(baselines, on=["model", "pretrain_seed"], how="inner")
    out["gap"] = np.maximum(out["val_loss"].astype(float) / out["baseline_loss"].astype(float) - 1, GAP_FLOOR)
    return out


def _pretraining(curves: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """Pretraining's own curves as gaps (``_gap``), one run per network."""
    pre = _gap(stats.kept_pretraining(curves), reference)
    return pre.assign(run="pretrain p" + pre["pretrain_seed"].astype(str))


def _run(rec: pd.DataFrame, *what: str) -> pd.Series:
    """One recovery curve's name: ``what`` (columns), its network and retrain seed."""
    return (
        rec[what[0]].str.cat([rec[w] for w in what[1:]], sep=" ")
        + " p"
        + rec["pretrain_seed"].astype(str)
        + " s"
        + rec["seed"].astype(str)
    )


def _pretrain_line(pre: pd.DataFrame, x: alt.X, y: alt.Y) -> alt.Chart:
    return alt.Chart(pre).mark_line(color="black", strokeWidth=2).encode(x=x, y=y, detail="run:N")


def log_curves(curves: pd.DataFrame, reference: pd.DataFrame, survival: pd.DataFrame) -> alt.Chart:
    """Recovery curves as the gap to the baseline, val loss / baseline − 1, on a log axis with the ε levels as
    dashed lines, so where a curve crosses each ε is where it passes the line, against examples seen or the
    fraction of S x E (symlog); reset layers coloured by relative depth (``survival`` gives each model's N), matched
    no-reset controls grey, pretraining from scratch black. One panel per model."""
    title = "Recovery curves: gap to the baseline against retraining data"
    legend = [  # a subtitle of short lines: one long title line would set the width of the whole figure
        "gap on a log scale, 0.1 % or less drawn at 0.1 %; dashed: the ε levels",
        "colour: relative depth; grey: matched no-reset controls; black: pretraining",
    ]
    rec = curves[(curves["kind"] == "recovery") & curves["layer"].notna()].copy() if len(curves) else curves
    if not len(rec) or not len(reference) or not (rec["init"] != "trained").any():
        return plots.empty_chart(title, "no single-layer recovery curves in this grid")
    # one setting, the asker's where the grid has it: its reset cells and their matched controls (the same regime
    # and policy, init trained); a layer's curves under another policy would share its colour and run
    reset, setting = _asked(rec[rec["init"] != "trained"])
    regime, policy = reset["regime"].iloc[0], reset["policy"].iloc[0]
    controls = rec[(rec["init"] == "trained") & (rec["regime"] == regime) & (rec["policy"] == policy)]
    rec = pd.concat([reset, controls])
    legend.append(setting)
    x_col = "fraction_of_pretrain" if curves["fraction_of_pretrain"].notna().all() else "examples"
    rec, pre = _gap(rec, reference), _pretraining(curves, reference)
    for table in (rec, pre):
        table["x"] = _float(table[x_col])
    deepest = rec.groupby("model")["depth"].max().astype(float) + 1  # where the estimates leave a model out
    n_layer = survival.drop_duplicates("model").set_index("model")["n_layer"].astype(float) if len(survival) else {}
    n_layer = rec["model"].map(n_layer).astype(float).fillna(rec["model"].map(deepest))
    rec["rel_depth"] = rec["depth"].astype(float) / np.maximum(n_layer - 1, 1)
    rec["run"] = _run(rec, "target")
    rec["role"] = np.where(rec["init"] == "trained", "matched control", "reset layer")
    x_scale, x_axis = plots.cost_axis(rec["x"], headroom=1.0)
    pre = pre[pre["x"] <= x_scale.domain[1]]  # pretraining beyond the retraining budget is off the panel
    y = _gap_y(rec, pre)
    x = alt.X("x:Q", scale=x_scale, axis=x_axis, title=plots.unit_title(x_col, "examples") + " (symlog)")
    rules, labels = _eps_levels(reference["threshold"], y, alt.X(datum=0.0, scale=x_scale, axis=x_axis))
    charts = []
    for model in sorted(rec["model"].unique()):
        mine, own_pre = rec[rec["model"] == model], pre[pre["model"] == model]
        tooltip = ["target", "pretrain_seed", "seed", "examples", "val_loss", "gap"]
        cells = alt.Chart(mine[mine["role"] == "reset layer"]).mark_line(opacity=0.6, strokeWidth=1.2)
        cells = cells.encode(x=x, y=y, color=depth_color(), detail="run:N", tooltip=tooltip)
        controls = alt.Chart(mine[mine["role"] == "matched control"]).mark_line(
            color="gray", strokeDash=[3, 2], opacity=0.6
        )
        controls = controls.encode(x=x, y=y, detail="run:N")
        charts.append(
            alt.layer(rules, labels, _pretrain_line(own_pre, x, y), controls, cells).properties(
                width=190, height=140, title=model
            )
        )
    return alt.concat(*charts, columns=4).properties(title=alt.TitleParams(title, subtitle=legend))


def effects(fit: pd.DataFrame) -> alt.Chart:
    """The fit's factors on the median cost, e^b (1: no change), with their intervals on a log axis: one row per
    term, one point per ε beside each other in it, one panel per setting."""
    title = "Scaling fit: factor e^b on the median cost (log-normal AFT, 95 % cluster-bootstrap interval)"
    table = fit[fit["determined"].astype(bool)] if len(fit) else fit
    if not len(table):
        return plots.empty_chart(title, "no term determined by this grid (see answer/fit.parquet)")
    data = plots.eps_column(table).assign(setting=lambda t: "policy / init / regime: " + plots.setting(t))
    lo, hi = plots.log_domain(data["factor_lo"], data["factor_hi"], [1.0])
    scale = alt.Scale(type="log", domain=[lo, hi], nice=False)
    axis = alt.Axis(values=plots.decade_ticks(lo, hi), format="~g")
    x = alt.X("factor:Q", title="factor on the median cost (log; 1: no change)", scale=scale, axis=axis)
    y = alt.Y("label:N", title=None, axis=alt.Axis(labelLimit=480))  # the terms' labels in full
    eps = {
        "color": alt.Color("eps:N", title="within ε of baseline", scale=plots.model_scale()),
        "yOffset": alt.YOffset("eps:N"),
    }
    tooltip = ["term", "threshold", "factor", "factor_lo", "factor_hi", "coef", "n_cells", "n_clusters"]
    points = alt.Chart().mark_point(filled=True, size=50, opacity=1).encode(x=x, y=y, tooltip=tooltip, **eps)
    bars = (
        alt.Chart()
        .mark_errorbar(ticks=True)
        .encode(x=alt.X("factor_lo:Q", scale=scale, title=""), x2="factor_hi:Q", y=y, **eps)
    )
    one = alt.Chart().mark_rule(strokeDash=[4, 3], color="gray").encode(x=alt.datum(1, scale=scale))
    header = alt.Header(labelOrient="top", labelAnchor="start", labelFontSize=12)
    return (
        alt.layer(one, bars, points, data=data)
        .properties(width=420, height=alt.Step(9))
        .facet(row=alt.Row("setting:N", title=None, header=header))
        .properties(title=title)
    )


def cka(table: pd.DataFrame) -> alt.Chart:
    """CKA between the original and the healed layer against L, with the unhealed floor (dashed)."""
    title = "Healed-layer similarity: linear CKA with the original layer (dashed: the unhealed, fresh layer)"
    data = table[table["cka"].notna()] if len(table) else table
    if not len(data):
        return plots.empty_chart(title, "no CKA measured (the tables have no cka values)")
    data, setting = _asked(data)
    subtitle = [setting]
    # a layer's cells damaged beyond a larger ε are a subset of those beyond a smaller one, so two ε with as many
    # cells read the same cells: where those agree, each cell's CKA was measured once (at the end of retraining)
    # and the ε differ only in which cells they count; one panel then shows all of them (the smallest ε's)
    same_cells = data.groupby(["model", "target", "n_cells"])
    if (same_cells["cka"].nunique() <= 1).all() and (same_cells["cka_floor"].nunique(dropna=False) <= 1).all():
        data = data[data["threshold"] == data["threshold"].min()].assign(threshold=math.nan)
        subtitle.append(
            "measured once per cell, at the end of retraining: one panel, every cell damaged beyond the smallest ε"
        )
    data = plots.eps_column(data).assign(eps=lambda d: d["eps"].where(d["threshold"].notna(), "every ε"))
    scale = alt.Scale(
        domain=plots.linear_domain(
            data["cka"], data["cka_lo"], data["cka_hi"], data["cka_floor"], include=[0, 1], pad=0
        ),
        nice=False,
    )
    x = alt.X("depth:O", title="reset layer L (depth)", axis=alt.Axis(labelAngle=0))
    color = alt.Color("model:N", scale=plots.model_scale())
    ticks = {"size": 8}  # short ticks: a band-wide one reads as a line
    line = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("cka:Q", title="linear CKA", scale=scale),
            color=color,
            tooltip=["model", "target", "cka", "cka_lo", "cka_hi", "cka_floor"],
        )
    )
    bars = plots.errorbar(alt.Chart(), x, "cka_lo", "cka_hi", scale, ticks=ticks, color=color)
    floor = alt.Chart().mark_line(strokeDash=[4, 3]).encode(x=x, y=alt.Y("cka_floor:Q", scale=scale), color=color)
    width = 360 if data["eps"].nunique() == 1 else 220
    layer = alt.layer(bars, line, floor, data=data)
    return plots.by_eps(layer, width, 200, alt.TitleParams(title, subtitle=subtitle), "healed to within ε")


def damage_cost(cells: pd.DataFrame) -> alt.Chart:
    """Zero-step damage against cost, per single-layer cell (``damage_cells``)."""
    title = "Zero-step damage against recovery cost, per single-layer cell (open triangles: beyond the budget)"
    data = cells.copy()
    if not len(data):
        return plots.empty_chart(title, NO_LAYER_CELLS)
    data, setting = _asked(data)
    data["status"] = np.where(data["recovered"].astype(bool), CELL_STATUS[0], CELL_STATUS[1])
    data = plots.eps_column(data)
    scale, axis = plots.cost_axis(data["cost"])
    x = alt.X("damage:Q", title="val loss right after the reset − baseline", scale=plots.linear_scale(data["damage"]))
    y = alt.Y("cost:Q", scale=scale, axis=axis, title="cost (crossing evaluation, or the budget; symlog)")
    tooltip = ["model", "target", "pretrain_seed", "seed", "damage", "cost", "recovered"]
    points = plots.status_points(
        alt.Chart(data),
        x,
        y,
        "model",
        CELL_STATUS,
        title="cell",
        tooltip=tooltip,
        size=50,
        color_scale=plots.model_scale(),
    )
    return plots.by_eps(points, 220, 200, alt.TitleParams(title, subtitle=[setting]), "within ε of baseline")


def out_of_sample(table: pd.DataFrame, survival: pd.DataFrame) -> alt.Chart:
    """Predicted (the fit without the part left out) against measured median cost, per tested layer (a prediction
    too wide to fail too, its panel marked "not informative"): points with their intervals, one panel per part left out and ε that has a tested layer (the others are named in the
    title with why). The axis ends a little above the retraining budget: a measured median beyond the budget is an
    arrow (triangle up) at the budget, and an interval end beyond the axis is drawn to its top."""
    title = "Out of sample: the fit's predicted median cost against the measured one, per layer left out"
    fitted = table[table["predicted"].notna()] if len(table) else table
    if not len(fitted):
        return plots.empty_chart(title, "no part of the size grid could be left out (answer/out_of_sample.parquet)")
    # a tested layer: held or not, or a prediction too wide to fail (drawn, its panel says so)
    wide = table["result"] == "not informative" if "result" in table.columns else pd.Series(False, index=table.index)
    drawn = table["held"].notna() | wide
    tested = fitted[drawn.loc[fitted.index]]
    panels = table.assign(_drawn=drawn).groupby(["left_out", "threshold"], sort=False)
    untested = [
        f"{name}, ε = {eps:g} ({'not fitted' if g['predicted'].isna().all() else 'no layer tested'})"
        for (name, eps), g in panels
        if not g["_drawn"].any()
    ]
    why = " (a layer is not tested when its median is 0 or its cells left the fit)"
    why = why if any("no layer tested" in u for u in untested) else ""
    subtitle = ["Not drawn: " + "; ".join(untested) + why] if untested else []
    if not len(tested):
        return plots.empty_chart(title, "no layer could be tested: " + "; ".join(untested))
    unit = tested["unit"].iloc[0]
    layers = survival[survival["kind"] == "layer"] if len(survival) else survival
    budget = float(pd.to_numeric(layers[budget_column(unit)], errors="coerce").max()) if len(layers) else math.nan
    key = tested.assign(
        panel=[
            f"{a}, ε = {e:g}{' (not informative)' if w else ''}"
            for a, e, w in zip(tested["left_out"], tested["threshold"], wide.loc[tested.index])
        ],
        layer=tested["model"] + " " + tested["target"],
    )
    censored = key["measured_censored"].astype(bool)
    predicted = key.assign(which="predicted", value=key["predicted"], lo=key["predicted_lo"], hi=key["predicted_hi"])
    value = key["measured_lo"].where(censored, key["measured"])
    measured = key.assign(which="measured", value=value, lo=key["measured_lo"], hi=key["measured_hi"])
    measured["status"] = np.where(censored, "measured: beyond the budget (↑)", "measured")
    columns = ["panel", "layer", "which", "value", "lo", "hi", "status"]
    long = pd.concat([predicted.assign(status="predicted"), measured]).sort_index(kind="stable")[columns]
    cap = budget if np.isfinite(budget) else float(np.nanmax(_float(long["value"])))
    for column in ("value", "lo", "hi"):
        long[column] = np.minimum(_float(long[column]), cap * 1.25)
    scale, axis = plots.cost_axis(long["value"], long["lo"], long["hi"], [cap], headroom=1.0)
    long["hi"] = np.minimum(_float(long["hi"]), scale.domain[1])
    y = alt.Y("value:Q", scale=scale, axis=axis, title=f"median cost ({UNIT_WORDS[unit]}; symlog)")
    statuses = ["predicted", "measured", "measured: beyond the budget (↑)"]
    points = plots.status_points(
        alt.Chart(),
        alt.X("layer:N", title=None),
        y,
        "which",
        statuses,
        ["circle", "square", "triangle-up"],
        tooltip=["panel", "layer", "which", "value", "lo", "hi"],
        size=55,
    )
    x = alt.X("layer:N", title=None, axis=alt.Axis(labelAngle=-55))
    offset = alt.XOffset("which:N")
    bars = plots.errorbar(
        alt.Chart(), x, "lo", "hi", scale, axis, color=alt.Color("which:N", legend=None), xOffset=offset
    )
    rule = alt.Chart().mark_rule(strokeDash=[4, 3], color="gray")
    budget_rule = rule.encode(y=alt.Y(datum=cap, scale=scale, axis=axis, title=""))
    points = points.encode(xOffset=offset)
    order = list(dict.fromkeys(long["panel"]))
    return (
        alt.layer(budget_rule, bars, points, data=long)
        .properties(width=210, height=170)
        .facet(facet=alt.Facet("panel:N", title=None, sort=order), columns=4)
        .resolve_scale(x="independent")
        .properties(title=alt.TitleParams(title, subtitle=subtitle + ["dashed: the retraining budget"]))
    )


# name (the file under plots/) -> how it is drawn from the answer tables and curves.parquet
ASIDE_CURVES = {  # the aside items drawn as curves (the single layers are in answer_curves), as the legend names them
    "all_cross_attention": "all cross-attention",
    "donor_swap": "{donor}'s encoder, trainable",
    "donor_swap_gated": "{donor}'s encoder, trainable",
    "donor_swap_frozen": "{donor}'s encoder, frozen",
    "donor_swap_frozen_gated": "{donor}'s encoder, frozen",
    "donor_stitch": "{donor}'s encoder, stitched in",
    "encoder_swap": "a fresh encoder",
    "encoder_swap_gated": "a fresh encoder",
    "reset_all": "every layer",
}


def aside_curves(curves: pd.DataFrame, reference: pd.DataFrame, aside: pd.DataFrame) -> alt.Chart:
    """Per encoder-decoder model: the recovery curves of its aside's resets beyond one layer (each encoder swap,
    all cross-attention, every layer; one line per network) as the gap to the baseline (log), against the examples
    seen over what pretraining from scratch needed to first reach the smallest ε (the aside's ``scratch`` median),
    so x = 1 is "as slow as from scratch" and a curve still above the ε line past it is slower; the gated swaps
    (init ``zero_out``) dashed in their swap's colour; pretraining's own curves black."""
    title = "The encoder-decoder aside: recovery against pretraining from scratch"
    legend = [
        "x: examples / what pretraining from scratch needed to reach the smallest ε (1 = as slow as from scratch)",
        "gap on a log scale, 0.1 % or less drawn at 0.1 %; dashed rules: the ε levels; dashed lines: gated swaps",
        "black: pretraining from scratch, each network's own pretraining curve",
    ]
    if not len(aside) or not len(curves) or not len(reference):
        return plots.empty_chart(title, "this grid has no encoder-decoder model in the estimates")
    eps_min = float(aside["threshold"].min())
    rows, pre = [], []
    for model, own in aside[aside["threshold"] == eps_min].groupby("model", sort=True):
        scratch = own[own["item"] == "scratch"]
        if not len(scratch) or not math.isfinite(float(scratch["median"].iloc[0])):
            continue
        per, unit = float(scratch["median"].iloc[0]), scratch["unit"].iloc[0]
        column = "fraction_of_pretrain" if unit == "fraction" else "examples"
        mine = curves[(curves["model"] == model) & (curves["kind"] == "recovery") & (curves["regime"] == "frozen")]
        for _, item in own[own["item"].isin(list(ASIDE_CURVES))].iterrows():
            one = mine[(mine[["target", "policy", "init"]] == item[["target", "policy", "init"]]).all(axis=1)].copy()
            donor = item["target"][len("swap-") :] if item["target"].startswith("swap-") else ""
            one["what"] = ASIDE_CURVES[item["item"]].format(donor=donor)
            one["gated"] = "gated" if item["init"] == "zero_out" else "not gated"
            one["x"] = _float(one[column]) / per
            rows.append(one)
        own_pre = stats.kept_pretraining(curves[curves["model"] == model]).copy()
        own_pre["x"] = _float(own_pre[column]) / per
        pre.append(own_pre)
    rec = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    if not len(rec):
        return plots.empty_chart(title, "no recovery curve of the aside's resets, or no from-scratch cost to scale by")
    rec, pre = _gap(rec, reference), _pretraining(pd.concat(pre, ignore_index=True), reference)
    rec["run"] = _run(rec, "what", "gated")
    right = plots.nice_up(max(float(rec["x"].max()), 1.0) * 1.05, (1, 1.5, 2, 2.5, 3, 4, 5, 10))
    pre = pre[pre["x"] <= right]
    y = _gap_y(rec, pre)
    x_scale = alt.Scale(domain=[0.0, right], nice=False)
    x = alt.X("x:Q", scale=x_scale, title=f"examples / what pretraining from scratch needed (ε = {100 * eps_min:g} %)")
    what = alt.Scale(domain=sorted(rec["what"].unique()), scheme="tableau10")
    rules, labels = _eps_levels(aside["threshold"], y, alt.X(datum=0.0, scale=x_scale))
    one = alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(color="black", strokeDash=[2, 2]).encode(x=x)
    gated = alt.Scale(domain=["not gated", "gated"], range=[[1, 0], [5, 3]])
    charts = []
    for model in sorted(rec["model"].unique()):
        mine, own_pre = rec[rec["model"] == model], pre[pre["model"] == model]
        lines = (
            alt.Chart(mine)
            .mark_line(opacity=0.75, strokeWidth=1.3)
            .encode(
                x=x,
                y=y,
                color=alt.Color("what:N", scale=what, title="reset"),
                strokeDash=alt.StrokeDash("gated:N", scale=gated, title="cross-attention output"),
                detail="run:N",
                tooltip=["what", "gated", "pretrain_seed", "examples", "val_loss", "gap"],
            )
        )
        single = mine[mine.groupby("run")["x"].transform("size") == 1]  # within ε at once: a one-point curve
        fill = alt.Fill("what:N", scale=what, legend=None)
        points = alt.Chart(single).mark_circle(size=30, opacity=0.9).encode(x=x, y=y, fill=fill)
        charts.append(
            alt.layer(rules, labels, one, _pretrain_line(own_pre, x, y), lines, points)
            .resolve_scale(fill="independent")
            .properties(width=420, height=260, title=model)
        )
    return alt.concat(*charts, columns=2).properties(title=alt.TitleParams(title, subtitle=legend))


FIGURES = {
    "answer_cost_depth": lambda t, curves: cost_depth(t["survival"], t["networks_flags"]),
    "answer_recovered": lambda t, curves: recovered(t["recovered_curves"]),
    "answer_curves": lambda t, curves: log_curves(curves, t["pretrain_reference"], t["survival"]),
    "answer_effects": lambda t, curves: effects(t["fit"]),
    "answer_cka": lambda t, curves: cka(t["cka"]),
    "answer_damage_cost": lambda t, curves: damage_cost(t["damage_cells"]),
    "answer_out_of_sample": lambda t, curves: out_of_sample(t["out_of_sample"], t["survival"]),
    "answer_aside": lambda t, curves: aside_curves(curves, t["pretrain_reference"], t["encoder_decoder"]),
}
