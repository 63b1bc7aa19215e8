"""§8, the caveats: the matched controls' drift, the costs against the matched control, the networks left out
or off their plateau.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis import answer_tables, survival
from selfheal.analysis.answer_page.position import _costliest, _costliest_words
from selfheal.analysis.answer_page.units import _times_scratch_span
from selfheal.analysis.answer_page.view import DEGENERATE_WORDS, View, _clusters_sentence, _estimated
from selfheal.analysis.answer_page.words import _eps_words, _median_span, _pick, _unit, _unit_after
from selfheal.analysis.page import Page, compact, num, signed_pct, span

# Published sizes for scale (static reference facts, not results): parameters and pretraining tokens.
REFERENCE_SIZES = [
    ("GPT-2 small", "124 M parameters", "about 10 B tokens"),
    ("BERT-base", "110 M", "about 3.3 B words × 40 epochs"),
    ("Llama 3 8B", "8 B", "about 15 T tokens"),
]

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


def _control_worst(v: View) -> tuple[float, pd.Series]:
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


def _controls_sentence(v: View) -> str:
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


def _drift_onset(v: View, models: set[str]) -> str:
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


def _against_control(v: View, setting: tuple | None, eps: float) -> pd.DataFrame:
    """The single-layer medians at ``eps`` measured against the matched controls (``answer/against_control``), in
    the asker's setting, on the models whose networks the estimates use."""
    table = v.tables.get("against_control", pd.DataFrame())
    if not len(table) or setting is None:
        return table.iloc[:0]
    rows = _pick(table, setting)
    rows = rows[rows["kind"] == survival.LAYER] if "kind" in rows.columns else rows
    return rows[(rows["threshold"] == eps) & rows["model"].isin(set(_estimated(v.networks)["model"]))]


def _against_control_words(
    v: View, setting: tuple | None, eps: float, baseline: pd.DataFrame | None = None, baseline_unit: str = ""
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


def section(doc: Page, v: View) -> None:
    """8. caveats"""
    flags, degenerate, summary, tables = v.flags, v.degenerate, v.summary, v.tables
    doc.h(2, "8. Caveats the data shows")
    items = [s for s in [_clusters_sentence(v.healed)] if s]  # none where no network is healed
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
    flagged = (  # only what was found: a count of none says nothing
        [
            f"{bnc} of {rows_total} (cell, ε) rows are flagged `baseline_not_converged` (their matched control fell "
            "more than ε_min/2 below the baseline: partly further training; kept)"
        ]
        if bnc
        else []
    )
    flagged += (
        [
            f"{moved} of {rows_total}{'' if flagged else ' (cell, ε) rows'} have a matched control that moved more than "
            "ε from the baseline by the cell's crossing"
        ]
        if moved
        else []
    )
    if flagged:
        items.append("; ".join(flagged) + ".")
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
