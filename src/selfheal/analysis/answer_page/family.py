"""§5, the families: their single-layer costs in the unit that does not depend on S x E, and the family fit."""

from __future__ import annotations

import numpy as np

from selfheal.analysis import scaling
from selfheal.analysis.answer_page.fit import _fit_table
from selfheal.analysis.answer_page.units import _three_units
from selfheal.analysis.answer_page.view import View, _usable
from selfheal.analysis.answer_page.words import BEYOND, NOT_DAMAGED, SETTING, _eps_words, _pick, _sxe_words_row, _unit
from selfheal.analysis.page import Page


def section(doc: Page, v: View) -> None:
    """5. families"""
    fit, settings, networks = v.fit, v.settings, v.networks
    doc.h(2, "5. Encoder-only, decoder-only, encoder-decoder")
    present = set(networks["family_kind"]) if len(networks) else set()
    usable = _usable(networks)
    kinds = sorted(set(usable["family_kind"])) if len(usable) else []
    flagged = sorted(present - set(kinds))
    missing = [k for k in ("decoder-only", "encoder-only", "encoder-decoder") if k not in present]
    doc.p(
        f"Families in this grid: {', '.join(kinds) or 'none'}."
        + (
            f" Not determined by this grid (every network of the family flagged degenerate): {', '.join(flagged)}."
            if flagged
            else ""
        )
        + (f" Not determined by this grid (no such model): {', '.join(missing)}." if missing else "")
    )
    if len(kinds) > 1 and settings:
        _family_units(doc, v, settings[0])
    family_rows = fit[fit["term"].str.startswith("family")] if len(fit) else fit
    family_rows = family_rows[[s in v.layer_settings for s in zip(*(family_rows[k] for k in SETTING))]]
    if len(family_rows) and not family_rows["determined"].any():  # no family term anywhere: one line says why
        reasons = sorted({scaling.REASONS.get(r, r) for r in family_rows["reason"]})
        doc.p(f"The fit of §3 compares no family: {'; '.join(reasons)}.")
    elif len(family_rows):
        doc.p("The family terms of the fit of §3 (against the most common family, at the same S × E).")
        _fit_table(doc, fit, v.layer_settings, sorted(family_rows["term"].unique()))


def _family_units(doc: Page, v: View, setting: tuple) -> None:
    """Families trained to their own plateau have their own S × E, so they compare in the unit that does not depend
    on it: the first and the last layer's median cost over the model's own from-scratch cost to the same loss, with
    the fraction of its S × E beside it, at the smallest ε."""
    layers = _pick(v.layers, setting)
    layers = layers[layers["model"].isin(set(_usable(v.networks)["model"]))]
    if not len(layers):
        return
    eps = float(layers["threshold"].min())
    kinds = v.networks.drop_duplicates("model").set_index("model")["family_kind"]
    body = []
    for model, g in layers[layers["threshold"] == eps].groupby("model", sort=True):
        unit = _unit(g, v.networks)
        net = v.networks[v.networks["model"] == model].iloc[0]
        row = [model, kinds.get(model, ""), _sxe_words_row(net)]
        for pick in (g["depth"].min(), g["depth"].max()):
            at = g[g["depth"] == pick]
            u = _three_units(at, unit, model, eps, v.summary, v.networks, v.ref)
            if not u["examples"]:
                row.append(BEYOND if np.isinf(at["median_examples"].astype(float)).any() else NOT_DAMAGED)
                continue
            row.append(f"{u['relative'] or 'n/a'} ({u['fraction'] or u['examples']})")
        body.append(row)
    doc.p(
        "Each family is trained to its own plateau on its own S × E, so the families compare × their own "
        f"from-scratch cost (the fraction of S × E in brackets): the first and last layer's median at ε = "
        f"{_eps_words(eps)}."
    )
    doc.table(["model", "family", "S × E", "first layer", "last layer"], body)
