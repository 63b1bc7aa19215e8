"""Figures of the transfer experiments in the spirit of Tamkin et al. 2020, drawn only from ``summary.parquet``
(mean and t 95 % interval over trials; columns: tasks, rows: accuracy and MCC):

- incremental (their Figure 2): score against k, every layer from k on re-initialised, one line per data size;
  probing of layer k's frozen features dashed;
- localized (Figure 3): each block of consecutive layers re-initialised, against the same block preserved with
  every other layer re-initialised;
- single: one layer re-initialised at a time;
- permutation (Figure 4): every shuffled layer order, beside the original and the fully re-initialised model;
- variants: incremental as published, keeping layer norms, and a larger learning rate for re-initialised layers.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from selfheal.analysis.plots import save
from selfheal.lazy import Module

alt = Module("altair")  # imported when a figure is drawn: the Snakefile reads the figure names at every start


PLOTS = ("transfer_incremental", "transfer_localized", "transfer_single", "transfer_permutation", "transfer_variants")
METRIC_TITLES = {"accuracy": "test accuracy", "mcc": "test MCC"}
METRIC_RANGE = {"accuracy": (0.0, 1.0), "mcc": (-1.0, 1.0)}


def _for_display(table: pd.DataFrame) -> pd.DataFrame:
    """Facet titles, and t intervals clipped to the metric's range (with 2 trials they reach far past it; the
    table keeps the unclipped values)."""
    low = table["metric"].map(lambda m: METRIC_RANGE[m][0])
    high = table["metric"].map(lambda m: METRIC_RANGE[m][1])
    return table.assign(
        metric_title=table["metric"].map(METRIC_TITLES),
        ci_low=table["ci_low"].clip(lower=low),
        ci_high=table["ci_high"].clip(upper=high),
    )


def _lines(
    table: pd.DataFrame, x: alt.X, color: str, color_title: str, dash: str | None = None, connect: bool = True
) -> alt.FacetChart:
    """Mean as line and points (points only with ``connect=False``), t 95 % CI as error bars; facets: metric
    (rows) x task (columns)."""
    table = _for_display(table)
    base = alt.Chart().encode(x=x, color=alt.Color(f"{color}:N", title=color_title, legend=alt.Legend(labelLimit=0)))
    tooltip = [
        "task",
        "size",
        "condition",
        "metric",
        alt.Tooltip("mean:Q", format=".4f"),
        alt.Tooltip("ci_low:Q", format=".4f"),
        alt.Tooltip("ci_high:Q", format=".4f"),
        "trials",
    ]
    mark = base.mark_line(point=True) if connect else base.mark_point(filled=True, size=60)
    line = mark.encode(
        y=alt.Y("mean:Q", title="score (mean over trials)", scale=alt.Scale(zero=False)),
        detail=f"{color}:N",
        tooltip=tooltip,
        **({"strokeDash": alt.StrokeDash(f"{dash}:N", title="")} if dash else {}),
    )
    bars = base.mark_errorbar().encode(y=alt.Y("ci_low:Q", title="score (mean over trials)"), y2="ci_high:Q")
    return (
        alt.layer(line, bars, data=table)
        .facet(
            row=alt.Row("metric_title:N", title=None, sort=list(METRIC_TITLES.values())),
            column=alt.Column("task:N", title=None),
        )
        .resolve_scale(y="independent")
    )


def incremental(summary: pd.DataFrame) -> alt.FacetChart:
    table = summary[summary["experiment"].isin(["incremental", "probing"])].copy()
    table["data"] = "n=" + table["size"].astype(str)
    table["kind"] = table["experiment"].map(
        {"incremental": "finetuned, layers ≥ k re-initialised", "probing": "probe of layer k (frozen)"}
    )
    return _lines(
        table, alt.X("x:O", title="k (layers 0 .. k-1 kept pretrained)"), "data", "training examples", dash="kind"
    ).properties(title="Incremental re-initialisation")


def localized(summary: pd.DataFrame) -> alt.FacetChart:
    table = summary[summary["experiment"].isin(["localized_reinit", "localized_preserve"])].copy()
    table["block"] = table["experiment"].map(
        {"localized_reinit": "block re-initialised", "localized_preserve": "block preserved, rest re-initialised"}
    )
    table["series"] = table["block"] + ", n=" + table["size"].astype(str)
    order = table.sort_values("x")["condition"].unique().tolist()
    return _lines(table, alt.X("condition:O", title="block of layers", sort=order), "series", "").properties(
        title="Localized re-initialisation"
    )


def single(summary: pd.DataFrame) -> alt.FacetChart:
    table = summary[summary["experiment"] == "single"].copy()
    table["data"] = "n=" + table["size"].astype(str)
    return _lines(table, alt.X("x:O", title="re-initialised layer"), "data", "training examples").properties(
        title="Single-layer re-initialisation"
    )


def permutation(summary: pd.DataFrame) -> alt.FacetChart:
    table = summary[summary["experiment"] == "permutation"].copy()
    table["kind"] = table["condition"].where(
        table["condition"].isin(["original", "all re-initialised"]), "permuted layers"
    )
    table["kind"] = table["kind"] + ", n=" + table["size"].astype(str)
    order = table.sort_values("x")["condition"].unique().tolist()
    order = (
        [c for c in order if c == "original"]
        + [c for c in order if c not in ("original", "all re-initialised")]
        + [c for c in order if c == "all re-initialised"]
    )
    return _lines(table, alt.X("condition:O", title="layer order", sort=order), "kind", "", connect=False).properties(
        title="Permuted layer orders"
    )


def variants(summary: pd.DataFrame) -> alt.FacetChart:
    names = {
        "incremental": "as published",
        "keep_layernorm": "layer norms kept",
        "reinit_lr": "re-initialised layers at a higher lr",
    }
    table = summary[summary["experiment"].isin(list(names))].copy()
    ks = set(table.loc[table["experiment"] != "incremental", "x"])
    table = table[(table["experiment"] != "incremental") | table["x"].isin(ks)]
    table["variant"] = table["experiment"].map(names) + ", n=" + table["size"].astype(str)
    return _lines(table, alt.X("x:O", title="k (layers ≥ k re-initialised)"), "variant", "").properties(
        title="Re-initialisation variants"
    )


CHARTS = {
    "transfer_incremental": incremental,
    "transfer_localized": localized,
    "transfer_single": single,
    "transfer_permutation": permutation,
    "transfer_variants": variants,
}


# Which experiments each figure needs (a figure is made only when the config runs one of them).
NEEDS = {
    "transfer_incremental": ("incremental",),
    "transfer_localized": ("localized",),
    "transfer_single": ("single",),
    "transfer_permutation": ("permutation",),
    "transfer_variants": ("keep_layernorm", "reinit_lr"),
}


def names(experiments: list[str]) -> list[str]:
    return [name for name in PLOTS if set(NEEDS[name]) & set(experiments)]


def write_all(summary_path: str, out: dict[str, tuple[str, str]]) -> None:
    summary = pd.read_parquet(summary_path)
    for name, (html, png) in out.items():
        for path in (html, png):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        save(CHARTS[name](summary), html, png)
