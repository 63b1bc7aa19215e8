"""The encoder-decoder aside: the headline's swap sentence and §6, every reset of the aside side by side in
× what pretraining from scratch needed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from selfheal.analysis import answer_tables
from selfheal.analysis.answer_page.view import View, _estimated
from selfheal.analysis.answer_page.words import _eps_words, _multiplier_words, _one, _two_digits, _unit_after
from selfheal.analysis.page import Page, num, span
from selfheal.analysis.stats import flag


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
    negated = not (brief and verdict)  # the text says "not back": a later ε follows as "nor within"
    later = rows.iloc[1:]
    reached = later[np.isfinite(later["relative_to_scratch"].astype(float))]
    if len(reached):
        r = reached.iloc[0]
        return text + f", within {_eps_words(float(r['threshold']))} at {num(float(r['relative_to_scratch']))} ×"
    if len(later):  # a brief verdict ("still falling (≈ 4 ×)") has no "not" for a "nor" to follow
        return text + f", {'nor' if negated else 'not even'} within {_eps_words(float(later['threshold'].max()))}"
    return text


def _swap_lr_costs(v: View, model: str, eps: float, scratch: pd.DataFrame) -> list[tuple[str, float, float]]:
    """What the lr check (``retrain.lr_sensitivity_targets``) measured of ``model``'s swaps at ε: (target, lr
    multiple, cost × pretraining from scratch, inf where not back by the budget), by target then the larger multiple
    first; [] where the check has no swap or the from-scratch cost is unknown."""
    table = v.tables.get("lr_sensitivity")
    if table is None or not len(table) or not len(scratch):
        return []
    rows = table[(table["model"] == model) & (table["threshold"] == eps) & table["target"].str.startswith("swap")]
    per = float(scratch["median"].iloc[0])
    column = "fraction_of_pretrain" if scratch["unit"].iloc[0] == "fraction" else "examples"
    out = []
    for _, r in rows.sort_values(["target", "lr_multiplier"], ascending=[True, False]).iterrows():
        cost = float(r[column]) if bool(r["recovered"]) and pd.notna(r[column]) else math.inf
        out.append(
            (r["target"], float(r["lr_multiplier"]), cost / per if math.isfinite(cost) and per > 0 else math.inf)
        )
    return out


def _swap_at_other_lrs(v: View, model: str, eps: float, scratch: pd.DataFrame) -> str:
    """What the lr check measured of a swap of ``model`` at ε (``_swap_lr_costs``): 'The lr check on `t` (its
    trainable swap): at ×3 the retraining lr, back within 1 % at r × from scratch; at ÷3 the retraining lr, not
    back within 1 % by the budget' ('' when the check has no swap)."""
    out = []
    for target, costs in itertools.groupby(_swap_lr_costs(v, model, eps, scratch), key=lambda c: c[0]):
        said = [
            f"at {_multiplier_words(m)} the retraining lr, "
            + (
                f"back within {_eps_words(eps)} at {num(r)} × from scratch"
                if math.isfinite(r)
                else f"not back within {_eps_words(eps)} by the budget"
            )
            for _, m, r in costs
        ]
        out.append(f"The lr check on `{target}` (its trainable swap): " + "; ".join(said))
    return ". ".join(out)


def _swap_lr_short(v: View, model: str, eps: float, aside: pd.DataFrame) -> str:
    """The lr check's swaps in the short answer's words: ', nor at ×3 or ÷3 the lr (its first network)' where none
    is back at another lr, else '; at ×3 the lr, `t` is back at r ×' for the fastest; '' without the check."""
    scratch = aside[(aside["model"] == model) & (aside["item"] == "scratch") & (aside["threshold"] == eps)]
    costs = _swap_lr_costs(v, model, eps, scratch)
    if not costs:
        return ""
    back = [c for c in costs if math.isfinite(c[2])]
    if not back:
        lrs = " or ".join(_multiplier_words(m) for m in dict.fromkeys(m for _, m, _ in costs))
        return f", nor at {lrs} the lr on its first network"
    target, m, r = min(back, key=lambda c: c[2])
    return f"; at {_multiplier_words(m)} the lr, `{target}` on its first network is back at {num(r)} ×"


def _donor_words(v: View, target: str, width: int | None) -> str:
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


def _swap_answer(v: View) -> str:
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
        lead += THAN_SCRATCH[_swap_verdict(at)[0]]
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


def _swap_verdict(at: pd.DataFrame) -> tuple[str, float]:
    """The swap against pretraining the model from scratch, from one model's swaps at the smallest ε: ``faster``
    (the fastest swap is back at under 1 ×), ``not_faster`` (at 1 × or more), ``slower`` (none back by a budget past
    1 ×), ``cannot_tell`` (none back, and a budget ends before 1 ×) or '' (no swap), with the fastest multiple or the
    shortest budget's."""
    if not len(at):
        return "", math.nan
    rel = at["relative_to_scratch"].astype(float)
    if np.isfinite(rel).any():
        fastest = float(rel[np.isfinite(rel)].min())
        return ("faster" if fastest < 1 else "not_faster"), fastest
    budget = at["budget_relative_to_scratch"].astype(float)
    known = budget[np.isfinite(budget)]
    if not len(known):
        return "", math.nan
    return ("slower" if float(known.min()) > 1 else "cannot_tell"), float(known.min())


THAN_SCRATCH = {  # the swap sentence's words for each verdict of ``_swap_verdict``
    "faster": ": faster than pretraining the model from scratch",
    "not_faster": ": no swap is faster than pretraining the model from scratch",
    "slower": ", so every swap is slower than pretraining the model from scratch",
    "cannot_tell": " (a budget shorter than pretraining from scratch: it cannot tell slower from never)",
    "": "",
}


def _swap_short(v: View) -> str:
    """The swap in one clause per encoder-decoder model, for the short answer: 'the encoder swap in m is slower than
    pretraining it from scratch (no swap back by 2.5 × that cost), as is resetting every layer with the same
    retraining' (the reset-all control says how much of that is the retraining's own); '' where the grid swaps no
    encoder."""
    aside = v.tables.get("encoder_decoder")
    if aside is None or not len(aside):
        return ""
    swaps = aside[aside["item"].isin(answer_tables.SWAP_ITEMS) & (aside["init"] == "fresh")]
    out = []
    for model, g in swaps.groupby("model", sort=True):
        eps = float(g["threshold"].min())
        verdict, r = _swap_verdict(g[g["threshold"] == eps])
        other_lr = _swap_lr_short(v, model, eps, aside)  # the lr check's swaps: is the verdict the lr's?
        words = {
            "faster": f"faster than pretraining it from scratch (its fastest swap: {num(r)} × that cost{other_lr})",
            "not_faster": f"no faster than pretraining it from scratch (its fastest swap: {num(r)} × that cost{other_lr})",
            "slower": f"slower than pretraining it from scratch (no swap back by {num(r)} × that cost{other_lr})",
            "cannot_tell": "not determined (its budget ends before the cost of pretraining it from scratch)",
        }.get(verdict)
        if not words:
            continue
        every = aside[(aside["model"] == model) & (aside["item"] == "reset_all") & (aside["threshold"] == eps)]
        same, r_all = _swap_verdict(every)  # the same retraining from every layer reset: how much is the retraining's
        if same == "slower" and verdict == "slower":
            words += ", as is resetting every layer with the same retraining"
        elif same in ("faster", "not_faster"):
            words += f"; resetting every layer with the same retraining takes {num(r_all)} ×"
        out.append(f"the encoder swap in {model} is {words}")
    return "; ".join(out)


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


def section(doc: Page, v: View) -> None:
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
        "`> r ×`: beyond the budget, with `(≈ r ×)` where the still-falling cells' last rate of fall would reach ε "
        "(optimistic), else what the cells did. Last row: pretraining from scratch in S × E, [least, most] at the "
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


def _aside_order(v: View, item: str, target: str) -> tuple:
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
        said = dict.fromkeys(_cell_verdict(r) for _, r in beyond.iterrows())
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
        + (f" ({_cell_verdict(r)})" if int(r["n_censored"]) and _cell_verdict(r) and not scratch else "")
        + (f", {undamaged} of {int(r['n_cells'])} not damaged beyond ε" if undamaged else "")
        + against
    )


def _projection(r: pd.Series, short: bool = False) -> str:
    """', ≈ r × at its last rate of fall' (short: ' (≈ r ×)', ``_projected``'s words) for an aside row beyond the
    budget with a cell still falling, else ''."""
    words = _projected(r)
    if not words:
        return ""
    if short:
        return f" ({words})"
    return ", never at its last rate of fall" if words.startswith("never") else f", {words} at its last rate of fall"


def _projected(r: pd.Series) -> str:
    """Where an aside row's still-falling cells would reach ε at their last rate of fall
    (``answer_tables.projected_examples``, over the from-scratch cost: a guess, and an optimistic one): '≈ r ×',
    'never, at its last rate', or '' where none is still falling or there is no projection."""
    rel = float(r.get("projected_relative", math.nan))
    if not int(r.get("n_still_falling", 0)) or math.isnan(rel):
        return ""
    return "never, at its last rate" if math.isinf(rel) else f"≈ {_two_digits(rel)} ×"


def _cell_verdict(r: pd.Series) -> str:
    """What the censored cells of an aside row did, as a table cell says it: '≈ r ×' where they were all still
    falling and have a projection (``_projected``: that says they were), else ``_verdicts`` with the projection."""
    verdict, projected = _verdicts(r), _projected(r)
    if verdict == "still falling" and projected:
        return projected
    return verdict + (f"; {projected}" if projected else "")


def _verdicts(r: pd.Series) -> str:
    """What the censored cells of an aside row did: 'stalled' (every curve had stopped falling: it refuses),
    'still falling' (the budget ended first: not answered), or the counts of each."""
    stalled, falling = int(r.get("n_stalled", 0)), int(r.get("n_still_falling", 0))
    if stalled and not falling:
        return "stalled"
    if falling and not stalled:
        return "still falling"
    return f"{stalled} stalled, {falling} still falling" if stalled or falling else ""
