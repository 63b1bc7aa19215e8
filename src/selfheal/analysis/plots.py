"""Altair figures, drawn only from the Parquet tables the workflow wrote (saved as HTML and PNG).

- recovery cost (``recovery_cost``; ``recovery_examples`` in examples, for every model): the fraction of S x E
  needed to get back within eps of the baseline, against the reset layer L, one panel per threshold eps (columns)
  and setting (rows), one colour per model, models side by side at each layer. Every seed is a point (filled
  circle: recovered; open triangle at its budget: censored, a lower bound; cross: diverged), the median over
  networks and seeds a line (dashed where one was censored: the median is then a lower bound or unknown) with their
  range (smallest to largest) as an error bar, the reset-all control and encoder swaps (medians) as rules. A cost
  has no spread to estimate from three networks, and a t interval of three would reach below 0: the range is what
  was measured. Cells never damaged beyond eps have no cost and are left out. The y axis is symlog
  (``cost_axis``): decades like a log axis, with an explicit 0 below them.
- recovery curves: validation loss against examples seen (as a fraction of S x E), one panel per model, every
  recovery curve (one line per network and seed; a one-evaluation curve as a point) over the model's own
  pretraining curve, with the baseline as a rule.
- damage: validation loss right after the reset minus the baseline, against L (mean and t 95 % CI over seeds), the
  reset-all control as a dashed rule; 0 is always on the axis.

Every quantitative axis has an explicit domain computed from the values it draws (``linear_domain``,
``log_domain``, ``cost_axis``), so that its ticks span the data; the answer figures (``answer_plots``) use the same
helpers. A figure whose table has nothing to draw (a grid of downloaded models has no fraction of S x E; a grid
without layer cells has no per-layer damage) is drawn as ``empty_chart``: its title and an explicit "no data for
this panel" line saying why, instead of failing. Every figure handles empty and one-row tables.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from selfheal.analysis import stats, survival
from selfheal.analysis.survival import MATCHED_CONTROL_INIT
from selfheal.lazy import Module

alt = Module("altair")  # imported when a figure is drawn: the Snakefile reads FIGURES at every start

# Legend words for a cost that was not reached within the budget (drawn at the budget: a lower bound).
BEYOND = "beyond the budget (drawn at the examples it trained)"


def model_scale() -> alt.Scale:
    """One colour per model: category10's ten saturated colours (they repeat after ten models; tableau20 pairs each
    with a pale one that a thin line or a small point does not show)."""
    return alt.Scale(scheme="category10")


# An upward triangle with a triangular hole (the inner path runs the other way): an open triangle that a filled
# point mark and its legend both draw as an outline.
OPEN_TRIANGLE = "M0,-1L1,0.8L-1,0.8Z M0,-0.45L-0.55,0.5L0.55,0.5Z"
ZERO_LABEL = "datum.value == 0 ? '0' : format(datum.value, datum.value >= 10000 ? '~s' : '~g')"
REACHED_SHAPES = ["circle", OPEN_TRIANGLE]  # a cost reached, one beyond the budget (``status_points``)


def empty_chart(title: str, reason: str) -> alt.Chart:
    """The chart drawn in place of a figure that has no data: the figure's title over "no data for this panel",
    with the reason on a second line (e.g. "every model here is downloaded: S × E is unknown")."""
    lines = pd.DataFrame({"text": ["no data for this panel", reason], "line": [0, 1]})
    return (
        alt.Chart(lines)
        .mark_text(size=14, align="center", baseline="middle")
        .encode(
            y=alt.Y("line:O", axis=None),
            text="text:N",
            size=alt.Size("line:O", scale=alt.Scale(domain=[0, 1], range=[16, 12]), legend=None),
        )
        .properties(width=max(360, 7 * max(len(reason), len(title))), height=90, title=title)
    )


# ---------------------------------------------------------------- axes that span the data


def finite(*columns: Iterable) -> np.ndarray:
    """The finite values of the given columns (None, NaN, ±inf and pd.NA dropped), as one float array."""
    parts = [pd.to_numeric(pd.Series(list(c), dtype="object"), errors="coerce").to_numpy(float) for c in columns]
    values = np.concatenate(parts) if parts else np.array([], dtype=float)
    return values[np.isfinite(values)]


def nice_up(x: float, steps: tuple = (1, 2, 5, 10)) -> float:
    """The smallest 1-2-5 x 10^k (or ``steps`` x 10^k) at or above x > 0."""
    power = 10.0 ** math.floor(math.log10(x))
    return float(f"{next(m * power for m in steps if m * power >= x * (1 - 1e-9)):.12g}")


def _nice_down(x: float) -> float:
    """The largest 1-2-5 x 10^k at or below x > 0."""
    power = 10.0 ** math.floor(math.log10(x))
    return next(m * power for m in (5, 2, 1) if m * power <= x * (1 + 1e-9))


def linear_domain(*columns: Iterable, include: Iterable[float] = (), pad: float = 0.06) -> list[float]:
    """[lo, hi] covering every finite value of ``columns`` and ``include``, padded by ``pad`` of the span on both
    sides (an end at 0 with nothing on its other side stays at 0) and rounded out to half the 1-2-5 tick step."""
    values = finite(*columns, list(include))
    if not len(values):
        return [0.0, 1.0]
    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= 1e-12 * max(abs(lo), abs(hi), 1.0):
        half = 0.5 * abs(lo) if lo else 0.5
        lo, hi = lo - half, hi + half
    span = hi - lo
    lo = lo if lo == 0 else lo - pad * span
    hi = hi if hi == 0 else hi + pad * span
    step = nice_up((hi - lo) / 5) / 2  # half a 1-2-5 step of about five intervals
    return [float(f"{math.floor(lo / step + 1e-9) * step:.12g}"), float(f"{math.ceil(hi / step - 1e-9) * step:.12g}")]


def log_domain(*columns: Iterable) -> list[float]:
    """[lo, hi] for a log axis: the positive finite values, rounded out to 1-2-5 x 10^k with a little room."""
    values = finite(*columns)
    values = values[values > 0]
    if not len(values):
        return [1.0, 10.0]
    return [_nice_down(float(values.min()) / 1.1), nice_up(float(values.max()) * 1.1)]


def decade_ticks(lo: float, hi: float) -> list[float]:
    """The powers of ten in [lo, hi] > 0, with the 2s and 5s where that spans one decade or less."""
    low, high = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    multiples = (1, 2, 5) if high - low <= 1 else (1,)
    ticks = (m * 10.0**k for k in range(low, high + 1) for m in multiples)
    return [float(f"{t:.12g}") for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]


def cost_axis(*columns: Iterable, headroom: float = 1.25, zero: bool = True) -> tuple[alt.Scale, alt.Axis]:
    """Scale and axis for a non-negative cost spanning decades, zeros included: a symlog scale (log-like above its
    constant, linear below) whose constant is a quarter of the power of ten at or below the smallest positive
    value, so that 0 sits apart below the smallest cost (about two thirds of a decade), labelled "0". Domain
    [0, top], top the 1-2-3-5 x 10^k at or above ``headroom`` times the largest value; ticks at 0, every power of
    ten in between (``decade_ticks``) and the top. ``zero`` False: where no value is 0, a log scale from a 1-2-5 below
    the smallest value instead, without the 0. NaN and inf are ignored (the caller draws a cost beyond the budget at
    the budget)."""
    values = finite(*columns)
    positive = values[values > 0]
    if not len(positive):
        return alt.Scale(type="symlog", constant=0.1, domain=[0.0, 1.0], nice=False), alt.Axis(
            values=[0.0, 1.0], labelExpr=ZERO_LABEL
        )
    low = math.floor(math.log10(float(positive.min())) + 1e-9)
    top = nice_up(float(positive.max()) * headroom, (1, 2, 3, 5, 10))
    if not zero and len(positive) == len(values):
        bottom = _nice_down(float(positive.min()) / 1.5)
        return alt.Scale(type="log", domain=[bottom, top], nice=False), alt.Axis(
            values=decade_ticks(bottom, top), format="~g"
        )
    ticks = [0.0, *decade_ticks(10.0**low, top)]
    if ticks[-1] < top * (1 - 1e-9):
        ticks.append(top)
    constant = float(f"{10.0**low / 4:.12g}")
    return (
        alt.Scale(type="symlog", constant=constant, domain=[0.0, top], nice=False),
        alt.Axis(values=ticks, labelExpr=ZERO_LABEL, grid=True),
    )


def eps_column(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with ``eps``, its threshold's panel header ("ε = 0.05")."""
    return table.assign(eps=table["threshold"].map(lambda e: f"ε = {e:g}"))


def setting(table: pd.DataFrame) -> pd.Series:
    return table["policy"] + " / " + table["init"] + " / " + table["regime"]


def unit_title(unit: str, what: str = "examples to recover") -> str:
    """A cost axis's title in ``unit`` (``fraction``/``fraction_of_pretrain`` of S x E, or ``examples``)."""
    return f"{what} / (S × E)" if unit.startswith("fraction") else what


def errorbar(base: alt.Chart, x, lo: str, hi: str, scale: alt.Scale, axis=None, ticks=True, **encode):
    """A vertical interval from ``lo`` to ``hi`` (columns) at ``x``, on the y ``scale`` (and ``axis``, if given)."""
    y = alt.Y(f"{lo}:Q", scale=scale, axis=alt.Undefined if axis is None else axis, title="")
    return base.mark_errorbar(ticks=ticks).encode(x=x, y=y, y2=f"{hi}:Q", **encode)


def by_eps(layer: alt.Chart, width: int, height: int, title, header: str, columns: int | None = None, **facet):
    """``layer`` (over data with ``eps_column``) as one panel per ε: a row of them, or ``columns`` to a row; ``facet``:
    more facet channels (``row=``)."""
    panels = layer.properties(width=width, height=height)
    if columns:
        panels = panels.facet(facet=alt.Facet("eps:N", title=header), columns=columns)
    else:
        panels = panels.facet(column=alt.Column("eps:N", title=header), **facet)
    return panels.properties(title=title)


def linear_scale(*columns: Iterable, include: Iterable[float] = (), zero: bool = False) -> alt.Scale:
    """A linear scale with ``linear_domain``'s explicit domain (``zero``: 0 always on it)."""
    return alt.Scale(
        domain=linear_domain(*columns, include=[*include, *([0.0] if zero else [])]), nice=False, zero=False
    )


def status_points(
    base: alt.Chart,
    x,
    y,
    color_field: str,
    statuses: list[str],
    shapes: list[str] = REACHED_SHAPES,
    *,
    title: str | None = None,
    tooltip: list,
    size: int = 60,
    labels: dict[str, str] | None = None,
    color_scale: alt.Scale | None = None,
    label_limit: int = 320,
):
    """Points coloured by ``color_field`` (on ``color_scale``: ``model_scale()`` for models) whose shape follows
    their ``status`` (``statuses`` -> ``shapes``), in one legend (``labels``: the legend's words for some
    statuses); ``OPEN_TRIANGLE`` among the shapes is an outline (beyond the budget), drawn as a filled path with a
    hole so that the legend shows it open too."""
    label_expr = "datum.label"
    for status, words in (labels or {}).items():
        label_expr = f"datum.label == '{status}' ? '{words}' : ({label_expr})"
    return base.mark_point(filled=True, size=size, opacity=0.85).encode(
        x=x,
        y=y,
        color=alt.Color(f"{color_field}:N", scale=color_scale or alt.Undefined),
        shape=alt.Shape(
            "status:N",
            title=title,
            scale=alt.Scale(domain=statuses, range=shapes),
            legend=alt.Legend(labelLimit=label_limit, symbolSize=90, labelExpr=label_expr),
        ),
        tooltip=tooltip,
    )


def dodge(table: pd.DataFrame, x: str, by: str, width: float) -> pd.Series:
    """``x`` shifted per value of ``by`` (sorted) so that groups at the same x sit side by side, ``width`` apart."""
    groups = sorted(table[by].dropna().unique()) if len(table) else []
    offset = {g: (i - (len(groups) - 1) / 2) * width for i, g in enumerate(groups)}
    return table[x].astype(float) + table[by].map(offset).astype(float)


def _mean_ci(table: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    """Per group of ``keys``: the mean of ``value``, its t 95 % interval (no interval: the mean) and the count."""
    rows = [(*key, *stats.mean_ci(g[value].tolist()), len(g)) for key, g in table.groupby(keys, sort=True)]
    out = pd.DataFrame(rows, columns=[*keys, "mean", "ci_lo", "ci_hi", "n_seeds"])
    return out.assign(ci_lo=out["ci_lo"].fillna(out["mean"]), ci_hi=out["ci_hi"].fillna(out["mean"]))


def _median_range(table: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    """Per group of ``keys``: the median of ``value`` (``mean``), the smallest and largest (``ci_lo``, ``ci_hi``), the
    count and the censored count."""
    censored = ~table["recovered"].astype(bool) if "recovered" in table else False
    out = (
        table.assign(_censored=censored)
        .groupby(keys, dropna=False, sort=True)
        .agg(
            mean=(value, "median"),
            ci_lo=(value, "min"),
            ci_hi=(value, "max"),
            n_seeds=(value, "size"),
            n_censored=("_censored", "sum"),
        )
    )
    return out.reset_index().astype({"n_censored": int})[[*keys, "mean", "ci_lo", "ci_hi", "n_seeds", "n_censored"]]


SEED_STATUS = ["recovered", "censored (≥ budget)", "diverged"]


def layer_axis(layers: Iterable) -> tuple[alt.Scale, alt.Axis]:
    """A quantitative x for integer layer indices (points dodged around them): every index a tick."""
    values = sorted({int(v) for v in finite(layers)}) or [0]
    return (
        alt.Scale(domain=[values[0] - 0.5, values[-1] + 0.5], nice=False, zero=False),
        alt.Axis(values=values, format="d", labelAngle=0, grid=False),
    )


def recovery_cost(summary: pd.DataFrame, unit: str = "fraction_of_pretrain") -> alt.Chart:
    """Cost against the reset layer's depth. ``unit`` fraction_of_pretrain (models pretrained here) or examples
    (every model, including downloaded ones whose S x E is unknown)."""
    title = "Recovery cost against reset layer"
    legend = [
        "Median and range over networks and seeds; open triangles: beyond the budget, at the examples trained.",
        "Faint rules marked 'beyond the budget': a censored median. Cells never damaged beyond ε: left out (no cost).",
    ]
    # a cell within eps right after the reset has no cost: it is counted apart (answer tables), never a 0 in a mean
    table = summary[summary[unit].notna() & (summary["outcome"] != "not_damaged")].copy()
    # a network that is degenerate or not fully trained is left out of every estimate, so out of the figure too;
    # where every network is, they are all drawn (a default run's networks are off their plateau) and the title
    # says that none of it is an answer
    left_out = survival.left_out(table)
    note = ""
    if left_out.all() and len(table):
        note = "Every network is degenerate or not fully trained (left out of the answer): for inspection only"
    elif left_out.any():
        names = table.loc[left_out, ["model", "pretrain_seed"]].values
        note = "Not drawn, being degenerate or not fully trained: " + ", ".join(
            sorted({f"{m} seed {s}" for m, s in names})
        )
        table = table[~left_out]
    if table.empty:
        reason = (
            "no cell of a model pretrained here (S × E is unknown for a downloaded model: see recovery_examples)"
            if unit == "fraction_of_pretrain" and len(summary)
            else "no retrain cells"
        )
        return empty_chart(title, reason)
    table["setting"] = setting(table)
    table["cost"] = table[unit].astype(float)
    table["status"] = [
        SEED_STATUS[2] if d else (SEED_STATUS[0] if r else SEED_STATUS[1])
        for r, d in zip(table["recovered"], table["diverged"])
    ]
    # matched no-reset controls (init "trained") start at the baseline: they have no cost to draw
    layers = table[table["depth"].notna() & (table["init"] != MATCHED_CONTROL_INIT)].copy()
    layers["layer"] = layers["depth"].astype(int)
    keys = ["model", "setting", "threshold", "layer"]
    means = _median_range(layers, keys, "cost")
    means["dashed"] = means["n_censored"] > 0
    layers["x"] = dodge(layers, "layer", "model", 0.12)
    means["x"] = dodge(means, "layer", "model", 0.12)
    # horizontal references: every layer reset (the from-scratch comparison) and encoder swaps
    controls = table[(table["target"] == "all") | table["target"].str.startswith("swap")]
    frames = [layers.assign(row="seed"), means.assign(row="mean")]
    if len(controls):  # a median that is censored is not a cost: its rule says so where it is drawn
        control_means = _median_range(controls, ["model", "setting", "threshold", "target"], "cost")
        frames.append(
            control_means.assign(row="control_all", beyond=control_means["n_censored"] * 2 > control_means["n_seeds"])
        )
    data = eps_column(pd.concat(frames, ignore_index=True))
    rules = data["row"] == "control_all"
    y_scale, y_axis = cost_axis(layers["cost"], means["mean"], means["ci_lo"], means["ci_hi"], data.loc[rules, "mean"])
    x_scale, x_axis = layer_axis(layers["layer"])
    data.loc[rules, "x"] = x_scale.domain[1] - 0.05  # a rule's label: at its right end
    x = alt.X("x:Q", title="reset layer L (depth; encoder first)", scale=x_scale, axis=x_axis)
    y = alt.Y("cost:Q", scale=y_scale, axis=y_axis, title=unit_title(unit))
    color = alt.Color("model:N", title="model", scale=model_scale())
    tooltip = ["model", "target", "seed", "examples", "tokens", "fraction_of_pretrain", "recovered", "status"]
    base = alt.Chart()
    seeds = status_points(
        base.transform_filter(alt.datum.row == "seed"),
        x,
        y,
        "model",
        SEED_STATUS,
        [*REACHED_SHAPES, "cross"],
        title="seed",
        tooltip=tooltip,
        labels={SEED_STATUS[1]: "censored: " + BEYOND},
        color_scale=model_scale(),
    )
    mean_y = alt.Y("mean:Q", scale=y_scale, axis=y_axis, title=unit_title(unit))
    line = (
        base.transform_filter(alt.datum.row == "mean")
        .mark_line(strokeWidth=1.5)
        .encode(
            x=x, y=mean_y, color=color, strokeDash=alt.condition(alt.datum.dashed, alt.value([4, 3]), alt.value([1, 0]))
        )
    )
    spread = [
        alt.Tooltip(f"{c}:Q", title=t) for c, t in (("mean", "median"), ("ci_lo", "smallest"), ("ci_hi", "largest"))
    ]
    bars = errorbar(
        base.transform_filter(alt.datum.row == "mean"),
        x,
        "ci_lo",
        "ci_hi",
        y_scale,
        y_axis,
        color=color,
        tooltip=["model", "layer", *spread, "n_seeds", "n_censored"],
    )
    charts = [bars, line, seeds]
    if len(controls):
        charts.append(
            base.transform_filter(alt.datum.row == "control_all")
            .mark_rule()
            .encode(
                y=mean_y,
                color=color,
                strokeDash=alt.StrokeDash(
                    "target:N",
                    title="reference (rule)",
                    legend=alt.Legend(
                        labelExpr="datum.label == 'all' ? 'every layer reset' : 'encoder swap (' + datum.label + ')'"
                    ),
                ),
                strokeOpacity=alt.condition(alt.datum.beyond, alt.value(0.45), alt.value(1.0)),
                tooltip=[
                    alt.Tooltip("model:N"),
                    alt.Tooltip("target:N"),
                    alt.Tooltip("mean:Q", title="median cost (censored: at least)"),
                    alt.Tooltip("beyond:N", title="median beyond the budget"),
                ],
            )
        )
        charts.append(
            base.transform_filter((alt.datum.row == "control_all") & alt.datum.beyond)
            .mark_text(align="right", baseline="bottom", dy=-2, fontSize=10)
            .encode(x=x, y=mean_y, color=color, text=alt.value("beyond the budget"))
        )
    return by_eps(
        alt.layer(*charts, data=data),
        240,
        220,
        alt.TitleParams(title, subtitle=legend + ([note] if note else []), anchor="start"),
        "recovered within ε of baseline",
        row=alt.Row("setting:N", title="policy / init / regime"),
    )


def recovery_curves(curves: pd.DataFrame, summary: pd.DataFrame) -> alt.Chart:
    curves = curves[curves["fraction_of_pretrain"].notna()]  # models pretrained here: S x E known
    if curves.empty:
        return empty_chart(
            "Recovery curves over the pretraining curve", "no model pretrained here: no curves against S × E"
        )
    rec = curves[curves["kind"] == "recovery"].copy()
    rec["setting"] = setting(rec)
    # one line per run: a cell (its network's pretraining seed and its retrain seed), a network's pretraining
    network = (" p" + rec["pretrain_seed"].astype(str)) if "pretrain_seed" in rec else ""
    rec["run"] = rec["target"] + network + " s" + rec["seed"].astype(str)
    pre = stats.kept_pretraining(curves).copy()
    pre["run"] = "pretrain" + ((" p" + pre["pretrain_seed"].astype(str)) if "pretrain_seed" in pre else "")
    baselines = summary.drop_duplicates("model")[["model", "baseline_loss"]]
    target = {
        "color": alt.Color("target:N", title="reset target"),
        "tooltip": ["model", "target", "seed", "examples", "val_loss"],
    }
    charts = []
    for model in sorted(curves["model"].unique()):
        mine, mine_rec = curves[curves["model"] == model], rec[rec["model"] == model]
        base_loss = baselines.loc[baselines["model"] == model, "baseline_loss"]
        x = alt.X(
            "fraction_of_pretrain:Q",
            title="examples seen / (S × E)",
            scale=alt.Scale(domain=linear_domain(mine["fraction_of_pretrain"], include=[0], pad=0), nice=False),
        )
        y_scale = linear_scale(mine["val_loss"], base_loss)
        y = alt.Y("val_loss:Q", title="validation loss", scale=y_scale)
        dash = alt.StrokeDash("setting:N", title="policy / init / regime")
        cells = alt.Chart(mine_rec).mark_line(opacity=0.7).encode(x=x, y=y, detail="run:N", strokeDash=dash, **target)
        pretrain = (
            alt.Chart(pre[pre["model"] == model])
            .mark_line(color="black", strokeWidth=2.5)
            .encode(x=x, y=y, detail="run:N", tooltip=["model", "run", "examples", "val_loss"])
        )
        base_rule = (
            alt.Chart(baselines[baselines["model"] == model])
            .mark_rule(color="gray", strokeDash=[2, 2])
            .encode(y=alt.Y("baseline_loss:Q", scale=y_scale))
        )
        # a run with one evaluation (within eps at 0 examples) has no line to draw: a point instead
        single = mine_rec[mine_rec.groupby(["setting", "run"])["run"].transform("size") == 1]
        once = alt.Chart(single).mark_point(filled=True, size=40).encode(x=x, y=y, **target)
        charts.append(
            alt.layer(pretrain, cells, once, base_rule).properties(
                width=360, height=240, title=f"{model}: recovery (colour) vs pretraining (black); dotted: baseline"
            )
        )
    return alt.vconcat(*charts).resolve_scale(color="independent", x="independent", y="independent")


def damage(summary: pd.DataFrame) -> alt.Chart:
    title = "Damage: validation loss right after the reset (dashed: every layer reset)"
    network = ["pretrain_seed"] if "pretrain_seed" in summary else []
    cell_keys = ["model", *network, "target", "policy", "init", "regime", "seed"]
    cells = summary.drop_duplicates(cell_keys).copy()  # one row per cell (its thresholds share the damage)
    cells = cells[cells["regime"] == cells["regime"].iloc[0]] if len(cells) else cells
    if not (cells["depth"].notna().any() or (cells["target"] == "all").any()):
        return empty_chart(title, "no layer cells and no reset-all control" if len(cells) else "no retrain cells")
    cells["damage"] = cells["damaged_loss"] - cells["baseline_loss"]
    cells["setting"] = cells["policy"] + " / " + cells["init"]
    layers = cells[cells["depth"].notna()].copy()
    layers["layer"] = layers["depth"].astype(int)
    means = _mean_ci(layers, ["model", "setting", "layer"], "damage")
    controls = cells[cells["target"] == "all"]
    control_means = controls.groupby("model", as_index=False)["damage"].mean()
    y_scale = linear_scale(means["mean"], means["ci_lo"], means["ci_hi"], control_means["damage"], zero=True)
    x_scale, x_axis = layer_axis(layers["layer"])
    means["x"] = dodge(means, "layer", "model", 0.08)
    color = alt.Color("model:N")
    x = alt.X("x:Q", title="reset layer L", scale=x_scale, axis=x_axis)
    y = alt.Y("mean:Q", title="val loss after reset − baseline", scale=y_scale)
    dash = alt.StrokeDash("setting:N", title="policy / init", legend=alt.Legend(symbolStrokeColor="black"))
    line = alt.Chart(means).mark_line().encode(x=x, y=y, color=color, detail="setting:N", strokeDash=dash)
    tooltip = ["model", "setting", "layer", "mean", "ci_lo", "ci_hi", "n_seeds"]
    points = alt.Chart(means).mark_point(filled=True, size=40).encode(x=x, y=y, color=color, tooltip=tooltip)
    bars = errorbar(alt.Chart(means), x, "ci_lo", "ci_hi", y_scale, color=color)
    zero = alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="lightgray")
    charts = [zero.encode(y=alt.Y("zero:Q", scale=y_scale)), bars, line, points]
    if len(control_means):
        reset_all = [alt.Tooltip("model:N"), alt.Tooltip("damage:Q", title="reset-all damage")]
        rule = alt.Chart(control_means).mark_rule(strokeDash=[6, 4])
        charts.append(rule.encode(y=alt.Y("damage:Q", scale=y_scale), color=color, tooltip=reset_all))
    return alt.layer(*charts).properties(width=420, height=260, title=title)


def save(chart: alt.Chart, html_path: str | Path, png_path: str | Path) -> None:
    """Every figure is written here (the grid's, the answer page's, the experiments'): as HTML and PNG, with
    altair's 5,000-row limit off (a curves table has more rows)."""
    alt.data_transformers.disable_max_rows()
    chart.save(str(html_path))
    chart.save(str(png_path), scale_factor=1.5)


# Every figure of the reset-and-retrain grid: its name (the file name under results/plots/) and how it is drawn
# from the two tables. The rules and the report read the names from here.
FIGURES = {
    "recovery_cost": lambda summary, curves: recovery_cost(summary),
    "recovery_examples": lambda summary, curves: recovery_cost(summary, unit="examples"),
    "recovery_curves": lambda summary, curves: recovery_curves(curves, summary),
    "damage": lambda summary, curves: damage(summary),
}


def write_all(
    summary_path: str, curves_path: str, names: list[str], html_paths: list[str], png_paths: list[str]
) -> None:
    """Draw the named figures (FIGURES) from the tables, each to its HTML and PNG path."""
    summary = pd.read_parquet(summary_path)
    curves = pd.read_parquet(curves_path)
    for name, html, png in zip(names, html_paths, png_paths, strict=True):
        save(FIGURES[name](summary, curves), html, png)
