"""The answer in short: one paragraph at the asker's ε, before the headline's sentences, that a reader can say back:
how much one reset layer needs (and × what pretraining from scratch needed), how many (model, layer) pairs do not get
back, which layer costs most, whether N and D matter, and the encoder swap against pretraining from scratch. Each
clause comes from the same helpers as its sub-question's sentence, so the two cannot disagree."""

from __future__ import annotations

import pandas as pd

from selfheal.analysis.answer_page.aside import _swap_short
from selfheal.analysis.answer_page.position import _costliest, _costliest_words
from selfheal.analysis.answer_page.refusal import _control_counts, median_answers
from selfheal.analysis.answer_page.size import _size_short
from selfheal.analysis.answer_page.units import _times_scratch_span
from selfheal.analysis.answer_page.view import View, _layer_cells
from selfheal.analysis.answer_page.words import _eps_words, _median_span, _refuses, _unit_after


def _drift_only(v: View, setting: tuple, eps: float) -> bool:
    """Whether every stalled single-layer cell at ``eps`` got within ε of its matched control (the intact network
    retrained the same way; ``_control_counts``, as the refusal sentence reads it): then what keeps it from the
    baseline is the retraining's own drift."""
    within = _control_counts(v, setting, [eps], "stalled").get(eps)
    stalled = _layer_cells(v, setting, "stalled")
    return within is not None and within[0] == within[1] == int((stalled["threshold"] == eps).sum())


def _refuse_words(refuses: int, eps_words: str, drift_only: bool) -> str:
    """'1 refuses (stalled short of 1 %, though within 1 % of its matched control)': the pairs that refuse, and
    whether the retraining's own drift accounts for their gap (``_drift_only``)."""
    its = "its" if refuses == 1 else "their"
    drift = f", though within {eps_words} of {its} matched control" if drift_only else ""
    return f"{refuses} {_refuses(refuses)} (stalled short of {eps_words}{drift})"


def _cost_short(v: View, at: pd.DataFrame, unit: str, eps: float, setting: tuple) -> str:
    """'one reset layer is back within 1 % of its old validation loss after a median a to b of S × E (c to d × what
    pretraining from scratch needed); of the 20 (model, layer) pairs, 1 refuses (stalled short of 1 %)'."""
    finite, _, total = _median_span(at, unit)
    e = _eps_words(eps)
    if not total:
        return f"no reset layer was damaged beyond {e}"
    counts = median_answers(at)
    refuses, falling = counts["refuses"], counts["not_answered"]
    not_back = [_refuse_words(refuses, e, _drift_only(v, setting, eps))] if refuses else []
    not_back += [f"{falling} {'is' if falling == 1 else 'are'} still falling at the budget"] if falling else []
    if finite:
        times = _times_scratch_span(v, at, eps)
        words = (
            f"one reset layer is back within {e} of its old validation loss after a median {finite} {_unit_after(unit)}"
        )
        words += f" ({times} × what pretraining from scratch needed)" if times else ""
    else:
        words = f"no reset layer is back within {e} of its old validation loss by the end of the budget"
    if not_back:
        words += f"; of the {total} (model, layer) pairs, " + " and ".join(not_back)
    return words


def in_short(v: View, rows: pd.DataFrame, unit: str, eps: float, setting: tuple) -> str:
    """The short answer at ``eps`` (the asker's, the smallest) over the headline's single-layer rows."""
    at = rows[rows["threshold"] == eps]
    counts, models = _costliest(at, unit)
    clauses = [
        _cost_short(v, at, unit, eps, setting),
        _costliest_words(counts, models),
        _size_short(v, setting, eps),
        _swap_short(v),
    ]
    said = " ".join(c[0].upper() + c[1:] + "." for c in clauses if c)
    return f"**In short** (medians over each model's networks): {said}"
