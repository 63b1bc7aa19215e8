"""The survival fit's tables and words: its terms' short names, factors and directions, and the cells each fit
leaves out.
"""

from __future__ import annotations

import pandas as pd

from selfheal.analysis import scaling
from selfheal.analysis.answer_page.words import _pick, _setting_words
from selfheal.analysis.page import Page, num


def _direction(row: pd.Series) -> str:
    """A determined term's verdict from its interval: 'raises the cost', 'lowers the cost' or 'no clear effect'."""
    if row["n_resamples"] == 0:
        return "no interval"
    if row["coef_lo"] > 0:
        return "raises the cost"
    if row["coef_hi"] < 0:
        return "lowers the cost"
    return "no clear effect"


def _coef(row: pd.Series) -> str:
    return f"{num(row['coef'])} [{num(row['coef_lo'])}, {num(row['coef_hi'])}]"


def _factor(row: pd.Series) -> str:
    return f"× {num(row['factor'])} [{num(row['factor_lo'])}, {num(row['factor_hi'])}]"


SHORT_LABELS = {
    "first_layer": "first layer",
    "last_layer": "last layer",
    "middle_depth": "depth among the middle layers",
    "log_n_layer": "log N",
    "log_d_model": "log D",
    "log_train_sequences": "log S",
    "log_epochs": "log E",
}


def _short(term: str) -> str:
    return SHORT_LABELS.get(term, term.replace("family", "family "))


CELL_KINDS = {
    "first_layer": "first layer",
    "last_layer": "last layer",
    "log_n_layer": "other N",
    "log_d_model": "other D",
    "log_train_sequences": "other S",
    "log_epochs": "other E",
}


def _left_out(row: pd.Series, terms=None) -> list[str]:
    """The kinds of cells a fit left out (``left_out``: the terms that identify them), among ``terms`` if given."""
    return [
        CELL_KINDS.get(t, t.removeprefix("family[").removesuffix("]"))
        for t in str(row.get("left_out") or "").split(",")
        if t and (terms is None or t in terms)
    ]


def _fit_table(doc: Page, fit: pd.DataFrame, settings: list[tuple], terms: list[str]) -> None:
    """The fit's determined coefficients at the smallest and largest ε (as §1 and the headline; every ε:
    ``answer/fit.parquet`` and the effects figure) as a table; the terms it does not determine there, one line per
    setting and reason that names them."""
    rows = fit[fit["term"].isin(terms)] if len(fit) else fit
    if len(rows):
        eps = sorted(set(rows["threshold"].astype(float)))
        rows = rows[rows["threshold"].astype(float).isin({eps[0], eps[-1]})]
    shown = [s for s in settings if len(_pick(rows, s)) and _pick(rows, s)["determined"].any()]
    body, missing = [], {}
    for setting in settings:
        for _, r in _pick(rows, setting).iterrows():
            if r["determined"]:
                body.append(
                    ([_setting_words(setting)] if len(shown) > 1 else [])
                    + [
                        f"{r['threshold']:g}",
                        _short(r["term"]),
                        _factor(r),
                        _direction(r),
                        f"{r['n_cells']} ({r['n_censored']})",
                        ", ".join(_left_out(r)) or "none",
                    ]
                )
            else:
                missing.setdefault((setting, r["reason"]), {}).setdefault(_short(r["term"]), []).append(r["threshold"])
    if not len(rows):
        doc.p("Not fitted: this grid has no single-layer cells on a usable network.")
        return
    if body:
        if len(shown) == 1:
            doc.p(f"{_setting_words(shown[0])}:")
        head = ["ε", "term", "factor on cost [95 %]", "verdict", "cells (censored)", "cells left out"]
        left = {row[-1] for row in body}
        if len(left) == 1:  # the same cells left every fit (or none did): said once, not in a column
            head, body = head[:-1], [row[:-1] for row in body]
        doc.table((["setting"] if len(shown) > 1 else []) + head, body)
        if len(left) == 1 and left != {"none"}:
            doc.p(f"Cells left out of every fit above: {left.pop()}.")
    items = []
    for setting in [s for s in settings if s not in shown and any(k[0] == s for k in missing)]:
        reasons = sorted({scaling.REASONS.get(r, r) for s, r in missing if s == setting})
        items.append(f"{_setting_words(setting)}: no term determined at any ε ({'; '.join(reasons)})")
    for (setting, reason), labels in missing.items():
        if setting not in shown:
            continue
        named = "; ".join(f"{label} (ε = {', '.join(f'{e:g}' for e in eps)})" for label, eps in labels.items())
        where = f"{_setting_words(setting)}: " if len(shown) > 1 else ""
        items.append(f"{where}{named}: {scaling.REASONS.get(reason, reason)}")
    if items:
        doc.p("Not determined (so no verdict):")
        doc.ul(items)


FIT_LEGEND = (
    "Factor: e^b for the term's coefficient b on log cost; verdict: its 95 % interval is above 1 (raises "
    "the cost), below 1 (lowers it) or includes 1 (no clear effect, not evidence of none)."
)
