"""The answer page (``results/answer.md`` and ``answer.html``), written from the answer tables only
(``answer_tables.compute``). It opens with the answer in sentences, one per sub-question of the asker (how much of
S x E one reset layer needs at the smallest and largest ε, beside pretraining from scratch; whether it ever refuses;
whether the position of L matters; whether N and D do; the encoder swap), each generated from the tables with its
numbers and saying when the data cannot decide, and a compact table per model; this block is copied into the
README. Then the detail, in the asker's order: cost per layer; refusals; the position of L; N and D (the networks,
the size ordering of the baselines, the out-of-sample check); families; the encoder-decoder aside; damage and
similarity; caveats; related work. ``page`` calls one function per section, each reading the tables through
``_View``.

Costs are in one unit per table (``stats.cost_unit``): the fraction of S x E for networks pretrained here, else
examples (a model you bring: its S x E is not this workflow's, and its adaptation to the corpus is called
adaptation; where its config gives its own pretraining tokens, networks_flags' ``pretraining_tokens``, its
single-layer medians in tokens are also stated as a share of them, and its page speaks of neither S x E nor
pretraining from scratch). §1 adds examples, tokens and the cost relative to the from-scratch run (the survival median in
examples over the mean, across the model's usable networks pretrained here, of the examples the network's own
pretraining needed to first reach the same loss). A median beyond the retraining budget is written ``BEYOND``.

The fit's verdicts branch on its reason codes (``scaling.REASONS``), never on its notes' wording.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re

import numpy as np
import pandas as pd

from selfheal.analysis import answer_tables, out_of_sample, related_work, scaling, survival
from selfheal.analysis.page import Page, compact, num, pct, signed_pct, span
from selfheal.analysis.stats import UNIT_WORDS, cost_unit, flag

BEYOND = "> B"  # a median (or interval end) beyond the retraining budget B: censored, only a lower bound
BEYOND_LEGEND = f"`{BEYOND}`: not back within ε by the end of the retraining budget B (censored: a lower bound)"
# Words for networks.parquet's degenerate_reason (analysis/tables.py: UNIGRAM_MARGIN, BIGRAM_MARGIN).
DEGENERATE_WORDS = {
    "unigram": "its baseline is not clearly below the unigram loss",
    "bigram": "it does not beat the interpolated bigram by 0.1 nats",
    "reset_all_harmless": "resetting every layer did less damage than ε_min",
}
HEADLINE = ("<!-- answer:headline -->", "<!-- /answer:headline -->")
NOT_HERE = "not pretrained here; "  # the start of a brought model's words in place of S × E
SHARE_WORDS = (
    "a brought model's single-layer medians in tokens over the tokens it was pretrained on elsewhere "
    "(its config's pretraining_tokens, `answer/networks_flags.parquet`)"
)
# Published sizes for scale (static reference facts, not results): parameters and pretraining tokens.
REFERENCE_SIZES = [
    ("GPT-2 small", "124 M parameters", "about 10 B tokens"),
    ("BERT-base", "110 M", "about 3.3 B words × 40 epochs"),
    ("Llama 3 8B", "8 B", "about 15 T tokens"),
]
ASKED = ("frozen", "full", "fresh")
SETTING = ("regime", "policy", "init")  # the columns of a setting


def _unit(table: pd.DataFrame, networks: pd.DataFrame) -> str:
    """``stats.cost_unit`` of some rows, with their networks' source (a model you bring: examples)."""
    if not len(table):
        return "fraction"
    sources = networks.loc[networks["model"].isin(set(table["model"])), "source"] if "source" in networks else None
    return cost_unit(table["pretrain_examples"], sources)


def _one(v: float) -> str:
    return BEYOND if math.isinf(v) else num(v)


def _cost(row: pd.Series, unit: str, interval: bool = True) -> str:
    """'0.038 [0.013, 0.070]' (``interval``: else the median alone); one number where the interval is that number;
    ``BEYOND`` beyond the budget; ``NOT_DAMAGED`` where no cell of the group left the ε band after the reset (no
    cost, so no median)."""
    value, lo, hi = (float(row[f"median_{unit}{s}"]) for s in ("", "_lo", "_hi"))
    if math.isnan(value):
        return NOT_DAMAGED
    if (math.isinf(value) and math.isinf(lo)) or value == lo == hi or not interval:
        return _one(value)
    return f"{_one(value)} [{_one(lo)}, {_one(hi)}]"


def _cost_verdict(row: pd.Series, unit: str) -> str:
    """``_cost``, and for a median beyond the budget how many of its cells stalled and how many were still falling
    there: '> B (2 stalled, 1 still falling)'."""
    cost = _cost(row, unit)
    if not math.isinf(float(row[f"median_{unit}"])):
        return cost
    counts = [(int(row[c]), w) for c, w in (("n_stalled", "stalled"), ("n_still_falling", "still falling")) if row[c]]
    return cost + (f" ({', '.join(f'{n} {w}' for n, w in counts)})" if counts else "")


def _settings(survival_table: pd.DataFrame) -> list[tuple]:
    """(regime, policy, init) of the single-layer groups, the asker's setting (frozen, full, fresh) first."""
    layers = survival_table[survival_table["kind"] == survival.LAYER]
    found = sorted(set(zip(layers["regime"], layers["policy"], layers["init"])))
    return sorted(found, key=lambda s: s != ASKED)


def _setting_words(setting: tuple) -> str:
    return f"regime `{setting[0]}`, policy `{setting[1]}`, init `{setting[2]}`"


def _pick(table: pd.DataFrame, setting: tuple) -> pd.DataFrame:
    return table[(table["regime"] == setting[0]) & (table["policy"] == setting[1]) & (table["init"] == setting[2])]


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


def _estimated(networks: pd.DataFrame) -> pd.DataFrame:
    """The networks the estimates use: neither degenerate nor off their plateau (``survival.left_out``)."""
    return networks[~survival.left_out(networks)]


def _clusters_sentence(networks: pd.DataFrame) -> str:
    """How many pretrained networks per model the intervals resample: those the estimates use, or every network
    where none is usable (the page then answers nothing)."""
    used = _estimated(networks)
    per_model = (used if len(used) else networks).groupby("model")["pretrain_seed"].nunique()
    least = int(per_model.min()) if len(per_model) else 0
    if least <= 1:
        return (
            "Some model has a single pretrained network: its intervals resample retrain seeds only and do "
            "**not** cover the variation between independently pretrained networks."
        )
    counts = span(per_model.astype(float))
    if least < 5:
        return (
            f"Intervals (95 %) resample the pretrained networks, only {counts} per model: read directions, not digits."
            + (" With two, a median is the faster network's cost." if least == 2 else "")
        )
    return f"Intervals (95 %) resample the pretrained networks ({counts} per model)."


def _tokens_per_example(summary: pd.DataFrame, networks: pd.DataFrame, model: str) -> float:
    """Tokens per example (sequence) of a model: its networks' ``context``, else the summary's tokens / examples."""
    if "context" in networks.columns:
        ctx = pd.to_numeric(networks.loc[networks["model"] == model, "context"], errors="coerce").dropna()
        if len(ctx):
            return float(ctx.iloc[0])
    if {"tokens", "examples"} <= set(summary.columns):
        rows = summary[(summary["model"] == model) & (pd.to_numeric(summary["examples"], errors="coerce") > 0)]
        if len(rows):
            return float((rows["tokens"].astype(float) / rows["examples"].astype(float)).median())
    return math.nan


def _usable(networks: pd.DataFrame) -> pd.DataFrame:
    """The networks the estimates use (not degenerate)."""
    if "degenerate" not in networks.columns:
        return networks
    return networks[~flag(networks["degenerate"])]


def _pretrained_here(networks: pd.DataFrame) -> pd.DataFrame:
    return networks[networks["source"] == "scratch"] if "source" in networks.columns else networks


def _scratch_reference(ref: pd.DataFrame, networks: pd.DataFrame, model: str, eps: float) -> dict:
    """The from-scratch reference of a model at one ε: the mean over its usable networks pretrained here of the
    examples (and fraction of S x E) their own pretraining curve needed to first reach baseline x (1 + ε)
    (interpolated, ``pretrain_reference``, the same as summary.parquet's scratch_examples), how many of them
    reached it, and whether any of those crossings is coarse. A model you bring has none (its adaptation to the
    corpus is not pretraining from scratch)."""
    nets = _pretrained_here(_usable(networks))
    nets = nets[nets["model"] == model]
    out = {"examples": math.nan, "fraction": math.nan, "reached": 0, "networks": len(nets), "coarse": False}
    if not len(nets) or not len(ref) or "examples" not in ref.columns:
        return out
    rows = ref[
        (ref["model"] == model) & (ref["threshold"] == eps) & ref["pretrain_seed"].isin(set(nets["pretrain_seed"]))
    ]
    reached = rows[rows["examples"].notna()]
    out["reached"] = len(reached)
    if len(reached):
        out["examples"] = float(reached["examples"].astype(float).mean())
        out["fraction"] = float(reached["fraction"].astype(float).mean())
        out["coarse"] = bool(reached["coarse"].astype(bool).any()) if "coarse" in reached.columns else False
    return out


def _three_units(
    at: pd.DataFrame,
    unit: str,
    model: str,
    eps: float,
    summary: pd.DataFrame,
    networks: pd.DataFrame,
    ref: pd.DataFrame,
) -> dict:
    """The per-layer survival medians of one model at one ε (``at``) in the three units: fraction of S x E,
    examples (and tokens), and relative to the from-scratch run (the median in examples over the mean scratch
    reference of ``_scratch_reference``). Values are spans over the layers, '' where unknown."""
    examples = at["median_examples"].astype(float)
    per_example = _tokens_per_example(summary, networks, model)
    scratch = _scratch_reference(ref, networks, model, eps)
    relative = examples / scratch["examples"] if scratch["examples"] > 0 else examples * math.nan
    return {
        "fraction": span(at["median_fraction"].astype(float)) if unit == "fraction" else "",
        "examples": span(examples),
        "tokens": span(examples * per_example, compact),
        "relative": span(relative),
        "scratch": scratch,
    }


def _budget_words(rows: pd.DataFrame, unit: str) -> str:
    """The budget of some cells: '0.2 of S × E', or 'N examples' when S × E is unknown; for models of different
    budgets the range."""
    if unit == "fraction":
        fractions = pd.to_numeric(rows["budget_fraction"], errors="coerce").round(3)
        return f"{span(fractions)} of S × E"  # budgets round to whole examples
    return f"{span(pd.to_numeric(rows['budget_examples'], errors='coerce'))} examples"


def _reasons(networks: pd.DataFrame) -> str:
    """The words for the degenerate_reason codes of some networks, each once."""
    codes = sorted(
        {c for r in networks.get("degenerate_reason", pd.Series(dtype=str)).dropna() for c in str(r).split(",") if c}
    )
    return ", ".join(DEGENERATE_WORDS.get(c, c) for c in codes) or "flagged"


# ---------------------------------------------------------------- the answer in sentences (the headline)


def _eps_words(eps: float) -> str:
    return f"{100 * eps:g} %"


def _unit_after(unit: str) -> str:
    return "of S × E" if unit == "fraction" else "examples"


NOT_DAMAGED = "not damaged"  # a (model, layer) none of whose cells left the ε band after the reset: no cost


def _median_span(at: pd.DataFrame, unit: str) -> tuple[str, int, int]:
    """The finite per-layer medians' span, how many medians lie beyond the budget (inf), and how many were damaged
    beyond ε at all (a median of no damaged cell is NaN: not a cost, and not beyond the budget either)."""
    med = at[f"median_{unit}"].astype(float)
    return span(med[np.isfinite(med)]), int(np.isinf(med).sum()), int(med.notna().sum())


def _scratch_span(v: _View, models: list[str], eps: float, unit: str) -> str:
    """The span over models of what pretraining from scratch needed to reach baseline x (1 + ε), in ``unit``."""
    values = [_scratch_reference(v.ref, v.networks, m, eps)[unit] for m in models]
    return span(values)


def _times_scratch_span(v: _View, rows: pd.DataFrame, eps: float) -> str:
    """The span of the finite (model, layer) medians as multiples of what their model's pretraining from scratch
    needed to reach the same loss (``_scratch_reference``); '' where no model has one."""
    return span(
        [
            float(r["median_examples"]) / ref
            for _, r in rows.iterrows()
            if (ref := _scratch_reference(v.ref, v.networks, r["model"], eps)["examples"]) > 0
        ]
    )


def _how_much(v: _View, rows: pd.DataFrame, unit: str, eps_pair: list[float]) -> str:
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


def _brought_words(v: _View, rows: pd.DataFrame, brought: list[str], eps_pair: list[float]) -> str:
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


def _own_pretraining(v: _View, model: str) -> float:
    """A brought model's own pretraining tokens (answer/networks_flags.parquet's pretraining_tokens, from the
    config), NaN where not given."""
    if "pretraining_tokens" not in v.flags.columns:
        return math.nan
    values = pd.to_numeric(v.flags.loc[v.flags["model"] == model, "pretraining_tokens"], errors="coerce").dropna()
    return float(values.iloc[0]) if len(values) else math.nan


def _share_span(v: _View, at: pd.DataFrame, model: str) -> str:
    """The finite single-layer medians of ``model`` in ``at`` (one ε) in tokens, as a share of its own pretraining
    tokens ('1.2e-6 to 3.4e-6'), '' where unknown."""
    own = _own_pretraining(v, model)
    if not own > 0:
        return ""
    med = at.loc[at["model"] == model, "median_examples"].astype(float)
    tokens = med[np.isfinite(med)] * _tokens_per_example(v.summary, v.networks, model)
    return span(tokens / own, _sci)


def _sci(x: float) -> str:
    """A small share in scientific notation: '1.2e-6'."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _network(v: _View, model: str) -> pd.Series:
    return v.networks[v.networks["model"] == model].iloc[0]


def _pretrained_elsewhere(v: _View, rows: pd.DataFrame) -> list[str]:
    """The models of ``rows`` a user brought (networks.parquet's source is not scratch)."""
    if "source" not in v.networks:
        return []
    nets = v.networks[v.networks["model"].isin(set(rows["model"]))]
    return sorted(set(nets.loc[nets["source"].fillna("scratch") != "scratch", "model"]))


def _two_digits(x: float) -> str:
    """A guess to two significant digits, without exponents: 3.1, 48, 180,000."""
    if x <= 0 or not math.isfinite(x):
        return num(x)
    rounded = round(x, 1 - math.floor(math.log10(x)))
    return f"{rounded:,.0f}" if rounded >= 100 else f"{rounded:.2g}"


def _layer_cells(v: _View, setting: tuple | None, *outcomes: str) -> pd.DataFrame:
    """The single-layer cells of these outcomes in network_costs.parquet (of one setting, where given)."""
    cells = v.tables.get("network_costs")
    if cells is None or not len(cells):
        return pd.DataFrame(columns=answer_tables.NETWORK_COST_COLUMNS)
    cells = cells[(cells["kind"] == survival.LAYER) & cells["outcome"].isin(outcomes)]
    return _pick(cells, setting) if setting else cells


def _falling_projections(v: _View, setting: tuple | None, eps_pair: list[float]) -> dict[float, str]:
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
    v: _View, setting: tuple | None, eps_pair: list[float], outcome: str
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
    found = [f"the {p} in {counts[p]}" for p in ("first", "middle", "last") if counts.get(p)]
    return f"{lead} {found[0]} of {models} models" + "".join(f", {f}" for f in found[1:])


def _position_answer(v: _View, rows: pd.DataFrame, unit: str, eps_pair: list[float], setting: tuple) -> str:
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


def _by_position(v: _View, at: pd.DataFrame, unit: str, eps: float) -> str:
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
    ε's factor named in it), else one sentence per ε."""
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
    return [
        f"in the fit at ε = {_eps_words(eps)}, "
        + "; ".join(f"{w} ({factor} {against})" if factor is not None else w for w, factor, against in found)
        for eps, found in verdicts.items()
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


def _size_family(v: _View) -> tuple[pd.DataFrame, str]:
    """The healed networks of the most common family (the size grid the N and D terms are fitted on, as
    out_of_sample.size_grid picks it) and that family's name ('' when the table has no family)."""
    healed = v.healed
    if not len(healed) or "family_kind" not in healed:
        return healed, ""
    family = healed.drop_duplicates("model")["family_kind"].astype(str).value_counts().idxmax()
    return healed[healed["family_kind"].astype(str) == family], family


SIZE_WORDS = {"n_layer": ("depths", "deeper"), "d_model": ("widths", "wider")}


def _same_loss(v: _View, column: str) -> str:
    """', and the depths reach the same validation loss (...)' where every pair of the size grid's models that differ
    only in ``column`` (``size_ordering``) has baselines apart by no more than their networks' spread, so that the
    size axis varies the architecture at one loss; '' otherwise, or with one network per model."""
    order = v.ordering
    if not len(order):
        return ""
    models = set(_size_family(v)[0]["model"].astype(str))
    pairs = order[
        (order["varied"] == column)
        & order["model_a"].astype(str).isin(models)
        & order["model_b"].astype(str).isin(models)
    ]
    if not len(pairs) or (pairs["n_seeds"] < 2).any():
        return ""
    if (pairs["difference"].abs() > pairs["seed_spread"]).any():
        return ""
    means = pd.concat([pairs["mean_loss_a"], pairs["mean_loss_b"]]).astype(float)
    plural, larger = SIZE_WORDS[column]
    return (
        f", and the {plural} reach the same validation loss (means {means.min():.3f} to {means.max():.3f} nats, "
        f"within their networks' spread of up to {float(pairs['seed_spread'].max()):.3f}): a {larger} network here "
        "is not a better-fitting one"
    )


def _size_answer(v: _View, setting: tuple, eps_pair: list[float]) -> str:
    fit = _pick(v.fit, setting) if len(v.fit) else v.fit
    out = []
    for term, letter in (("log_n_layer", "N"), ("log_d_model", "D")):
        rows = fit[(fit["term"] == term) & fit["threshold"].isin(eps_pair)] if len(fit) else fit
        column = {"N": "n_layer", "D": "d_model"}[letter]
        values = sorted(_size_family(v)[0][column].astype(int).unique())
        unvaried = not len(rows) or (rows["reason"] == "not_varied").all()
        if unvaried or (len(values) < 2 and not rows["determined"].astype(bool).any()):
            across = len(v.healed) and v.healed[column].nunique() > 1  # only another family differs in it
            out.append(
                f"{letter} is not determined (the size grid does not vary it; only another family's networks "
                "differ in it)"
                if across and len(values) < 2
                else f"{letter} is not determined (the grid does not vary it)"
            )
            continue
        words = []
        for _, r in rows.sort_values("threshold").iterrows():
            if r["determined"]:
                words.append(
                    f"{_direction(r)} at ε = {_eps_words(r['threshold'])} (cost ∝ {letter}^{num(r['coef'])}"
                    f" [{num(r['coef_lo'])}, {num(r['coef_hi'])}])"
                )
            else:
                words.append(f"not determined at ε = {_eps_words(r['threshold'])} ({scaling.REASONS[r['reason']]})")
        out.append(f"larger {letter} ({', '.join(map(str, values))}): " + ", ".join(words) + _same_loss(v, column))
    return "**Do N and D matter?** " + "; ".join(p[0].upper() + p[1:] if i == 0 else p for i, p in enumerate(out)) + "."


def _swap_reach(rows: pd.DataFrame, brief: bool = False) -> str:
    """One swap over every ε, relative to pretraining from scratch to the same loss: back within the smallest ε at
    r ×, or not by the budget (stalled or still falling) and then the smallest ε it did reach. ``brief``: the
    sentence has said already that no swap is back within the smallest ε by the budget, so a swap beyond it starts
    with what its cells did."""
    rows = rows.sort_values("threshold")
    first = rows.iloc[0]
    eps0 = _eps_words(float(first["threshold"]))
    if math.isnan(float(first["median"])):
        return f"not damaged beyond {eps0}"
    return _swap_reach_baseline(rows, first, eps0, brief) + _swap_reach_control(first, eps0)


def _swap_reach_control(first: pd.Series, eps0: str) -> str:
    """'; against its matched control (...), within 1 % at r ×' for an aside row with a matched control (a frozen
    encoder's swap: every cross-attention of the intact network retrained the same way), else ''."""
    control = float(first.get("control_median", math.nan))
    if math.isnan(control):
        return ""
    rel = float(first.get("control_relative_to_scratch", math.nan))
    reach = f"within {eps0} of it at {num(rel)} ×" if math.isfinite(rel) else f"not within {eps0} of it either"
    return f"; against its matched control, {reach}"


def _swap_reach_baseline(rows: pd.DataFrame, first: pd.Series, eps0: str, brief: bool = False) -> str:
    rel = float(first["relative_to_scratch"])
    if math.isfinite(rel):
        return f"back within {eps0} at {num(rel)} ×"
    budget = float(first["budget_relative_to_scratch"])
    by = f" by {num(budget)} ×" if math.isfinite(budget) else " within the budget"
    if brief:  # the lead said what "(≈ r ×)" is, and that none is back by the budget
        verdict = _verdicts(first) + _projection(first, short=True)
        text = verdict or f"not back within {eps0}{by}"
    else:
        verdict = _verdicts(first) + _projection(first)
        text = f"not back within {eps0}{by}" + (f" ({verdict})" if verdict else "")
    later = rows.iloc[1:]
    reached = later[np.isfinite(later["relative_to_scratch"].astype(float))]
    if len(reached):
        r = reached.iloc[0]
        return text + f", within {_eps_words(float(r['threshold']))} at {num(float(r['relative_to_scratch']))} ×"
    if len(later):
        return text + f", nor within {_eps_words(float(later['threshold'].max()))}"
    return text


def _swap_at_other_lrs(v: _View, model: str, eps: float, scratch: pd.DataFrame) -> str:
    """What the lr check (``retrain.lr_sensitivity_targets``) measured of a swap of ``model`` at ε: 'At ×3 the
    retraining lr, the swap `t` is back within 1 % at r × from scratch; at ÷3 not back by the budget.' ('' when the
    check has no swap)."""
    table = v.tables.get("lr_sensitivity")
    if table is None or not len(table) or not len(scratch):
        return ""
    rows = table[(table["model"] == model) & (table["threshold"] == eps) & table["target"].str.startswith("swap")]
    per = float(scratch["median"].iloc[0])
    column = "fraction_of_pretrain" if scratch["unit"].iloc[0] == "fraction" else "examples"
    out = []
    for target, g in rows.groupby("target", sort=True):
        said = []
        for _, r in g.sort_values("lr_multiplier", ascending=False).iterrows():
            cost = float(r[column]) if bool(r["recovered"]) and pd.notna(r[column]) else math.inf
            reach = (
                f"back within {_eps_words(eps)} at {num(cost / per)} × from scratch"
                if math.isfinite(cost) and per > 0
                else f"not back within {_eps_words(eps)} by the budget"
            )
            said.append(f"at {_multiplier_words(float(r['lr_multiplier']))} the retraining lr, {reach}")
        out.append(f"The lr check on `{target}` (its trainable swap): " + "; ".join(said))
    return ". ".join(out)


def _donor_words(v: _View, target: str, width: int | None) -> str:
    """'bart-n2-d64's trained encoder (width 64, narrower)' from the networks table (the donor is pretrained there)."""
    donor = target[len("swap-") :]
    net = v.networks[v.networks["model"] == donor]
    if not len(net) or width is None:
        return f"{donor}'s trained encoder"
    w = int(net["d_model"].iloc[0])
    side = "narrower" if w < width else "wider" if w > width else "the same width"
    return f"{donor}'s trained encoder (width {w}, {side})"


def _gate_effect(at: pd.DataFrame) -> str:
    """Whether starting the wiped cross-attention's output at zero heals a swap faster: per swap (target, policy)
    with both inits, the gated median against the ungated one at the smallest ε either reaches."""
    faster = slower = same = neither = 0
    for _, g in at.groupby(["target", "policy"], sort=False):
        inits = set(g["init"])
        if not {"fresh", answer_tables.ZERO_OUT} <= inits:
            continue
        verdict = None
        for _, e in g.groupby("threshold", sort=True):
            by = e.set_index("init")["median"].astype(float)
            gated, plain = by[answer_tables.ZERO_OUT], by["fresh"]
            if math.isnan(gated) or math.isnan(plain) or (math.isinf(gated) and math.isinf(plain)):
                continue
            verdict = "faster" if gated < plain else "slower" if gated > plain else "same"
            break
        if verdict is None:
            neither += 1
        else:
            faster += verdict == "faster"
            slower += verdict == "slower"
            same += verdict == "same"
    n = faster + slower + same + neither
    if not n:
        return ""
    counts = [(faster, "faster"), (slower, "slower"), (same, "as fast"), (neither, "neither back at any ε")]
    counts = [(k, words) for k, words in counts if k]
    among = "the one swap measured both ways" if n == 1 else f"the {n} swaps measured both ways"
    if len(counts) == 1:
        effect = f"{counts[0][1]} in {among}"
    else:
        effect = ", ".join(f"{words} in {k}" for k, words in counts) + f" of {among}"
    return (
        f"A closed gate (the wiped cross-attention's output starting at zero): {effect} (at the smallest ε either "
        "reaches)"
    )


SWAP_LEAD = "**The encoder swap.** "
CROSS_ATTN = "cross_attn"  # the policy that resets a decoder layer's cross-attention only: the aside's (§6)


def _swap_answer(v: _View) -> str:
    """The swap in sentences the asker can use: first whether any swapped-in encoder is back within the smallest ε
    within its budget, as a multiple of pretraining the model from scratch to the same loss; then each swap (a donor's
    trained encoder, trainable and frozen; a fresh encoder) with what it reached; then whether the closed gate
    helps."""
    aside = v.tables.get("encoder_decoder")
    swaps = aside[aside["item"].isin(answer_tables.SWAP_ITEMS)] if aside is not None and len(aside) else pd.DataFrame()
    if not len(swaps):
        why = _no_aside(v.healed) or "this grid has no encoder-decoder model with its encoder swapped"
        return f"**The encoder swap:** not determined ({why})."
    out = []
    for model, g in swaps.groupby("model", sort=True):
        eps = float(g["threshold"].min())
        net = v.networks[v.networks["model"] == model]
        width = int(net["d_model"].iloc[0]) if len(net) else None
        scratch = aside[(aside["model"] == model) & (aside["item"] == "scratch") & (aside["threshold"] == eps)]
        plain = g[g["init"] == "fresh"]
        at = plain[plain["threshold"] == eps]
        rel = at["relative_to_scratch"].astype(float)
        lead = f"In {model}, "
        if len(at) and np.isfinite(rel).any():
            best = at.loc[rel[np.isfinite(rel)].idxmin()]
            lead += (
                f"the fastest swap is back within {_eps_words(eps)} of the old loss at {num(float(best['relative_to_scratch']))} × "
                "what pretraining from scratch needed"
            )
        elif len(at):
            budget = at["budget_relative_to_scratch"].astype(float)
            known = budget[np.isfinite(budget)]
            lead += f"no swapped encoder is back within {_eps_words(eps)} of the old loss" + (
                f" in {span(known)} × what pretraining from scratch needed" if len(known) else " within the budget"
            )
        if len(scratch) and math.isfinite(float(scratch["median"].iloc[0])):
            lead += f" ({num(float(scratch['median'].iloc[0]))} {_unit_after(scratch['unit'].iloc[0])})"
        brief = len(at) > 0 and not np.isfinite(rel).any()  # the lead said that none is back by the budget
        falling = at[at["n_still_falling"].astype(int) > 0] if brief else at.iloc[:0]
        if falling["projected_relative"].notna().any():  # the brief verdicts' "(≈ r ×)", said once
            lead += f"; ≈ r ×: where a still-falling swap's last rate of fall would reach {_eps_words(eps)}"
        parts = []  # (fresh last, donor width, target, frozen, words): each donor's swaps then share one clause
        for (item, target), rows in plain.groupby(["item", "target"], sort=False):
            reach = _swap_reach(rows, brief)
            if item == "encoder_swap":
                parts.append((1, 0, target, False, f"a fresh encoder of width {target[len('swap') :]}: {reach}"))
                continue
            donor = v.networks[v.networks["model"] == target[len("swap-") :]]
            order = int(donor["d_model"].iloc[0]) if len(donor) else 0
            how = "trainable" if item == "donor_swap" else "frozen"
            parts.append((0, order, target, item != "donor_swap", f"{how}: {reach}"))
        clauses = []
        for (fresh, _, target), group in itertools.groupby(sorted(parts), key=lambda p: p[:3]):
            words = "; ".join(p[-1] for p in group)
            clauses.append(words if fresh else f"{_donor_words(v, target, width)}, {words}")
        body = "; ".join(clauses)
        text = lead + ". With the cross-attention wiped and re-sized to it: " + body if len(at) else body
        other_lr = _swap_at_other_lrs(v, model, eps, scratch)
        if other_lr:
            text += f". {other_lr}"
        every = aside[(aside["model"] == model) & (aside["item"] == "reset_all")]
        if len(every):  # the same retraining from every layer reset: how much of the swap's cost is the retraining's
            text += f". Every layer reset instead (the embeddings kept), with the same retraining: {_swap_reach(every)}"
        gate = _gate_effect(g)
        out.append(text + (". " + gate if gate else ""))
    return SWAP_LEAD + ". ".join(out) + "."


def _sxe_words(v: _View, model: str) -> str:
    net = v.networks[v.networks["model"] == model]
    return _sxe_words_row(net.iloc[0]) if len(net) else "n/a"


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


def _model_row(v: _View, g: pd.DataFrame, setting: tuple, unit: str, eps_pair: list) -> list[str]:
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


def _reference_cell(v: _View, g: pd.DataFrame, model: str, eps: float, unit: str) -> str:
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


def _headline(doc: Page, v: _View) -> None:
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
        "scratch": "from scratch: what pretraining needed to first reach the same loss, baseline × (1 + ε) (the mean "
        "over the model's networks; `answer/pretrain_reference.parquet`), and `r ×` a cost over it",
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


# ---------------------------------------------------------------- the detail


def _cost_section(doc: Page, v: _View) -> None:
    """1. cost per layer"""
    surv, settings, links = v.surv, v.settings, v.plot_links
    if len(v.layers):
        here, _ = _origins(v, v.layers)
    else:  # no reported cells: the networks say whether any was pretrained here
        here = "source" not in v.networks or bool((v.networks["source"].fillna("scratch") == "scratch").any())
    of = "of S × E" if here else "data"
    doc.h(2, f"1. How much {of} does a single reset layer need to get back within ε?")
    doc.p(
        f"The median cost to get back within ε [95 %] (Turnbull estimate of the interval-censored crossings; a cell "
        f"never back is censored at the budget, never averaged; `{BEYOND}` as above, with how many cells stalled or "
        f"were still falling: §2), at the smallest and largest ε (every ε: `answer/survival.parquet`; figures: "
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


def _control_column(v: _View, setting: tuple) -> pd.DataFrame | None:
    """The single-layer medians at ε_min against the matched controls, by (model, target), where §1 shows them
    beside the medians against the baseline: where retraining alone moved an intact network by more than
    ε_min / 4 (``_control_worst``); else None."""
    eps_min, worst = _control_worst(v)
    if not any(abs(w) > eps_min / 4 for w in worst):
        return None
    rows = _against_control(v, setting, eps_min)
    return rows.set_index(["model", "target"]) if len(rows) else None


def _units_table(doc: Page, v: _View, setting: tuple) -> None:
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


def _origins(v: _View, rows: pd.DataFrame) -> tuple[bool, bool]:
    """Whether the models of ``rows`` include some pretrained here, and some a user brought."""
    brought = _pretrained_elsewhere(v, rows)
    return bool(set(rows["model"]) - set(brought)), bool(brought)


def _refusals(doc: Page, v: _View) -> None:
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


def _median_answers(doc: Page, v: _View, where: str = "") -> None:
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
            n = median_answers(at)
            parts = [f"{n['finite']} of {len(at)} finite"] + [
                f"{n[k]} {word}"
                for k, word in (
                    ("refuses", "refuse (beyond the budget, stalled)"),
                    ("not_answered", "not answered (beyond the budget, still falling)"),
                    ("not_damaged", "never damaged beyond ε (no cost)"),
                )
                if n[k]
            ]
            said.append(f"at ε = {_eps_words(e)}, " + ", ".join(parts))
        lead = f"{_setting_words(setting)}: " if len(v.layer_settings) > 1 else ""
        lines.append(lead + "; ".join(said))
    if lines:
        doc.p(f"The (model, layer) medians of §1{f' ({where})' if where else ''}: " + ". ".join(lines) + ".")


NOT_BACK_WORDS = {  # a not-back cell's verdict, as §2's table says it (its legend: stalled refuses, by the rule)
    "stalled": "stalled",
    "still_falling": "still falling",
    "diverged": "diverged",
}


def _not_back_cells(doc: Page, v: _View) -> None:
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
        f"The single-layer cells not back within ε = {_eps_words(eps)} (`answer/network_costs.parquet`): whether "
        "each stalled (it refuses, by the stall rule) or was still falling at the budget, how far above its "
        "baseline it ended, how long it was retrained (to its budget, or until it stalled past "
        "`retrain.stop_stalled`), where a still-falling curve's last rate of fall would reach ε (an optimistic "
        "guess), and where it got within ε of its matched control (— without one), all × its network's "
        "from-scratch cost."
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


def _position(doc: Page, v: _View) -> None:
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


def _data_axis_overfit(networks: pd.DataFrame, eps_min: float | None) -> str:
    """Where the size grid's data regimes (S × E) left their networks at different points of their training: one
    regime's networks all ended past their validation minimum by more than ε_min / 4 (they overfit S) and apart from
    every other regime's, so the log S and log E terms measure the regime together with that overfitting. '' where
    the grid has one regime, no pretraining curves, or no such split."""
    if eps_min is None or not len(networks) or "past_minimum" not in networks:
        return ""
    past = (networks["past_minimum"] / networks["baseline_loss"]).rename("past")
    g = networks.assign(past=past).dropna(subset=["past"]).groupby(["train_sequences", "epochs"])
    if g.ngroups < 2:
        return ""
    spans = g.agg(lo=("past", "min"), hi=("past", "max"), models=("model", lambda m: sorted(set(m))))
    spans = spans.sort_values("lo")
    over = spans[spans["lo"] > eps_min / 4]
    rest = spans.drop(over.index)
    if not len(over) or not len(rest) or over["lo"].min() <= rest["hi"].max():
        return ""

    def regime(key, r, what: str = "") -> str:
        share = f"{100 * r['lo']:.2f} %" + ("" if r["lo"] == r["hi"] else f" to {100 * r['hi']:.2f} %")
        return f"{int(key[0]):,} × {int(key[1])}: {share}{what}"

    return (
        "The data axis compares networks at different points of their training (by S × E): "
        + "; ".join(regime(k, r, " above their validation minimum (they overfit S)") for k, r in over.iterrows())
        + ", "
        + "; ".join(regime(k, r) for k, r in rest.iterrows())
        + ". So the log S and log E terms measure those regimes with their overfitting, not S or E alone."
    )


def _sizes(doc: Page, v: _View) -> None:
    """4. N and D"""
    networks = v.networks
    doc.h(2, "4. Do N and D matter?")
    grid, family = _size_family(v)
    n_values = sorted(grid["n_layer"].unique()) if len(grid) else []
    d_values = sorted(grid["d_model"].unique()) if len(grid) else []
    others = v.healed[v.healed["model"].isin(set(v.healed["model"]) - set(grid["model"]))].drop_duplicates("model")
    doc.p(
        f"Cost grows as N^b, D^b, S^b, E^b for the coefficient b of log N, D, S, E (the fit and legend of §3). "
        f"The size grid{f' ({family}, the most common family)' if family else ''}: N "
        f"{', '.join(str(int(x)) for x in n_values) or 'none'}; D {', '.join(str(int(x)) for x in d_values) or 'none'}."
        + (
            " Other families (N × D): "
            + ", ".join(f"{r['model']} ({int(r['n_layer'])} × {int(r['d_model'])})" for _, r in others.iterrows())
            + "."
            if len(others)
            else ""
        )
    )
    _fit_table(doc, v.fit, v.layer_settings, ["log_n_layer", "log_d_model", "log_train_sequences", "log_epochs"])
    eps_min = float(v.summary["threshold"].min()) if len(v.summary) else None
    axis = _data_axis_overfit(networks[networks["model"].isin(set(grid["model"]))], eps_min) if len(grid) else ""
    if axis:
        doc.p(axis)
    doc.h(3, "The networks")
    refs = networks.drop_duplicates(["unigram_loss", "bigram_loss"]) if len(networks) else networks
    grams = "; ".join(
        f"{r['unigram_loss']:.3f}, "
        + (
            "none (masked LM)"
            if pd.isna(r["bigram_loss"])
            else f"{r['bigram_loss']:.3f} ({num(float(r['bigram_weight']))})"
        )
        + f" ({', '.join(sorted(networks[networks['unigram_loss'] == r['unigram_loss']]['family_kind'].unique()))})"
        for _, r in refs.iterrows()
    )
    every_off = len(networks) and "off_plateau" in networks and flag(networks["off_plateau"]).all()
    body = (
        [_network_row(g, not every_off) for _, g in networks.sort_values(["model", "pretrain_seed"]).groupby("model")]
        if len(networks)
        else []
    )
    flagged = any(row[-1] for row in body)
    past = (networks["past_minimum"] / networks["baseline_loss"]).dropna() if "past_minimum" in networks else []
    past_words = (  # a downloaded model has no pretraining curve: n/a
        f"; past its minimum: how far above its own pretraining curve's lowest validation loss it ended (it "
        f"overfits S; {int((past > eps_min / 4).sum())} of {len(past)} networks by more than ε_min / 4 = "
        f"{_eps_words(eps_min / 4)}; whether more pretraining would lower it: §8's plateau check)"
        if eps_min is not None and len(past)
        else ""
    )
    doc.p(
        "Validation loss (nats per token); margin over the train split's bigram (interpolated with the unigram, "
        f"λ tuned on validation; under 0.1 nats: degenerate){past_words}. Unigram, bigram (λ): {grams}."
    )
    if every_off:
        doc.p("Every network was still improving at the end of pretraining (off its plateau; §8).")
    doc.table(
        ["model", "loss per seed", "margin per seed", "past its minimum per seed"] + (["flags"] if flagged else []),
        [row if flagged else row[:-1] for row in body],
    )
    _ordering(doc, v.ordering)


def _network_row(g: pd.DataFrame, plateau: bool = True) -> list[str]:
    """One model's networks: their losses, margins over the bigram and how far each ended past its validation
    minimum (one per pretraining seed), and flags."""

    def losses(column):
        return ", ".join("n/a" if pd.isna(x) else f"{float(x):.3f}" for x in g[column]) if column in g else "n/a"

    r = g.iloc[0]
    margins = g["bigram_margin"] if "bigram_margin" in g else g["bigram_loss"] - g["baseline_loss"]
    seeds: dict[str, list[str]] = {}
    for _, n in g.iterrows():
        if bool(n.get("degenerate", False)):
            reason = n.get("degenerate_reason")
            label = "**degenerate**" + (f" ({reason})" if isinstance(reason, str) and reason else "")
            seeds.setdefault(label, []).append(str(n["pretrain_seed"]))
        if plateau and bool(n.get("off_plateau", False)):
            seeds.setdefault("off its plateau", []).append(str(n["pretrain_seed"]))
    flags = [f"{label} (seed{'s' if len(s) > 1 else ''} {', '.join(s)})" for label, s in seeds.items()]
    past = g["past_minimum"] / g["baseline_loss"] if "past_minimum" in g else pd.Series([None] * len(g))
    return [
        r["model"],
        losses("baseline_loss"),
        ", ".join("n/a" if pd.isna(m) else f"{float(m):+.3f}" for m in margins),
        ", ".join("n/a" if pd.isna(x) else f"{100 * float(x):.2f} %" for x in past),
        "; ".join(flags),
    ]


def _sxe_words_row(r: pd.Series) -> str:
    """A network's S × E ('30,921 × 1'), or that it was not pretrained here (a model you bring)."""
    if r.get("source", "scratch") != "scratch":
        s, e = r.get("train_sequences"), r.get("epochs")
        adapted = (
            f"adaptation: {num(float(s))} sequences × {num(float(e))}"
            if s is not None and e is not None and not pd.isna(s) and not pd.isna(e)
            else "no adaptation"
        )
        return f"{NOT_HERE}{adapted}"
    s, e = r.get("train_sequences"), r.get("epochs")
    if s is not None and e is not None and not pd.isna(s) and not pd.isna(e):
        return f"{num(float(s))} × {num(float(e))}"
    sxe = r.get("pretrain_examples")
    return num(float(sxe)) if sxe is not None and not pd.isna(sxe) else "n/a"


def _ordering(doc: Page, order: pd.DataFrame) -> None:
    """Each pair of size_ordering with its numbers."""
    if not len(order):
        doc.p(
            "Size ordering: no two models of the same family differ in exactly one of N and D, so the grid cannot "
            "show how the baseline moves with N or D."
        )
        return
    held = {k: (int(g["holds"].sum()), len(g)) for k, g in order.groupby("varied")}
    said = [
        f"at fixed N it falls with D in {held['d_model'][0]} of {held['d_model'][1]} pairs"
        if "d_model" in held
        else "",
        f"at fixed D it does not rise with N in {held['n_layer'][0]} of {held['n_layer'][1]} pairs"
        if "n_layer" in held
        else "",
    ]
    doc.p(
        "Size ordering of the baselines (means over the seeds; a pair holds by more than the larger seed spread of "
        f"its two models): {'; '.join(filter(None, said))}."
    )
    failed = order[~order["holds"].astype(bool)]
    if len(failed):
        doc.p(
            "Pairs where it does not hold (smaller → larger; mean loss; difference; seed spread): "
            + "; ".join(
                f"{r['model_a']} → {r['model_b']}: {r['mean_loss_a']:.3f} → {r['mean_loss_b']:.3f}, "
                f"{r['difference']:+.3f}, " + ("one seed" if r["n_seeds"] < 2 else f"{r['seed_spread']:.3f}")
                for _, r in failed.iterrows()
            )
            + " (every pair: `answer/size_ordering.parquet`)."
        )


def _out_of_sample(doc: Page, v: _View) -> None:
    """4b. Does the trend predict a size it was not fitted on?"""
    table = v.tables.get("out_of_sample", pd.DataFrame(columns=out_of_sample.COLUMNS))
    doc.h(3, "Does the trend predict a size it was not fitted on?")
    if not len(table):
        doc.p(
            "Not tested: the size grid needs more than two levels of N or D, or more than two sizes, to leave one "
            "out and still fit a trend (`answer/out_of_sample.parquet` is empty)."
        )
        return
    doc.p(
        "The fit of §3–4, refitted on the size grid without one part of it, predicts each left-out layer's median; "
        "a layer **held** where the predicted and measured intervals overlap (beyond the budget: between the budget "
        "and ∞); not tested: a median of 0, or a kind of cell that left the fit (per layer: "
        f"`answer/out_of_sample.parquet`, [plot]({v.plot_links['answer_out_of_sample']}))."
    )
    verdicts = out_of_sample.verdicts(table)
    items = []
    for name, g in verdicts.groupby("left_out", sort=False):
        words = "; ".join(
            f"**{verdict}** at ε = {', '.join(f'{e:g}' for e in h['threshold'])}"
            + (
                f" ({int(h['held'].sum())} of {int(h['layers'].sum())} tested layers held)"
                if verdict in ("held", "did not hold")
                else ""
            )
            + (f" ({h['note'].iloc[0]})" if verdict == "not fitted" and h["note"].iloc[0] else "")
            for verdict, h in g.groupby("verdict", sort=False)
        )
        items.append(f"{name} ({g['models'].iloc[0]}): {words}")
    doc.ul(items)


def _families(doc: Page, v: _View) -> None:
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


def _family_units(doc: Page, v: _View, setting: tuple) -> None:
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


def _no_aside(networks: pd.DataFrame) -> str:
    """Why an encoder-decoder model of the grid has no aside ("" where the grid has none): every one of its
    networks is left out of the estimates (off its plateau or degenerate, §8)."""
    if not len(networks) or "family_kind" not in networks:
        return ""
    encdec = networks[networks["family_kind"] == "encoder-decoder"]
    if not len(encdec):
        return ""
    models = ", ".join(f"`{m}`" for m in sorted(encdec["model"].unique()))
    if len(_estimated(encdec)):
        return f"the encoder-decoder model {models} has no cell in the estimates"
    reasons = " or ".join(
        words
        for name, words in (("off_plateau", "not fully trained"), ("degenerate", "degenerate"))
        if name in encdec and flag(encdec[name]).any()
    )
    return f"every network of the encoder-decoder model {models} is left out of the estimates ({reasons}: §8)"


def _aside(doc: Page, v: _View) -> None:
    """6. The encoder-decoder aside: each part of it reset, beside every layer and pretraining from scratch."""
    aside = v.tables.get("encoder_decoder", pd.DataFrame(columns=answer_tables.ENCODER_DECODER_COLUMNS))
    doc.h(2, "6. The encoder-decoder aside: cross-attention and the encoder swap")
    if not len(aside):
        why = _no_aside(v.healed) or "this grid has no encoder-decoder model"
        doc.p(
            f"{why[0].upper()}{why[1:]}, so the cost of resetting an encoder or decoder layer, the cross-attention or "
            "the whole encoder is not determined by it."
        )
        return
    swap = _swap_answer(v)
    doc.p(
        ("The headline's answer on the encoder swap comes from this table. " if swap.startswith(SWAP_LEAD) else "")
        + "A swap wipes the cross-attention and re-sizes it to the new encoder, which trains or stays frozen; gated: "
        "the cross-attention's output starts at zero (a tanh gate at 0, as Flamingo's; init `zero_out`). Regime "
        "`frozen`. Each cell: the median cost over the networks × what pretraining from scratch needed to reach "
        "the same loss; at the smallest ε with [95 %] and, where it differs, `vs. control` (the same tensors "
        "retrained from their trained values; for a frozen encoder, the intact network's cross-attention); "
        "`> r ×`: beyond the budget, with what the cells did and, if still falling, `(≈ r ×)` where the last rate "
        "of fall would reach ε (optimistic). Last row: pretraining from scratch in S × E, [least, most] at the "
        f"smallest ε (`answer/encoder_decoder.parquet`; curves: [plot]({v.plot_links['answer_aside']}))."
    )
    for model, rows in aside.groupby("model", sort=True):
        eps_list = sorted(rows["threshold"].unique())  # every ε: the aside compares its resets at each
        body, order = [], []
        for item, g in rows.groupby("item", sort=False):
            if item in PER_LAYER_ITEMS:  # one row per kind of layer: the range over its layers (each: §1)
                layers = sorted(g["target"].unique())
                label = f"{g['what'].iloc[0]} (`{layers[0]}`" + (f" to `{layers[-1]}`)" if len(layers) > 1 else ")")
                body.append(
                    [label]
                    + [
                        _aside_range(g[g["threshold"] == e], e == eps_list[0]) if (g["threshold"] == e).any() else ""
                        for e in eps_list
                    ]
                )
                order.append(_aside_order(v, item, ""))
                continue
            for _, one in g.groupby(["target", "policy", "init"], sort=False):
                one = one.set_index("threshold")
                body.append(
                    [one["what"].iloc[0]]
                    + [_aside_cost(one.loc[e], e == eps_list[0]) if e in one.index else "" for e in eps_list]
                )
                order.append(_aside_order(v, item, str(one["target"].iloc[0])))
        body = [row for _, row in sorted(zip(order, body), key=lambda kv: kv[0])]
        doc.h(3, model)
        doc.table(["reset"] + [f"ε = {e:g}" for e in eps_list], body)


PER_LAYER_ITEMS = ("encoder_layer", "decoder_layer", "cross_attention")  # aside items with a row per layer
ITEM_ORDER = [item for item, _, _ in answer_tables.ENCODER_DECODER_ITEMS] + ["scratch"]


def _aside_order(v: _View, item: str, target: str) -> tuple:
    """Where an aside row goes: in the table's order of items, each donor's four swaps together (trainable, gated,
    frozen, frozen and gated), the narrower donor first."""
    if item.startswith("donor_swap"):
        donor = v.networks[v.networks["model"] == target[len("swap-") :]]
        width = int(donor["d_model"].iloc[0]) if len(donor) else 0
        return (ITEM_ORDER.index("donor_swap"), width, target, ITEM_ORDER.index(item))
    return (ITEM_ORDER.index(item) if item in ITEM_ORDER else len(ITEM_ORDER), 0, target, 0)


def _aside_range(rows: pd.DataFrame, first: bool) -> str:
    """One kind of layer's aside cell at one ε: the range of its layers' medians × from scratch, with how many are
    beyond the budget (and what their cells did) or never damaged beyond ε, and at the smallest ε (``first``) the
    range against the matched control where it differs."""
    if len(rows) == 1:
        return _aside_cost(rows.iloc[0], first)
    rel = rows["relative_to_scratch"].astype(float)
    finite = rel[np.isfinite(rel)]
    beyond = rows[np.isinf(rel)]
    undamaged = int((rows["n_not_damaged"] == rows["n_cells"]).sum())
    parts = [f"{span(finite)} ×"] if len(finite) else []
    if len(beyond):
        said = dict.fromkeys(_verdicts(r) + _projection(r, short=True) for _, r in beyond.iterrows())
        verdicts = "; ".join(w for w in said if w)
        budget = beyond["budget_relative_to_scratch"].astype(float)
        parts.append(f"{len(beyond)} of {len(rows)} > {span(budget)} ×" + (f" ({verdicts})" if verdicts else ""))
    if undamaged:
        parts.append(f"{undamaged} of {len(rows)} not damaged beyond ε")
    text = ", ".join(parts)
    control = rows["control_relative_to_scratch"].astype(float).dropna()
    if first and len(control) and span(control) != span(finite):
        text += f"; vs. control {span(control)} ×"
    return text


def _aside_cost(r: pd.Series, first: bool = True) -> str:
    """One aside cell, in the aside's unit: × what pretraining from scratch needed to reach the same loss (the
    median [95 %], `> r ×` beyond the budget with what the cells did there, against the matched control where that
    differs); the from-scratch row itself in the model's unit; the median in that unit where no from-scratch cost
    is known."""
    undamaged = int(r["n_not_damaged"])  # 0 for the scratch row
    if undamaged == int(r["n_cells"]) > 0:
        return "not damaged beyond ε (no cost)"
    value, lo, hi = float(r["median"]), float(r["median_lo"]), float(r["median_hi"])
    rel = float(r.get("relative_to_scratch", math.nan))
    budget_rel = float(r.get("budget_relative_to_scratch", math.nan))
    scratch = r["item"] == "scratch"
    # × from scratch: the row's median, interval and budget over the same from-scratch cost
    per = rel / value if math.isfinite(rel) and value > 0 else budget_rel / float(r["budget"])
    if scratch or not math.isfinite(per):
        per, times = 1.0, "" if scratch else f" {_unit_after(r['unit'])}"
    else:
        times = " ×"

    def x(v: float) -> str:
        return _one(v * per)

    if math.isinf(value) and math.isfinite(budget_rel) and not scratch:  # beyond the budget: the budget's multiple
        text = f"> {num(budget_rel)} ×" + ("" if math.isinf(lo) or not first else f" [{x(lo)}, {x(hi)}]")
    elif math.isinf(value):
        text = _one(value) + times
    else:
        text = x(value) + times + ("" if value == lo == hi or not first else f" [{x(lo)}, {x(hi)}]")
    if scratch:
        text += f" {_unit_after(r['unit'])}"
    partly = 0 < r["n_censored"] < r["n_cells"]
    control = float(r.get("control_median", math.nan))
    control_rel = float(r.get("control_relative_to_scratch", math.nan))
    said = num(control_rel) if times == " ×" and math.isfinite(control_rel) else x(control)
    differs = first and not math.isnan(control) and _one(control) != _one(value)
    against = f"; vs. control {said}{times}" if differs else ""
    return (
        text
        + (f", {int(r['n_censored'])} of {int(r['n_cells'])} censored" if partly else "")
        + (f"; {_verdicts(r)}{_projection(r, short=True)}" if int(r["n_censored"]) and not scratch else "")
        + (f", {undamaged} of {int(r['n_cells'])} not damaged beyond ε" if undamaged else "")
        + against
    )


def _projection(r: pd.Series, short: bool = False) -> str:
    """', ≈ r × at its last rate of fall' (short: ' (≈ r ×)') for an aside row beyond the budget with a cell still
    falling (``answer_tables.projected_examples``, over the from-scratch cost: a guess, and an optimistic one), else
    ''."""
    rel = float(r.get("projected_relative", math.nan))
    if not int(r.get("n_still_falling", 0)) or math.isnan(rel):
        return ""
    if short:
        return " (never, at its last rate)" if math.isinf(rel) else f" (≈ {_two_digits(rel)} ×)"
    return (
        ", never at its last rate of fall" if math.isinf(rel) else f", ≈ {_two_digits(rel)} × at its last rate of fall"
    )


def _verdicts(r: pd.Series) -> str:
    """What the censored cells of an aside row did: 'stalled' (every curve had stopped falling: it refuses),
    'still falling' (the budget ended first: not answered), or the counts of each."""
    stalled, falling = int(r.get("n_stalled", 0)), int(r.get("n_still_falling", 0))
    if stalled and not falling:
        return "stalled"
    if falling and not stalled:
        return "still falling"
    return f"{stalled} stalled, {falling} still falling" if stalled or falling else ""


def _damage_similarity(doc: Page, v: _View) -> None:
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


DRIFT_WORDS = {
    "raised": "the retraining itself raised the intact network's loss, so near that ε part of a reset "
    "network's remaining gap is the retraining's own effect, not missing healing",
    "lowered": "training alone lowered the intact network's loss, so a recovery to within an ε near that "
    "drift is partly further training",
    "no matched control": "no matched control measures it",
}


def _drift_reading(mine: pd.DataFrame) -> str:
    """'raised' or 'lowered' (DRIFT_WORDS): the sign of the matched controls' largest move from the baseline."""
    ends = mine[["drift_min", "drift_max"]].to_numpy(float).ravel()
    if not len(ends):
        return "no matched control"
    return "raised" if float(ends[np.abs(ends).argmax()]) > 0 else "lowered"


def _control_worst(v: _View) -> tuple[float, pd.Series]:
    """eps_min and, per model, the matched controls' largest move from the baseline at any evaluation (signed; the
    networks the estimates use); empty where the drift table has no ``drift_worst`` (tables written before it)."""
    drift = v.tables.get("control_drift", pd.DataFrame())
    if "drift_worst" not in drift.columns or not len(drift) or not len(v.summary):
        return math.nan, pd.Series(dtype=float)
    used = _estimated(v.networks)
    keys = set(zip(used["model"], used["pretrain_seed"]))
    drift = drift[[(m, p) in keys for m, p in zip(drift["model"], drift["pretrain_seed"])]].dropna(
        subset=["drift_worst"]
    )
    worst = drift.groupby("model")["drift_worst"].agg(lambda d: d.iloc[np.abs(d.to_numpy()).argmax()])
    return float(v.summary["threshold"].min()), worst


def _controls_sentence(v: _View) -> str:
    """Whether retraining alone leaves an intact network at its baseline: the matched controls' worst move per model
    against eps_min / 4 (the method's bound), or '' where the drift table cannot say."""
    eps_min, worst = _control_worst(v)
    if not len(worst):
        return ""
    bound = eps_min / 4
    inside = [f"{m} ({signed_pct(w)})" for m, w in worst.items() if abs(w) <= bound]
    outside = [f"{m} ({signed_pct(w)})" for m, w in worst.items() if abs(w) > bound]
    lead = "Retraining alone (the matched no-reset controls: the reset tensors retrained from their trained values) "
    within = f"at most ± ε_min / 4 = {100 * bound:g} % at every evaluation"
    if not outside:
        return f"{lead}moved an intact network's loss {within} in every model (worst: {', '.join(inside)})."
    onset = _drift_onset(v, {m for m, w in worst.items() if abs(w) > bound})
    more = (
        f"{lead}moved an intact network's loss {within} in {', '.join(inside)}; more in {', '.join(outside)}"
        if inside
        else f"{lead}moved an intact network's loss by more than ± ε_min / 4 = {100 * bound:g} % in every model: "
        f"{', '.join(outside)}"
    )
    return (
        f"{more}{onset}: there a healed layer also has to overcome what the retraining itself adds, so its costs at "
        f"ε = {_eps_words(eps_min)} lean high (§1 gives each against its matched control)."
    )


def _drift_onset(v: _View, models: set[str]) -> str:
    """' (k of n controls passed it, after a median m of S × E of retraining over the networks; per network a to
    b)': when the drift sets in (each network's median first crossing of ± ε_min / 4, ``control_drift``'s
    n_beyond and beyond_examples, over its S × E) in ``models``, or '' where the table or the networks' S × E
    cannot say."""
    drift = v.tables.get("control_drift", pd.DataFrame())
    if "beyond_examples" not in drift.columns or "pretrain_examples" not in v.networks.columns:
        return ""
    used = _estimated(v.networks)[["model", "pretrain_seed", "pretrain_examples"]]
    rows = drift.merge(used, on=["model", "pretrain_seed"])
    rows = rows[rows["model"].isin(models)]
    if not len(rows) or rows["n_beyond"].isna().all():
        return ""
    unit = _unit(rows, v.networks)  # a model you bring: examples, never its adaptation as S × E
    onset = rows["beyond_examples"].astype(float)
    onset = (onset / rows["pretrain_examples"].astype(float) if unit == "fraction" else onset).dropna()
    if not len(onset):
        return ""
    spread = f"; per network {span(onset)}" if len(onset) > 1 else ""
    return (
        f" ({int(rows['n_beyond'].sum())} of {int(rows['n_controls'].sum())} controls passed it, after a median "
        f"{num(float(onset.median()))} {_unit_after(unit)} of retraining over the networks{spread})"
    )


def _against_control(v: _View, setting: tuple | None, eps: float) -> pd.DataFrame:
    """The single-layer medians at ``eps`` measured against the matched controls (``answer/against_control``), in
    the asker's setting, on the models whose networks the estimates use."""
    table = v.tables.get("against_control", pd.DataFrame())
    if not len(table) or setting is None:
        return table.iloc[:0]
    rows = _pick(table, setting)
    rows = rows[rows["kind"] == survival.LAYER] if "kind" in rows.columns else rows
    return rows[(rows["threshold"] == eps) & rows["model"].isin(set(_estimated(v.networks)["model"]))]


def _against_control_words(
    v: _View, setting: tuple | None, eps: float, baseline: pd.DataFrame | None = None, baseline_unit: str = ""
) -> str:
    """' Measured against its matched control instead ..., one reset layer needs a median a to b ... (c to d × from
    scratch)': the headline's correction for what the retraining itself does, or '' without such medians. Where
    the costliest layer per model measured so differs from the one ``baseline`` (the same ε's medians against the
    baseline, in ``baseline_unit``) gives, the sentence says so: the position verdict's exceptions can be drift."""
    rows = _against_control(v, setting, eps)
    if not len(rows):
        return ""
    unit = _unit(rows, v.networks)
    finite, beyond, total = _median_span(rows, unit)
    if not total:
        return ""
    times = _times_scratch_span(v, rows, eps)
    cost = f"a median {finite} {_unit_after(unit)}" + (f", {times} × from scratch" if times else "") if finite else ""
    if beyond:
        cost += (", and " if cost else "") + f"beyond the budget for {beyond} of {total} (model, layer) pairs"
    if baseline is not None and len(baseline):  # the same models, so only the measure differs
        baseline = baseline[baseline["model"].isin(set(rows["model"]))]
        then = _costliest_words(*_costliest(rows, unit), lead="the costliest layer is then")
        if then and _costliest(rows, unit) != _costliest(baseline, baseline_unit):
            cost += f"; {then}"
    return (
        f" Measured against its matched control instead (the intact network retrained the same way, at the same "
        f"examples), one reset layer is back within {_eps_words(eps)} at {cost} (§1, §8)."
    )


def _caveats(doc: Page, v: _View) -> None:
    """8. caveats"""
    flags, degenerate, summary, tables = v.flags, v.degenerate, v.summary, v.tables
    doc.h(2, "8. Caveats the data shows")
    items = [_clusters_sentence(v.healed)]
    for _, r in degenerate.iterrows():
        reasons = [DEGENERATE_WORDS.get(k, k) for k in str(r.get("degenerate_reason") or "").split(",") if k]
        why = (
            "; ".join(reasons)
            if reasons
            else "no better than n-gram statistics, or resetting every layer did little damage"
        )
        items.append(
            f"{r['model']} pretraining seed {r['pretrain_seed']} is **degenerate** ({why}): excluded "
            f"from every verdict above."
        )
    bnc = int(flags["n_baseline_not_converged"].sum()) if len(flags) else 0
    moved = int(flags["n_control_moved"].sum()) if len(flags) else 0
    rows_total = int(flags["n_rows"].sum()) if len(flags) else 0
    items.append(
        f"{bnc} of {rows_total} (cell, ε) rows are flagged `baseline_not_converged` (their matched control fell more "
        f"than ε_min/2 below the baseline: partly further training; kept); {moved} have a matched control that moved "
        f"more than ε from the baseline by the cell's crossing."
    )
    controls = _controls_sentence(v)
    items += [controls] if controls else []
    if len(flags):
        params = flags["n_params"].astype(float)
        tokens = pd.to_numeric(flags["pretrain_tokens"], errors="coerce")
        items.append(
            f"Scale of this grid: {span(params)} parameters, "
            + (
                f"{span(tokens, compact)} pretraining tokens"
                if tokens.notna().any()
                else "pretraining tokens unknown (models not pretrained here)"
            )
            + "; published sizes: "
            + "; ".join(f"{name}: {p}, {t}" for name, p, t in REFERENCE_SIZES)
            + "."
        )
    doc.ul(items)
    off = flags[flags["off_plateau"].astype(bool)] if len(flags) else flags
    if not len(off):
        return
    drift = tables.get("control_drift", pd.DataFrame(columns=answer_tables.CONTROL_DRIFT_COLUMNS))
    eps_min = float(summary["threshold"].min()) if len(summary) else math.nan
    quiet, moved = [], []
    for _, r in off.iterrows():
        mine = drift[(drift["model"] == r["model"]) & (drift["pretrain_seed"] == r["pretrain_seed"])]
        name = f"{r['model']} seed {r['pretrain_seed']}"
        ends = mine[["drift_min", "drift_max"]].to_numpy(float).ravel()
        if len(ends) and float(np.abs(ends).max()) < eps_min / 2:
            quiet.append(name)
            continue
        largest = float(ends[np.abs(ends).argmax()]) if len(ends) else math.nan
        moved.append(
            [name, signed_pct(largest), _drift_reading(mine), f"{r['n_baseline_not_converged']} of {r['n_rows']}"]
        )
    doc.p(
        f"{len(off)} of {len(flags)} networks were still improving at the end of pretraining (off their plateau"
        + (
            f": {', '.join(f'{r.model} seed {r.pretrain_seed}' for r in off.itertuples())}"
            if len(off) <= OFF_NAMED
            else ""
        )
        + "); they are left out of every estimate. The same "
        f"retraining applied to the intact network (its matched no-reset controls: `answer/control_drift.parquet`, "
        f"and `control_loss` in summary.parquet) moved "
        f"the loss by less than ε_min / 2 = {100 * eps_min / 2:g} % for "
        + (f"{len(quiet)} of them" if quiet else "none of them")
        + (": training alone does not account for their recoveries." if quiet else ".")
        + (
            " The others (" + "; ".join(f"{k}: {DRIFT_WORDS[k]}" for k in sorted({row[2] for row in moved})) + "):"
            if moved
            else ""
        )
    )
    doc.table(["network", "controls' largest move", "reading", "rows `baseline_not_converged`"], moved)


OFF_NAMED = 6  # networks off their plateau named one by one in the caveats, up to this many

LR_EPS = 0.01  # the ε the lr-sensitivity sentence states (the table's smallest where it lacks this one)


def _multiplier_words(m: float) -> str:
    """3 -> '×3', 0.3333 -> '÷3'."""
    return f"×{m:g}" if m > 1 else f"÷{1 / m:.3g}"


def _lr_cost(row: pd.Series, column: str, recovered: str) -> str:
    return num(float(row[column])) if bool(row[recovered]) and pd.notna(row[column]) else "beyond the budget"


def _lr_at(rows: pd.DataFrame, unit: str) -> tuple[float, pd.DataFrame, str]:
    """One model's lr-check rows at the ε they are stated at (LR_EPS, else the smallest), and the cost column of
    ``unit``."""
    eps = LR_EPS if (rows["threshold"] == LR_EPS).any() else float(rows["threshold"].min())
    return eps, rows[rows["threshold"] == eps], "fraction_of_pretrain" if unit == "fraction" else "examples"


def lr_sensitivity_sentence(rows: pd.DataFrame, unit: str) -> str:
    """One model's sentence from its rows of the lr-sensitivity table: at ε = LR_EPS (else the smallest), the cost
    of its first and its last layer (and of any further target, ``retrain.lr_sensitivity_targets``) at the chosen
    lr and at each multiple of it, in ``unit``."""
    eps, at, column = _lr_at(rows, unit)
    layers = list(at[at["depth"].notna()].sort_values("depth")["target"].unique())
    others = sorted(set(at["target"]) - set(layers))  # retrain.lr_sensitivity_targets beyond the two layers
    parts, unit_said = [], False
    for i, target in enumerate(layers + others):
        g = at[at["target"] == target].sort_values("lr_multiplier")
        first = g.iloc[0]
        which = (
            "the reset"
            if target in others
            else "its one layer"
            if len(layers) == 1
            else "the first layer"
            if i == 0
            else "the last layer"
        )
        start = _lr_cost(first, f"chosen_{column}", "chosen_recovered")
        if not unit_said and bool(first["chosen_recovered"]):  # the unit after the first number
            start, unit_said = f"{start} {_unit_after(unit)}", True
        if i == 0:
            start += f" at the chosen lr ({num(first['chosen_lr'])})"
        moves = " and ".join(
            f"to {_lr_cost(r, column, 'recovered')} at {_multiplier_words(r['lr_multiplier'])}" for _, r in g.iterrows()
        )
        parts.append(f"{which} (`{target}`) {'moves ' if i == 0 else ''}from {start} {moves}")
    sentence = f"{rows['model'].iloc[0]}: at ε = {eps:g} the cost of " + "; of ".join(parts) + "."
    faster = _faster_lrs(at, column)
    if faster:
        sentence += (
            f" **The chosen lr is not the fastest measured** ({faster}): its costs are upper bounds on how fast "
            "these layers can heal."
        )
    return sentence


FASTER = 0.9  # a multiple of the lr is "faster" when it recovers at under this share of the chosen lr's cost


def _faster_rows(at: pd.DataFrame, column: str) -> pd.DataFrame:
    """The rows (one ε) whose multiple of the lr healed its target sooner than the chosen lr: recovered where the
    chosen lr did not, or at under FASTER of its cost (crossings are located to a resolution, so a smaller gap is
    not a difference); by depth (further targets last), then multiplier."""
    at = at.sort_values(["depth", "lr_multiplier"], na_position="last")
    chosen = at[f"chosen_{column}"].astype(float).where(at["chosen_recovered"].astype(bool), math.inf)
    cost = at[column].astype(float)
    return at[at["recovered"].astype(bool) & cost.notna() & (cost < FASTER * chosen)]


def _faster_lrs(at: pd.DataFrame, column: str) -> str:
    """The multiples of the lr that healed a target sooner than the chosen lr (``_faster_rows``), as words ('×3 on
    `L0`'). '' when none."""
    return ", ".join(
        f"{_multiplier_words(r['lr_multiplier'])} on `{r['target']}`" for _, r in _faster_rows(at, column).iterrows()
    )


def lr_headline_words(table: pd.DataFrame | None, unit_of) -> str:
    """The headline's words on the lr check (``retrain.lr_sensitivity``), per model at ε = LR_EPS (else its
    smallest): where another multiple of the lr healed a target sooner, how much sooner, and that the costs are
    then upper bounds; where none did, that the chosen lr is the fastest measured. ``unit_of(rows)`` gives a
    model's cost unit. '' without the check."""
    if table is None or not len(table):
        return ""
    faster, fastest = [], []
    for model, rows in table.groupby("model", sort=True):
        unit = unit_of(rows)
        eps, at, column = _lr_at(rows, unit)
        found = _faster_rows(at, column)
        if not len(found):
            fastest.append(f"`{model}`")
            continue
        by_lr = []
        for multiplier, g in found.groupby("lr_multiplier", sort=False):
            heals = " and ".join(
                f"`{r['target']}` in {num(float(r[column]))} {_unit_after(unit)} instead of "
                f"{_lr_cost(r, f'chosen_{column}', 'chosen_recovered')}"
                for _, r in g.iterrows()
            )
            by_lr.append(f"{_multiplier_words(multiplier)} the lr heals {heals}")
        faster.append(f"on `{model}`'s first network at ε = {_eps_words(eps)}, " + "; ".join(by_lr))
    words = ""
    if faster:
        words += (
            " **The retraining lr moves these costs:** "
            + "; ".join(faster)
            + " (§8), so the costs above are upper bounds on how fast a layer heals."
        )
    if fastest:
        words += f" No other lr measured heals faster on {', '.join(fastest)} (§8)."
    return words


def _lr_sensitivity(doc: Page, v: _View) -> None:
    """The lr-sensitivity check (``retrain.lr_sensitivity``): one sentence per model; nothing when it is off."""
    table = v.tables.get("lr_sensitivity")
    if table is None or not len(table):
        return
    doc.p(
        "How much the retraining lr matters (`retrain.lr_sensitivity`, `answer/lr_sensitivity.parquet`): the first "
        "network of each model healed again at multiples of the chosen lr, the same budget and evaluations."
    )
    doc.ul([lr_sensitivity_sentence(rows, _unit(rows, v.networks)) for _, rows in table.groupby("model", sort=True)])


def _related_work(doc: Page, v: _View) -> None:
    """9. What is already known, beside this grid's numbers."""
    doc.h(2, "9. What is already known")
    doc.p(
        "The published experiments nearest to the question, each finding in short, and this grid's number beside it "
        "(from the answer tables); their findings in full and how each setting differs: docs/experiments.md, "
        "'What is already known'."
    )
    doc.table(["work", "finding", "this grid"], related_work.comparisons(v.tables))


@dataclasses.dataclass
class _View:
    """What every section reads: the answer tables, the three workflow tables and the figures' links, with the
    selections several sections share."""

    tables: dict[str, pd.DataFrame]
    summary: pd.DataFrame
    networks: pd.DataFrame
    plot_links: dict[str, str]

    def __post_init__(self) -> None:
        t = self.tables
        self.surv, self.fit, self.flags = t["survival"], t["fit"], t["networks_flags"]
        self.ref = t["pretrain_reference"]
        self.layers = self.surv[self.surv["kind"] == survival.LAYER] if len(self.surv) else self.surv
        self.degenerate = self.flags[self.flags["degenerate"].astype(bool)] if len(self.flags) else self.flags
        self.settings = _settings(self.surv) if len(self.surv) else []
        # the settings §1 to §5 read as single-layer resets: the cross-attention's policy is the aside's, read in §6
        # where the grid has one
        aside = len(t.get("encoder_decoder", pd.DataFrame()))
        self.layer_settings = [s for s in self.settings if not (aside and s[1] == CROSS_ATTN)]
        ordering = t.get("size_ordering")
        self.ordering = answer_tables.size_ordering(self.networks) if ordering is None else ordering
        # the networks of models with cells: a donor (``heal: false``) is pretrained and listed, never healed, so
        # it is neither a size the answer speaks of nor a model whose intervals resample its networks
        healed = self.networks["model"].isin(set(self.summary["model"]))
        self.healed = self.networks[healed] if healed.any() else self.networks


SECTIONS = [
    _headline,
    _cost_section,
    _refusals,
    _position,
    _sizes,
    _out_of_sample,
    _families,
    _aside,
    _damage_similarity,
    _caveats,
    _lr_sensitivity,
    _related_work,
]


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


def page(
    tables: dict[str, pd.DataFrame], summary: pd.DataFrame, networks: pd.DataFrame, plot_links: dict[str, str]
) -> Page:
    """The whole page: its title and question, then each of ``SECTIONS``."""
    doc = Page()
    doc.h(1, "selfheal: the answer")
    doc.p(
        "*Reset one layer L of a trained N-layer transformer (width D, trained E epochs on S sequences) to random "
        "weights, freeze the rest, retrain: how much data until it is back within ε of its old validation loss?* "
        "Every number below comes from the workflow's tables (`answer/*.parquet`, from `summary.parquet`, "
        "`curves.parquet` and `networks.parquet`)."
    )
    view = _View(tables, summary, networks, plot_links)
    for section in SECTIONS:
        section(doc, view)
    return doc
