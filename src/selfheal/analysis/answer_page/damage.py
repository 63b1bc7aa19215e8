"""§7, damage and similarity: how far each reset moves the loss and the layer's representations."""

from __future__ import annotations

from selfheal.analysis.answer_page.view import View
from selfheal.analysis.answer_page.words import SETTING, _setting_words
from selfheal.analysis.page import Page, num


def section(doc: Page, v: View) -> None:
    """7. damage and similarity"""
    doc.h(2, "7. Does the damage predict the cost, and is the healed layer the same function?")
    dc = v.tables["damage_cost"]
    doc.p(
        f"Spearman's rank correlation between the loss right after the reset and the cost, across single-layer "
        f"cells (censored cells rank above every recovered one), at the smallest and largest ε (every ε: "
        f"`answer/damage_cost.parquet` and the [plot]({v.plot_links['answer_damage_cost']}))."
    )
    if len(dc):  # the single-layer settings (the cross-attention's policy is the aside's, §6)
        dc = dc[[s in v.layer_settings for s in zip(*(dc[k] for k in SETTING))]]
    defined = dc[dc["rho"].notna()] if len(dc) else dc
    if len(defined):
        defined = defined[defined["threshold"].isin({defined["threshold"].min(), defined["threshold"].max()})]
    doc.table(
        ["policy", "ε", "ρ [95 %]", "cells (censored)"],
        [
            [
                r["policy"],
                f"{r['threshold']:g}",
                f"{num(r['rho'])} [{num(r['rho_lo'])}, {num(r['rho_hi'])}]",
                f"{r['n_cells']} ({r['n_censored']})",
            ]
            for _, r in defined.iterrows()
        ],
    )
    undefined = dc[dc["rho"].isna()] if len(dc) else dc
    if len(undefined):
        doc.p(
            "Undefined (fewer than 3 cells, or damage or cost does not vary): "
            + "; ".join(
                f"{_setting_words(s)} at ε = {', '.join(f'{e:g}' for e in g['threshold'])}"
                for s, g in undefined.groupby(["regime", "policy", "init"], sort=True)
            )
            + "."
        )
    ck = v.tables["cka"]
    if len(ck):
        doc.p(
            f"Linear CKA between the original and the healed layer's outputs ([plot]({v.plot_links['answer_cka']})):"
            f" mean over layers {num(ck['cka'].mean())} (range {num(ck['cka'].min())} to {num(ck['cka'].max())}); "
            f"the fresh unhealed layer's, the floor: {num(ck['cka_floor'].mean())}."
        )
    else:
        doc.p("No CKA was measured in these tables.")
