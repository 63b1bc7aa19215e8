"""The frozen-random figure (``results/plots/frozen_random.{html,png}``, the ``frozen_random_plot`` rule): validation
perplexity of the models pretrained with components frozen at their random init, against the all-trainable model
(``results/frozen_random.parquet``, ``frozen_random.table``), on a log axis.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from selfheal.analysis import plots
from selfheal.lazy import Module

alt = Module("altair")  # imported when the figure is drawn


def figure(table: pd.DataFrame) -> alt.Chart:
    """One panel per base model: the validation perplexity after pretraining per frozen set, the all-trainable
    reference as a dashed rule; labels are the perplexity ratio to it."""
    title = "Pretrained with components frozen at their random init (Bogoychev 2021)"
    if table.empty:
        return plots.empty_chart(title, "no frozen-random variant in this grid")
    data = table.assign(n_frozen=[0 if f == "none" else len(f.split("+")) for f in table["frozen"]])
    x = alt.X(
        "frozen:N",
        sort=list(dict.fromkeys(table["frozen"])),
        title="left at random init and frozen",
        axis=alt.Axis(labelAngle=-30),
    )
    y = alt.Y(
        "val_perplexity:Q",
        title="validation perplexity after pretraining (log)",
        scale=alt.Scale(type="log", domain=plots.log_domain(table["val_perplexity"]), nice=False),
        axis=alt.Axis(format="~g"),
    )
    points = (
        alt.Chart()
        .mark_point(size=90, filled=True)
        .encode(
            x=x,
            y=y,
            color=alt.Color("n_frozen:O", title="frozen components", scale=alt.Scale(scheme="tableau10")),
            tooltip=[
                "model",
                "frozen",
                "trainable_params",
                "frozen_params",
                alt.Tooltip("val_loss:Q", format=".4f"),
                alt.Tooltip("val_perplexity:Q", format=".2f"),
                alt.Tooltip("delta_loss:Q", format="+.4f"),
                alt.Tooltip("perplexity_ratio:Q", format=".3f"),
            ],
        )
    )
    labels = (
        alt.Chart().mark_text(dy=-12, fontSize=10).encode(x=x, y=y, text=alt.Text("perplexity_ratio:Q", format=".2f"))
    )
    reference = (
        alt.Chart().transform_filter(alt.datum.frozen == "none").mark_rule(strokeDash=[6, 4], color="black").encode(y=y)
    )
    return (
        alt.layer(reference, points, labels, data=data)
        .properties(width=260, height=240)
        .facet(column=alt.Column("base_model:N", title="base model"))
        .properties(title=title)
    )


def write(table_path: str, html_path: str | Path, png_path: str | Path) -> None:
    plots.save(figure(pd.read_parquet(table_path)), html_path, png_path)
