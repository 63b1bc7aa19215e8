"""How much data one reset layer needs: the headline's sentence and §1, cost per layer, with its units table."""

from __future__ import annotations

import numpy as np
import pandas as pd

from selfheal.analysis import survival
from selfheal.analysis.answer_page.controls import _against_control, _control_worst
from selfheal.analysis.answer_page.units import (
    _own_pretraining,
    _scratch_span,
    _share_span,
    _three_units,
    _times_scratch_span,
    _tokens_per_example,
)
from selfheal.analysis.answer_page.view import View, _network, _origins, _pretrained_elsewhere
from selfheal.analysis.answer_page.words import (
    BEYOND,
    NOT_HERE,
    SHARE_WORDS,
    _budget_words,
    _cost,
    _cost_verdict,
    _eps_words,
    _median_span,
    _pick,
    _setting_words,
    _sxe_words_row,
    _unit,
    _unit_after,
)
from selfheal.analysis.page import Page, compact, span
from selfheal.analysis.stats import UNIT_WORDS


def _how_much(v: View, rows: pd.DataFrame, unit: str, eps_pair: list[float]) -> str:
    parts = []
    for i, eps in enumerate(eps_pair):
        at = rows[rows["threshold"] == eps]
        finite, beyond, total = _median_span(at, unit)
        tokens = span(
            at["median_examples"].astype(float).where(np.isfinite(at["median_examples"].astype(float)))
            * at["model"].map(lambda m: _tokens_per_example(v.summary, v.networks, m)).astype(float),
            compact,
        )
        times = _times_scratch_span(v, at, eps)
        budget = f" ({_budget_words(at, unit)})" if i == 0 else ""
        undamaged = len(at) - total
        # one parenthesis after the median: its multiple of from scratch and, where no later clause gives it, the budget
        notes = [f"{times} × what pretraining from scratch needed"] if times and i == 0 else []
        if budget and not beyond and not (total and undamaged):
            notes.append(f"budget {_budget_words(at, unit)}")
        cost = (
            f"a median {finite} {_unit_after(unit)}"
            + (f" ({tokens} tokens)" if unit == "examples" and tokens else "")
            + (f" ({'; '.join(notes)})" if notes else "")
            if finite
            else "more than the budget for every layer"
            if total
            else "nothing: no layer was damaged beyond it"
        )
        if finite and beyond:
            cost += f", and more than the budget{budget} for {beyond} of {total} (model, layer) pairs"
        if total and undamaged:
            cost += f" ({undamaged} of {len(at)} pairs were never damaged beyond it: no cost)"
        scratch = _scratch_span(v, sorted(at["model"].unique()), eps, unit)
        if scratch:
            cost += f"; pretraining from scratch needed {scratch} {_unit_after(unit)} to reach the same loss"
        parts.append(
            f"back within {_eps_words(eps)} of its old validation loss, one reset layer needs {cost}"
            if i == 0
            else f"back within {_eps_words(eps)}: {cost}"
        )
    brought = _pretrained_elsewhere(v, rows)
    if brought:
        parts.append(_brought_words(v, rows, brought, eps_pair))
    return "**How much data?** " + ". ".join(p[0].upper() + p[1:] for p in parts) + "."


def _brought_words(v: View, rows: pd.DataFrame, brought: list[str], eps_pair: list[float]) -> str:
    """What the models a user brought are: their adaptation to the corpus (called adaptation), their costs in
    examples and tokens, and where the config gives a model's own pretraining tokens, its single-layer medians as a
    share of them."""
    described = []
    for m in brought:
        words = _sxe_words_row(_network(v, m)).removeprefix(NOT_HERE)
        own = _own_pretraining(v, m)
        if own > 0:
            shares = [(eps, _share_span(v, rows[rows["threshold"] == eps], m)) for eps in eps_pair]
            pretraining = f"of its own {compact(own)} pretraining tokens"
            within = " and ".join(f"{share} {pretraining} within {_eps_words(eps)}" for eps, share in shares if share)
            words += f"; one reset layer needs {within or 'more than the budget'}"
        described.append(f"{m} ({words})")
    its = "its" if len(brought) == 1 else "their"
    return (
        f"Not pretrained here: {', '.join(described)}; {its} costs are in examples and tokens, and {its} "
        f"adaptation to the corpus is counted as adaptation, not as {its} pretraining"
    )


def section(doc: Page, v: View) -> None:
    """1. cost per layer"""
    surv, settings, links = v.surv, v.settings, v.plot_links
    if len(v.layers):
        here, _ = _origins(v, v.layers)
    else:  # no reported cells: the networks say whether any was pretrained here
        here = "source" not in v.networks or bool((v.networks["source"].fillna("scratch") == "scratch").any())
    of = "of S × E" if here else "data"
    doc.h(2, f"1. How much {of} does a single reset layer need to get back within ε?")
    doc.p(
        f"The median cost to get back within ε [95 %] (Turnbull estimate of the interval-censored crossings; "
        f"`{BEYOND}` as above; how many cells stalled or were still falling: §2), at the smallest and largest ε "
        f"(every ε: `answer/survival.parquet`; figures: "
        f"[cost against depth]({links['answer_cost_depth']}), [share of cells back]({links['answer_recovered']}), "
        f"[recovery curves]({links['answer_curves']}))."
    )
    if not settings:
        doc.p("No single-layer cells to estimate.")
    for setting in settings:
        if setting not in v.layer_settings:  # the cross-attention's resets: §6, beside the swaps
            continue
        rows = _pick(surv, setting)
        rows = rows[rows["kind"].isin([survival.LAYER]) | (rows["target"] == "all")]
        unit = _unit(rows, v.networks)
        eps_list = sorted({float(rows["threshold"].min()), float(rows["threshold"].max())})
        control = _control_column(v, setting) if setting == settings[0] else None
        doc.h(3, f"{_setting_words(setting)} ({UNIT_WORDS[unit]})")
        body = []
        for model, g in rows.groupby("model", sort=True):
            order = g.assign(last=g["target"] == "all").sort_values(["last", "depth"], kind="stable")
            for target, t in order.groupby("target", sort=False):
                t = t.set_index("threshold")
                label = "every layer" if target == "all" else f"{target} ({t['position'].iloc[0]})"
                costs = [_cost_verdict(t.loc[e], unit) if e in t.index else "" for e in eps_list]
                if control is not None:
                    key = (model, target)
                    costs.insert(1, _cost(control.loc[key], unit, interval=False) if key in control.index else "—")
                body.append([model, label] + costs)
        heads = [f"ε = {e:g}" for e in eps_list]
        if control is not None:
            heads.insert(1, f"ε = {eps_list[0]:g}, vs. matched control")
        doc.table(["model", "reset"] + heads, body)
        if control is not None:
            doc.p(
                "`vs. matched control`: the same median, back within (1 + ε) × the loss of the intact network "
                "retrained the same way at the same examples (its interval: `answer/against_control.parquet`; the "
                "first retrain seed's cells), since retraining alone moved an intact network by more than ε_min / 4 "
                "(§8)."
            )
        if setting == settings[0]:
            _units_table(doc, v, setting)


def _control_column(v: View, setting: tuple) -> pd.DataFrame | None:
    """The single-layer medians at ε_min against the matched controls, by (model, target), where §1 shows them
    beside the medians against the baseline: where retraining alone moved an intact network by more than
    ε_min / 4 (``_control_worst``); else None."""
    eps_min, worst = _control_worst(v)
    if not any(abs(w) > eps_min / 4 for w in worst):
        return None
    rows = _against_control(v, setting, eps_min)
    return rows.set_index(["model", "target"]) if len(rows) else None


def _units_table(doc: Page, v: View, setting: tuple) -> None:
    """The asker's setting at the smallest and largest ε in examples (and, for a model brought, as a share of its own
    pretraining); × from scratch is in the headline's table."""
    layers = _pick(v.layers, setting)
    eps_pair = sorted({float(layers["threshold"].min()), float(layers["threshold"].max())})
    here, brought = _origins(v, layers)
    shared = brought and any(_own_pretraining(v, m) > 0 for m in set(layers["model"]))
    body = []
    for model, g in layers.groupby("model", sort=True):  # (× from scratch: the headline's table, _model_row)
        row = [model]
        for eps in eps_pair:
            at = g[g["threshold"] == eps]
            u = _three_units(at, _unit(g, v.networks), model, eps, v.summary, v.networks, v.ref)
            row += [u["examples"] or BEYOND]
            row += [(_share_span(v, at, model) or "n/a") if u["examples"] else BEYOND] if shared else []
        body.append(row)
    context = pd.to_numeric(v.networks.get("context", pd.Series(dtype=float)), errors="coerce").dropna().unique()
    tokens = f"{int(context[0])} tokens each" if len(context) == 1 else "tokens: their context each"
    share = f", and as a share of own pretraining: {SHARE_WORDS}"
    doc.p(
        f"The same single-layer medians (range over the finite ones) in examples ({tokens})"
        + (share if shared else "")
        + ("; × from scratch: the table of the answer above" if here else "")
        + "."
    )
    heads = [("share of own pretraining", shared)]
    doc.table(
        ["model"]
        + [h for e in eps_pair for h in [f"examples, ε = {e:g}"] + [f"{k}, ε = {e:g}" for k, on in heads if on]],
        body,
    )
