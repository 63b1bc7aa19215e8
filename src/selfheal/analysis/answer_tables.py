"""The answer tables (``results/answer/*.parquet``, schemas in docs/outputs.md), computed from summary, curves and
networks: ``compute`` builds them all. The survival estimates are ``survival.py``'s, the scaling fit and the
damage-cost correlation ``scaling.py``'s, the out-of-sample check of the fit ``out_of_sample.py``'s; this module
adds the tables about networks and controls (pretraining's own curve as the from-scratch reference, the quality
flags, the size ordering of the baselines, how far training alone moves a network) and the per-cell views the
figures draw.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis import controls, headline, out_of_sample, resolution, scaling, survival, verdicts
from selfheal.analysis.stats import (
    DRIFT_TOLERANCE,
    SAME_REGIME,
    budget_column,
    copies,
    cost_unit,
    fewest_crossing,
    typed,
    with_set_epochs,
)
from selfheal.heal.thresholds import threshold_loss

ZERO_OUT = "zero_out"  # grid.ZERO_OUT: the init whose output projections start at zero (no training stack here)

TABLES = [
    "survival",
    "recovered_curves",
    "fit",
    "damage_cost",
    "damage_cells",
    "cka",
    "pretrain_reference",
    "networks_flags",
    "size_ordering",
    "control_drift",
    "against_control",
    "out_of_sample",
    "encoder_decoder",
    "network_costs",
    "validation_error",
    "resolved_eps",
    "headline",
    "size_effects",
]
NETWORK_COST_COLUMNS = [
    "model",
    "pretrain_seed",
    "target",
    "kind",
    "position",
    "depth",
    "rel_depth",
    *survival.SETTING,
    "seed",
    "threshold",
    "outcome",
    "lower",
    "upper",
    "budget_examples",
    "pretrain_examples",
    "fraction_lo",
    "fraction_hi",
    "stall_gap",
    "end_examples",
    "scratch_examples",
    "projected",
    "projected_relative",
    "control_lower",
    "control_upper",
]
VALIDATION_ERROR_COLUMNS = [
    "model",
    "val_sequences_se",
    "n_cells",
    "eps_min",
    "baseline_loss",
    "target_se",
    "resolves",
    "n_confirmed",
    "n_not_confirmed",
]
CKA_KEYS = ["model", "target", "depth", "regime", "policy", "init", "threshold"]  # a cka row's layer and setting
CKA_COLUMNS = [*CKA_KEYS, "cka", "cka_lo", "cka_hi", "cka_floor", "n_cells", "n_clusters"]
REFERENCE_COLUMNS = [
    "model",
    "pretrain_seed",
    "threshold",
    "baseline_loss",
    "examples_lo",
    "examples_hi",
    "fraction_lo",
    "fraction_hi",
    "examples",
    "fraction",
    "coarse",
]
FLAG_COLUMNS = [
    "model",
    "pretrain_seed",
    "family_kind",
    "n_layer",
    "d_model",
    "n_params",
    "pretrain_tokens",
    "pretraining_tokens",
    "degenerate",
    "degenerate_reason",
    "off_plateau",
    "source",
    "n_rows",
    "n_baseline_not_converged",
    "n_control_moved",
    "raced",
]
CONTROL_DRIFT_COLUMNS = [
    "model",
    "pretrain_seed",
    "regime",
    "n_controls",
    "baseline_loss",
    "examples",
    "drift_median",
    "drift_min",
    "drift_max",
    "drift_worst",
    "n_beyond",
    "beyond_examples",
]
SIZE_ORDERING_COLUMNS = [
    "model_a",
    "model_b",
    "varied",
    "value_a",
    "value_b",
    "mean_loss_a",
    "mean_loss_b",
    "difference",
    "seed_spread",
    "n_seeds",
    "holds",
]
DAMAGE_CELL_COLUMNS = [
    "model",
    "pretrain_seed",
    "seed",
    "target",
    "depth",
    *survival.SETTING,
    "threshold",
    "damage",
    "cost",
    "recovered",
]
ENCODER_DECODER_COLUMNS = [
    "model",
    "threshold",
    "item",
    "what",
    "target",
    "policy",
    "init",
    "unit",
    "median",
    "median_lo",
    "median_hi",
    "budget",
    "n_cells",
    "n_censored",
    "n_stalled",
    "n_still_falling",
    "n_not_damaged",
    "relative_to_scratch",
    "budget_relative_to_scratch",
    "projected",
    "projected_relative",
    "control_median",
    "control_median_lo",
    "control_median_hi",
    "control_relative_to_scratch",
    "control_stopped",
    "control_beyond_relative",
]


# The encoder-decoder aside, in the order the page lists it: (item, what, targets, policy, init), each in the asker's
# regime (frozen); init zero_out: a gated swap, the cross-attention's output starts at zero. ``targets``: a prefix of
# the layers' targets, targets joined by "|", or the encoder swaps "donor" (swap-<model>) or "width" (swap<w>), whose
# donor or width ``what`` names. The "scratch" row is pretraining's own curve (pretrain_reference).
ENCODER_DECODER_ITEMS = [
    ("encoder_layer", "one encoder layer", "enc.", "full", "fresh"),
    ("decoder_layer", "one decoder layer", "dec.", "full", "fresh"),
    ("cross_attention", "one decoder layer's cross-attention", "dec.", "cross_attn", "fresh"),
    ("all_cross_attention", "all cross-attention", "all|dec", "cross_attn", "fresh"),
    ("donor_swap", "{donor}'s trained encoder, trainable", "donor", "full", "fresh"),
    ("donor_swap_gated", "{donor}'s trained encoder, trainable, gated", "donor", "full", ZERO_OUT),
    ("donor_swap_frozen", "{donor}'s trained encoder, frozen", "donor", "cross_attn", "fresh"),
    ("donor_swap_frozen_gated", "{donor}'s trained encoder, frozen, gated", "donor", "cross_attn", ZERO_OUT),
    (
        "donor_stitch",
        "{donor}'s trained encoder, frozen, stitched in (cross-attention kept)",
        "donor",
        "stitch",
        "fresh",
    ),
    ("encoder_swap", "a fresh encoder of width {width}", "width", "full", "fresh"),
    ("encoder_swap_gated", "a fresh encoder of width {width}, gated", "width", "full", ZERO_OUT),
    ("reset_all", "every layer reset", "all", "full", "fresh"),
]
SWAP_ITEMS = tuple(item for item, *_ in ENCODER_DECODER_ITEMS if "swap" in item)


def _item_rows(s: pd.DataFrame, targets: str, policy: str, init: str) -> pd.Series:
    """Which survival rows an aside item reads (``ENCODER_DECODER_ITEMS``)."""
    if targets in ("donor", "width"):
        picked = (s["kind"] == survival.SWAP) & (s["target"].str.startswith("swap-") == (targets == "donor"))
    elif targets.endswith("."):
        picked = s["target"].str.startswith(targets)
    else:
        picked = s["target"].isin(targets.split("|"))
    return picked & (s["policy"] == policy) & (s["init"] == init)


def _what(what: str, target: str) -> str:
    """An item's words with its swap's donor or width filled in from the target (swap-<model>, swap<w>)."""
    donor = target[len("swap-") :] if target.startswith("swap-") else ""
    width = target[len("swap") :] if target.startswith("swap") and not donor else ""
    return what.format(donor=donor, width=width)


def cka(cells: pd.DataFrame) -> pd.DataFrame:
    rows = survival.estimable(cells)
    if "cka" not in rows.columns:
        return pd.DataFrame(columns=CKA_COLUMNS)
    rows = rows[(rows["kind"] == survival.LAYER) & rows["cka"].notna()]
    out = []
    for key, group in rows.groupby(CKA_KEYS, sort=True):
        values = group["cka"].astype(float).to_numpy()
        col, units = survival.resample_units(group)
        boot, probs = [], []
        if len(units) > 1:
            for draw, prob in survival.cluster_resamples([units]):
                w = np.array([draw.get(u, 0) for u in group[col]], dtype=float)
                boot.append(float(np.average(values, weights=w)))
                probs.append(prob)
        lo, hi = survival.weighted_interval(boot, probs) if probs else (values.mean(), values.mean())
        floor = group["cka_floor"].astype(float).mean() if "cka_floor" in group else math.nan
        out.append(
            {
                **dict(zip(CKA_KEYS, key)),
                "cka": float(values.mean()),
                "cka_lo": lo,
                "cka_hi": hi,
                "cka_floor": floor,
                "n_cells": len(group),
                "n_clusters": int(group["pretrain_seed"].nunique()),
            }
        )
    return pd.DataFrame(out, columns=CKA_COLUMNS)


def pretrain_curves(curves: pd.DataFrame, networks: pd.DataFrame, scratch_only: bool = False) -> dict:
    """Each network's own pretraining curves, one (examples, val_loss) pair of arrays per copy of its lr race
    (``stats.copies``; the from-scratch cost is the fewest examples of any, ``stats.fewest_crossing``), keyed
    (model, pretrain_seed), in that order: the one builder of the from-scratch reference (``pretrain_reference`` here, summary.parquet's scratch_*
    columns in analysis/tables.py; the retraining budget's, ``heal.budget``, reads the same curve). ``scratch_only``:
    only the networks of ``networks`` pretrained here (its source ``scratch``, every one without the column)."""
    pre = curves[curves["kind"] == "pretrain"] if "kind" in curves.columns else curves.iloc[:0]
    keep = None
    if scratch_only:
        sources = networks["source"] if "source" in networks.columns else pd.Series("scratch", index=networks.index)
        keep = {
            (m, int(p)) for m, p, src in zip(networks["model"], networks["pretrain_seed"], sources) if src == "scratch"
        }
    return {
        (model, int(ps)): copies(group)
        for (model, ps), group in pre.groupby(["model", "pretrain_seed"], sort=True)
        if keep is None or (model, int(ps)) in keep
    }


def pretrain_reference(curves: pd.DataFrame, networks: pd.DataFrame, thresholds) -> pd.DataFrame:
    """Pretraining's own curve as the reference: where the from-scratch run first got within eps of the network's
    baseline (``first_crossing``: the bracketing evaluations, the interpolated crossing and whether the bracket is
    coarse; censored when it never did)."""
    out = []
    if "pretrain_seed" not in curves.columns:
        return pd.DataFrame(columns=REFERENCE_COLUMNS)
    for (model, ps), curve in pretrain_curves(curves, networks).items():
        net = networks[(networks["model"] == model) & (networks["pretrain_seed"] == ps)]
        if not len(net):
            continue
        baseline = float(net["baseline_loss"].iloc[0])
        sxe = net["pretrain_examples"].iloc[0]
        known = sxe is not None and not pd.isna(sxe) and sxe > 0
        for eps in thresholds:
            c = fewest_crossing(curve, threshold_loss(baseline, eps))
            out.append(
                {
                    "model": model,
                    "pretrain_seed": ps,
                    "threshold": eps,
                    "baseline_loss": baseline,
                    "examples_lo": c.examples_lo,
                    "examples_hi": c.examples_hi,
                    "fraction_lo": c.examples_lo / sxe if known else math.nan,
                    "fraction_hi": c.examples_hi / sxe if known and c.examples_hi is not None else math.nan,
                    "examples": c.examples,
                    "fraction": c.examples / sxe if known else math.nan,
                    "coarse": c.coarse,
                }
            )
    return typed(
        pd.DataFrame(out, columns=REFERENCE_COLUMNS),
        Int64=["examples_lo", "examples_hi"],
        float64=["fraction_lo", "fraction_hi", "examples", "fraction"],
        bool=["coarse"],
    )


def size_ordering(networks: pd.DataFrame) -> pd.DataFrame:
    """Does the baseline fall with D at fixed N, and not rise with N at fixed D, by more than the spread between
    pretraining seeds? One row per pair of models of the same family (arch), source and SAME_REGIME (S and
    context) that differ in exactly one of n_layer and d_model (its columns: docs/outputs.md); n_seeds: the smaller
    of the two models' numbers of seeds."""
    needs = ["model", "pretrain_seed", "arch", "n_layer", "d_model", "baseline_loss"]
    if not len(networks) or any(c not in networks.columns for c in needs):
        return _typed_size_ordering([])
    nets = with_set_epochs(networks)
    for column in ("source",) + SAME_REGIME:
        nets[column] = nets[column].fillna(-1) if column in nets.columns else ""
    per = nets.groupby("model", sort=True).agg(
        arch=("arch", "first"),
        source=("source", "first"),
        n_layer=("n_layer", "first"),
        d_model=("d_model", "first"),
        mean_loss=("baseline_loss", "mean"),
        spread=("baseline_loss", lambda v: float(v.max() - v.min())),
        n_seeds=("pretrain_seed", "nunique"),
        **{c: (c, "first") for c in SAME_REGIME},
    )
    rows = []
    models = list(per.index)
    for i, a in enumerate(models):
        for b in models[i + 1 :]:
            ra, rb = per.loc[a], per.loc[b]
            if any(ra[c] != rb[c] for c in ("arch", "source") + SAME_REGIME):
                continue  # one thing at a time: same family, source, data and schedule
            same_n, same_d = ra["n_layer"] == rb["n_layer"], ra["d_model"] == rb["d_model"]
            if same_n == same_d:  # both differ, or neither
                continue
            varied = "d_model" if same_n else "n_layer"
            (a_, ra_), (b_, rb_) = sorted([(a, ra), (b, rb)], key=lambda m: m[1][varied])  # a: the smaller
            difference = float(rb_["mean_loss"] - ra_["mean_loss"])
            spread = float(max(ra_["spread"], rb_["spread"]))
            holds = difference < -spread if varied == "d_model" else difference < spread
            rows.append(
                {
                    "model_a": a_,
                    "model_b": b_,
                    "varied": varied,
                    "value_a": int(ra_[varied]),
                    "value_b": int(rb_[varied]),
                    "mean_loss_a": float(ra_["mean_loss"]),
                    "mean_loss_b": float(rb_["mean_loss"]),
                    "difference": difference,
                    "seed_spread": spread,
                    "n_seeds": int(min(ra_["n_seeds"], rb_["n_seeds"])),
                    "holds": bool(holds),
                }
            )
    rows.sort(key=lambda r: (r["varied"], r["model_a"], r["model_b"]))
    return _typed_size_ordering(rows)


def _typed_size_ordering(rows: list[dict]) -> pd.DataFrame:
    return typed(
        pd.DataFrame(rows, columns=SIZE_ORDERING_COLUMNS),
        object=["model_a", "model_b", "varied"],
        int64=["value_a", "value_b", "n_seeds"],
        float64=["mean_loss_a", "mean_loss_b", "difference", "seed_spread"],
        bool=["holds"],
    )


def flags(cells: pd.DataFrame, networks: pd.DataFrame, curves: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per network: its quality flags, its cells' counts and ``raced``: it was pretrained by the raced recipe
    (``curves``' pretraining rows carry its ``lr``; a network trained before the race has none)."""
    # the columns a networks table written before them lacks, as they read there
    missing = {"pretrain_tokens": pd.NA, "pretraining_tokens": pd.NA, "source": "scratch", "degenerate_reason": ""}
    nets = networks.assign(**{column: value for column, value in missing.items() if column not in networks})
    nets["degenerate_reason"] = nets["degenerate_reason"].fillna("").astype(str)
    counts = (
        cells[~cells["is_control"]]
        .groupby(survival.CLUSTER)
        .agg(
            n_rows=("threshold", "size"),
            n_baseline_not_converged=("baseline_not_converged", "sum"),
            n_control_moved=("control_moved", "sum"),
        )
        .reset_index()
    )
    table = nets.merge(counts, on=survival.CLUSTER, how="left")
    for column in ("n_rows", "n_baseline_not_converged", "n_control_moved"):
        table[column] = table[column].fillna(0).astype(int)
    raced = set()
    if curves is not None and "lr" in curves.columns:
        pre = curves[curves["kind"] == "pretrain"]
        lrs = pre.groupby(survival.CLUSTER)["lr"].count()
        raced = {(m, int(ps)) for (m, ps), n in lrs.items() if n > 0}
    table["raced"] = [(m, int(ps)) in raced for m, ps in zip(table["model"], table["pretrain_seed"])]
    return table.reindex(columns=FLAG_COLUMNS)


def damage_cells(cells: pd.DataFrame) -> pd.DataFrame:
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


def network_costs(cells: pd.DataFrame) -> pd.DataFrame:
    """Every network's own cost beside the medians (its columns: docs/outputs.md): per reported cell (not a control)
    and threshold, its outcome and cost interval, where its retraining ended, where its last rate of fall would reach
    the threshold (``projected_examples``) and its crossing against its matched control."""
    rows = survival.reported(cells).copy()
    undamaged = rows["status"] == "not_damaged"
    for column in ("lower", "upper", "stall_gap"):  # a cell not damaged has no cost
        rows[column] = rows[column].where(~undamaged)
    base = rows["pretrain_examples"].astype(float)
    rows["fraction_lo"] = rows["lower"] / base
    rows["fraction_hi"] = rows["upper"] / base
    rows["outcome"] = rows["outcome"].astype(str)
    back = rows["outcome"].isin(["recovered", "not_damaged"])
    rows["end_examples"] = rows["examples"].astype(float).where(~back)
    rows["scratch_examples"] = rows["scratch_examples"].astype(float)
    rows["projected"] = projected_examples(rows)
    scratch = rows["scratch_examples"].where(rows["scratch_examples"] > 0)
    rows["projected_relative"] = rows["projected"] / scratch
    # a summary written before the crossings against the matched control has neither column: no control to read
    unknown = pd.Series(math.nan, index=rows.index)
    control_lo = rows.get("control_examples_lo", unknown).astype("Float64").astype(float)
    control_hi = rows.get("control_examples_hi", unknown).astype("Float64").astype(float)
    rows["control_lower"] = control_lo
    rows["control_upper"] = control_hi.where(control_lo.isna() | control_hi.notna(), math.inf)
    return rows.reindex(columns=NETWORK_COST_COLUMNS).sort_values(
        ["model", "threshold", "target", "pretrain_seed", "seed"], ignore_index=True
    )


def validation_error(summary: pd.DataFrame) -> pd.DataFrame:
    """Per model: the median standard error of a cell's (cell - baseline) loss difference on the fixed validation
    set (``val_diff_se``, from each cell's confirmation), against ε_min x baseline / 5, the most it may be for the
    set to resolve ε_min; and how many recovered crossings of ε_min the confirmation confirmed."""
    out = []
    for model, rows in summary.groupby("model", sort=True):
        eps_min = float(rows["threshold"].min())
        baseline = float(rows["baseline_loss"].median())
        se = rows.drop_duplicates(["pretrain_seed", "target", "policy", "init", "regime", "seed"])["val_diff_se"]
        se = se.dropna()
        at_min = rows[(rows["threshold"] == eps_min) & rows["confirmed"].notna()]
        target = resolution.SE_SHARE * eps_min * baseline
        median = float(se.median()) if len(se) else math.nan
        out.append(
            {
                "model": model,
                "val_sequences_se": median,
                "n_cells": len(se),
                "eps_min": eps_min,
                "baseline_loss": baseline,
                "target_se": target,
                "resolves": bool(len(se)) and median <= target,
                "n_confirmed": int(at_min["confirmed"].astype(bool).sum()),
                "n_not_confirmed": int((~at_min["confirmed"].astype(bool)).sum()),
            }
        )
    return pd.DataFrame(out, columns=VALIDATION_ERROR_COLUMNS)


def compute(
    summary: pd.DataFrame, curves: pd.DataFrame, networks: pd.DataFrame, workers: int = 1
) -> dict[str, pd.DataFrame]:
    """Every answer table. ``workers``: processes for the scaling fit's bootstrap refits (the same numbers)."""
    cells = survival.prepare(summary, networks)
    thresholds = sorted(summary["threshold"].unique())
    surv = survival.estimate(cells)
    ref = pretrain_reference(curves, networks, thresholds)
    against = against_control(cells)
    tables = {
        "survival": surv,
        "recovered_curves": survival.recovered_curves(cells),
        "fit": scaling.fit(cells, workers=workers),
        "damage_cost": scaling.damage_cost(cells),
        "damage_cells": damage_cells(cells),
        "cka": cka(cells),
        "pretrain_reference": ref,
        "networks_flags": flags(cells, networks, curves),
        "size_ordering": size_ordering(networks),
        "control_drift": control_drift(curves, networks, float(min(thresholds)) if thresholds else None),
        "against_control": against,
        "out_of_sample": out_of_sample.check(cells, surv, workers=workers),
        "encoder_decoder": encoder_decoder(surv, ref, networks, cells, against),
        "network_costs": network_costs(cells),
        "validation_error": validation_error(summary),
    }
    t = verdicts.add(tables, networks, float(min(thresholds)) if thresholds else None)
    setting = headline.setting(t["survival"], t["encoder_decoder"])
    around = cells.assign(control_loss_around=controls.control_loss_around(cells, curves))
    t["resolved_eps"] = resolution.resolved_eps(
        thresholds, t["validation_error"], t["control_drift"], networks, setting[0] if setting else None, around
    )
    t["headline"] = headline.headline(t["survival"], t["against_control"], t["resolved_eps"], networks, setting)
    t["size_effects"] = headline.size_effects(t["survival"], networks, setting, cells)
    return t


def projected_examples(cells: pd.DataFrame) -> pd.Series:
    """Per (cell, threshold) row: its cost in examples where it got back; where it was still falling at its budget,
    the examples at which its last rate of fall would reach the threshold: the end examples x 2^(gap / fall), the
    gap being final_loss - threshold_loss and the fall the stall rule's fall of the validation loss over the last
    doubling of examples (``fall_per_doubling``). That is a guess, and an optimistic one: a recovery curve's fall per
    doubling shrinks as it goes. inf for a cell that stalled or diverged; NaN for one never damaged beyond the
    threshold."""
    outcome = cells["outcome"].astype(str)
    examples = cells["examples"].astype(float)
    gap = cells["final_loss"].astype(float) - cells["threshold_loss"].astype(float)
    fall = cells["fall_per_doubling"].astype(float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        falling = examples * np.exp2(gap / fall)
    out = pd.Series(math.inf, index=cells.index, dtype="float64")
    out[outcome == "recovered"] = examples[outcome == "recovered"]
    still = (outcome == "still_falling") & (fall > 0)
    out[still] = falling[still]
    out[outcome == "not_damaged"] = math.nan
    return out


def _lower_median(values: np.ndarray) -> float:
    """The lower median (with two networks, the faster one's, as the survival medians read)."""
    values = np.sort(values[~np.isnan(values)])
    return float(values[(len(values) - 1) // 2]) if len(values) else math.nan


def encoder_decoder(
    surv: pd.DataFrame,
    ref: pd.DataFrame,
    networks: pd.DataFrame,
    cells: pd.DataFrame | None = None,
    against: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The encoder-decoder aside (its columns: docs/outputs.md): per encoder-decoder model and threshold, a row per
    survival group of each item (``ENCODER_DECODER_ITEMS``), in the survival table's unit, beside pretraining from
    scratch to the same loss (the ``scratch`` row, from ``ref``, ``pretrain_reference``), each cost and budget over
    that; ``projected`` from ``cells`` (``survival.prepare``'s rows) for a row beyond the budget with a cell still
    falling, the ``control_*`` medians from ``against`` (the ``against_control`` table)."""
    out = []
    keys = ["model", "threshold", "regime", "target", "policy", "init"]
    regime = survival.ASKED[0]
    controls = against.set_index(keys) if against is not None and len(against) else None
    estimable = survival.estimable(cells) if cells is not None and len(cells) else None
    projection = projected_examples(estimable) if estimable is not None else None
    kinds = networks.drop_duplicates("model").set_index("model")["family_kind"] if len(networks) else pd.Series()
    models = [m for m, k in kinds.items() if k == "encoder-decoder"]
    rows = surv[surv["model"].isin(models) & (surv["regime"] == regime)] if len(surv) else surv
    for (model, eps), group in rows.groupby(["model", "threshold"], sort=True):
        unit = cost_unit(group, networks)
        scratch = ref[(ref["model"] == model) & (ref["threshold"] == eps)] if len(ref) else ref
        scratch_median = float(scratch[unit].astype(float).fillna(math.inf).median()) if len(scratch) else math.nan
        row = {"model": model, "threshold": float(eps), "unit": unit}
        for item, what, *which in ENCODER_DECODER_ITEMS:
            for _, r in group[_item_rows(group, *which)].sort_values("target").iterrows():
                key = (model, eps, regime, r["target"], r["policy"], r["init"])
                projected = math.nan
                if math.isinf(r[f"median_{unit}"]) and int(r["n_still_falling"]) and projection is not None:
                    mine = estimable[(estimable[keys] == list(key)).all(axis=1)]
                    scale = mine["pretrain_examples"].astype(float) if unit == "fraction" else 1.0
                    projected = _lower_median((projection[mine.index] / scale).to_numpy(float))
                control = controls.loc[key] if controls is not None and key in controls.index else None
                against_median = (
                    [math.nan] * 3
                    if control is None
                    else [float(control[f"median_{unit}{end}"]) for end in ("", "_lo", "_hi")]
                )
                # against the control, a median beyond where its cells stopped short of the budget (their own rule)
                stopped = control is not None and math.isinf(against_median[0]) and int(control["n_stopped"]) > 0
                beyond = float(control[f"beyond_{unit}"]) if stopped else math.nan
                out.append(
                    {
                        **row,
                        "item": item,
                        "what": _what(what, r["target"]),
                        "target": r["target"],
                        "policy": r["policy"],
                        "init": r["init"],
                        "median": r[f"median_{unit}"],
                        "median_lo": r[f"median_{unit}_lo"],
                        "median_hi": r[f"median_{unit}_hi"],
                        "budget": r[budget_column(unit)],
                        "n_cells": int(r["n_cells"]),
                        "n_censored": int(r["n_censored"]),
                        "n_stalled": int(r["n_stalled"]),
                        "n_still_falling": int(r["n_still_falling"]),
                        "n_not_damaged": int(r["n_not_damaged"]),
                        "relative_to_scratch": _ratio(r[f"median_{unit}"], scratch_median),
                        "budget_relative_to_scratch": _ratio(r[budget_column(unit)], scratch_median),
                        "projected": projected,
                        "projected_relative": _ratio(projected, scratch_median),
                        "control_median": against_median[0],
                        "control_median_lo": against_median[1],
                        "control_median_hi": against_median[2],
                        "control_relative_to_scratch": _ratio(against_median[0], scratch_median),
                        "control_stopped": stopped,
                        "control_beyond_relative": _ratio(beyond, scratch_median),
                    }
                )
        if len(scratch):
            v = scratch[unit].astype(float)
            reached = v.dropna()
            out.append(
                {
                    **dict.fromkeys(ENCODER_DECODER_COLUMNS, math.nan),  # no budget, projection or control
                    **row,
                    "item": "scratch",
                    "what": "pretraining from scratch to the same loss",
                    "target": "",
                    "policy": "",
                    "init": "",
                    "median": scratch_median,
                    "median_lo": float(reached.min()) if len(reached) else math.inf,
                    "median_hi": float(v.fillna(math.inf).max()),
                    "n_cells": len(v),
                    "n_censored": int(v.isna().sum()),
                    "n_stalled": 0,
                    "n_still_falling": 0,
                    "n_not_damaged": 0,
                    "relative_to_scratch": 1.0 if math.isfinite(scratch_median) else math.nan,
                    "control_stopped": False,
                }
            )
    counts = ["n_cells", "n_censored", "n_stalled", "n_still_falling", "n_not_damaged"]
    words = ["model", "item", "what", "target", "policy", "init", "unit"]
    numbers = [c for c in ENCODER_DECODER_COLUMNS if c not in counts + words + ["control_stopped"]]
    return typed(
        pd.DataFrame(out, columns=ENCODER_DECODER_COLUMNS), int64=counts, float64=numbers, bool=["control_stopped"]
    )


def _ratio(cost, scratch: float) -> float:
    """A cost over pretraining's own from-scratch cost to the same loss (inf when the cost is beyond the budget;
    NaN when the from-scratch cost is unknown or never reached)."""
    cost = float(cost) if cost is not None and not pd.isna(cost) else math.nan
    if not math.isfinite(scratch) or scratch <= 0 or math.isnan(cost):
        return math.nan
    return cost / scratch


def control_drift(curves: pd.DataFrame, networks: pd.DataFrame, eps_min: float | None = None) -> pd.DataFrame:
    """How far training alone moves each network's loss: per network and regime, its matched no-reset controls
    (the reset cells' tensors trained from their trained values, init ``trained``) at the end of their runs, as
    val loss / baseline − 1 (negative: training alone went below the baseline). A network off its plateau shows
    here how much of a cell's "recovery" further training could account for. With ``eps_min`` (the smallest ε):
    how many controls ever moved beyond ± DRIFT_TOLERANCE x eps_min (the method's bound), and the median of the examples at
    which each of them first did (when the drift sets in)."""
    rec = curves[(curves["kind"] == "recovery") & (curves["init"] == survival.MATCHED_CONTROL_INIT)]
    out = []
    for (model, ps, regime), group in rec.groupby(["model", "pretrain_seed", "regime"], sort=True):
        net = networks[(networks["model"] == model) & (networks["pretrain_seed"] == ps)]
        if not len(net):
            continue
        baseline = float(net["baseline_loss"].iloc[0])
        ends = group.sort_values("examples").groupby(["target", "policy", "seed"]).tail(1)
        drift = ends["val_loss"].astype(float) / baseline - 1
        # every evaluation after the start, not only the ends: the largest move either way
        after = group[group["examples"].astype(float) > 0]
        along = after["val_loss"].astype(float) / baseline - 1
        beyond = after[np.abs(along) > DRIFT_TOLERANCE * eps_min] if eps_min is not None else after.iloc[:0]
        onsets = beyond.groupby(["target", "policy", "seed"])["examples"].min().astype(float)
        out.append(
            {
                "model": model,
                "pretrain_seed": int(ps),
                "regime": regime,
                "n_controls": len(ends),
                "baseline_loss": baseline,
                "examples": float(ends["examples"].median()),
                "drift_median": float(drift.median()),
                "drift_min": float(drift.min()),
                "drift_max": float(drift.max()),
                "drift_worst": float(along.iloc[np.abs(along.to_numpy()).argmax()]) if len(along) else math.nan,
                "n_beyond": len(onsets) if eps_min is not None else pd.NA,
                "beyond_examples": float(onsets.median()) if len(onsets) else math.nan,
            }
        )
    table = pd.DataFrame(out, columns=CONTROL_DRIFT_COLUMNS)
    table["n_beyond"] = table["n_beyond"].astype("Int64")
    return table


def against_control(cells: pd.DataFrame) -> pd.DataFrame:
    """The estimates again (``survival.estimate``'s columns) with each cell's crossing measured against its matched
    control (``control_examples_lo`` / ``_hi`` in summary.parquet: within (1 + ε) x the loss of the intact network
    retrained the same way, at the same examples) instead of against its baseline: what the cost is once what the
    retraining itself does to an intact network is taken out. Only cells with a matched control (single layers,
    sets of layers, and encoder swaps whose encoder stays frozen: ``grid.matched_control_of``); never within it
    along the shared evaluations: censored at the last of them."""
    if "control_examples_lo" not in cells.columns:  # tables written before the column
        return survival.estimate(cells.iloc[:0])
    rows = cells[cells["control_examples_lo"].notna()].copy()
    hi = rows["control_examples_hi"].astype("Float64").astype(float).fillna(math.inf)
    rows["lower"] = rows["control_examples_lo"].astype(float)
    rows["upper"] = hi
    status = np.where(hi == 0, "not_damaged", np.where(np.isfinite(hi), "recovered", "censored"))
    rows["status"] = status
    rows["outcome"] = status  # neither stalled nor still falling: the rule reads the loss, not the gap to a control
    return survival.estimate(rows)


# ---------------------------------------------------------------- the page
