"""The answer page (``results/answer.md`` and ``answer.html``), written from the answer tables only
(``answer_tables.compute``), in the asker's order: the headline; cost per layer (against the reset-all control and
pretraining's own curve); refusals; the position of L; N and D (every network against its n-gram references and
the size ordering of the baselines); families; the encoder-decoder aside; caveats; related work. ``page`` calls one
function per section, each reading the tables through ``_View``.

Costs are stated in three units: the fraction of S x E; examples and tokens; and relative to the from-scratch run,
the survival median in examples over the mean (across the model's usable networks pretrained here) of the examples
the network's own pretraining needed to first reach the same loss.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from selfheal.analysis import answer_tables, out_of_sample, related_work, survival
from selfheal.analysis.page import Page, compact, num, pct, signed_pct, span

def _cost(row: pd.Series, unit: str) -> str:
    """'0.038 [0.013, 0.070]', with '> budget' for a median (or bound) beyond the budget."""
    value, lo, hi = row[f"median_{unit}"], row[f"median_{unit}_lo"], row[f"median_{unit}_hi"]
    budget = row[f"budget_{unit}"] if unit == "fraction" else row["budget_examples"]

    def one(v):
        return f"> {num(budget)} (budget)" if math.isinf(v) else num(v)

    return f"{one(value)} [{one(lo)}, {one(hi)}]"


def _unit(table: pd.DataFrame) -> str:
    return "fraction" if len(table) and table["median_fraction"].notna().all() else "examples"


def _unit_words(unit: str) -> str:
    return "fraction of S × E" if unit == "fraction" else "examples (S × E unknown for downloaded models)"



# Words for networks.parquet's degenerate_reason (analysis/tables.py: UNIGRAM_MARGIN, BIGRAM_MARGIN).
DEGENERATE_WORDS = {"unigram": "its baseline is not clearly below the unigram loss",
                    "bigram": "it does not beat the interpolated bigram by 0.1 nats",
                    "reset_all_harmless": "resetting every layer did less damage than ε_min"}
HEADLINE = ("<!-- answer:headline -->", "<!-- /answer:headline -->")
# Published sizes for scale (static reference facts, not results): parameters and pretraining tokens.
REFERENCE_SIZES = [("GPT-2 small (2019)", "124 M parameters", "about 10 B tokens (WebText, several epochs)"),
                   ("BERT-base (2018)", "110 M parameters", "about 3.3 B words, 40 epochs"),
                   ("Llama 3 8B (2024)", "8 B parameters", "about 15 T tokens")]


def _settings(survival_table: pd.DataFrame) -> list[tuple]:
    """(regime, policy, init) of the single-layer groups, the asker's setting (frozen, full, fresh) first."""
    layers = survival_table[survival_table["kind"] == survival.LAYER]
    found = sorted(set(zip(layers["regime"], layers["policy"], layers["init"])))
    return sorted(found, key=lambda s: s != ("frozen", "full", "fresh"))


def _setting_words(setting: tuple) -> str:
    return f"regime `{setting[0]}`, policy `{setting[1]}`, init `{setting[2]}`"


def _pick(table: pd.DataFrame, setting: tuple) -> pd.DataFrame:
    return table[(table["regime"] == setting[0]) & (table["policy"] == setting[1]) & (table["init"] == setting[2])]


def _verdict(row: pd.Series) -> str:
    if not row["determined"]:
        return row["note"]
    if row["n_resamples"] == 0:
        return f"no verdict: {row['note']}"
    lo, hi = row["coef_lo"], row["coef_hi"]
    if lo > 0:
        return "raises the cost (interval above 0)"
    if hi < 0:
        return "lowers the cost (interval below 0)"
    return "no clear effect at this grid's resolution (the interval includes 0; not evidence of no effect)"


def _clusters_sentence(networks: pd.DataFrame) -> str:
    per_model = networks.groupby("model")["pretrain_seed"].nunique()
    least = int(per_model.min()) if len(per_model) else 0
    if least <= 1:
        return ("Some model has a single pretrained network: its intervals resample retrain seeds only and do "
                "**not** cover the variation between independently pretrained networks.")
    if least < 5:
        return (f"Intervals resample pretrained networks (clusters: {least} to {int(per_model.max())} per model); "
                f"with so few clusters they are wide and rough: read directions, not digits.")
    return f"Intervals resample pretrained networks ({least} to {int(per_model.max())} per model)."



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
    return networks[~networks["degenerate"].fillna(False).astype(bool)]


def _scratch_reference(ref: pd.DataFrame, networks: pd.DataFrame, model: str, eps: float) -> dict:
    """The from-scratch reference of a model at one ε: the mean over its usable networks pretrained here of the
    examples their own pretraining curve needed to first reach baseline x (1 + ε) (interpolated,
    ``pretrain_reference.examples``, the same as summary.parquet's scratch_examples), how many of them reached it,
    and whether any of those crossings is coarse."""
    nets = _usable(networks)
    nets = nets[nets["model"] == model]
    if "source" in nets.columns:
        nets = nets[nets["source"] == "scratch"]
    out = {"examples": math.nan, "reached": 0, "networks": len(nets), "coarse": False}
    if not len(nets) or not len(ref) or "examples" not in ref.columns:
        return out
    rows = ref[(ref["model"] == model) & (ref["threshold"] == eps)
               & ref["pretrain_seed"].isin(set(nets["pretrain_seed"]))]
    reached = rows[rows["examples"].notna()]
    out["reached"] = len(reached)
    if len(reached):
        out["examples"] = float(reached["examples"].astype(float).mean())
        out["coarse"] = bool(reached["coarse"].astype(bool).any()) if "coarse" in reached.columns else False
    return out


def _three_units(at: pd.DataFrame, unit: str, model: str, eps: float, summary: pd.DataFrame,
                 networks: pd.DataFrame, ref: pd.DataFrame) -> dict:
    """The per-layer survival medians of one model at one ε (``at``) in the three units: fraction of S x E,
    examples (and tokens), and relative to the from-scratch run (the median in examples over the mean scratch
    reference of ``_scratch_reference``). Values are spans over the layers, '' where unknown."""
    examples = at["median_examples"].astype(float)
    per_example = _tokens_per_example(summary, networks, model)
    scratch = _scratch_reference(ref, networks, model, eps)
    relative = examples / scratch["examples"] if scratch["examples"] > 0 else examples * math.nan
    return {"fraction": span(at["median_fraction"].astype(float)) if unit == "fraction" else "",
            "examples": span(examples), "tokens": span(examples * per_example, compact),
            "relative": span(relative), "scratch": scratch}


def _budget_words(rows: pd.DataFrame, unit: str) -> str:
    """The budget of some cells: '0.2 of S × E = 6,184 examples', or 'N examples' when S × E is unknown; for models
    of different S × E the range of examples, '0.2 of S × E = 6,184 to 12,368 examples'."""
    low, high = (float(pd.to_numeric(rows["budget_examples"]).agg(f)) for f in ("min", "max"))
    examples = f"{num(low)} examples" if low == high else f"{num(low)} to {num(high)} examples"
    fractions = pd.to_numeric(rows["budget_fraction"], errors="coerce") if "budget_fraction" in rows else None
    if unit == "fraction" and fractions is not None and fractions.notna().all() and fractions.round(3).nunique() == 1:
        return f"{num(float(fractions.iloc[0]))} of S × E = {examples}"  # budgets round to whole examples
    return examples


def _network_line(r: pd.Series) -> str:
    """One network: its loss against the n-gram references, S, E and its flags."""
    def loss(column):
        v = r.get(column)
        return "n/a" if v is None or pd.isna(v) else f"{float(v):.3f}"

    bigram = "none (masked LM)" if pd.isna(r.get("bigram_loss")) else loss("bigram_loss")
    weight = r.get("bigram_weight")
    if weight is not None and not pd.isna(weight):
        bigram += f" (λ = {num(float(weight))})"
    margin = r.get("bigram_margin")
    if (margin is None or pd.isna(margin)) and not pd.isna(r.get("bigram_loss")):
        margin = float(r["bigram_loss"]) - float(r["baseline_loss"])
    margin_text = "n/a" if margin is None or pd.isna(margin) else f"{float(margin):+.3f}"

    def count(column):
        v = r.get(column)
        return "n/a" if v is None or pd.isna(v) else num(float(v))

    reason = r.get("degenerate_reason")
    flags = []
    if bool(r.get("degenerate", False)):
        flags.append("**degenerate**" + (f" ({reason})" if isinstance(reason, str) and reason else ""))
    if bool(r.get("off_plateau", False)):
        flags.append("off its plateau")
    return (f"{r['model']} seed {r['pretrain_seed']}: loss {loss('baseline_loss')}, unigram {loss('unigram_loss')}, "
            f"bigram {bigram}, margin over the bigram {margin_text} nats; S = {count('train_sequences')}, "
            f"E = {count('epochs')} ({count('pretrain_examples')} examples, "
            f"{compact(r.get('pretrain_tokens'))} tokens)" + (f"; {', '.join(flags)}" if flags else ""))


def _ordering_sentence(order: pd.DataFrame) -> str:
    """Each pair of size_ordering with its numbers."""
    if not len(order):
        return ("Size ordering: no two models of the same family differ in exactly one of N and D, so the grid "
                "cannot show how the baseline moves with N or D.")
    items = []
    for _, r in order.iterrows():
        letter = "D" if r["varied"] == "d_model" else "N"
        if letter == "D":
            verdict = ("holds: it falls by more than the seed spread" if r["holds"]
                       else "does not hold: it does not fall by more than the seed spread")
        else:
            verdict = ("holds: it does not rise by more than the seed spread" if r["holds"]
                       else "does not hold: it rises by more than the seed spread")
        seeds = ("one pretraining seed: no spread to compare with" if r["n_seeds"] < 2
                 else f"spread {r['seed_spread']:.3f} over {r['n_seeds']} seeds")
        items.append(f"{r['model_a']} → {r['model_b']} ({letter} {r['value_a']} → {r['value_b']}): "
                     f"{r['mean_loss_a']:.3f} → {r['mean_loss_b']:.3f}, difference {r['difference']:+.3f} ({seeds}): "
                     f"{verdict}")
    return ("Size ordering of the baselines (mean over pretraining seeds; the spread is the larger max − min across "
            "seeds of the two models): " + "; ".join(items) + ".")


def _ordering_headline(order: pd.DataFrame) -> str | None:
    if not len(order):
        return None
    parts = []
    for varied, words in (("d_model", "at fixed N the baseline falls with D"),
                          ("n_layer", "at fixed D it does not rise with N")):
        rows = order[order["varied"] == varied]
        if len(rows):
            parts.append(f"{words} in {int(rows['holds'].sum())} of {len(rows)} pairs")
    return "Size ordering: " + "; ".join(parts) + ", each by more than the spread between pretraining seeds (§4)."



HEADLINE_TERMS = ["rel_depth", "first_layer", "log_n_layer", "log_d_model", "log_train_sequences", "log_epochs"]


def _reasons(networks: pd.DataFrame) -> str:
    """The words for the degenerate_reason codes of some networks, each once."""
    codes = sorted({c for r in networks.get("degenerate_reason", pd.Series(dtype=str)).dropna() for c in
                    str(r).split(",") if c})
    return ", ".join(DEGENERATE_WORDS.get(c, c) for c in codes) or "flagged"


def _headline(doc: Page, v: _View) -> None:
    """The headline (copied into the README): the answer across the grid at the smallest and largest ε, the fit's
    verdicts on position, N, D, S and E, the out-of-sample check, the encoder-decoder aside, the gates; then one
    row per model."""
    layers, degenerate, settings, networks = v.layers, v.degenerate, v.settings, v.networks
    headline = []
    if not len(layers):
        headline.append("This grid has no single-layer cells on a usable network, so it cannot answer the question "
                        "(see the caveats).")
    setting = settings[0] if settings else None
    rows = _pick(layers, setting) if setting else layers
    unit = _unit(rows)
    eps_pair = sorted({rows["threshold"].min(), rows["threshold"].max()}) if len(rows) else []
    for eps in eps_pair:
        headline.append(_grid_line(v, rows[rows["threshold"] == eps], setting, unit, eps))
    every_eps = _pick(v.fit, setting) if setting and len(v.fit) else v.fit.iloc[:0]
    fit = every_eps[every_eps["threshold"] == every_eps["threshold"].min()] if len(every_eps) else every_eps
    for term in HEADLINE_TERMS:
        for _, r in fit[fit["term"] == term].iterrows():
            if not r["determined"] and str(r["note"]).startswith("not determined by this grid: it does not vary"):
                continue  # the grid does not vary it: said once under "not varied" below
            coef = (f"{num(r['coef'])} [{num(r['coef_lo'])}, {num(r['coef_hi'])}]" if r["determined"] else "")
            line = f"Fit at ε = {r['threshold']:g}, {r['label']}: {coef + ' — ' if coef else ''}{_verdict(r)}"
            later = every_eps[(every_eps["term"] == term) & every_eps["determined"].astype(bool)]
            if not r["determined"] and len(later):  # where it is determined: the smallest such ε
                d = later.sort_values("threshold").iloc[0]
                line += (f"; at ε = {d['threshold']:g}, the smallest ε where it is determined: {num(d['coef'])} "
                         f"[{num(d['coef_lo'])}, {num(d['coef_hi'])}] — {_verdict(d)}")
            headline.append(line + ".")
    fixed = [r["label"] for _, r in fit.iterrows() if r["term"] in HEADLINE_TERMS and not r["determined"]
             and str(r["note"]).startswith("not determined by this grid: it does not vary")]
    if fixed:
        headline.append(f"Not varied by this grid, so not determined: {', '.join(fixed)}.")
    headline.extend(_out_of_sample_headline(v))
    headline.extend(_aside_headline(v))
    ordering_line = _ordering_headline(v.ordering)
    if ordering_line:
        headline.append(ordering_line)
    if len(degenerate):
        named = "; ".join(f"{m} ({len(g)} of its networks: {_reasons(g)})"
                          for m, g in degenerate.groupby("model", sort=True))
        headline.append(f"Flagged degenerate and left out of every verdict: {named}.")
    headline.append(_clusters_sentence(networks))
    doc.h(2, "Headline")
    doc.raw(HEADLINE[0])
    doc.ul(headline)
    if len(rows):
        doc.p(f"Per model ({_setting_words(setting)}): the single-layer survival medians (range over the layers; "
              f"'>' beyond the budget), the reset-all control, and the median over layers relative to what "
              f"pretraining from scratch needed to first reach the same loss.")
        doc.table(["model", "N", "D", "S × E"] + [f"one layer, ε = {e:g}" for e in eps_pair]
                  + [f"every layer, ε = {eps_pair[-1]:g}", f"one layer ÷ from scratch, ε = {eps_pair[-1]:g}"],
                  [_model_row(v, g, setting, unit, eps_pair) for _, g in
                   sorted(rows.groupby("model"), key=lambda kv: (str(kv[1]["family_kind"].iloc[0]),
                                                                 int(kv[1]["n_layer"].iloc[0]),
                                                                 int(kv[1]["d_model"].iloc[0]), kv[0]))])
    doc.raw(HEADLINE[1])


def _layer_span(at: pd.DataFrame, unit: str) -> str:
    med = at[f"median_{unit}"].astype(float)
    finite = med[np.isfinite(med)]
    budget = at[f"budget_{unit}" if unit == "fraction" else "budget_examples"].astype(float).max()
    if not len(finite):
        return f"> {num(budget)} (all)"
    beyond = int((~np.isfinite(med)).sum())
    return span(finite) + (f"; {beyond} of {len(med)} > {num(budget)}" if beyond else "")


def _model_row(v: _View, g: pd.DataFrame, setting: tuple, unit: str, eps_pair: list) -> list[str]:
    model = g["model"].iloc[0]
    net = v.networks[v.networks["model"] == model]
    sxe = net["pretrain_examples"].iloc[0] if len(net) and "pretrain_examples" in net else math.nan
    s = net["train_sequences"].iloc[0] if len(net) and "train_sequences" in net else math.nan
    e = net["epochs"].iloc[0] if len(net) and "epochs" in net else math.nan
    sxe_words = (f"{num(float(s))} × {num(float(e))}" if not pd.isna(s) and not pd.isna(e) else
                 num(float(sxe)) if not pd.isna(sxe) else "n/a")
    cells = [f"{model} ({g['family_kind'].iloc[0]})", str(int(g["n_layer"].iloc[0])), str(int(g["d_model"].iloc[0])),
             sxe_words]
    cells += [_layer_span(g[g["threshold"] == eps], unit) for eps in eps_pair]
    eps = eps_pair[-1]
    allc = v.surv[(v.surv["model"] == model) & (v.surv["target"] == "all") & (v.surv["policy"] == "full")
                  & (v.surv["threshold"] == eps) & (v.surv["regime"] == setting[0]) & (v.surv["init"] == setting[2])]
    cells.append(_cost(allc.iloc[0], unit).split(" [")[0] if len(allc) else "n/a")
    units = _three_units(g[g["threshold"] == eps], unit, model, eps, v.summary, v.networks, v.ref)
    cells.append(units["relative"] or "n/a")
    return cells


def _grid_line(v: _View, at: pd.DataFrame, setting: tuple, unit: str, eps: float) -> str:
    """One ε across the grid: the per-layer medians, how many beyond the budget, and the reset-all control."""
    med = at[f"median_{unit}"].astype(float)
    finite = med[np.isfinite(med)]
    models = at["model"].nunique()
    budget = _budget_words(at, unit)
    allc = v.surv[(v.surv["target"] == "all") & (v.surv["policy"] == "full") & (v.surv["threshold"] == eps)
                  & (v.surv["regime"] == setting[0]) & (v.surv["init"] == setting[2])
                  & v.surv["model"].isin(set(at["model"]))]
    within = int(np.isfinite(allc[f"median_{unit}"].astype(float)).sum())
    refused = int((at["n_censored"] + at["n_diverged"]).sum())
    cost = (f"a median {span(finite)} {'of S × E' if unit == 'fraction' else 'examples'} depending on the layer "
            f"and model" if len(finite) else "more than the budget for every layer")
    beyond = int((~np.isfinite(med)).sum())
    return (f"**ε = {eps:g}** (back within {100 * eps:g} % of the old validation loss), {models} model(s): one reset "
            f"layer needs {cost}; {beyond} of {len(med)} (model, layer) medians lie beyond the budget ({budget}), "
            f"{refused} of {int(at['n_cells'].sum())} cells did not get there; resetting every layer got there "
            f"within the budget in {within} of {len(allc)} models.")


def _out_of_sample_headline(v: _View) -> list[str]:
    table = v.tables.get("out_of_sample")
    if table is None or not len(table):
        return []
    verdicts = out_of_sample.verdicts(table)
    parts = []
    for name, g in verdicts.groupby("left_out", sort=False):
        words = "; ".join(f"{verdict} at ε = {', '.join(f'{e:g}' for e in h['threshold'])}"
                          + (f" ({int(h['held'].sum())} of {int(h['layers'].sum())} tested layer medians)"
                             if verdict in ("held", "did not hold") else "")
                          for verdict, h in g.groupby("verdict", sort=False))
        parts.append(f"{name} ({g['models'].iloc[0]}): {words}")
    return ["Out of sample (the fit without a part of the size grid predicts that part's per-layer medians; held = "
            "intervals overlap): " + "; ".join(parts) + "."]


def _aside_headline(v: _View) -> list[str]:
    aside = v.tables.get("encoder_decoder")
    if aside is None or not len(aside):
        return []
    out = []
    for model, g in aside.groupby("model", sort=True):
        eps = g["threshold"].max()
        at = g[g["threshold"] == eps]
        words = []
        for item in ("encoder_layer", "decoder_layer", "cross_attention", "all_cross_attention", "encoder_swap",
                     "reset_all", "scratch"):
            rows = at[at["item"] == item]
            if not len(rows):
                continue
            med = rows["median"].astype(float)
            finite = med[np.isfinite(med)]
            value = span(finite) if len(finite) == len(med) else (
                f"{span(finite)}, {len(med) - len(finite)} beyond the budget" if len(finite) else "beyond the budget")
            words.append(f"{rows['what'].iloc[0]} {value}")
        out.append(f"Encoder-decoder {model}, ε = {eps:g} (median {at['unit'].iloc[0]}): " + "; ".join(words) + ".")
    return out


def _cost_section(doc: Page, v: _View) -> None:
    """1. cost"""
    surv, ref, settings, summary, networks, plot_links = v.surv, v.ref, v.settings, v.summary, v.networks, v.plot_links
    doc.h(2, "1. How much of S × E does a single reset layer need to get back within ε?")
    doc.p(f"Median cost to recover with its 95 % interval, from the Turnbull estimate of the interval-censored "
          f"crossings (a crossing between two evaluations counts at the evaluation that saw it; a cell that never "
          f"got there is censored at the budget, never averaged as a cost). Plots: [cost against depth]"
          f"({plot_links['answer_cost_depth']}), [share recovered against examples]"
          f"({plot_links['answer_recovered']}), [recovery curves, log x]({plot_links['answer_curves']}).")
    doc.p("Three units, because E is a choice of the grid: the fraction of S × E; examples (sequences) and tokens; "
          "and relative to the from-scratch run, the survival median in examples divided by the mean, over the "
          "model's usable networks pretrained here, of the examples their own pretraining needed to first reach the "
          "same loss, baseline × (1 + ε) (`scratch_examples` in summary.parquet, `examples` in "
          "answer/pretrain_reference.parquet: linearly interpolated between the two evaluations around the crossing; "
          "rough where those are more than 10 % of it apart).")
    if not settings:
        doc.p("No single-layer cells to estimate.")
    for setting in settings:
        rows = _pick(surv, setting)
        rows = rows[rows["kind"].isin([survival.LAYER]) | (rows["target"] == "all")]
        unit = _unit(rows)
        eps_list = sorted(rows["threshold"].unique())
        doc.h(3, f"{_setting_words(setting)} ({_unit_words(unit)})")
        table_rows = []
        for (model, target), g in rows.groupby(["model", "target"], sort=False):
            g = g.set_index("threshold")
            label = "every layer reset (control)" if target == "all" else f"{target} ({g['position'].iloc[0]})"
            table_rows.append([f"{model} ({g['family_kind'].iloc[0]})", label]
                              + [_cost(g.loc[e], unit) if e in g.index else "" for e in eps_list])
        for model, g in ref.groupby("model", sort=True) if len(ref) else []:
            col = "fraction" if unit == "fraction" else "examples"
            cells = []
            for e in eps_list:
                at_e = g[g["threshold"] == e]
                v = at_e[col].astype(float)
                rough = " (rough)" if at_e["coarse"].astype(bool).any() else ""
                cells.append("never" if v.isna().all() else f"{num(v.median())}{rough} (median of {len(v)} "
                                                            f"network{'s' if len(v) > 1 else ''})")
            if model in set(rows["model"]):
                table_rows.append([model, "pretraining from scratch reached it at"] + cells)
        table_rows.sort(key=lambda r: r[0])
        doc.table(["model", "reset"] + [f"ε = {e:g}" for e in eps_list], table_rows)
        unit_rows = []
        layer_rows = rows[rows["kind"] == survival.LAYER]
        for (model, eps), at in layer_rows.groupby(["model", "threshold"], sort=True):
            u = _three_units(at, unit, model, eps, summary, networks, ref)
            scratch = u["scratch"]
            unit_rows.append([model, f"{eps:g}", u["fraction"] or "n/a", u["examples"] or "none reached",
                              u["tokens"] or "n/a", u["relative"] or "n/a",
                              (f"{num(scratch['examples'])}{' (rough)' if scratch['coarse'] else ''} "
                               f"({scratch['reached']} of {scratch['networks']})") if scratch["networks"] else "n/a"])
        doc.p("The single-layer medians of this setting (range over the layers) in the three units; the last column "
              "is the from-scratch reference: the mean examples to that loss over the networks whose pretraining "
              "reached it (k of n: of the model's usable networks pretrained here).")
        doc.table(["model", "ε", "fraction of S × E", "examples", "tokens", "× pretraining from scratch",
                   "pretraining from scratch: examples to that loss"], unit_rows)


def _refusals(doc: Page, v: _View) -> None:
    """2. refusals"""
    layers, settings = v.layers, v.settings
    doc.h(2, "2. Does it ever refuse to train?")
    items = []
    for setting in settings:
        rows = _pick(layers, setting)
        for eps, g in rows.groupby("threshold", sort=True):
            n, cen, div = int(g["n_cells"].sum()), int(g["n_censored"].sum()), int(g["n_diverged"].sum())
            gap = g["stall_gap_median"].dropna()
            stall = (f"; where it stalled, the loss ended a median {pct(gap.median())} above the baseline "
                     f"(ε = {pct(eps)})" if len(gap) else "")
            items.append(f"{_setting_words(setting)}, ε = {eps:g}: {cen} of {n} single-layer cells censored "
                         f"({pct(cen / n)}), {div} diverged ({pct(div / n)}){stall}.")
    verdict = ("No single-layer cell refused: every one got within every ε within the budget."
               if len(layers) and int((layers["n_censored"] + layers["n_diverged"]).sum()) == 0 else
               "Some cells did not recover within the budget (censored, or the loss diverged):" if len(layers)
               else "No single-layer cells to judge.")
    doc.p(verdict)
    doc.ul(items)


def _position(doc: Page, v: _View) -> None:
    """3. position"""
    fit, settings, plot_links = v.fit, v.settings, v.plot_links
    doc.h(2, "3. Does the position of L matter?")
    doc.p(f"From the censored log-normal fit of log cost (all single-layer cells of a setting and ε; "
          f"[effects plot]({plot_links['answer_effects']})). A coefficient b multiplies the cost by e^b: for relative "
          f"depth, going from the first to the last layer along the trend; for first/last layer, on top of it.")
    _fit_table(doc, fit, settings, ["rel_depth", "first_layer", "last_layer"])


def _sizes(doc: Page, v: _View) -> None:
    """4. N and D"""
    fit, settings, networks, ordering = v.fit, v.settings, v.networks, v.ordering
    doc.h(2, "4. Do N and D matter?")
    doc.p("Cost grows as N^b and D^b for the coefficients of log N and log D (in units of S × E when known; the "
          "fit is censoring-aware and its intervals resample pretrained networks).")
    _fit_table(doc, fit, settings, ["log_n_layer", "log_d_model"])
    n_values = sorted(networks["n_layer"].unique()) if len(networks) else []
    d_values = sorted(networks["d_model"].unique()) if len(networks) else []
    doc.p(f"The grid's N: {', '.join(str(int(v)) for v in n_values) or 'none'}; D: "
          f"{', '.join(str(int(v)) for v in d_values) or 'none'}.")
    doc.h(3, "The networks")
    doc.p("Every network's validation loss against the n-gram tables of the whole train split (nats per token; the "
          "bigram is interpolated with the unigram, its weight λ tuned on the validation set: the best such table). "
          "A network must beat the bigram by at least 0.1 nats (the margin) not to be flagged degenerate.")
    doc.ul([_network_line(r) for _, r in networks.sort_values(["model", "pretrain_seed"]).iterrows()]
           if len(networks) else [])
    doc.p(_ordering_sentence(ordering))


def _out_of_sample(doc: Page, v: _View) -> None:
    """4b. Does the trend predict a size it was not fitted on?"""
    table = v.tables.get("out_of_sample", pd.DataFrame(columns=out_of_sample.COLUMNS))
    doc.h(3, "Does the trend predict a size it was not fitted on?")
    if not len(table):
        doc.p("Not tested: the size grid needs more than two levels of N or D, or more than two sizes, to leave one "
              "out and still fit a trend (`answer/out_of_sample.parquet` is empty).")
        return
    doc.p("The censoring-aware fit of §3–4, refitted on the size grid (the most common family and (S, E), the asker's "
          "setting) without one part of it, predicts the per-layer median cost of the part left out: the fit's "
          "median with its interval over the same refits on resampled networks, against the measured survival "
          "median with its interval. A layer **held** when the two intervals overlap (a median beyond the budget "
          "lies between the budget and ∞). A layer whose measured median is 0 (within ε before any training) is not "
          "tested: the fit models the cost of cells that needed training. A part held when every one of its tested "
          "layers did (`answer/out_of_sample.parquet`; "
          f"[plot]({v.plot_links['answer_out_of_sample']})).")
    verdicts = out_of_sample.verdicts(table)
    doc.table(["left out", "models", "ε", "layers held", "verdict", "fitted on"],
              [[r["left_out"], r["models"], f"{r['threshold']:g}", f"{r['held']} of {r['layers']}",
                f"**{r['verdict']}**" + (f" ({r['note']})" if r["note"] else ""),
                _fitted_on(table, r["left_out"], r["threshold"])] for _, r in verdicts.iterrows()])
    largest = table[table["left_out"] == table["left_out"].iloc[0]]
    doc.p(f"Per layer, {largest['left_out'].iloc[0]} left out ({', '.join(largest['model'].unique())}), in the "
          f"fit's unit ({_unit_words(largest['unit'].iloc[0])}):")
    doc.table(["model", "layer", "ε", "predicted [95 %]", "measured [95 %]", "held"],
              [[r["model"], f"{r['target']}", f"{r['threshold']:g}",
                f"{num(r['predicted'])} [{num(r['predicted_lo'])}, {num(r['predicted_hi'])}]",
                f"{num(r['measured'])} [{num(r['measured_lo'])}, {num(r['measured_hi'])}]"
                + (" (beyond the budget)" if r["measured_censored"] else ""),
                "n/a" if pd.isna(r["held"]) else "yes" if r["held"] else "**no**"]
               for _, r in largest.sort_values(["threshold", "model", "depth"]).iterrows()])


def _fitted_on(table: pd.DataFrame, left_out: str, eps: float) -> str:
    r = table[(table["left_out"] == left_out) & (table["threshold"] == eps)].iloc[0]
    return f"{r['fit_models']} models, {r['fit_cells']} cells; terms: {r['fit_terms'] or 'none'}"


def _families(doc: Page, v: _View) -> None:
    """5. families"""
    fit, layers, settings, networks = v.fit, v.layers, v.settings, v.networks
    doc.h(2, "5. Encoder-only, decoder-only, encoder-decoder")
    present = set(networks["family_kind"]) if len(networks) else set()
    usable = _usable(networks)
    kinds = sorted(set(usable["family_kind"])) if len(usable) else []
    flagged = sorted(present - set(kinds))
    missing = [k for k in ("decoder-only", "encoder-only", "encoder-decoder") if k not in present]
    doc.p(f"Families in this grid: {', '.join(kinds) or 'none'}."
          + (f" Not determined by this grid (every network of the family flagged degenerate): {', '.join(flagged)}."
             if flagged else "")
          + (f" Not determined by this grid (no such model): {', '.join(missing)}." if missing else ""))
    family_rows = fit[fit["term"].str.startswith("family")] if len(fit) else fit
    if len(family_rows):
        _fit_table(doc, fit, settings, sorted(family_rows["term"].unique()))
    for setting in settings[:1]:
        rows = _pick(layers, setting)
        unit = _unit(rows)
        items = []
        for (kind, eps), g in rows.groupby(["family_kind", "threshold"], sort=True):
            med = g[f"median_{unit}"]
            items.append(f"{kind}, ε = {eps:g}: per-layer medians {num(med.min())} to {num(med.max())} "
                         f"({len(g)} layer groups)")
        doc.ul(items)


def _aside(doc: Page, v: _View) -> None:
    """6. The encoder-decoder aside: each part of it reset, beside every layer and pretraining from scratch."""
    aside = v.tables.get("encoder_decoder", pd.DataFrame(columns=answer_tables.ENCODER_DECODER_COLUMNS))
    doc.h(2, "6. The encoder-decoder aside: one encoder or decoder layer, cross-attention, the encoder swap")
    if not len(aside):
        doc.p("This grid has no encoder-decoder model, so the cost of resetting an encoder or decoder layer, the "
              "cross-attention or the whole encoder is not determined by it.")
        return
    doc.p("Regime `frozen`, init `fresh`: the median cost [95 % interval] of each reset, in the unit of the row "
          "(fraction of S × E when known); '> budget' is a median beyond the retraining budget (censored). The last "
          "row is pretraining from scratch to the same loss: the median over the model's networks [least, most] "
          "(`answer/encoder_decoder.parquet`).")
    for model, rows in aside.groupby("model", sort=True):
        eps_list = sorted(rows["threshold"].unique())
        body = []
        for (item, target, policy), g in rows.groupby(["item", "target", "policy"], sort=False):
            g = g.set_index("threshold")
            first = g.iloc[0]
            label = first["what"] + (f" (`{target}`{', ' + policy if policy == 'cross_attn' else ''})"
                                     if target and item not in ("all_cross_attention", "reset_all") else "")
            body.append([label] + [_aside_cost(g.loc[e]) if e in g.index else "" for e in eps_list])
        doc.h(3, model)
        doc.table(["reset"] + [f"ε = {e:g}" for e in eps_list], body)


def _aside_cost(r: pd.Series) -> str:
    def one(x):
        return f"> {num(r['budget'])} (budget)" if math.isinf(x) and not pd.isna(r["budget"]) else num(x)

    censored = f", {int(r['n_censored'])} of {int(r['n_cells'])} censored" if r["n_censored"] else ""
    return f"{one(r['median'])} [{one(r['median_lo'])}, {one(r['median_hi'])}]{censored}"


def _caveats(doc: Page, v: _View) -> None:
    """7. caveats"""
    flags, degenerate, summary, networks = v.flags, v.degenerate, v.summary, v.networks
    plot_links, tables = v.plot_links, v.tables
    doc.h(2, "7. Caveats the data shows")
    items = [_clusters_sentence(networks)]
    for _, r in degenerate.iterrows():
        reasons = [DEGENERATE_WORDS.get(k, k) for k in str(r.get("degenerate_reason") or "").split(",") if k]
        why = ("; ".join(reasons) if reasons else
               "no better than n-gram statistics, or resetting every layer did little damage")
        items.append(f"{r['model']} pretraining seed {r['pretrain_seed']} is **degenerate** ({why}): excluded "
                     f"from every verdict above.")
    off = flags[flags["off_plateau"].astype(bool)] if len(flags) else flags
    drift = tables.get("control_drift", pd.DataFrame(columns=answer_tables.CONTROL_DRIFT_COLUMNS))
    for _, r in off.iterrows():
        mine = drift[(drift["model"] == r["model"]) & (drift["pretrain_seed"] == r["pretrain_seed"])]
        measured = "; ".join(
            f"in the {d['regime']} regime its {d['n_controls']} matched no-reset control(s) ended "
            f"{signed_pct(d['drift_min'])} to {signed_pct(d['drift_max'])} from the baseline loss (+: above it; median "
            f"{signed_pct(d['drift_median'])}) "
            f"after a median {num(d['examples'])} examples" for _, d in mine.iterrows())
        eps_min = float(summary["threshold"].min()) if len(summary) else math.nan
        ends = mine[["drift_min", "drift_max"]].to_numpy(float).ravel()
        largest = float(np.abs(ends).max()) if len(ends) else math.nan
        rose = len(ends) > 0 and float(ends[np.abs(ends).argmax()]) > 0
        verdict = (f"at most {signed_pct(largest)[1:]} either way, under ε_min / 2 = {100 * eps_min / 2:g} %: training "
                   f"alone does not account for the recoveries at these thresholds" if largest < eps_min / 2 else
                   f"the same retraining raised the intact network's loss by as much as {signed_pct(largest)[1:]}: "
                   f"near that ε, part of a reset network's remaining gap is the retraining's own effect, not missing "
                   f"healing" if rose else
                   f"as much as {signed_pct(largest)[1:]} below: a recovery to within an ε near that drift is partly "
                   f"further training, not healing")
        items.append(f"{r['model']} pretraining seed {r['pretrain_seed']} was still improving at the end of "
                     f"pretraining (off its plateau): "
                     + (f"{measured}; {verdict} (summary.parquet's `control_loss` gives each cell's control at its "
                        f"crossing)." if measured else
                        "part of any 'recovery' may be further training (no matched control in this grid measures "
                        "how much)."))
    bnc = int(flags["n_baseline_not_converged"].sum()) if len(flags) else 0
    moved = int(flags["n_control_moved"].sum()) if len(flags) else 0
    rows_total = int(flags["n_rows"].sum()) if len(flags) else 0
    items.append(f"{bnc} of {rows_total} (cell, ε) rows are flagged `baseline_not_converged` (the matched no-reset "
                 f"control went below the baseline by more than ε_min/2: training alone moves the loss).")
    for _, r in flags[flags["n_baseline_not_converged"] > 0].iterrows() if bnc else []:
        items.append(f"{r['model']} pretraining seed {r['pretrain_seed']}: {r['n_baseline_not_converged']} of "
                     f"{r['n_rows']} rows `baseline_not_converged`: their 'recovery' partly measures further "
                     f"training (they stay in the estimates, flagged).")
    items.append(f"{moved} of {rows_total} (cell, ε) rows have a matched control that moved more than ε from the "
                 f"baseline by the cell's crossing.")
    if len(flags):
        params = flags["n_params"].astype(float)
        tokens = pd.to_numeric(flags["pretrain_tokens"], errors="coerce")
        items.append(f"Scale of this grid: {num(params.min())} to {num(params.max())} parameters, "
                     + (f"{num(tokens.min())} to {num(tokens.max())} pretraining tokens"
                        if tokens.notna().any() else "pretraining tokens unknown (downloaded models)")
                     + "; for comparison (published sizes): "
                     + "; ".join(f"{name}: {p}, {t}" for name, p, t in REFERENCE_SIZES) + ".")
    doc.ul(items)
    dc = tables["damage_cost"]
    doc.h(3, "Does the damage predict the cost?")
    doc.p(f"Spearman's rank correlation between the loss right after the reset and the cost, across single-layer "
          f"cells (censored cells rank above every recovered one). [Plot]({plot_links['answer_damage_cost']}).")
    doc.table(["setting", "ε", "ρ [95 %]", "cells (censored)", "note"],
              [[_setting_words((r["regime"], r["policy"], r["init"])), f"{r['threshold']:g}",
                f"{num(r['rho'])} [{num(r['rho_lo'])}, {num(r['rho_hi'])}]",
                f"{r['n_cells']} ({r['n_censored']})", r["note"]] for _, r in dc.iterrows()])
    ck = tables["cka"]
    doc.h(3, "Is the healed layer the same function?")
    if len(ck):
        doc.p(f"Linear CKA between the original and the healed layer's outputs, with the fresh unhealed layer as the "
              f"floor ([plot]({plot_links['answer_cka']})): mean over layers {num(ck['cka'].mean())} "
              f"(range {num(ck['cka'].min())} to {num(ck['cka'].max())}); floor "
              f"{num(ck['cka_floor'].mean())}.")
    else:
        doc.p("No CKA was measured in these tables.")


def _related_work(doc: Page, v: _View) -> None:
    """8. What is already known, beside this grid's numbers."""
    doc.h(2, "8. What is already known")
    doc.p("The published experiments nearest to the question, their findings (as published), how their setting "
          "differs, and the number of this grid that can be set beside each (from the answer tables above).")
    doc.table(["work", "finding", "how the setting differs", "this grid"], related_work.comparisons(v.tables))


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
        ordering = t.get("size_ordering")
        self.ordering = answer_tables.size_ordering(self.networks) if ordering is None else ordering


SECTIONS = [_headline, _cost_section, _refusals, _position, _sizes, _out_of_sample, _families, _aside, _caveats,
            _related_work]


def page(tables: dict[str, pd.DataFrame], summary: pd.DataFrame, networks: pd.DataFrame,
         plot_links: dict[str, str]) -> Page:
    """The whole page: its title and question, then each of ``SECTIONS``."""
    doc = Page()
    doc.h(1, "selfheal: the answer")
    doc.p("*Reset one layer L of a trained N-layer transformer (width D, trained E epochs on S sequences) to random "
          "weights, freeze the rest, retrain: how much data until it is back within ε of its old validation loss?* "
          "Every number below is computed from `summary.parquet`, `curves.parquet` and `networks.parquet` by "
          "`selfheal.analysis.answer`; the tables behind it are in `answer/*.parquet`.")
    view = _View(tables, summary, networks, plot_links)
    for section in SECTIONS:
        section(doc, view)
    return doc


def _fit_table(doc: Page, fit: pd.DataFrame, settings: list[tuple], terms: list[str]) -> None:
    rows = []
    for setting in settings:
        for _, r in _pick(fit, setting).iterrows():
            if r["term"] not in terms:
                continue
            coef = (f"{num(r['coef'])} [{num(r['coef_lo'])}, {num(r['coef_hi'])}]" if r["determined"] else "—")
            factor = (f"× {num(r['factor'])} [{num(r['factor_lo'])}, {num(r['factor_hi'])}]"
                      if r["determined"] else "—")
            rows.append([_setting_words(setting), f"{r['threshold']:g}", r["label"], coef, factor, _verdict(r),
                         f"{r['n_cells']} ({r['n_censored']}), {r['n_clusters']} networks"])
    if not rows:
        doc.p("Not fitted: this grid has no single-layer cells on a usable network.")
    doc.table(["setting", "ε", "term", "coefficient on log cost [95 %]", "factor on cost", "verdict",
               "cells (censored), clusters"], rows)


# ---------------------------------------------------------------- files
