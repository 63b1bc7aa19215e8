"""The answer: tables under ``results/answer/`` and the page ``results/answer.md`` (and ``answer.html`` for the
report), every number read from the Parquet tables the workflow wrote (summary, curves, networks).

``compute`` builds the answer tables (schemas in docs/outputs.md); ``page`` writes the page from them, in
the asker's order: cost per layer (vs. the reset-all control and pretraining's own curve), refusals, position of L,
N and D (with every network against its n-gram references and the size ordering of the baselines), families, the
encoder swap and cross-attention wipe, caveats, related work. ``write_all`` is what the ``answer`` rule runs.
``python -m selfheal.analysis.answer --readme results/answer.md README.md`` copies the page's headline into the
README (between its ``answer:headline`` markers).

Costs are stated in three units: the fraction of S x E; examples and tokens; and relative to the from-scratch run,
the survival median in examples over the mean (across the model's usable networks pretrained here) of the examples
the network's own pretraining needed to first reach the same loss. That crossing is ``stats.first_crossing`` (linear
interpolation between the two evaluations around it, ``coarse`` when they are more than 10 % of it apart),
the one function behind ``pretrain_reference`` here and summary.parquet's scratch_* columns (analysis/tables.py).

``size_ordering`` (networks.parquet only): per pair of models of one family that differ in exactly one of N and D,
whether the mean baseline falls with D (by more than the spread between pretraining seeds) or does not rise with N
(by more than that spread).
"""

from __future__ import annotations

import argparse
import html
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from selfheal import results_io
from selfheal.analysis import answer_plots, plots, scaling, survival
from selfheal.analysis.stats import first_crossing

TABLES = ["survival", "recovered_curves", "fit", "damage_cost", "damage_cells", "cka", "pretrain_reference",
          "networks_flags", "size_ordering", "control_drift"]
CKA_COLUMNS = ["model", "target", "depth", "regime", "policy", "init", "threshold", "cka", "cka_lo", "cka_hi",
               "cka_floor", "n_cells", "n_clusters"]
REFERENCE_COLUMNS = ["model", "pretrain_seed", "threshold", "baseline_loss", "examples_lo", "examples_hi",
                     "fraction_lo", "fraction_hi", "examples", "fraction", "coarse"]
FLAG_COLUMNS = ["model", "pretrain_seed", "family_kind", "n_layer", "d_model", "n_params", "pretrain_tokens",
                "degenerate", "degenerate_reason", "off_plateau", "n_rows", "n_baseline_not_converged",
                "n_control_moved"]
CONTROL_DRIFT_COLUMNS = ["model", "pretrain_seed", "regime", "n_controls", "baseline_loss", "examples", "drift_median",
                         "drift_min", "drift_max"]
SIZE_ORDERING_COLUMNS = ["model_a", "model_b", "varied", "value_a", "value_b", "mean_loss_a", "mean_loss_b",
                         "difference", "seed_spread", "n_seeds", "holds"]
# Words for networks.parquet's degenerate_reason (analysis/tables.py: UNIGRAM_MARGIN, BIGRAM_MARGIN).
DEGENERATE_WORDS = {"unigram": "its baseline is not clearly below the unigram loss",
                    "bigram": "it does not beat the interpolated bigram by 0.1 nats",
                    "reset_all_harmless": "resetting every layer did less damage than ε_min"}
DAMAGE_CELL_COLUMNS = ["model", "pretrain_seed", "seed", "target", "depth", "regime", "policy", "init", "threshold",
                       "damage", "cost", "recovered"]
HEADLINE = ("<!-- answer:headline -->", "<!-- /answer:headline -->")
# Published sizes for scale (static reference facts, not results): parameters and pretraining tokens.
REFERENCE_SIZES = [("GPT-2 small (2019)", "124 M parameters", "about 10 B tokens (WebText, several epochs)"),
                   ("BERT-base (2018)", "110 M parameters", "about 3.3 B words, 40 epochs"),
                   ("Llama 3 8B (2024)", "8 B parameters", "about 15 T tokens")]
RELATED_WORK = [
    "**Tamkin et al. 2020**, *Investigating Transferability in Pretrained Language Models*: re-initialise layers "
    "of a pretrained BERT and finetune the *whole* model on a downstream task; the early layers matter most. Here "
    "the rest of the network is frozen and the measure is language-modelling loss against the data it took "
    "(this workflow's `transfer:` section re-runs their experiments).",
    "**Bogoychev 2021**, *Not all parameters are born equal: attention is mostly what you need*: components left "
    "at random initialisation and frozen during (translation) training cost little. It trains from scratch "
    "rather than healing a trained network (the `frozen_random` experiment here).",
    "**Zhang, Bengio & Singer 2019**, *Are All Layers Created Equal?*: re-initialising one layer of a trained "
    "image classifier to its initial values (or to random values) without retraining; most layers are "
    "'robust' to the former, the first ones are 'critical'. No retraining, vision models; `init: original` "
    "here is their re-initialisation, followed by healing.",
    "**Gromov et al. 2024**, *The Unreasonable Ineffectiveness of the Deeper Layers*, and **LLM-Streamline** "
    "(Chen et al. 2024): remove (prune) blocks of deep layers of large LLMs and 'heal' with a little "
    "parameter-efficient finetuning (QLoRA) or a lightweight replacement layer. They delete layers rather than "
    "re-initialise them, at billions of parameters, and report task accuracy after a fixed healing budget rather "
    "than the data needed to return to the original loss.",
]


# ---------------------------------------------------------------- tables


def _cka(cells: pd.DataFrame) -> pd.DataFrame:
    rows = survival.estimable(cells)
    if "cka" not in rows.columns:
        return pd.DataFrame(columns=CKA_COLUMNS)
    rows = rows[(rows["kind"] == survival.LAYER) & rows["cka"].notna()]
    out = []
    keys = ["model", "target", "depth", "regime", "policy", "init", "threshold"]
    for key, group in rows.groupby(keys, sort=True):
        values = group["cka"].astype(float).to_numpy()
        col = "pretrain_seed" if group["pretrain_seed"].nunique() > 1 else "seed"
        units = sorted(group[col].unique())
        boot, probs = [], []
        if len(units) > 1:
            for draw, prob in survival.cluster_resamples([units]):
                w = np.array([draw.get(u, 0) for u in group[col]], dtype=float)
                boot.append(float(np.average(values, weights=w)))
                probs.append(prob)
        lo, hi = survival.weighted_interval(boot, probs) if probs else (values.mean(), values.mean())
        floor = group["cka_floor"].astype(float).mean() if "cka_floor" in group else math.nan
        out.append({**dict(zip(keys, key)), "cka": float(values.mean()), "cka_lo": lo, "cka_hi": hi,
                    "cka_floor": floor, "n_cells": len(group), "n_clusters": int(group["pretrain_seed"].nunique())})
    return pd.DataFrame(out, columns=CKA_COLUMNS)


def pretrain_reference(curves: pd.DataFrame, networks: pd.DataFrame, thresholds) -> pd.DataFrame:
    """Pretraining's own curve as the reference: where the from-scratch run first got within eps of the network's
    baseline (``first_crossing``: the bracketing evaluations, the interpolated crossing and whether the bracket is
    coarse; censored when it never did)."""
    out = []
    pre = curves[curves["kind"] == "pretrain"]
    if "pretrain_seed" not in pre.columns:
        return pd.DataFrame(columns=REFERENCE_COLUMNS)
    for (model, ps), curve in pre.groupby(["model", "pretrain_seed"], sort=True):
        net = networks[(networks["model"] == model) & (networks["pretrain_seed"] == ps)]
        if not len(net):
            continue
        baseline = float(net["baseline_loss"].iloc[0])
        sxe = net["pretrain_examples"].iloc[0]
        known = sxe is not None and not pd.isna(sxe) and sxe > 0
        for eps in thresholds:
            c = first_crossing(curve["examples"], curve["val_loss"], baseline * (1 + eps))
            out.append({"model": model, "pretrain_seed": ps, "threshold": eps, "baseline_loss": baseline,
                        "examples_lo": c.examples_lo, "examples_hi": c.examples_hi,
                        "fraction_lo": c.examples_lo / sxe if known else math.nan,
                        "fraction_hi": c.examples_hi / sxe if known and c.examples_hi is not None else math.nan,
                        "examples": c.examples, "fraction": c.examples / sxe if known else math.nan,
                        "coarse": c.coarse})
    table = pd.DataFrame(out, columns=REFERENCE_COLUMNS)
    for column in ("examples_lo", "examples_hi"):
        table[column] = table[column].astype("Int64")
    for column in ("fraction_lo", "fraction_hi", "examples", "fraction"):
        table[column] = table[column].astype("float64")
    table["coarse"] = table["coarse"].astype(bool)
    return table


def size_ordering(networks: pd.DataFrame) -> pd.DataFrame:
    """Does the baseline fall with D at fixed N, and not rise with N at fixed D, by more than the spread between
    pretraining seeds? One row per pair of models of the same family (arch) and source that differ in exactly one
    of n_layer and d_model; a is the smaller, b the larger. mean_loss: the mean baseline over the model's
    pretraining seeds; seed_spread: the larger of the two models' max - min baseline across seeds (0 with one seed);
    n_seeds: the smaller of the two models' numbers of seeds. holds: varied d_model, difference (b - a) <
    -seed_spread (it falls by more than the spread); varied n_layer, difference < seed_spread (it does not rise by
    more than the spread)."""
    needs = ["model", "pretrain_seed", "arch", "n_layer", "d_model", "baseline_loss"]
    if not len(networks) or any(c not in networks.columns for c in needs):
        return _typed_size_ordering([])
    nets = networks.copy()
    nets["source"] = nets["source"] if "source" in nets.columns else ""
    per = nets.groupby("model", sort=True).agg(
        arch=("arch", "first"), source=("source", "first"), n_layer=("n_layer", "first"),
        d_model=("d_model", "first"), mean_loss=("baseline_loss", "mean"),
        spread=("baseline_loss", lambda v: float(v.max() - v.min())), n_seeds=("pretrain_seed", "nunique"))
    rows = []
    models = list(per.index)
    for i, a in enumerate(models):
        for b in models[i + 1:]:
            ra, rb = per.loc[a], per.loc[b]
            if ra["arch"] != rb["arch"] or ra["source"] != rb["source"]:
                continue
            same_n, same_d = ra["n_layer"] == rb["n_layer"], ra["d_model"] == rb["d_model"]
            if same_n == same_d:  # both differ, or neither
                continue
            varied = "d_model" if same_n else "n_layer"
            if ra[varied] > rb[varied]:
                a_, b_, ra_, rb_ = b, a, rb, ra
            else:
                a_, b_, ra_, rb_ = a, b, ra, rb
            difference = float(rb_["mean_loss"] - ra_["mean_loss"])
            spread = float(max(ra_["spread"], rb_["spread"]))
            holds = difference < -spread if varied == "d_model" else difference < spread
            rows.append({"model_a": a_, "model_b": b_, "varied": varied, "value_a": int(ra_[varied]),
                         "value_b": int(rb_[varied]), "mean_loss_a": float(ra_["mean_loss"]),
                         "mean_loss_b": float(rb_["mean_loss"]), "difference": difference, "seed_spread": spread,
                         "n_seeds": int(min(ra_["n_seeds"], rb_["n_seeds"])), "holds": bool(holds)})
    rows.sort(key=lambda r: (r["varied"], r["model_a"], r["model_b"]))
    return _typed_size_ordering(rows)


def _typed_size_ordering(rows: list[dict]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=SIZE_ORDERING_COLUMNS)
    for column in ("model_a", "model_b", "varied"):
        table[column] = table[column].astype(object)
    for column in ("value_a", "value_b", "n_seeds"):
        table[column] = table[column].astype("int64")
    for column in ("mean_loss_a", "mean_loss_b", "difference", "seed_spread"):
        table[column] = table[column].astype("float64")
    table["holds"] = table["holds"].astype(bool)
    return table


def _flags(cells: pd.DataFrame, networks: pd.DataFrame) -> pd.DataFrame:
    nets = networks.copy()
    for column in ("pretrain_tokens",):
        if column not in nets:
            nets[column] = pd.NA
    if "degenerate_reason" not in nets:  # tables written before the reason was recorded
        nets["degenerate_reason"] = ""
    nets["degenerate_reason"] = nets["degenerate_reason"].fillna("").astype(str)
    counts = cells[~cells["is_control"]].groupby(survival.CLUSTER).agg(
        n_rows=("threshold", "size"), n_baseline_not_converged=("baseline_not_converged", "sum"),
        n_control_moved=("control_moved", "sum")).reset_index()
    table = nets.merge(counts, on=survival.CLUSTER, how="left")
    for column in ("n_rows", "n_baseline_not_converged", "n_control_moved"):
        table[column] = table[column].fillna(0).astype(int)
    return table.reindex(columns=FLAG_COLUMNS)


def _damage_cells(cells: pd.DataFrame) -> pd.DataFrame:
    rows = survival.estimable(cells)
    rows = rows[rows["kind"] == survival.LAYER].copy()
    if not len(rows):
        return pd.DataFrame(columns=DAMAGE_CELL_COLUMNS)
    unit = scaling.cost_unit(rows)
    spent = np.where(np.isfinite(rows["upper"]), rows["upper"], rows["budget_examples"].astype(float))
    if unit == "fraction":
        spent = spent / rows["pretrain_examples"].astype(float).to_numpy()
    rows["cost"] = spent
    rows["recovered"] = rows["status"] == "recovered"
    return rows[DAMAGE_CELL_COLUMNS].reset_index(drop=True)


def compute(summary: pd.DataFrame, curves: pd.DataFrame, networks: pd.DataFrame,
            workers: int = 1) -> dict[str, pd.DataFrame]:
    """Every answer table. ``workers``: processes for the scaling fit's bootstrap refits (the same numbers)."""
    cells = survival.prepare(summary, networks)
    thresholds = sorted(summary["threshold"].unique())
    return {
        "survival": survival.estimate(cells),
        "recovered_curves": survival.recovered_curves(cells),
        "fit": scaling.fit(cells, workers=workers),
        "damage_cost": scaling.damage_cost(cells),
        "damage_cells": _damage_cells(cells),
        "cka": _cka(cells),
        "pretrain_reference": pretrain_reference(curves, networks, thresholds),
        "networks_flags": _flags(cells, networks),
        "size_ordering": size_ordering(networks),
        "control_drift": control_drift(curves, networks),
    }


def control_drift(curves: pd.DataFrame, networks: pd.DataFrame) -> pd.DataFrame:
    """How far training alone moves each network's loss: per network and regime, its matched no-reset controls
    (the reset cells' tensors trained from their trained values, init ``trained``) at the end of their runs, as
    val loss / baseline − 1 (negative: training alone went below the baseline). A network off its plateau shows
    here how much of a cell's "recovery" further training could account for."""
    rec = curves[(curves["kind"] == "recovery") & (curves["init"] == survival.MATCHED_CONTROL_INIT)]
    out = []
    for (model, ps, regime), group in rec.groupby(["model", "pretrain_seed", "regime"], sort=True):
        net = networks[(networks["model"] == model) & (networks["pretrain_seed"] == ps)]
        if not len(net):
            continue
        baseline = float(net["baseline_loss"].iloc[0])
        ends = group.sort_values("examples").groupby(["target", "policy", "seed"]).tail(1)
        drift = ends["val_loss"].astype(float) / baseline - 1
        out.append({"model": model, "pretrain_seed": int(ps), "regime": regime, "n_controls": len(ends),
                    "baseline_loss": baseline, "examples": float(ends["examples"].median()),
                    "drift_median": float(drift.median()), "drift_min": float(drift.min()),
                    "drift_max": float(drift.max())})
    return pd.DataFrame(out, columns=CONTROL_DRIFT_COLUMNS)


# ---------------------------------------------------------------- the page


def _num(x: float) -> str:
    if x is None or pd.isna(x):
        return "n/a"
    if math.isinf(x):
        return "∞"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) < 0.01 else f"{x:.3f}".rstrip("0").rstrip(".") if abs(x) < 1 else f"{x:.3g}"


def _pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.0f} %"


def _signed_pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:+.2f} %"


def _cost(row: pd.Series, unit: str) -> str:
    """'0.038 [0.013, 0.070]', with '> budget' for a median (or bound) beyond the budget."""
    value, lo, hi = row[f"median_{unit}"], row[f"median_{unit}_lo"], row[f"median_{unit}_hi"]
    budget = row[f"budget_{unit}"] if unit == "fraction" else row["budget_examples"]

    def one(v):
        return f"> {_num(budget)} (budget)" if math.isinf(v) else _num(v)

    return f"{one(value)} [{one(lo)}, {one(hi)}]"


def _unit(table: pd.DataFrame) -> str:
    return "fraction" if len(table) and table["median_fraction"].notna().all() else "examples"


def _unit_words(unit: str) -> str:
    return "fraction of S × E" if unit == "fraction" else "examples (S × E unknown for downloaded models)"


class Page:
    """Blocks of the page (heading, paragraph, bullet list, table), rendered to Markdown and to HTML."""

    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def ul(self, items: list[str]) -> None:
        if items:
            self.blocks.append(("ul", items))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        if rows:
            self.blocks.append(("table", header, rows))

    def raw(self, text: str) -> None:
        self.blocks.append(("raw", text))

    def markdown(self) -> str:
        out = []
        for block in self.blocks:
            if block[0] == "h":
                out.append("#" * block[1] + " " + block[2])
            elif block[0] == "p":
                out.append(block[1])
            elif block[0] == "ul":
                out.append("\n".join(f"- {item}" for item in block[1]))
            elif block[0] == "table":
                out.append("\n".join(["| " + " | ".join(block[1]) + " |", "|" + "---|" * len(block[1])]
                                     + ["| " + " | ".join(r) + " |" for r in block[2]]))
            else:
                out.append(block[1])
        return "\n\n".join(out) + "\n"

    def html(self) -> str:
        def inline(text: str) -> str:
            text = html.escape(text)
            text = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r'<a href="\2">\1</a>', text)
            text = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)
            text = re.sub(r"\*([^*]+)\*", r"<i>\1</i>", text)
            return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)

        out = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>selfheal: the answer</title>"
               "<style>body{font-family:sans-serif;max-width:60em;margin:auto}table{border-collapse:collapse}"
               "td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>"]
        for block in self.blocks:
            if block[0] == "h":
                out.append(f"<h{block[1]}>{inline(block[2])}</h{block[1]}>")
            elif block[0] == "p":
                out.append(f"<p>{inline(block[1])}</p>")
            elif block[0] == "ul":
                out.append("<ul>" + "".join(f"<li>{inline(i)}</li>" for i in block[1]) + "</ul>")
            elif block[0] == "table":
                out.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in block[1]) + "</tr>" + "".join(
                    "<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in block[2]) + "</table>")
        out.append("</body></html>")
        return "\n".join(out)


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


def _compact(x: float) -> str:
    """A count in few digits: '310k', '2.56M', '1.2B'."""
    if x is None or pd.isna(x):
        return "n/a"
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return _num(x)


def _span(values, fmt=_num) -> str:
    """'a to b' over the finite values ('a' when they agree), or '' when there are none."""
    v = pd.Series(values, dtype="float64")
    v = v[np.isfinite(v)]
    if not len(v):
        return ""
    lo, hi = fmt(v.min()), fmt(v.max())
    return lo if lo == hi else f"{lo} to {hi}"


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
    return {"fraction": _span(at["median_fraction"].astype(float)) if unit == "fraction" else "",
            "examples": _span(examples), "tokens": _span(examples * per_example, _compact),
            "relative": _span(relative), "scratch": scratch}


def _budget_words(row: pd.Series, unit: str) -> str:
    """'0.2 of S × E = 6,184 examples', or 'N examples' when S × E is unknown."""
    examples = f"{_num(float(row['budget_examples']))} examples"
    if unit == "fraction" and not pd.isna(row.get("budget_fraction")):
        return f"{_num(float(row['budget_fraction']))} of S × E = {examples}"
    return examples


def _three_units_words(units: dict) -> str:
    """'0.081 to 0.115 of S × E = 4,900 to 6,900 examples (310k to 440k tokens) = 0.12 to 0.17 × what pretraining
    from scratch needed to first reach that loss'."""
    if not units["examples"]:
        return "none reached"
    parts = [f"{units['fraction']} of S × E = " if units["fraction"] else ""]
    parts.append(f"{units['examples']} examples")
    if units["tokens"]:
        parts.append(f" ({units['tokens']} tokens)")
    if not units["fraction"]:
        parts.append(" (S × E unknown for downloaded models)")
    scratch = units["scratch"]
    if units["relative"]:
        parts.append(f" = {units['relative']} × what pretraining from scratch needed to first reach that loss")
        if scratch["reached"] < scratch["networks"]:
            parts.append(f" (only {scratch['reached']} of {scratch['networks']} networks' pretraining reached it)")
        if scratch["coarse"]:
            parts.append(" (rough: the pretraining curve is coarse there)")
    elif scratch["networks"] and not scratch["reached"]:
        parts.append("; pretraining from scratch never reached that loss")
    else:
        parts.append("; no from-scratch pretraining curve to compare with")
    return "".join(parts)


def _network_line(r: pd.Series) -> str:
    """One network: its loss against the n-gram references, S, E and its flags."""
    def loss(column):
        v = r.get(column)
        return "n/a" if v is None or pd.isna(v) else f"{float(v):.3f}"

    bigram = "none (masked LM)" if pd.isna(r.get("bigram_loss")) else loss("bigram_loss")
    weight = r.get("bigram_weight")
    if weight is not None and not pd.isna(weight):
        bigram += f" (λ = {_num(float(weight))})"
    margin = r.get("bigram_margin")
    if (margin is None or pd.isna(margin)) and not pd.isna(r.get("bigram_loss")):
        margin = float(r["bigram_loss"]) - float(r["baseline_loss"])
    margin_text = "n/a" if margin is None or pd.isna(margin) else f"{float(margin):+.3f}"

    def count(column):
        v = r.get(column)
        return "n/a" if v is None or pd.isna(v) else _num(float(v))

    reason = r.get("degenerate_reason")
    flags = []
    if bool(r.get("degenerate", False)):
        flags.append("**degenerate**" + (f" ({reason})" if isinstance(reason, str) and reason else ""))
    if bool(r.get("off_plateau", False)):
        flags.append("off its plateau")
    return (f"{r['model']} seed {r['pretrain_seed']}: loss {loss('baseline_loss')}, unigram {loss('unigram_loss')}, "
            f"bigram {bigram}, margin over the bigram {margin_text} nats; S = {count('train_sequences')}, "
            f"E = {count('epochs')} ({count('pretrain_examples')} examples, "
            f"{_compact(r.get('pretrain_tokens'))} tokens)" + (f"; {', '.join(flags)}" if flags else ""))


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


def page(tables: dict[str, pd.DataFrame], summary: pd.DataFrame, networks: pd.DataFrame,
         plot_links: dict[str, str]) -> Page:
    surv, fit, flags = tables["survival"], tables["fit"], tables["networks_flags"]
    ref = tables["pretrain_reference"]
    doc = Page()
    doc.h(1, "selfheal: the answer")
    doc.p("*Reset one layer L of a trained N-layer transformer (width D, trained E epochs on S sequences) to random "
          "weights, freeze the rest, retrain: how much data until it is back within ε of its old validation loss?* "
          "Every number below is computed from `summary.parquet`, `curves.parquet` and `networks.parquet` by "
          "`selfheal.analysis.answer`; the tables behind it are in `answer/*.parquet`.")
    layers = surv[surv["kind"] == survival.LAYER] if len(surv) else surv
    degenerate = flags[flags["degenerate"].astype(bool)] if len(flags) else flags
    settings = _settings(surv) if len(surv) else []

    # headline
    headline = []
    if not len(layers):
        headline.append("This grid has no single-layer cells on a usable network, so it cannot answer the question "
                        "(see the caveats).")
    for setting in settings[:1]:
        unit = _unit(_pick(layers, setting))
        for model, rows in _pick(layers, setting).groupby("model", sort=True):
            for eps in sorted({rows["threshold"].min(), rows["threshold"].max()}):
                at = rows[rows["threshold"] == eps]
                med = at[f"median_{unit}"]
                span = (_three_units_words(_three_units(at, unit, model, eps, summary, networks, ref))
                        if np.isfinite(med).any() else
                        f"more than the budget ({_budget_words(at.iloc[0], unit)}) for every layer")
                refused = int((at["n_censored"] + at["n_diverged"]).sum())
                total = int(at["n_cells"].sum())
                unreached = int((~np.isfinite(med)).sum())
                allc = surv[(surv["model"] == model) & (surv["target"] == "all") & (surv["threshold"] == eps)
                            & (surv["regime"] == setting[0]) & (surv["init"] == setting[2])]
                allc_text = (f"; resetting every layer: {_cost(allc.iloc[0], unit)}" if len(allc) else "")
                headline.append(
                    f"**{model}** (N = {int(at['n_layer'].iloc[0])}, D = {int(at['d_model'].iloc[0])}), ε = "
                    f"{eps:g}: one reset layer needs a median {span}"
                    f"{', depending on the layer' if np.isfinite(med).any() else ''}"
                    f"{' (' + str(unreached) + ' layer(s) with the median beyond the budget)' if unreached and np.isfinite(med).any() else ''}"
                    f"{allc_text}; {refused} of {total} layer cells did not get there within the budget.")
    for setting in settings[:1]:
        rows = _pick(fit, setting)
        rows = rows[rows["threshold"] == rows["threshold"].min()] if len(rows) else rows
        for _, r in rows[rows["term"].isin(["rel_depth", "log_n_layer", "log_d_model"])].iterrows():
            coef = (f"{_num(r['coef'])} [{_num(r['coef_lo'])}, {_num(r['coef_hi'])}]" if r["determined"] else "")
            headline.append(f"Fit at ε = {r['threshold']:g}, {r['label']}: {coef + ' — ' if coef else ''}"
                            f"{_verdict(r)}.")
    ordering = tables.get("size_ordering")
    if ordering is None:
        ordering = size_ordering(networks)
    ordering_line = _ordering_headline(ordering)
    if ordering_line:
        headline.append(ordering_line)
    if len(degenerate):
        headline.append(f"{len(degenerate)} network(s) flagged degenerate are left out of every verdict.")
    headline.append(_clusters_sentence(networks))
    doc.h(2, "Headline")
    doc.raw(HEADLINE[0])
    doc.ul(headline)
    doc.raw(HEADLINE[1])

    # 1. cost
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
                cells.append("never" if v.isna().all() else f"{_num(v.median())}{rough} (median of {len(v)} "
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
                              (f"{_num(scratch['examples'])}{' (rough)' if scratch['coarse'] else ''} "
                               f"({scratch['reached']} of {scratch['networks']})") if scratch["networks"] else "n/a"])
        doc.p("The single-layer medians of this setting (range over the layers) in the three units; the last column "
              "is the from-scratch reference: the mean examples to that loss over the networks whose pretraining "
              "reached it (k of n: of the model's usable networks pretrained here).")
        doc.table(["model", "ε", "fraction of S × E", "examples", "tokens", "× pretraining from scratch",
                   "pretraining from scratch: examples to that loss"], unit_rows)

    # 2. refusals
    doc.h(2, "2. Does it ever refuse to train?")
    items = []
    for setting in settings:
        rows = _pick(layers, setting)
        for eps, g in rows.groupby("threshold", sort=True):
            n, cen, div = int(g["n_cells"].sum()), int(g["n_censored"].sum()), int(g["n_diverged"].sum())
            gap = g["stall_gap_median"].dropna()
            stall = (f"; where it stalled, the loss ended a median {_pct(gap.median())} above the baseline "
                     f"(ε = {_pct(eps)})" if len(gap) else "")
            items.append(f"{_setting_words(setting)}, ε = {eps:g}: {cen} of {n} single-layer cells censored "
                         f"({_pct(cen / n)}), {div} diverged ({_pct(div / n)}){stall}.")
    verdict = ("No single-layer cell refused: every one got within every ε within the budget."
               if len(layers) and int((layers["n_censored"] + layers["n_diverged"]).sum()) == 0 else
               "Some cells did not recover within the budget (censored, or the loss diverged):" if len(layers)
               else "No single-layer cells to judge.")
    doc.p(verdict)
    doc.ul(items)

    # 3. position
    doc.h(2, "3. Does the position of L matter?")
    doc.p(f"From the censored log-normal fit of log cost (all single-layer cells of a setting and ε; "
          f"[effects plot]({plot_links['answer_effects']})). A coefficient b multiplies the cost by e^b: for relative "
          f"depth, going from the first to the last layer along the trend; for first/last layer, on top of it.")
    _fit_table(doc, fit, settings, ["rel_depth", "first_layer", "last_layer"])

    # 4. N and D
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

    # 5. families
    doc.h(2, "5. Encoder-only, decoder-only, encoder-decoder")
    kinds = sorted(networks["family_kind"].unique()) if len(networks) else []
    missing = [k for k in ("decoder-only", "encoder-only", "encoder-decoder") if k not in kinds]
    doc.p(f"Families in this grid: {', '.join(kinds) or 'none'}."
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
            items.append(f"{kind}, ε = {eps:g}: per-layer medians {_num(med.min())} to {_num(med.max())} "
                         f"({len(g)} layer groups)")
        doc.ul(items)

    # 6. encoder swap and cross-attention wipe
    doc.h(2, "6. The encoder swap and the all-cross-attention wipe")
    special = surv[(surv["kind"] == survival.SWAP) | ((surv["target"] == "dec") & (surv["policy"] == "cross_attn"))] \
        if len(surv) else surv
    if not len(special):
        doc.p("This grid has no encoder-swap cells and no cross-attention wipe (they need an encoder-decoder model "
              "and `grid.encoder_swap` / policy `cross_attn`): not determined by this grid.")
    else:
        unit = _unit(special)
        rows_out = []
        for _, r in special.iterrows():
            allc = surv[(surv["model"] == r["model"]) & (surv["target"] == "all") & (surv["policy"] == "full")
                        & (surv["threshold"] == r["threshold"]) & (surv["regime"] == r["regime"])]
            rf = ref[(ref["model"] == r["model"]) & (ref["threshold"] == r["threshold"])] if len(ref) else ref
            col = "fraction" if unit == "fraction" else "examples"
            rows_out.append([r["model"], f"{r['target']} / {r['policy']}", f"{r['threshold']:g}", _cost(r, unit),
                             _cost(allc.iloc[0], unit) if len(allc) else "n/a",
                             _num(rf[col].astype(float).median()) if len(rf) else "n/a"])
        doc.table(["model", "target / policy", "ε", "median cost [95 %]", "every layer reset", "pretraining"],
                  rows_out)

    # 7. caveats
    doc.h(2, "7. Caveats the data shows")
    items = [_clusters_sentence(networks)]
    for _, r in degenerate.iterrows():
        reasons = [DEGENERATE_WORDS.get(k, k) for k in str(r.get("degenerate_reason") or "").split(",") if k]
        why = ("; ".join(reasons) if reasons else
               "no better than n-gram statistics, or resetting every layer did little damage")
        items.append(f"{r['model']} pretraining seed {r['pretrain_seed']} is **degenerate** ({why}): excluded "
                     f"from every verdict above.")
    off = flags[flags["off_plateau"].astype(bool)] if len(flags) else flags
    drift = tables.get("control_drift", pd.DataFrame(columns=CONTROL_DRIFT_COLUMNS))
    for _, r in off.iterrows():
        mine = drift[(drift["model"] == r["model"]) & (drift["pretrain_seed"] == r["pretrain_seed"])]
        measured = "; ".join(
            f"in the {d['regime']} regime its {d['n_controls']} matched no-reset control(s) ended "
            f"{_signed_pct(d['drift_min'])} to {_signed_pct(d['drift_max'])} from the baseline (median "
            f"{_signed_pct(d['drift_median'])}) "
            f"after a median {_num(d['examples'])} examples" for _, d in mine.iterrows())
        eps_min = float(summary["threshold"].min()) if len(summary) else math.nan
        largest = float(mine[["drift_min", "drift_max"]].abs().max().max()) if len(mine) else math.nan
        verdict = (f"at most {_signed_pct(largest)[1:]} either way, under ε_min / 2 = {100 * eps_min / 2:g} %: training "
                   f"alone does not account for the recoveries at these thresholds" if largest < eps_min / 2 else
                   f"as much as {_signed_pct(largest)[1:]}: a recovery to within an ε near that drift is partly "
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
        items.append(f"Scale of this grid: {_num(params.min())} to {_num(params.max())} parameters, "
                     + (f"{_num(tokens.min())} to {_num(tokens.max())} pretraining tokens"
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
                f"{_num(r['rho'])} [{_num(r['rho_lo'])}, {_num(r['rho_hi'])}]",
                f"{r['n_cells']} ({r['n_censored']})", r["note"]] for _, r in dc.iterrows()])
    ck = tables["cka"]
    doc.h(3, "Is the healed layer the same function?")
    if len(ck):
        doc.p(f"Linear CKA between the original and the healed layer's outputs, with the fresh unhealed layer as the "
              f"floor ([plot]({plot_links['answer_cka']})): mean over layers {_num(ck['cka'].mean())} "
              f"(range {_num(ck['cka'].min())} to {_num(ck['cka'].max())}); floor "
              f"{_num(ck['cka_floor'].mean())}.")
    else:
        doc.p("No CKA was measured in these tables.")

    # 8. related work
    doc.h(2, "8. What is already known")
    doc.ul(RELATED_WORK)
    return doc


def _fit_table(doc: Page, fit: pd.DataFrame, settings: list[tuple], terms: list[str]) -> None:
    rows = []
    for setting in settings:
        for _, r in _pick(fit, setting).iterrows():
            if r["term"] not in terms:
                continue
            coef = (f"{_num(r['coef'])} [{_num(r['coef_lo'])}, {_num(r['coef_hi'])}]" if r["determined"] else "—")
            factor = (f"× {_num(r['factor'])} [{_num(r['factor_lo'])}, {_num(r['factor_hi'])}]"
                      if r["determined"] else "—")
            rows.append([_setting_words(setting), f"{r['threshold']:g}", r["label"], coef, factor, _verdict(r),
                         f"{r['n_cells']} ({r['n_censored']}), {r['n_clusters']} networks"])
    if not rows:
        doc.p("Not fitted: this grid has no single-layer cells on a usable network.")
    doc.table(["setting", "ε", "term", "coefficient on log cost [95 %]", "factor on cost", "verdict",
               "cells (censored), clusters"], rows)


# ---------------------------------------------------------------- files


def write_all(summary_path: str, curves_path: str, networks_path: str, table_paths: dict[str, str], md_path: str,
              html_path: str, plot_html: dict[str, str], plot_png: dict[str, str], workers: int = 1) -> None:
    """Everything the ``answer`` rule makes: the answer tables, the page (Markdown and HTML) and its figures.
    Plot links on the page are relative to the page's folder."""
    summary = pd.read_parquet(summary_path)
    curves = pd.read_parquet(curves_path)
    networks = pd.read_parquet(networks_path)
    tables = compute(summary, curves, networks, workers)
    for name in TABLES:
        results_io.write_parquet(table_paths[name], tables[name])
    folder = Path(md_path).parent
    links = {name: str(Path(path).resolve().relative_to(folder.resolve())) if Path(path).resolve().is_relative_to(
        folder.resolve()) else str(path) for name, path in plot_html.items()}
    doc = page(tables, summary, networks, links)
    Path(md_path).write_text(doc.markdown())
    Path(html_path).write_text(doc.html())
    for name, draw in answer_plots.FIGURES.items():
        plots.save(draw(tables, curves), plot_html[name], plot_png[name])


def headline(md_text: str) -> str:
    """The headline block of a page, markers included."""
    start, end = md_text.index(HEADLINE[0]), md_text.index(HEADLINE[1]) + len(HEADLINE[1])
    return md_text[start:end]


def update_readme(page_path: str, readme_path: str) -> None:
    """Replace the README's headline block (between the markers) with the page's."""
    block = headline(Path(page_path).read_text())
    text = Path(readme_path).read_text()
    start, end = text.index(HEADLINE[0]), text.index(HEADLINE[1]) + len(HEADLINE[1])
    Path(readme_path).write_text(text[:start] + block + text[end:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", nargs=2, metavar=("ANSWER_MD", "README"), required=True,
                        help="copy ANSWER_MD's headline into README between its answer:headline markers")
    args = parser.parse_args(argv)
    update_readme(*args.readme)


if __name__ == "__main__":
    main()
