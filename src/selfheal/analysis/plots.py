"""Altair figures, drawn only from the Parquet tables the workflow wrote (saved as HTML and PNG).

- recovery cost: fraction of S x E needed to get back within eps of the baseline, against the reset layer L, one
  line per model, mean and t 95 % CI over seeds; censored seeds drawn as hollow triangles at their budget (a lower
  bound), and the reset-all control as a dashed rule.
- recovery curves: validation loss against examples seen (as a fraction of S x E), every recovery curve over the
  model's own pretraining curve, with the baseline as a rule.
- damage: validation loss right after the reset minus the baseline, against L.
- frozen random: validation perplexity of models pretrained with components frozen at their random init, against
  the all-trainable model (``results/frozen_random.parquet``).

A figure whose table has nothing to draw (a grid of downloaded models has no fraction of S x E; a grid without
layer cells has no per-layer damage) is drawn as ``empty_chart``: its title and an explicit "no data for this
panel" line saying why, instead of failing. Every figure handles empty and one-row tables.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd

from selfheal.analysis import stats

alt.data_transformers.disable_max_rows()


def empty_chart(title: str, reason: str) -> alt.Chart:
    """The chart drawn in place of a figure that has no data: the figure's title over "no data for this panel",
    with the reason on a second line (e.g. "every model here is downloaded: S × E is unknown")."""
    lines = pd.DataFrame({"text": ["no data for this panel", reason], "line": [0, 1]})
    return alt.Chart(lines).mark_text(size=14, align="center", baseline="middle").encode(
        y=alt.Y("line:O", axis=None),
        text="text:N",
        size=alt.Size("line:O", scale=alt.Scale(domain=[0, 1], range=[16, 12]), legend=None),
    ).properties(width=max(360, 7 * max(len(reason), len(title))), height=90, title=title)


def _setting(table: pd.DataFrame) -> pd.Series:
    return table["policy"] + " / " + table["init"] + " / " + table["regime"]


def _mean_ci(table: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    rows = []
    for key, group in table.groupby(keys, dropna=False, sort=True):
        mean, lo, hi = stats.mean_ci(group[value].tolist())
        rows.append({**dict(zip(keys, key)), "mean": mean, "ci_lo": lo, "ci_hi": hi, "n_seeds": len(group),
                     "n_censored": int((~group["recovered"].astype(bool)).sum()) if "recovered" in group else 0})
    # the columns are there even without a group, so an empty table still draws (as an empty layer)
    return pd.DataFrame(rows, columns=[*keys, "mean", "ci_lo", "ci_hi", "n_seeds", "n_censored"])


COST_UNITS = {
    "fraction_of_pretrain": "examples to recover / (S × E)",
    "examples": "examples (sequences) to recover",
}


def recovery_cost(summary: pd.DataFrame, unit: str = "fraction_of_pretrain") -> alt.Chart:
    """Cost against the reset layer's depth. ``unit`` fraction_of_pretrain (models pretrained here) or examples
    (every model, including downloaded ones whose S x E is unknown)."""
    title = "Recovery cost against reset layer (mean, 95 % CI over seeds; triangles: censored)"
    table = summary[summary[unit].notna()].copy()
    if table.empty:
        reason = ("no cell of a model pretrained here (S × E is unknown for a downloaded model: see "
                  "recovery_examples)" if unit == "fraction_of_pretrain" and len(summary) else "no retrain cells")
        return empty_chart(title, reason)
    table["setting"] = _setting(table)
    positive = table.loc[table[unit] > 0, unit]
    # Log scale: a cell that was already within eps at 0 examples is drawn at half the smallest positive cost.
    floor = float(positive.min()) / 2 if len(positive) else 1e-4
    table["cost"] = table[unit].astype(float).clip(lower=floor)
    table["status"] = [
        "diverged" if d else ("recovered" if r else "censored (≥ budget)")
        for r, d in zip(table["recovered"], table["diverged"])
    ]
    layers = table[table["depth"].notna()].copy()
    layers["layer"] = layers["depth"].astype(int)
    keys = ["model", "setting", "threshold", "layer"]
    means = _mean_ci(layers, keys, "cost")
    # With few seeds the t interval's lower end can fall below zero, which a log axis cannot show: clip it there.
    means["ci_lo"] = means["ci_lo"].clip(lower=floor)
    # horizontal references: every layer reset (the from-scratch comparison) and encoder swaps
    controls = table[(table["target"] == "all") | table["target"].str.startswith("swap")]
    control_means = _mean_ci(controls, ["model", "setting", "threshold", "target"], "cost") if len(controls) else None

    frames = [layers.assign(row="seed"), means.assign(row="mean")]
    if control_means is not None:
        frames.append(control_means.assign(row="control_all"))
    data = pd.concat(frames, ignore_index=True)
    data["threshold"] = data["threshold"].map(lambda e: f"ε = {e:g}")

    y_scale = alt.Scale(type="log")
    color = alt.Color("model:N", title="model")
    base = alt.Chart()
    seeds = base.transform_filter(alt.datum.row == "seed").mark_point(size=45, filled=True).encode(
        x=alt.X("layer:O", title="reset layer L (depth; encoder first)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("cost:Q", scale=y_scale, title=COST_UNITS[unit]),
        color=color,
        shape=alt.Shape("status:N", scale=alt.Scale(domain=["recovered", "censored (≥ budget)", "diverged"],
                                                    range=["circle", "triangle-up", "cross"]), title="seed"),
        opacity=alt.condition(alt.datum.status == "recovered", alt.value(0.9), alt.value(0.35)),
        tooltip=["model", "target", "seed", "examples", "tokens", "fraction_of_pretrain", "recovered"],
    )
    line = base.transform_filter(alt.datum.row == "mean").mark_line().encode(
        x="layer:O", y=alt.Y("mean:Q", scale=y_scale), color=color,
        strokeDash=alt.condition(alt.datum.n_censored > 0, alt.value([4, 3]), alt.value([1, 0])),
    )
    bars = base.transform_filter(alt.datum.row == "mean").mark_errorbar(ticks=True).encode(
        x="layer:O", y=alt.Y("ci_lo:Q", scale=y_scale, title=""), y2="ci_hi:Q", color=color,
        tooltip=["model", "layer", "mean", "ci_lo", "ci_hi", "n_seeds", "n_censored"],
    )
    charts = [bars, line, seeds]
    if control_means is not None:
        charts.append(base.transform_filter(alt.datum.row == "control_all").mark_rule().encode(
            y=alt.Y("mean:Q", scale=y_scale), color=color,
            strokeDash=alt.StrokeDash("target:N", title="reference (rule)",
                                      legend=alt.Legend(labelExpr="datum.label == 'all' ? 'every layer reset' : "
                                                                  "'encoder swap ' + datum.label")),
            tooltip=[alt.Tooltip("model:N"), alt.Tooltip("target:N"), alt.Tooltip("mean:Q", title="cost")],
        ))
    return alt.layer(*charts, data=data).properties(width=220, height=200).facet(
        column=alt.Column("threshold:N", title="recovered within ε of baseline"),
        row=alt.Row("setting:N", title="policy / init / regime"),
    ).properties(title=title)


def recovery_curves(curves: pd.DataFrame, summary: pd.DataFrame) -> alt.Chart:
    curves = curves[curves["fraction_of_pretrain"].notna()]  # models pretrained here: S x E known
    if curves.empty:
        return empty_chart("Recovery curves over the pretraining curve",
                           "no model pretrained here: no curves against S × E")
    rec = curves[curves["kind"] == "recovery"].copy()
    rec["setting"] = _setting(rec)
    rec["run"] = rec["target"] + " s" + rec["seed"].astype(str)
    pre = curves[curves["kind"] == "pretrain"]
    baselines = summary.drop_duplicates("model")[["model", "baseline_loss"]]
    x = alt.X("fraction_of_pretrain:Q", title="examples seen / (S × E)")
    y = alt.Y("val_loss:Q", title="validation loss", scale=alt.Scale(zero=False))
    cells = alt.Chart(rec).mark_line(opacity=0.7).encode(
        x=x, y=y, color=alt.Color("target:N", title="reset target"), detail="run:N",
        strokeDash=alt.StrokeDash("setting:N", title="policy / init / regime"),
        tooltip=["model", "target", "seed", "examples", "val_loss"],
    )
    pretrain = alt.Chart(pre).mark_line(color="black", strokeWidth=2.5).encode(
        x=x, y=y, tooltip=["model", "examples", "val_loss"])
    base_rule = alt.Chart(baselines).mark_rule(color="gray", strokeDash=[2, 2]).encode(y="baseline_loss:Q")
    charts = []
    for model in sorted(curves["model"].unique()):
        pick = alt.datum.model == model
        charts.append(alt.layer(
            pretrain.transform_filter(pick), cells.transform_filter(pick), base_rule.transform_filter(pick)
        ).properties(width=360, height=240, title=f"{model}: recovery (colour) vs pretraining (black)"))
    return alt.vconcat(*charts).resolve_scale(color="independent")


def damage(summary: pd.DataFrame) -> alt.Chart:
    title = "Damage: validation loss right after the reset (dashed: every layer reset)"
    cells = summary.drop_duplicates(["model", "target", "policy", "init", "regime", "seed"]).copy()
    cells = cells[cells["regime"] == cells["regime"].iloc[0]] if len(cells) else cells
    if not (cells["depth"].notna().any() or (cells["target"] == "all").any()):
        return empty_chart(title, "no layer cells and no reset-all control" if len(cells) else "no retrain cells")
    cells["damage"] = cells["damaged_loss"] - cells["baseline_loss"]
    cells["setting"] = cells["policy"] + " / " + cells["init"]
    layers = cells[cells["depth"].notna()].copy()
    layers["layer"] = layers["depth"].astype(int)
    layers["recovered"] = True  # not used for damage; keeps _mean_ci's censor count at 0
    means = _mean_ci(layers, ["model", "setting", "layer"], "damage")
    color = alt.Color("model:N")
    line = alt.Chart(means).mark_line(point=True).encode(
        x=alt.X("layer:O", title="reset layer L", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("mean:Q", title="val loss after reset − baseline"), color=color,
        strokeDash=alt.StrokeDash("setting:N", title="policy / init"),
        tooltip=["model", "layer", "mean", "ci_lo", "ci_hi", "n_seeds"],
    )
    bars = alt.Chart(means).mark_errorbar(ticks=True).encode(
        x="layer:O", y=alt.Y("ci_lo:Q", title=""), y2="ci_hi:Q", color=color)
    charts = [bars, line]
    controls = cells[cells["target"] == "all"]
    if len(controls):
        control_means = controls.groupby("model", as_index=False)["damage"].mean()
        charts.append(alt.Chart(control_means).mark_rule(strokeDash=[6, 4]).encode(
            y="damage:Q", color=color, tooltip=["model", alt.Tooltip("damage:Q", title="reset-all damage")]))
    return alt.layer(*charts).properties(width=420, height=260, title=title)


def frozen_random(table: pd.DataFrame) -> alt.Chart:
    """Frozen random components (frozen_random.py): validation perplexity after pretraining (log scale) per frozen set,
    one panel per base model, the all-trainable reference as a dashed rule; labels are the perplexity ratio to it."""
    title = "Pretrained with components frozen at their random init (Bogoychev 2021)"
    if table.empty:
        return empty_chart(title, "no frozen-random variant in this grid")
    data = table.assign(n_frozen=[0 if f == "none" else len(f.split("+")) for f in table["frozen"]])
    x = alt.X("frozen:N", sort=list(dict.fromkeys(table["frozen"])), title="left at random init and frozen",
              axis=alt.Axis(labelAngle=-30))
    y = alt.Y("val_perplexity:Q", title="validation perplexity after pretraining", scale=alt.Scale(type="log"))
    points = alt.Chart().mark_point(size=90, filled=True).encode(
        x=x, y=y,
        color=alt.Color("n_frozen:O", title="frozen components", scale=alt.Scale(scheme="tableau10")),
        tooltip=["model", "frozen", "trainable_params", "frozen_params", alt.Tooltip("val_loss:Q", format=".4f"),
                 alt.Tooltip("val_perplexity:Q", format=".2f"), alt.Tooltip("delta_loss:Q", format="+.4f"),
                 alt.Tooltip("perplexity_ratio:Q", format=".3f")],
    )
    labels = alt.Chart().mark_text(dy=-12, fontSize=10).encode(
        x=x, y=y, text=alt.Text("perplexity_ratio:Q", format=".2f"))
    reference = alt.Chart().transform_filter(alt.datum.frozen == "none").mark_rule(
        strokeDash=[6, 4], color="black").encode(y=y)
    return alt.layer(reference, points, labels, data=data).properties(width=260, height=240).facet(
        column=alt.Column("base_model:N", title="base model"),
    ).properties(title=title)


def write_frozen_random(table_path: str, html_path: str | Path, png_path: str | Path) -> None:
    save(frozen_random(pd.read_parquet(table_path)), html_path, png_path)


def save(chart: alt.Chart, html_path: str | Path, png_path: str | Path) -> None:
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


def write_all(summary_path: str, curves_path: str, names: list[str], html_paths: list[str],
              png_paths: list[str]) -> None:
    """Draw the named figures (FIGURES) from the tables, each to its HTML and PNG path."""
    summary = pd.read_parquet(summary_path)
    curves = pd.read_parquet(curves_path)
    for name, html, png in zip(names, html_paths, png_paths, strict=True):
        save(FIGURES[name](summary, curves), html, png)
