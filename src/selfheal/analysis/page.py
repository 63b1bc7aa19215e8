"""The answer page (``results/answer.md`` and ``answer.html``): one Jinja2 template (``templates/answer.md.j2``)
over the answer tables and their verdict columns (``verdicts``), with the number formats below as its filters.
``context`` only selects and orders rows (the asker's setting first, the smallest and largest ε); every judgement
the page states is a column of a table. The HTML is the Markdown rendered by markdown-it-py.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import jinja2
import pandas as pd
from markdown_it import MarkdownIt

from selfheal.analysis import headline, out_of_sample, related_work, scaling, survival, verdicts
from selfheal.analysis.answer_tables import SWAP_ITEMS
from selfheal.analysis.formats import compact, eps, num, pct, signed_pct, span
from selfheal.analysis.stats import DRIFT_TOLERANCE, UNIT_WORDS, cost_unit, flag

HEADLINE = ("<!-- answer:headline -->", "<!-- /answer:headline -->")
BEYOND = "> B"
DEGENERATE_WORDS = {
    "unigram": "its baseline is not clearly below the unigram loss",
    "bigram": "it does not beat the interpolated bigram by 0.1 nats",
    "reset_all_harmless": "resetting every layer did less damage than ε_min",
}
REFERENCE_SIZES = [
    ("GPT-2 small", "124 M parameters", "about 10 B tokens"),
    ("BERT-base", "110 M", "about 3.3 B words × 40 epochs"),
    ("Llama 3 8B", "8 B", "about 15 T tokens"),
]


def cost(x) -> str:
    """A median: '> B' beyond the budget, 'not damaged' where no cell left the ε band."""
    x = float(x)
    return "not damaged" if math.isnan(x) else BEYOND if math.isinf(x) else num(x)


def interval(row, column: str) -> str:
    """'m [lo, hi]' of a median column, one number where they agree."""
    m, lo, hi = (float(row[column + s]) for s in ("", "_lo", "_hi"))
    if math.isnan(m) or (math.isinf(m) and math.isinf(lo)) or m == lo == hi:
        return cost(m)
    return f"{cost(m)} [{cost(lo)}, {cost(hi)}]"


def times(x, approx: bool = False) -> str:
    x = float(x)
    if not math.isfinite(x):
        return "—"
    digits = f"{x:.2g}" if approx else num(x)
    return f"{'≈ ' if approx else ''}{digits} ×"


def counted(counts: dict) -> str:
    """'the first in 3 of 5 models, the last in 2' from {position: count}."""
    total = sum(counts.values())
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"the {p} in {n}{f' of {total} models' if i == 0 else ''}" for i, (p, n) in enumerate(items))


def pct_2(x) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.2f} %"


def multiplier(m) -> str:
    """3 -> '×3', 0.3333 -> '÷3'."""
    return f"×{m:g}" if m > 1 else f"÷{1 / m:.3g}"


def quoted(names) -> str:
    """'`a`', '`a` and `b`', '`a`, `b` and `c`'."""
    q = [f"`{n}`" for n in names]
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " and " + q[-1]


FILTERS = {
    **{f.__name__: f for f in (num, pct, signed_pct, eps, compact, cost, interval, times, counted, pct_2, multiplier)},
    "quoted": quoted,
    "span": lambda values, fmt="num": span(values, FILTERS[fmt]),
    "loss": lambda x: f"{x:.3f}",
    "margin": lambda x: f"{x:+.3f}",
}


def _brought(net: pd.Series) -> bool:
    source = net.get("source", "scratch")
    return source is not None and not pd.isna(source) and source != "scratch"


def _sxe(net: pd.Series, epochs: pd.Series | None = None) -> str:
    """A network's S × E ('3,865 × 24'), or that it was not pretrained here (a model you bring) and its adaptation.
    ``epochs``: every network's E of the model, stated as their range where they differ ('800 × 24–29': each
    network's race found its own)."""
    s, e = net.get("train_sequences"), net.get("epochs")
    both = s is not None and e is not None and not pd.isna(s) and not pd.isna(e)
    if _brought(net):
        return "not pretrained here; " + (
            f"adaptation: {num(float(s))} sequences × {num(float(e))}" if both else "no adaptation"
        )
    own = epochs.dropna().astype(float) if epochs is not None else pd.Series(dtype=float)
    if both and own.nunique() > 1:
        return f"{num(float(s))} × {num(own.min())}–{num(own.max())}"
    return f"{num(float(s))} × {num(float(e))}" if both else num(net.get("pretrain_examples"))


def sci(x) -> str:
    """A small share in scientific notation: '1.2e-6'."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _share(rows: pd.DataFrame, net: pd.Series, own) -> str:
    """A brought model's finite single-layer medians in tokens over its own pretraining tokens ('1.2e-6 to 3e-6')."""
    own, context = (
        pd.to_numeric(pd.Series([x]), errors="coerce").astype(float).iloc[0] for x in (own, net.get("context"))
    )
    if not (own > 0 and context > 0):
        return ""
    finite = rows.loc[rows["verdict"] == "recovered", "median_examples"].astype(float)
    return span(finite * context / own, sci)


def _at(rows: pd.DataFrame, e: float) -> dict:
    """What the page says of one ε over some (model, layer) medians."""
    verdict = Counter(rows["verdict"])
    finite = rows[rows["verdict"] == "recovered"]
    return {
        "eps": e,
        "n": len(rows),
        "n_finite": verdict["recovered"],
        "n_refuses": verdict["refuses"],
        "n_back_to_control": verdict["back_to_control"],
        "n_still_falling": verdict["still_falling"],
        "n_not_damaged": verdict["not_damaged"],
        "fraction": span(finite["median_fraction"]),
        "examples": span(finite["median_examples"]),
        "relative": span(finite["relative_to_scratch"]),
        "scratch": span(rows.drop_duplicates("model")["scratch_fraction"]),
        "costliest": dict(Counter(rows.loc[rows["costliest"], "position"])),
    }


def partial(left_out: pd.DataFrame) -> dict:
    """What a page read with ``partial`` leaves out (``selfheal.partial.left_out_table``): its mode, each unfinished
    model, each unfinished network of a model read with its others, and each finished model's unfinished lr check."""
    networks = left_out[left_out["part"].str.startswith("network ")]
    return {
        "mode": "networks" if len(networks) else "true",
        "models": list(left_out.loc[left_out["part"] == "model", "model"]),
        "networks": [
            (m, " and ".join(p.removeprefix("network ") for p in g["part"]))
            for m, g in networks.groupby("model", sort=False)
        ],
        "checks": list(left_out.loc[left_out["part"] == "lr check", "model"]),
    }


def _lr(lr, networks: pd.DataFrame) -> dict | None:
    """The lr check's rows at ε = 0.01 (else its smallest), with their ``faster`` verdict (``verdicts.lr_verdicts``)."""
    if lr is None or not len(lr):
        return None
    unit = cost_unit(lr, networks)
    lr = verdicts.lr_verdicts(lr)
    col = "fraction_of_pretrain" if unit == "fraction" else "examples"
    lr_eps = 0.01 if (lr["threshold"] == 0.01).any() else float(lr["threshold"].min())
    at = lr[lr["threshold"] == lr_eps].sort_values(["model", "depth", "target", "lr_multiplier"])
    out = {
        "eps": lr_eps,
        "unit_words": UNIT_WORDS[unit],
        "multipliers": sorted(at["lr_multiplier"].unique()),
        "rows": [
            {
                "model": m,
                "target": tg,
                "chosen_lr": g["chosen_lr"].iloc[0],
                "chosen": g[f"chosen_{col}"].iloc[0] if flag(g["chosen_recovered"]).iloc[0] else math.inf,
                "costs": [r[col] if r["recovered"] else math.inf for _, r in g.iterrows()],
                "faster": bool(g["faster"].any()),
            }
            for (m, tg), g in at.groupby(["model", "target"], sort=False)
        ],
    }
    out["faster"] = [f"{r['model']}'s `{r['target']}`" for r in out["rows"] if r["faster"]]
    return out


def _headline(t: dict[str, pd.DataFrame], rows: pd.DataFrame) -> dict:
    """The headline's table (positions x the ε it states), its sentence (at the smallest of them), which ε it states
    and why, the N and D verdicts per position, what the intervals are and each model's validation resolution."""
    hl, res, sizes = t["headline"], t["resolved_eps"], t["size_effects"]
    stated = sorted(res.loc[res["headline"], "threshold"].astype(float)) if len(res) else []
    shown = stated or sorted(hl["threshold"].unique())
    by = {(r["position"], float(r["threshold"])): r for r in hl.to_dict("records")}
    positions = [p for p in headline.POSITIONS if any((p, e) in by for e in shown)]
    first = shown[0] if shown else None
    kinds = set(rows["interval_kind"].dropna()) if "interval_kind" in rows.columns else set()
    n_units = rows.drop_duplicates("model")["n_clusters"].astype(int).tolist() if len(rows) else []
    at_first = sizes[sizes["threshold"] == first] if len(sizes) else sizes
    validation = t["validation_error"]
    return {
        "hl_eps": shown,
        "hl_stated": bool(stated),
        "hl_rows": [{"position": p, "cells": [by.get((p, e)) for e in shown]} for p in positions],
        "hl_sentence": [by[(p, first)] for p in positions if (p, first) in by],
        "hl_first": first,
        "resolved": res.to_dict("records"),
        "sizes": [
            {
                "factor": headline.SIZE_FACTORS[varied],
                "rows": g.to_dict("records"),
            }
            for varied, g in at_first.groupby("varied", sort=False)
        ],
        "size_reasons": headline.SIZE_REASONS,
        "bootstrap": kinds == {"bootstrap"},  # survival.interval_kind: every interval a 95 % bootstrap interval
        "n_units": span(n_units),
        "min_units": survival.MIN_BOOTSTRAP_UNITS,
        "validation": validation.to_dict("records"),
        "unresolved": validation.loc[~validation["resolves"].astype(bool), "model"].tolist(),
    }


def context(tables: dict[str, pd.DataFrame], summary: pd.DataFrame, networks: pd.DataFrame, links: dict) -> dict:
    """What the template reads: the answer tables' rows, selected (the asker's setting first, the smallest and largest
    ε) and ordered, with the few counts and ranges its sentences state."""
    t = tables
    surv, fit, flags, drift = t["survival"], t["fit"], t["networks_flags"], t["control_drift"]
    layers = surv[surv["kind"] == survival.LAYER] if len(surv) else surv
    aside = t.get("encoder_decoder", pd.DataFrame())
    setting = headline.setting(surv, aside)
    rows = survival.in_setting(layers, setting) if setting else layers.iloc[:0]
    healed = networks[networks["model"].isin(set(summary["model"]))] if len(summary) else networks
    left_out = t.get("left_out")
    c = {"links": links, "setting": setting, "partial": partial(left_out) if left_out is not None else None}
    c["lr"] = _lr(t.get("lr_sensitivity"), networks)
    c["degenerate"] = []
    for m, g in flags[flag(flags["degenerate"])].groupby("model", sort=True) if len(flags) else []:
        reasons = sorted({x for r in g["degenerate_reason"] for x in str(r).split(",") if x})
        c["degenerate"].append((m, len(g), ", ".join(DEGENERATE_WORDS.get(x, x) for x in reasons) or "flagged"))
    if not len(rows):
        c["answered"] = False
        c["n_networks"], c["n_off"] = len(networks), int(flag(networks.get("off_plateau", pd.Series())).sum())
        return c
    c["answered"] = True
    unit = c["unit"] = cost_unit(rows, networks)
    c["unit_words"] = UNIT_WORDS[unit]
    eps_pair = c["eps_pair"] = sorted({float(rows["threshold"].min()), float(rows["threshold"].max())})
    eps_min = c["eps_min"] = eps_pair[0]
    c["bound"] = DRIFT_TOLERANCE * eps_min
    c["at"] = [_at(rows[rows["threshold"] == e], e) for e in eps_pair]
    first = rows.drop_duplicates("model").set_index("model")  # each model's own columns
    order = sorted(first.index, key=lambda m: (*first.loc[m, ["family_kind", "n_layer", "d_model"]], m))
    nets = networks.drop_duplicates("model").set_index("model")
    own = flags.drop_duplicates("model").set_index("model")["pretraining_tokens"].to_dict() if len(flags) else {}
    allc = survival.in_setting(surv[(surv["target"] == "all")], (setting[0], "full", setting[2]))
    c["models"] = []
    for m in order:
        mine, net = rows[rows["model"] == m], nets.loc[m] if m in nets.index else None
        brought = net is not None and _brought(net)
        c["models"].append(
            {
                "model": m,
                "nxd": f"{int(first.loc[m, 'n_layer'])} × {int(first.loc[m, 'd_model'])}",
                "sxe": _sxe(net, networks.loc[networks["model"] == m, "epochs"]) if net is not None else "n/a",
                "at": [_at(mine[mine["threshold"] == e], e) for e in eps_pair],
                "all": allc.loc[(allc["model"] == m) & (allc["threshold"] == eps_pair[-1]), f"median_{unit}"].tolist(),
                "brought": brought,
                "share": [_share(mine[mine["threshold"] == e], net, own.get(m)) if brought else "" for e in eps_pair],
                "own": own.get(m),
            }
        )
    c["brought"] = [x for x in c["models"] if x["brought"]]
    c.update(_headline(t, rows))
    shown = survival.in_setting(surv[(surv["kind"] == survival.LAYER) | (surv["target"] == "all")], setting)
    shown = shown.sort_values(["model", "depth", "target"], na_position="last")
    against = survival.in_setting(t["against_control"], setting)
    c["cost_rows"] = [
        {
            "model": m,
            "target": tg,
            "position": g["position"].iloc[0] if g["kind"].iloc[0] == survival.LAYER else "every layer",
            "at": [g[g["threshold"] == e].iloc[0] if (g["threshold"] == e).any() else None for e in eps_pair],
            "control": against[
                (against["model"] == m) & (against["target"] == tg) & (against["threshold"] == eps_min)
            ].to_dict("records"),
        }
        for (m, tg), g in shown.groupby(["model", "target"], sort=False)
    ]
    a_rows = against[(against["kind"] == survival.LAYER) & (against["threshold"] == eps_min)]
    c["against"] = _at(a_rows, eps_min) if len(a_rows) else None
    context = pd.to_numeric(nets.get("context", pd.Series(dtype=float)), errors="coerce").astype(float)
    c["tokens_per_example"] = span(float(context.get(m, math.nan)) for m in order)
    costs = survival.in_setting(t["network_costs"], setting)
    back = costs["outcome"].isin(["recovered", "not_damaged"])
    costs = costs[(costs["kind"] == survival.LAYER) & (costs["threshold"] == eps_min) & ~back]
    c["not_back"] = costs.sort_values(["model", "depth", "pretrain_seed"]).to_dict("records")
    # the fit: position terms (§3) and size terms (§4) at the pair of ε
    fits = survival.in_setting(fit, setting)
    fits = fits[fits["threshold"].isin(eps_pair)] if len(fits) else fits
    position_terms, size_terms = (
        ["first_layer", "last_layer", "middle_depth"],
        [t_ for t_ in scaling.TERMS if t_.startswith("log_")],
    )
    c["fit_position"] = fits[fits["term"].isin(position_terms) & flag(fits["determined"])].to_dict("records")
    c["fit_size"] = fits[fits["term"].isin(size_terms) & flag(fits["determined"])].to_dict("records")
    undetermined = fits[~flag(fits["determined"]) & fits["term"].isin(size_terms + position_terms)]
    c["not_determined"] = [
        (g["label"].iloc[0], ", ".join(f"{x:g}" for x in sorted(g["threshold"])), scaling.REASONS.get(r, r))
        for (term, r), g in undetermined.groupby(["term", "reason"], sort=False)
    ]
    at_min = fits[(fits["threshold"] == eps_min) & fits["term"].isin(position_terms + ["log_n_layer", "log_d_model"])]
    c["fit_headline"] = [(r["label"], r["verdict"]) for _, r in at_min[flag(at_min["determined"])].iterrows()] + [
        (", ".join(g["label"]), f"not determined ({scaling.REASONS.get(why, why)})")
        for why, g in at_min[~flag(at_min["determined"])].groupby("reason", sort=False)
    ]
    c["fit_left_out"] = sorted(
        {x.removeprefix("family[").removesuffix("]") for x in fits["left_out"].dropna() if x} if len(fits) else []
    )
    # the networks
    c["networks"] = [
        {
            "model": m,
            "loss": g["baseline_loss"].tolist(),
            "margin": g["bigram_margin"].tolist(),
            "past": (g["past_minimum"] / g["baseline_loss"]).tolist(),
        }
        for m, g in networks.sort_values(["model", "pretrain_seed"]).groupby("model", sort=True)
    ]
    c["n_overfit"], c["n_nets"] = int(flags["overfit"].sum()), len(flags)
    pretrained_here = flags[flags["source"].fillna("scratch") == "scratch"] if len(flags) else flags
    c["old_way"] = int((~flag(pretrained_here["raced"])).sum()) if len(pretrained_here) else 0
    c["n_here"] = len(pretrained_here)
    c["ngram"] = [
        (k, g["unigram_loss"].iloc[0], g["bigram_loss"].iloc[0], g["bigram_weight"].iloc[0])
        for k, g in (networks.groupby("family_kind", sort=True) if "bigram_loss" in networks.columns else [])
    ]
    by_sxe = flags.merge(networks[["model", "pretrain_seed", "train_sequences", "epochs"]], how="left")
    c["by_sxe"] = [
        (f"{num(float(s))} × {num(float(e))}", span(g["past_minimum_share"], pct_2), bool(g["overfit"].all()))
        for (s, e), g in by_sxe[by_sxe["model"].isin(order)].groupby(["train_sequences", "epochs"], sort=True)
    ]
    c["ordering"] = t["size_ordering"].to_dict("records")
    oos = t["out_of_sample"]
    said = out_of_sample.verdicts(oos) if len(oos) else pd.DataFrame(columns=["left_out"])
    c["oos"] = [
        {
            "left_out": lo,
            "models": g["models"].iloc[0],
            "verdicts": [(v, ", ".join(f"{x:g}" for x in h["threshold"])) for v, h in g.groupby("verdict", sort=False)],
            "held": int(oos.loc[oos["left_out"] == lo, "held"].astype("boolean").fillna(False).sum()),
            "tested": int(oos.loc[oos["left_out"] == lo, "held"].notna().sum()),
            "wide": int((oos.loc[oos["left_out"] == lo, "result"] == "not informative").sum())
            if "result" in oos.columns
            else 0,
        }
        for lo, g in said.groupby("left_out", sort=False)
    ]
    # families: the first and last layer at ε_min, × their own from-scratch cost
    at_min = rows[rows["threshold"] == eps_min]
    c["families"] = []
    for x in c["models"]:  # in their order
        mine = at_min[at_min["model"] == x["model"]]
        if len(mine):
            ends = {p: mine[mine["position"] == p].to_dict("records") for p in ("first", "last")}
            c["families"].append({"model": x["model"], "family": mine["family_kind"].iloc[0], "sxe": x["sxe"], **ends})
    kinds = set(networks["family_kind"])
    c["family_kinds"] = sorted(kinds)
    c["no_family"] = [k for k in ("encoder-only", "decoder-only", "encoder-decoder") if k not in kinds]
    # the encoder-decoder aside
    c["aside"] = []  # per encoder-decoder model, its rows (what, target) by ε
    for m, g in aside.groupby("model", sort=True) if len(aside) else []:
        by_eps = [
            (what, tg, {float(r["threshold"]): r for r in h.to_dict("records")})
            for (what, tg), h in g.groupby(["what", "target"], sort=False)
        ]
        c["aside"].append({"model": m, "eps": sorted(g["threshold"].unique()), "rows": by_eps})
    c["swaps"] = []  # per model with swaps at ε_min: how many are slower than from scratch, and is resetting all
    for m, mine in aside[aside["threshold"] == eps_min].groupby("model", sort=True) if len(aside) else []:
        swaps, item = mine[mine["item"].isin(SWAP_ITEMS)], mine["item"]
        slower = mine.loc[item == "reset_all", "slower_than_scratch"]
        if len(swaps):
            scratch = mine.loc[item == "scratch", "median"].tolist()
            c["swaps"].append((m, int(swaps["slower_than_scratch"].sum()), len(swaps), scratch, bool(slower.any())))
    c["as_if_reset"] = as_if_reset(aside, c.get("hl_first") or eps_min)
    # damage and similarity
    damage = survival.in_setting(t["damage_cost"], setting)
    c["damage"] = damage[damage["threshold"].isin(eps_pair)].to_dict("records")
    ck = t["cka"]
    c["cka"] = (ck["cka"].mean(), ck["cka"].min(), ck["cka"].max(), ck["cka_floor"].mean()) if len(ck) else None
    # caveats
    per_model = (healed[~survival.left_out(healed)] if len(healed) else healed).groupby("model")["pretrain_seed"]
    c["clusters"] = per_model.nunique().astype(float).tolist()
    c["moved"] = (int(flags["n_control_moved"].sum()), int(flags["n_rows"].sum()))
    if len(drift):
        usable = healed.loc[~survival.left_out(healed), ["model", "pretrain_seed"]]
        drift = drift.merge(usable, on=["model", "pretrain_seed"]).dropna(subset=["drift_worst"])
    worst = drift.loc[drift["drift_worst"].abs().groupby(drift["model"]).idxmax()] if len(drift) else drift
    c["drift"] = [
        (r["model"], r["drift_worst"], bool(drift.loc[drift["model"] == r["model"], "beyond_tolerance"].any()))
        for _, r in worst.iterrows()
    ]
    sxe = drift.merge(networks[["model", "pretrain_seed", "pretrain_examples"]], how="left")
    onset = (sxe["beyond_examples"] / sxe["pretrain_examples"]).dropna()
    within = int((drift["n_controls"] - drift["n_beyond"]).sum())  # the controls that never moved beyond the bound
    median_onset = num(float(onset.median())) if len(onset) else ""
    c["drift_counts"] = (within, int(drift["n_controls"].sum()), median_onset, span(onset)) if len(drift) else None
    res = t["resolved_eps"]
    at_min = res[res["threshold"].astype(float) == float(res["threshold"].min())] if len(res) else res
    read_at = "n_crossings" in at_min.columns  # tables written before the column: the whole run's drift only
    crossing = at_min.iloc[0] if read_at and len(at_min) and int(at_min["n_crossings"].iloc[0]) else None
    # the matched controls where the costs at eps_min are read: (worst drift there, its model, within eps_min / 4)
    c["crossing"] = (
        (float(crossing["crossing_drift"]), crossing["crossing_model"], bool(crossing["controls_resolve"]))
        if crossing is not None
        else None
    )
    c["scale"] = (
        span(flags["n_params"].astype(float)),
        span(pd.to_numeric(flags["pretrain_tokens"], errors="coerce"), compact),
    )
    c["reference_sizes"] = REFERENCE_SIZES
    c["related"] = related_work.comparisons(t)
    return c


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    env.globals.update(isinf=lambda x: math.isinf(float(x)), isnan=lambda x: pd.isna(x), headline=HEADLINE)
    return env


def markdown(tables: dict[str, pd.DataFrame], summary: pd.DataFrame, networks: pd.DataFrame, links: dict) -> str:
    """The page in Markdown: the template over ``context``."""
    text = _environment().get_template("answer.md.j2").render(**context(tables, summary, networks, links))
    return _tidy(text)


def _kind(line: str) -> str:
    return "" if not line.strip() else "table" if line.startswith("|") else "list" if line.startswith("- ") else "text"


def _tidy(text: str) -> str:
    """One blank line between blocks (paragraphs, headings, tables, lists), none inside a table or a list."""
    out: list[str] = []
    for line in text.splitlines():
        kind = _kind(line)
        if not kind:
            if out and out[-1]:
                out.append("")
            continue
        if out and out[-1] and (_kind(out[-1]) != kind or kind == "text" or line.startswith("#")):
            out.append("")
        out.append(line.rstrip())
    return "\n".join(out).strip() + "\n"


def html(md: str) -> str:
    """The page in HTML (markdown-it-py, CommonMark with tables)."""
    body = MarkdownIt("commonmark").enable("table").render(md)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>selfheal: the answer</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>\n" + body + "</body></html>\n"
    )


def as_if_reset(aside: pd.DataFrame, eps: float | None) -> list[dict]:
    """Per encoder-decoder model, at ``eps`` (the headline's first ε): which of its aside's resets act as if the
    whole model had been reset (``like_reset_all``) and which do not, each with its median and its ratio to the
    every-layer reset's median, and that reset's own median and interval. A reset whose description the model's
    aside repeats (one encoder layer, per layer) is labelled with its target too."""
    if not len(aside) or eps is None or "like_reset_all" not in aside.columns:
        return []
    out = []
    for m, mine in aside[aside["threshold"].astype(float) == float(eps)].groupby("model", sort=True):
        every = mine[mine["item"] == "reset_all"]
        rows = mine[mine["like_reset_all"].notna()]
        if not len(every) or not len(rows):
            continue
        every = every.iloc[0]
        scale = float(every["median"]) if math.isfinite(float(every["median"])) else math.nan
        repeated = rows["what"].duplicated(keep=False)
        items = [
            {**r, "label": f"{r['what']} `{r['target']}`" if twice else r["what"], "ratio": float(r["median"]) / scale}
            for r, twice in zip(rows.to_dict("records"), repeated, strict=True)
        ]
        out.append(
            {
                "model": m,
                "eps": float(eps),
                "unit": every["unit"],
                "reset_all": every.to_dict(),
                "like": [r for r in items if r["like_reset_all"]],
                "unlike": [r for r in items if not r["like_reset_all"]],
            }
        )
    return out
