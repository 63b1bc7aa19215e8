"""The answer in sentences and the per-model table, copied into the README between the ``HEADLINE`` markers;
a page read while the study runs first says what it leaves out (``partial_note``).
"""

from __future__ import annotations

import pandas as pd

from selfheal.analysis.answer_page.aside import _swap_answer
from selfheal.analysis.answer_page.controls import _against_control_words, _control_worst
from selfheal.analysis.answer_page.cost import _how_much
from selfheal.analysis.answer_page.lr import lr_headline_words
from selfheal.analysis.answer_page.position import _position_answer
from selfheal.analysis.answer_page.refusal import _control_counts, _falling_projections, _refusal_answer
from selfheal.analysis.answer_page.short import in_short
from selfheal.analysis.answer_page.size import _size_answer
from selfheal.analysis.answer_page.units import _scratch_reference, _share_span, _three_units
from selfheal.analysis.answer_page.view import (
    View,
    _clusters_sentence,
    _origins,
    _pretrained_elsewhere,
    _reasons,
    _sxe_words,
)
from selfheal.analysis.answer_page.words import (
    BEYOND,
    BEYOND_LEGEND,
    NOT_DAMAGED,
    SHARE_WORDS,
    _eps_words,
    _median_span,
    _one,
    _pick,
    _setting_words,
    _unit,
)
from selfheal.analysis.page import Page, num, signed_pct
from selfheal.analysis.stats import UNIT_WORDS

HEADLINE = ("<!-- answer:headline -->", "<!-- /answer:headline -->")


def _layer_span(at: pd.DataFrame, unit: str, times: str = "") -> str:
    """The range of one model's single-layer medians at one ε, with ``times`` (the same range × from scratch) and
    how many are beyond the budget or never damaged beyond ε in brackets."""
    finite, beyond, total = _median_span(at, unit)
    undamaged = len(at) - total
    if not total:
        return NOT_DAMAGED
    notes = [f"{times} ×"] if finite and times else []
    notes += [f"{beyond} of {total} {BEYOND}"] if finite and beyond else []
    notes += [f"{undamaged} {NOT_DAMAGED}"] if undamaged else []
    return (finite or BEYOND) + (f" ({'; '.join(notes)})" if notes else "")


def _model_row(v: View, g: pd.DataFrame, setting: tuple, unit: str, eps_pair: list) -> list[str]:
    model = g["model"].iloc[0]
    cells = [model, f"{int(g['n_layer'].iloc[0])} × {int(g['d_model'].iloc[0])}", _sxe_words(v, model)]
    here = model not in _pretrained_elsewhere(v, g)
    for eps in eps_pair:  # per ε, one layer's cost (and × from scratch) beside what pretraining from scratch needed
        at = g[g["threshold"] == eps]
        times = _three_units(at, unit, model, eps, v.summary, v.networks, v.ref)["relative"] if here else ""
        cells += [_layer_span(at, unit, times), _reference_cell(v, g, model, eps, unit)]
    eps = eps_pair[-1]
    allc = v.surv[
        (v.surv["model"] == model)
        & (v.surv["target"] == "all")
        & (v.surv["policy"] == "full")
        & (v.surv["threshold"] == eps)
        & (v.surv["regime"] == setting[0])
        & (v.surv["init"] == setting[2])
    ]
    cells.append(_one(float(allc[f"median_{unit}"].iloc[0])) if len(allc) else "n/a")
    return cells


def _reference_cell(v: View, g: pd.DataFrame, model: str, eps: float, unit: str) -> str:
    """What a model's one-layer cost at ε is read against: pretraining from scratch to the same loss, or for a
    network pretrained elsewhere one layer's share of its own pretraining."""
    if model in _pretrained_elsewhere(v, g):
        return _share_span(v, g[g["threshold"] == eps], model) or "n/a"
    scratch = _scratch_reference(v.ref, v.networks, model, eps)[unit]
    return "n/a" if pd.isna(scratch) else num(scratch)


def _unanswered(networks: pd.DataFrame) -> str:
    """Why a grid cannot answer: how many of its networks are not fully trained or degenerate (left out of every
    estimate), or that it has no single-layer cells."""
    n = len(networks)
    off = int(networks["off_plateau"].astype(bool).sum()) if "off_plateau" in networks else 0
    degenerate = int(networks["degenerate"].astype(bool).sum()) if "degenerate" in networks else 0
    if n and off + degenerate:
        parts = []
        if off:
            parts.append(
                f"{off} of {n} networks are off their plateau (more pretraining would still lower their "
                "loss by more than ε_min / 4: not fully trained)"
            )
        if degenerate:
            parts.append(f"{degenerate} of {n} are degenerate (no better than n-gram statistics)")
        return (
            "**Not answered by this grid.** " + "; ".join(parts) + ". Such networks are left out of every "
            "estimate, and no single-layer cell on a usable network remains (the caveats list them)."
        )
    return "This grid has no single-layer cells on a usable network, so it cannot answer the question."


def section(doc: Page, v: View) -> None:
    """The answer in sentences, one per sub-question, at the smallest and largest ε; then one row per model. Copied
    into the README between the HEADLINE markers; a page read with ``partial: true`` first says what it leaves out."""
    layers, degenerate, settings = v.layers, v.degenerate, v.settings
    doc.h(2, "The answer")
    doc.raw(HEADLINE[0])
    if "left_out" in v.tables:
        doc.p(partial_note(v.tables["left_out"]))
    setting = settings[0] if settings else None
    rows = _pick(layers, setting) if setting else layers
    if not len(rows):
        doc.p(_unanswered(v.networks))
        doc.raw(HEADLINE[1])
        return
    unit = _unit(rows, v.networks)
    eps_pair = sorted({float(rows["threshold"].min()), float(rows["threshold"].max())})
    doc.p(in_short(v, rows, unit, eps_pair[0], setting))
    items = [
        _how_much(v, rows, unit, eps_pair),
        _refusal_answer(
            rows,
            eps_pair,
            _falling_projections(v, setting, eps_pair),
            {o: _control_counts(v, setting, eps_pair, o) for o in ("stalled", "still_falling")},
        ),
        _position_answer(v, rows, unit, eps_pair, setting),
        _size_answer(v, setting, eps_pair),
        _swap_answer(v),
    ]
    if len(degenerate):
        named = "; ".join(
            f"{m} ({len(g)} of its networks: {_reasons(g)})" for m, g in degenerate.groupby("model", sort=True)
        )
        items.append(f"**Left out** of every number above (flagged degenerate): {named}.")
    eps_min, worst = _control_worst(v)
    beyond = {m: w for m, w in worst.items() if abs(w) > eps_min / 4}
    where = (
        f"all {len(beyond)} models (their worst: {signed_pct(min(beyond.values()))} to {signed_pct(max(beyond.values()))})"
        if len(beyond) == len(worst) > 2 and all(w > 0 for w in beyond.values())
        else ", ".join(f"{m} (up to {signed_pct(w)})" for m, w in beyond.items())
    )
    drift_words = (
        f" Retraining alone moves an intact network by more than ε_min / 4 = {100 * eps_min / 4:g} % in {where}"
        + f": its costs at ε = {_eps_words(eps_min)} lean high (§8)."
        if beyond
        else (f" Retraining alone keeps an intact network within ± {100 * eps_min / 4:g} % (§8)." if len(worst) else "")
    )
    against = _against_control_words(v, setting, eps_min, rows[rows["threshold"] == eps_min], unit) if beyond else ""
    lr_words = lr_headline_words(v.tables.get("lr_sensitivity"), lambda r: _unit(r, v.networks))
    items.append(f"**How sure?** {_clusters_sentence(v.healed)}{drift_words}{against}{lr_words}")
    doc.ul(items)
    here, brought = _origins(v, rows)
    legend = {
        "scratch": "from scratch: what pretraining needed to first reach baseline × (1 + ε), the mean over the "
        "model's networks, and `r ×` a cost over it",
        "share": f"share of own pretraining: {SHARE_WORDS}",
    }
    last = " or ".join(k for k, on in (("from scratch", here), ("one layer's share of own pretraining", brought)) if on)
    doc.p(
        f"Per model ({_setting_words(setting)}; {UNIT_WORDS[unit]}; {BEYOND_LEGEND}; one layer: the range of its "
        f"layers' medians; " + "; ".join(legend[k] for k, on in (("scratch", here), ("share", brought)) if on) + "):"
    )
    doc.table(
        ["model", "N × D", " or ".join(k for k, on in (("S × E", here), ("adaptation", brought)) if on)]
        + [h for e in eps_pair for h in (f"one layer, ε = {_eps_words(e)}", f"{last}, ε = {_eps_words(e)}")]
        + [f"every layer, ε = {_eps_words(eps_pair[-1])}"],
        [
            _model_row(v, g, setting, unit, eps_pair)
            for _, g in sorted(
                rows.groupby("model"),
                key=lambda kv: (
                    str(kv[1]["family_kind"].iloc[0]),
                    int(kv[1]["n_layer"].iloc[0]),
                    int(kv[1]["d_model"].iloc[0]),
                    kv[0],
                ),
            )
        ],
    )
    doc.raw(HEADLINE[1])


def partial_note(left_out: pd.DataFrame) -> str:
    """The first thing a page read with ``partial`` says: that it reads a study still running, and what it leaves out
    (``selfheal.partial.left_out_table``: each unfinished model; with ``partial: networks`` each unfinished network
    of a model read with its others; each finished model's unfinished lr check)."""

    def listed(names: list[str]) -> str:
        quoted = [f"`{n}`" for n in names]
        return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]

    models = list(left_out.loc[left_out["part"] == "model", "model"])
    checks = list(left_out.loc[left_out["part"] == "lr check", "model"])
    networks = left_out[left_out["part"].str.startswith("network ")]
    note = (
        "**Read while the study runs** (`partial: networks`): this page reads only the networks whose every cell "
        "has finished. "
        if len(networks)
        else "**Read while the study runs** (`partial: true`): this page reads only the models whose every network "
        "and cell has finished. "
    )
    if models:
        note += (
            f"Not finished yet, and in no number below: {listed(models)}; below, “this grid” and “the grid” mean "
            "the models read here."
        )
    elif not len(networks):
        note += "Every model of the config has finished."
    if len(networks):
        each = [
            f"`{m}` {' and '.join(p.removeprefix('network ') for p in g['part'])}"
            for m, g in networks.groupby("model", sort=False)
        ]
        note += f"{' ' if models else ''}Networks not finished, and in no number below: {'; '.join(each)}."
    if checks:
        note += f" The lr check of {listed(checks)} has not finished: that model is read without it."
    return note
