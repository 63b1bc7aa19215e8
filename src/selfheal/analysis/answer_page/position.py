"""Whether the position of L matters: the headline's sentence (per-layer medians and the fit's position terms)
and §3.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from selfheal.analysis import scaling
from selfheal.analysis.answer_page.fit import FIT_LEGEND, _direction, _factor, _fit_table
from selfheal.analysis.answer_page.units import _times_scratch_span
from selfheal.analysis.answer_page.view import View
from selfheal.analysis.answer_page.words import _eps_words, _pick, _unit_after
from selfheal.analysis.page import Page, span


def _costliest(at: pd.DataFrame, unit: str) -> tuple[dict[str, int], int]:
    """Per model of two or more layers: the position of its single costliest layer (ties left out), counted."""
    counts: dict[str, int] = {}
    models = 0
    for _, g in at.groupby("model", sort=True):
        if len(g) < 2:
            continue
        models += 1
        med = g[f"median_{unit}"].astype(float)
        top = g[med == med.max()]
        if len(top) == 1:
            counts[top["position"].iloc[0]] = counts.get(top["position"].iloc[0], 0) + 1
    return counts, models


def _costliest_words(counts: dict[str, int], models: int, lead: str = "the costliest layer is") -> str:
    """'the costliest layer is the first in a of n models, the last in b' (``_costliest``'s counts), or '' where
    fewer than half the models have a single costliest layer."""
    if not models or sum(counts.values()) * 2 <= models:
        return ""
    if models == 1:
        return f"{lead} the {next(iter(counts))}"
    found = [f"the {p} in {counts[p]}" for p in ("first", "middle", "last") if counts.get(p)]
    return f"{lead} {found[0]} of {models} models" + "".join(f", {f}" for f in found[1:])


def _position_answer(v: View, rows: pd.DataFrame, unit: str, eps_pair: list[float], setting: tuple) -> str:
    """At the asker's ε the medians by position (``_by_position``); which layer is costliest per model, how many
    first layers' medians lie beyond the budget against the other layers' (at the other ε: the medians by position
    say it at the asker's), and the fit's position terms (``POSITION_TERMS``; those with no clear effect named
    together, a term not determined with why). A verdict the same at both ε is said once, with each ε's factor."""
    by = _by_position(v, rows[rows["threshold"] == eps_pair[0]], unit, eps_pair[0])
    out = [by] if by else []
    costliest, beyond = {}, {}
    for eps in eps_pair:  # the asker's ε first, as in the other answers
        at = rows[rows["threshold"] == eps]
        counts, models = _costliest(at, unit)
        if not models:
            continue
        words = _costliest_words(counts, models)
        if words:
            costliest[eps] = words
        first = at[at["position"] == "first"][f"median_{unit}"].astype(float)
        others = at[at["position"].isin(["middle", "last"])][f"median_{unit}"].astype(float)
        if np.isinf(first).any() or np.isinf(others).any():
            beyond[eps] = (
                f"medians beyond the budget: {int(np.isinf(first).sum())} of {len(first)} first layers, "
                f"{int(np.isinf(others).sum())} of {len(others)} others"
            )
    out += _at_each_eps(costliest)
    if by:  # the medians by position said at the asker's ε how many lie beyond the budget
        beyond.pop(eps_pair[0], None)
    out += _at_each_eps(beyond)
    fit = _pick(v.fit, setting) if len(v.fit) else v.fit
    saturated, verdicts = [], {}
    for eps in eps_pair:  # the asker's ε first, as in the other answers
        at = fit[fit["threshold"] == eps].set_index("term") if len(fit) else fit
        if "first_layer" not in at.index:
            continue
        if at.loc["first_layer", "reason"] == "saturated":  # the whole fit: said once, below
            saturated.append(_eps_words(eps))
            continue
        verdicts[eps] = _position_verdicts(at)
    out += _fit_sentences(verdicts)
    if saturated:
        out.append(f"the depth fit at ε = {' and '.join(saturated)} is not made ({scaling.REASONS['saturated']})")
    if not out:
        return "**Does the position of L matter?** Not determined: no model of this grid has two layers."
    return "**Does the position of L matter?** " + ". ".join(p[0].upper() + p[1:] for p in out) + "."


POSITIONS = (("first", "the first layer"), ("middle", "the middle layers"), ("last", "the last layer"))


def _by_position(v: View, at: pd.DataFrame, unit: str, eps: float) -> str:
    """One ε's single-layer medians by position in their stack (first, middle, last): each position's span over the
    finite medians with their multiples of what pretraining from scratch needed and how many lie beyond the budget,
    or that every one does; '' where fewer than two positions have a median (a layer never damaged beyond ε has
    none)."""
    parts, with_times = [], False
    for position, name in POSITIONS:
        med = at.loc[at["position"] == position, f"median_{unit}"].astype(float).dropna()
        if not len(med):
            continue
        finite = at.loc[med[np.isfinite(med)].index]
        if not len(finite):
            parts.append(f"{name} beyond the budget in every model")
            continue
        times = _times_scratch_span(v, finite, eps)
        with_times |= bool(times)
        beyond = int(np.isinf(med).sum())
        parts.append(
            f"{name} {span(med)}"
            + (f" ({times} ×)" if times else "")
            + (f", beyond the budget in {beyond} of {len(med)} models" if beyond else "")
        )
    if len(parts) < 2:
        return ""
    scratch = ", and × what pretraining from scratch needed" if with_times else ""
    return f"at ε = {_eps_words(eps)}, by position (median {_unit_after(unit)}{scratch}): " + "; ".join(parts)


def _at_each_eps(phrases: dict[float, str]) -> list[str]:
    """'at ε = a and b, <phrase>' for the ε that share a phrase, in the order first given."""
    grouped: dict[str, list[float]] = {}
    for eps, phrase in phrases.items():
        grouped.setdefault(phrase, []).append(eps)
    return [f"at ε = {' and '.join(_eps_words(e) for e in eps)}, {phrase}" for phrase, eps in grouped.items()]


def _position_verdicts(at: pd.DataFrame) -> list[tuple[str, str | None, str]]:
    """One ε's position verdicts as (words, factor, what it is against): a clear direction carries its factor, the
    terms with no clear effect and those not determined come after it, without one."""
    words, unclear, undetermined = [], [], []
    first_vs_last = at.loc["first_layer", "label"] == scaling.FIRST_VS_LAST
    for term, name, against in POSITION_TERMS:
        r = at.loc[term] if term in at.index else None
        if r is None or (first_vs_last and term != "first_layer"):  # no middle layers: first against last only
            continue
        if first_vs_last:
            against = "against the last layer"
        if not r["determined"]:
            undetermined.append((name, r["reason"]))
        elif _direction(r) == "no clear effect":
            unclear.append(name)
        else:
            words.append((f"{name} {_direction(r)}", _factor(r), against))
    if unclear:
        words.append(("no clear effect of " + " or of ".join(unclear), None, ""))
    return words + [(w, None, "") for w in _not_determined(undetermined)]


def _fit_sentences(verdicts: dict[float, list[tuple[str, str | None, str]]]) -> list[str]:
    """The fit's position verdicts: one sentence for every ε where they read the same but for their factors (each
    ε's factor named in it), else the asker's ε's (the first) and where the others' are (§3's table)."""
    verdicts = {eps: found for eps, found in verdicts.items() if found}
    if not verdicts:
        return []
    shapes = {tuple((w, a) for w, _, a in found) for found in verdicts.values()}
    if len(verdicts) > 1 and len(shapes) == 1:
        eps_all = list(verdicts)
        parts = []
        for i, (w, factor, against) in enumerate(next(iter(verdicts.values()))):
            if factor is None:
                parts.append(w)
                continue
            each = ", ".join(f"{verdicts[e][i][1]} at ε = {_eps_words(e)}" for e in eps_all)
            parts.append(f"{w} ({each}, {against})")
        return [f"in the fit at ε = {' and '.join(_eps_words(e) for e in eps_all)}, " + "; ".join(parts)]
    eps, found = next(iter(verdicts.items()))
    others = [_eps_words(e) for e in verdicts if e != eps]
    return [
        f"in the fit at ε = {_eps_words(eps)}, "
        + "; ".join(f"{w} ({factor} {against})" if factor is not None else w for w, factor, against in found)
        + (f"; at ε = {' and '.join(others)} it reads otherwise (§3)" if others else "")
    ]


# The depth fit's position terms, as the answer names them, with what each factor compares (scaling._design).
POSITION_TERMS = (
    ("first_layer", "the first layer", "against the middle layers"),
    ("last_layer", "the last layer", "against the middle layers"),
    ("middle_depth", "depth among the middle layers", "from the second layer to the second-to-last"),
)


def _not_determined(terms: list[tuple[str, str]]) -> list[str]:
    """'a and b are not determined (why)': the terms not determined, those of one reason (``scaling.REASONS``) in
    one phrase, in the order first given."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in terms:
        by_reason.setdefault(reason, []).append(name)
    out = []
    for reason, names in by_reason.items():
        why = scaling.REASONS[reason]
        if len(names) == 1:
            out.append(f"{names[0]} is not determined ({why})")
            continue
        why = re.sub(r"\bits coefficient is\b", "their coefficients are", why)
        why = re.sub(r"\bits\b", "their", re.sub(r"\bit\b", "them", why))
        named = ", ".join(names[:-1]) + f" and {names[-1]}"
        out.append(f"{named} are not determined ({why})")
    return out


def section(doc: Page, v: View) -> None:
    """3. position"""
    doc.h(2, "3. Does the position of L matter?")
    doc.p(
        "The censored log-normal fit of log cost over the single-layer cells at the smallest and largest ε (every "
        f"ε: `answer/fit.parquet`, [plot]({v.plot_links['answer_effects']})): the first and the last layer against "
        "the middle layers, and the depth among the middle layers (second to second-to-last, where there are two "
        "or more). A term whose cells are all beyond the budget is not determined, and its cells leave the fit "
        f"(named where any did). {FIT_LEGEND}"
        + (
            " Where no network of a fit has middle layers (N ≤ 2), its first-layer term compares the first layer "
            "with the last."
            if len(v.fit) and (v.fit["label"] == scaling.FIRST_VS_LAST).any()
            else ""
        )
    )
    _fit_table(doc, v.fit, v.layer_settings, [t for t, _, _ in POSITION_TERMS])
