"""Whether a layer ever refuses: the headline's sentence and §2, the medians' answers and the cells not back."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis.answer_page.view import View, _layer_cells
from selfheal.analysis.answer_page.words import SETTING, _eps_words, _pick, _refuses, _setting_words, _two_digits
from selfheal.analysis.page import Page, pct, signed_pct, span


def _falling_projections(v: View, setting: tuple | None, eps_pair: list[float]) -> dict[float, str]:
    """Per ε: where the damaged single-layer cells still falling at their budget would reach ε at their last rate of
    fall, over their network's own from-scratch cost (network_costs.parquet's projected_relative): 'about r ×' or
    'about a to b ×'; none where no such cell has a from-scratch cost."""
    cells, out = _layer_cells(v, setting, "still_falling"), {}
    for eps in eps_pair:
        rel = cells.loc[cells["threshold"] == eps, "projected_relative"].astype(float)
        rel = rel[np.isfinite(rel)]
        if len(rel):
            out[eps] = f"about {span(rel, _two_digits)} ×"
    return out


def _control_counts(
    v: View, setting: tuple | None, eps_pair: list[float], outcome: str
) -> dict[float, tuple[int, int]]:
    """Per ε: of the single-layer cells of ``outcome`` (stalled, still falling) that have a matched control, how many
    got within ε of that control (the intact network retrained the same way, at the same examples), and how many
    have one (network_costs.parquet's control_upper)."""
    cells, out = _layer_cells(v, setting, outcome), {}
    for eps in eps_pair:
        control = cells.loc[cells["threshold"] == eps, "control_upper"].astype(float).dropna()
        if len(control):
            out[eps] = (int(np.isfinite(control).sum()), len(control))
    return out


def _refusal_answer(
    rows: pd.DataFrame,
    eps_pair: list[float],
    projections: dict[float, str] | None = None,
    against_control: dict[str, dict[float, tuple[int, int]]] | None = None,
) -> str:
    """Does it ever refuse? From the outcomes of the damaged single-layer cells: a cell refuses only when its curve
    stalled short of the threshold (the stall rule); a censored cell still falling when the budget ran out says
    only that the budget ended first (and, from ``projections``, where its last rate of fall would take it); for
    either, where ``against_control`` (per outcome, per ε) says so, how many got within ε of their matched control
    (their gap to the baseline is the retraining's own drift); a diverged cell is counted apart. Undamaged cells
    are not counted."""
    control = against_control or {}
    lowest = rows[rows["threshold"] == eps_pair[0]]
    damaged = lowest["n_cells"] - lowest["n_not_damaged"]
    n, diverged = int(damaged.sum()), int(lowest["n_diverged"].sum())
    out = ["No single-layer cell diverged." if not diverged else f"{diverged} of {n} single-layer cells diverged."]
    for eps in eps_pair:
        at = rows[rows["threshold"] == eps]
        total = int((at["n_cells"] - at["n_not_damaged"]).sum())
        stalled, falling = int(at["n_stalled"].sum()), int(at["n_still_falling"].sum())
        if not stalled and not falling:
            out.append(f"Within {_eps_words(eps)}: every damaged cell got back within the budget.")
            continue
        was = "was" if falling == 1 else "were"
        stall_control = _near_control(eps, stalled, control.get("stalled", {}).get(eps)) if stalled else ""
        out.append(
            f"Within {_eps_words(eps)}: {stalled} of {total} damaged cells stalled short of it"
            + (
                f" ({'it refuses' if stalled == 1 else 'they refuse'}, by the stall rule" + stall_control + ")"
                if stalled
                else ""
            )
            + f"; {falling} {was} still falling when the budget ran out"
            + (
                " (not answered: the budget ended first"
                + (
                    f"; at {'its' if falling == 1 else 'their'} last rate of fall, {(projections or {})[eps]} what "
                    "pretraining from scratch needed"
                    if eps in (projections or {})
                    else ""
                )
                + _near_control(eps, falling, control.get("still_falling", {}).get(eps), explain=not stall_control)
                + ")."
                if falling
                else "."
            )
        )
    return "**Does it ever refuse?** " + " ".join(out)


def _near_control(eps: float, n: int, counts: tuple[int, int] | None, explain: bool = True) -> str:
    """'; but k of them got within ε of their matched control, …' for ``n`` stalled cells (or still falling ones)
    that got within ε of the intact network retrained the same way (their gap to the baseline is the retraining's
    own drift; ``explain``: say so, where the sentence has not yet)."""
    if not counts or not counts[0]:
        return ""
    back, known = counts
    if known < n:  # only some have a matched control (the first retrain seed's cells)
        who = "the one" if known == 1 else (f"all {known}" if back == known else f"{back} of the {known}")
        target, whose = "with a matched control got within {eps} of it", "their" if back > 1 else "its"
    else:
        who = "it" if n == 1 else ("all of them" if back == known else f"{back} of them")
        whose = "its" if n == 1 else "their"
        target = f"got within {{eps}} of {whose} matched control"
    said = f"; but {who} {target.format(eps=_eps_words(eps))}"
    if not explain:  # said once already in the sentence
        return said
    return f"{said}, the intact network retrained the same way: the retraining's own drift accounts for {whose} gap"


def section(doc: Page, v: View) -> None:
    """2. refusals"""
    layers = v.layers
    doc.h(2, "2. Does it ever refuse to train?")
    if not len(layers):
        doc.p("No single-layer cells to judge.")
        return
    if len(v.layer_settings) == 1:  # the headline's refusal sentence counts the one setting's cells already
        _median_answers(doc, v, "the cells: the answer above; every ε: `answer/survival.parquet`")
        _not_back_cells(doc, v)
        return
    doc.p(
        "Per policy, at the smallest and largest ε (every ε: `answer/survival.parquet`): the single-layer cells not "
        "back within ε by the end of their retraining (censored), those of them whose curve had stopped falling "
        "(stalled: they refuse, by the stall rule) or was still falling (not answered: the budget ended first), and "
        "their median loss above the baseline at the end."
    )
    body = []
    ends = {float(layers["threshold"].min()), float(layers["threshold"].max())}
    for setting in v.layer_settings:
        picked = _pick(layers, setting)
        for eps, g in picked[picked["threshold"].isin(ends)].groupby("threshold", sort=True):
            n, cen, div = int(g["n_cells"].sum()), int(g["n_censored"].sum()), int(g["n_diverged"].sum())
            gap = g["stall_gap_median"].dropna()
            body.append(
                [
                    setting[1],
                    f"{eps:g}",
                    str(n),
                    f"{cen} ({pct(cen / n)})",
                    str(int(g["n_stalled"].sum())),
                    str(int(g["n_still_falling"].sum())),
                    str(div),
                    signed_pct(gap.median()) if len(gap) else "—",
                ]
            )
    head = ["policy", "ε", "cells", "not back (censored)", "stalled", "still falling", "diverged"]
    doc.table(head + ["ended above the baseline"], body)
    _median_answers(doc, v)
    _not_back_cells(doc, v)


def median_answers(medians: pd.DataFrame) -> dict[str, int]:
    """How the single-layer (model, layer) medians of one policy and ε end: ``finite`` (a cost), ``refuses``
    (beyond the budget, its cells stalled or diverged at least as often as still falling: an answer, by the stall
    rule), ``not_answered`` (beyond the budget, more of its cells still falling: the budget ended first) and
    ``not_damaged`` (no cell left the ε band: no cost)."""
    med = medians["median_examples"].astype(float)
    beyond = medians[np.isinf(med)]
    falling = beyond["n_still_falling"] > beyond["n_stalled"] + beyond["n_diverged"]
    return {
        "finite": int(np.isfinite(med).sum()),
        "refuses": int((~falling).sum()),
        "not_answered": int(falling.sum()),
        "not_damaged": int(med.isna().sum()),
    }


def _median_answers(doc: Page, v: View, where: str = "") -> None:
    """At the smallest and the largest ε, as §1 shows them: how the (model, layer) medians end
    (``median_answers``), one sentence per setting."""
    lines = []
    for setting in v.layer_settings:
        rows = _pick(v.layers, setting)
        if not len(rows):
            continue
        eps = sorted(set(rows["threshold"].astype(float)))
        said = []
        for e in dict.fromkeys([eps[0], eps[-1]]):
            at = rows[rows["threshold"] == e]
            said.append(f"at ε = {_eps_words(e)}, " + _median_answer_words(median_answers(at), len(at)))
        lead = f"{_setting_words(setting)}: " if len(v.layer_settings) > 1 else ""
        lines.append(lead + "; ".join(said))
    if lines:
        doc.p(f"The (model, layer) medians of §1{f' ({where})' if where else ''}: " + ". ".join(lines) + ".")


def _median_answer_words(n: dict[str, int], total: int) -> str:
    """'19 of 20 finite, 1 refuses (beyond the budget, stalled)': how the medians of ``median_answers`` end."""
    words = (
        ("refuses", f"{_refuses(n['refuses'])} (beyond the budget, stalled)"),
        ("not_answered", "not answered (beyond the budget, still falling)"),
        ("not_damaged", "never damaged beyond ε (no cost)"),
    )
    return ", ".join([f"{n['finite']} of {total} finite"] + [f"{n[k]} {word}" for k, word in words if n[k]])


NOT_BACK_WORDS = {  # a not-back cell's verdict, as §2's table says it (its legend: stalled refuses, by the rule)
    "stalled": "stalled",
    "still_falling": "still falling",
    "diverged": "diverged",
}


def _not_back_cells(doc: Page, v: View) -> None:
    """Every single-layer cell not back within the smallest ε, with its verdict (network_costs.parquet): how far
    above its baseline it ended, where its retraining ended and, for one still falling, where its last rate of fall
    would reach ε, both over its network's own from-scratch cost; and its crossing against its matched control."""
    cells = _layer_cells(v, None, *NOT_BACK_WORDS)
    if not len(cells):
        return
    eps = float(v.tables["network_costs"]["threshold"].min())
    cells = cells[cells["threshold"] == eps]
    cells = cells[[setting in v.layer_settings for setting in zip(*(cells[k] for k in SETTING))]]
    if not len(cells):
        return
    several = len(set(zip(*(cells[k] for k in SETTING)))) > 1
    resets = cells["seed"].nunique() > 1
    doc.p(
        f"The single-layer cells not back within ε = {_eps_words(eps)} (`answer/network_costs.parquet`), × its "
        "network's from-scratch cost: stalled: it refuses, by the stall rule; retrained for: to its budget, or until "
        "it stalled (`retrain.stop_stalled`); at its last rate of fall: where a still-falling curve would reach ε "
        "(optimistic); against its matched control: where it got within ε of it (— without one)."
    )
    body = []
    for r in cells.sort_values(["regime", "policy", "init", "model", "depth", "pretrain_seed", "seed"]).itertuples():
        scratch = float(r.scratch_examples)
        known = math.isfinite(scratch) and scratch > 0
        projected = float(r.projected_relative)
        control = float(r.control_upper)
        if math.isnan(control):
            against = "—"
        elif math.isinf(control):
            against = "not back"
        else:
            against = f"back at {_two_digits(control / scratch)} ×" if known else "back"
        body.append(
            ([_setting_words((r.regime, r.policy, r.init))] if several else [])
            + [
                r.model,
                f"{r.target} ({r.position})",
                f"seed {r.pretrain_seed}" + (f", reset seed {r.seed}" if resets else ""),
                NOT_BACK_WORDS[r.outcome],
                signed_pct(r.stall_gap) if math.isfinite(float(r.stall_gap)) else "—",
                f"{_two_digits(r.end_examples / scratch)} ×" if known else "—",
                f"≈ {_two_digits(projected)} ×" if r.outcome == "still_falling" and math.isfinite(projected) else "—",
                against,
            ]
        )
    head = [
        "model",
        "reset",
        "network",
        "verdict",
        "ended above the baseline",
        "retrained for",
        "at its last rate of fall",
        "against its matched control",
    ]
    doc.table((["setting"] if several else []) + head, body)
