"""Time to recover as a survival time, per group of cells (lifelines' Turnbull NPMLE, cluster-bootstrap intervals).

A cell's recovery cost is known only as an interval: the crossing lies in (examples_lo, examples_hi] (the last
evaluation above the threshold and the first at or below); a threshold never reached within the budget is
right-censored at the budget (hi = null). Nothing here averages a censored budget as if it were a cost.

- ``prepare`` turns ``summary.parquet`` (+ ``networks.parquet``) into one row per (cell, threshold) with the cost
  interval, the cluster (model, pretrain_seed), the layer's position, relative depth, damage and the flags. The
  controls (the matched no-reset control, init ``trained``, and the ``none`` target) and the networks flagged
  ``degenerate`` are marked and left out of every estimate.
- ``estimate`` gives per (model, family, target, regime, policy, init, threshold): the median cost (examples and
  fraction of S x E) and the probability of recovering within the budget, from lifelines'
  ``KaplanMeierFitter.fit_interval_censoring`` (the Turnbull NPMLE), each with a 95 % percentile interval from a
  bootstrap over pretraining seeds (the clusters: different pretrained networks), or over retrain seeds when a model
  has only one pretrained network (then the interval does not cover between-network variation).
- ``recovered_curves``: the NPMLE's share of cells recovered against examples seen, per group.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from selfheal.analysis.stats import flag
from selfheal.lazy import Module

lifelines = Module("lifelines")  # imported at first use: the Snakefile imports the figures' module at every start

CLUSTER = ["model", "pretrain_seed"]
SETTING = ["regime", "policy", "init"]
ASKED = ("frozen", "full", "fresh")  # the asker's setting (regime, policy, init): first wherever a grid has it
GROUP_KEYS = [
    "model",
    "family_kind",
    "n_layer",
    "d_model",
    "target",
    "kind",
    "stack",
    "layer",
    "depth",
    "position",
    "rel_depth",
    *SETTING,
    "threshold",
]
SUMMARY_NEEDS = [
    "model",
    "pretrain_seed",
    "arch",
    "n_layer",
    "d_model",
    "target",
    "stack",
    "layer",
    "depth",
    "policy",
    "init",
    "regime",
    "seed",
    "threshold",
    "recovered",
    "diverged",
    "examples_lo",
    "examples_hi",
    "baseline_loss",
    "damaged_loss",
    "final_loss",
    "threshold_loss",
    "budget_examples",
    "pretrain_examples",
    "baseline_not_converged",
    "outcome",
]
NETWORK_NEEDS = ["model", "pretrain_seed", "family_kind", "n_params", "degenerate", "off_plateau"]
MATCHED_CONTROL_INIT = "trained"
# target kinds, read from the table's columns (this module runs in the analysis env, without the training stack that
# selfheal.grid imports): a layer has a layer index; the rest are the none control, an encoder swap or a set
LAYER, SET, SWAP, NONE = "layer", "set", "swap", "none"
LEVEL = 0.95
MAX_RESAMPLES = 200  # exact enumeration up to this many distinct resamples, else this many random draws
# an interval is a 95 % bootstrap interval from this many networks (or retrain seeds) on; with fewer, the bootstrap's
# percentiles are the extreme networks' own medians, so the interval is called what it is: their range
MIN_BOOTSTRAP_UNITS = 5
INTERVAL_KINDS = ("bootstrap", "range", "none")

ESTIMATE_COLUMNS = GROUP_KEYS + [
    "n_cells",
    "n_clusters",
    "n_recovered",
    "n_censored",
    "n_stalled",
    "n_still_falling",
    "n_diverged",
    "n_not_damaged",
    "n_baseline_not_converged",
    "n_control_moved",
    "budget_examples",
    "pretrain_examples",
    "median_examples",
    "median_examples_lo",
    "median_examples_hi",
    "median_fraction",
    "median_fraction_lo",
    "median_fraction_hi",
    "p_recover",
    "p_recover_lo",
    "p_recover_hi",
    "budget_fraction",
    "stall_gap_median",
    "interval_over",
    "interval_kind",
    "n_resamples",
    "n_stopped",
    "beyond_examples",
    "beyond_fraction",
]
CURVE_COLUMNS = GROUP_KEYS + ["examples", "fraction", "recovered_share"]


def _require(table: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{name} lacks the columns {missing} (docs/outputs.md)")


def n_layers_total(n_layer: int, family_kind: str, n_dec_layer: int | None = None, max_depth=None) -> int:
    """Layers of the whole network. The tables' n_layer already counts both stacks of an encoder-decoder (the
    family's n_layers); should a table count the encoder only (a layer deeper than n_layer - 1 shows it), the
    decoder's n_dec_layer (default: as many as the encoder, as in grid.layer_ids) is added."""
    total = int(n_layer)
    if family_kind == "encoder-decoder" and max_depth is not None and not pd.isna(max_depth) and max_depth >= total:
        total += int(n_dec_layer if n_dec_layer is not None and not pd.isna(n_dec_layer) else n_layer)
    return total


def _kind(target: str, layer) -> str:
    if target == NONE:
        return NONE
    if layer is not None and not pd.isna(layer):
        return LAYER
    return SWAP if target.startswith("swap") else SET


def _position(depth, total: int) -> str:
    if total == 1:
        return "only"
    if depth == 0:
        return "first"
    if depth == total - 1:
        return "last"
    return "middle"


def stack_places(table: pd.DataFrame, totals: Sequence[int]) -> tuple[list[str], list[float]]:
    """Each single-layer row's position (``first``/``middle``/``last``/``only``) and ``middle_depth`` within its own
    stack: an encoder-decoder's encoder and decoder are stacks of their own (its decoder's first layer is a first
    layer), of ``n_dec_layer`` decoder layers (else half the network's) and the rest encoder layers; any other
    network is one stack of ``totals`` (the row's network's layers). Other rows: their kind, NaN."""
    positions, middles = [], []
    n_dec = (
        table["n_dec_layer"] if "n_dec_layer" in table.columns else pd.Series([None] * len(table), index=table.index)
    )
    for kind, family, stack, layer, depth, total, dec in zip(
        table["kind"], table["family_kind"], table["stack"], table["layer"], table["depth"], totals, n_dec
    ):
        if kind != LAYER or pd.isna(depth):
            positions.append(kind)
            middles.append(math.nan)
            continue
        place, size = int(depth), int(total)
        if family == "encoder-decoder" and stack in ("enc", "dec") and not pd.isna(layer):
            decoder = int(dec) if dec is not None and not pd.isna(dec) else total // 2
            place, size = int(layer), decoder if stack == "dec" else total - decoder
        positions.append(_position(place, size))
        middles.append(middle_depth(float(place), size))
    return positions, middles


def middle_depth(depth: float, total: int) -> float:
    """A layer's place among the middle layers (those between the first and the last) of a stack of ``total``:
    -0.5 for the second layer to +0.5 for the second-to-last, centred so that the middle layers average 0. The first
    and the last layer, and the middle layer of a 3-layer stack, are at 0: the depth fit's first- and last-layer terms
    then compare each with the middle layers, and its depth term is measured among them only."""
    if total < 4 or depth < 1 or depth > total - 2:
        return 0.0
    return (depth - 1) / (total - 3) - 0.5


def prepare(summary: pd.DataFrame, networks: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, threshold) with its cost interval [lower, upper] in examples (upper = inf: right-censored)
    and everything the estimates group and flag on. Columns added: family_kind, n_params, degenerate, off_plateau,
    kind (grid target kind), position (first/middle/last/only for one layer within its stack, else the target kind:
    ``stack_places``), rel_depth (over the whole network), middle_depth (``middle_depth``, within the stack),
    is_control, lower, upper, status, damage, stall_gap, control_moved."""
    _require(summary, SUMMARY_NEEDS, "summary.parquet")
    _require(networks, NETWORK_NEEDS, "networks.parquet")
    extra = [c for c in ("n_dec_layer", "train_sequences", "epochs", "source") if c in networks.columns]
    table = summary.merge(
        networks[NETWORK_NEEDS + extra], on=CLUSTER, how="left", suffixes=("", "_network"), validate="many_to_one"
    )
    for name in ("degenerate", "off_plateau", "baseline_not_converged"):  # the cell's flag, or its network's
        own = flag(table[name])
        table[name] = own | flag(table.pop(f"{name}_network")) if f"{name}_network" in table.columns else own
    if "n_params_network" in table.columns:
        table["n_params"] = table["n_params"].fillna(table["n_params_network"])
        table = table.drop(columns=["n_params_network"])
    table["family_kind"] = table["family_kind"].fillna("unknown")
    table["kind"] = [_kind(t, layer) for t, layer in zip(table["target"], table["layer"])]
    is_layer = (table["kind"] == LAYER).to_list()
    deepest = table.groupby("model")["depth"].transform("max")
    totals = [
        n_layers_total(n, f, d, m)
        for n, f, d, m in zip(
            table["n_layer"],
            table["family_kind"],
            table["n_dec_layer"] if "n_dec_layer" in table else [None] * len(table),
            deepest,
        )
    ]
    depth = table["depth"]
    table["position"], table["middle_depth"] = stack_places(table, totals)
    table["rel_depth"] = [
        float(d) / (tot - 1) if lay and not pd.isna(d) and tot > 1 else (0.0 if lay else math.nan)
        for lay, d, tot in zip(is_layer, depth, totals)
    ]
    table["is_control"] = (table["init"] == MATCHED_CONTROL_INIT) | (table["kind"] == NONE)
    lo = table["examples_lo"].astype("Float64").fillna(0).astype(float)
    hi = table["examples_hi"].astype("Float64").astype(float).fillna(math.inf)
    recovered = table["recovered"].astype(bool)
    hi = hi.where(recovered, math.inf)
    outcome = table["outcome"].astype(str)
    # a diverged cell did not recover within its budget: censored there, not where it diverged; so is a cell the
    # stall rule stopped before its budget (``stalled_examples``)
    lo = lo.where(~outcome.isin(["diverged", "stalled"]), table["budget_examples"].astype(float))
    table["lower"] = lo
    table["upper"] = hi
    table["status"] = np.where(outcome.isin(["stalled", "still_falling"]), "censored", outcome)
    table["damage"] = table["damaged_loss"] - table["baseline_loss"]
    # how far above its baseline a cell that never got within eps ended (to compare with eps)
    table["stall_gap"] = (table["final_loss"] / table["baseline_loss"] - 1).where(~recovered)
    if "control_loss" in table.columns:
        moved = (table["control_loss"] / table["baseline_loss"] - 1).abs() > table["threshold"]
        table["control_moved"] = flag(moved)
    else:
        table["control_moved"] = False
    return table


def in_setting(table: pd.DataFrame, setting: Sequence[str] = ASKED) -> pd.DataFrame:
    """The rows of one setting (regime, policy, init); an empty table as it is."""
    if not len(table):
        return table
    regime, policy, init = setting
    return table[(table["regime"] == regime) & (table["policy"] == policy) & (table["init"] == init)]


def left_out(table: pd.DataFrame) -> pd.Series:
    """The rows (cells or networks) of a network the estimates leave out: degenerate or off its plateau (not fully
    trained). A flag column the table lacks, or an empty flag, leaves nothing out."""
    out = pd.Series(False, index=table.index)
    for name in ("degenerate", "off_plateau"):
        if name in table.columns:
            out |= flag(table[name])
    return out


def reported(cells: pd.DataFrame) -> pd.DataFrame:
    """The rows the answer reports: not a control, on a network the estimates keep (``left_out``)."""
    return cells[~cells["is_control"] & ~left_out(cells)]


def estimable(cells: pd.DataFrame) -> pd.DataFrame:
    """The rows with a cost to estimate: those reported that the reset damaged beyond eps (a cell within eps before
    any training has no cost; the estimates count it apart, ``n_not_damaged``)."""
    rows = reported(cells)
    return rows[rows["status"] != "not_damaged"]


def _multinomial_p(counts: Sequence[int]) -> float:
    n = sum(counts)
    p = math.factorial(n) / math.prod(math.factorial(c) for c in counts)
    return p / n**n


def cluster_resamples(
    strata: Sequence[Sequence], max_resamples: int = MAX_RESAMPLES, seed: int = 0
) -> list[tuple[dict, float]]:
    """Bootstrap draws of units within strata: each draw maps every unit to how often it was drawn (its weight), with
    the draw's probability. Units are resampled with replacement within their stratum (a stratum of k units gives k
    draws). When the distinct draws are few (2 pretraining seeds per model: 3 per model), all of them are enumerated
    with their exact multinomial probabilities; otherwise ``max_resamples`` random draws of equal probability."""
    strata = [list(s) for s in strata if len(s)]
    per_stratum = [math.comb(2 * len(s) - 1, len(s)) for s in strata]
    if math.prod(per_stratum) <= max_resamples:
        options = []
        for units in strata:
            opts = []
            for combo in itertools.combinations_with_replacement(range(len(units)), len(units)):
                counts = np.bincount(combo, minlength=len(units))
                opts.append(({units[i]: int(c) for i, c in enumerate(counts) if c}, _multinomial_p(counts)))
            options.append(opts)
        draws = []
        for product in itertools.product(*options):
            weights = {}
            for w, _ in product:
                weights.update(w)
            draws.append((weights, math.prod(p for _, p in product)))
        return draws
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(max_resamples):
        weights = {}
        for units in strata:
            picks = rng.integers(0, len(units), len(units))
            for i, c in zip(*np.unique(picks, return_counts=True)):
                weights[units[i]] = int(c)
        draws.append((weights, 1.0 / max_resamples))
    return draws


def weighted_interval(values: Sequence[float], probs: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of a discrete bootstrap distribution (values with probabilities; NaN draws dropped)."""
    v = np.asarray(values, dtype=float)
    p = np.asarray(probs, dtype=float)
    keep = ~np.isnan(v)
    v, p = v[keep], p[keep]
    if not len(v):
        return (math.nan, math.nan)
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(p[order]) / p.sum()
    tail = (1 - level) / 2
    lo = v[min(np.searchsorted(cum, tail - 1e-12), len(v) - 1)]
    hi = v[min(np.searchsorted(cum, 1 - tail - 1e-12), len(v) - 1)]
    return (float(lo), float(hi))


def _npmle(lower: np.ndarray, upper: np.ndarray, weights: np.ndarray) -> pd.Series:
    """The Turnbull NPMLE of the survival function, indexed by examples, read so that a crossing counts at the
    evaluation that saw it (lifelines' lower column: at a Turnbull interval's right end its mass has fallen); each
    interval is open below (``OPEN_BELOW``). Exact
    zeros (recovered at the first evaluation) are fitted as (0, 0.5] and mapped back to 0. The fit of the same
    intervals with the same weights, in the same order, is made once (``_npmle_of``): a group's bootstrap draws and
    its groups at neighbouring ε often repeat one (about half the fits of a grid's answer), and a repeat returns
    the same numbers bit for bit."""
    keep = weights > 0
    lower, upper, weights = (np.ascontiguousarray(a[keep]) for a in (lower, upper, weights))
    key = tuple((a.dtype.str, a.tobytes()) for a in (lower, upper, weights))
    return _npmle_of(key).copy()


# lifelines fits closed intervals [lower, upper]; a crossing lies in (examples_lo, examples_hi] and a censored cell
# beyond its last evaluation, so a lower bound is fitted this far above itself (examples are whole numbers) and read
# back: one cell's crossing at an evaluation and another's bracket starting there do not overlap
OPEN_BELOW = 0.25


@functools.lru_cache(maxsize=4096)
def _npmle_of(key: tuple[tuple[str, bytes], ...]) -> pd.Series:
    lower, upper, weights = (np.frombuffer(data, dtype=dtype).copy() for dtype, data in key)
    upper = np.where(upper == 0, 0.5, upper)
    opened = np.where(lower > 0, lower + OPEN_BELOW, lower)
    fitter = lifelines.KaplanMeierFitter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitter.fit_interval_censoring(opened, upper, weights=weights)
    curve = fitter.survival_function_["NPMLE_estimate_lower"]
    index = np.asarray(curve.index, dtype=float)
    index = np.where(np.isin(index, opened[lower > 0]), index - OPEN_BELOW, index)
    curve.index = np.where(index == 0.5, 0.0, index)
    return curve.groupby(level=0).min()


def _median(curve: pd.Series) -> float:
    below = curve[curve <= 0.5]
    return float(below.index.min()) if len(below) else math.inf


def _stats(rows: pd.DataFrame, weights: np.ndarray, budget: float) -> tuple[float, float]:
    """The median cost of the weighted rows and the share of them recovered by the budget."""
    curve = _npmle(rows["lower"].to_numpy(float), rows["upper"].to_numpy(float), weights)
    by_budget = curve[curve.index <= budget]
    return _median(curve), 1.0 - (float(by_budget.iloc[-1]) if len(by_budget) else 1.0)


def _group_iter(cells: pd.DataFrame) -> Iterator[tuple[dict, pd.DataFrame]]:
    for key, rows in cells.groupby(GROUP_KEYS, dropna=False, sort=True):
        yield dict(zip(GROUP_KEYS, key)), rows


def resample_units(rows: pd.DataFrame) -> tuple[str, list]:
    """Pretraining seeds when a model has more than one; else the retrain seeds (within the one network)."""
    if rows["pretrain_seed"].nunique() > 1:
        return "pretrain_seed", sorted(rows["pretrain_seed"].unique())
    return "seed", sorted(rows["seed"].unique())


def _fraction(examples: float, pretrain_examples) -> float:
    if pretrain_examples is None or pd.isna(pretrain_examples) or not pretrain_examples:
        return math.nan
    return examples / float(pretrain_examples)


def interval_kind(n_units: int) -> str:
    """What a median's interval is (``INTERVAL_KINDS``): a 95 % bootstrap interval over at least
    ``MIN_BOOTSTRAP_UNITS`` networks (or retrain seeds), the range of their medians over fewer, none over one."""
    return "none" if n_units < 2 else "bootstrap" if n_units >= MIN_BOOTSTRAP_UNITS else "range"


def estimate(cells: pd.DataFrame, max_resamples: int = MAX_RESAMPLES) -> pd.DataFrame:
    """Per group (GROUP_KEYS) of estimable cells: counts, the median cost and P(recover within the budget) with 95 %
    cluster-bootstrap intervals (see the module docstring; ``interval_kind`` says what they are). A median not reached
    within the budget is inf; then ``beyond_examples`` is the median of where its censored cells were last seen (the
    budget, or short of it for the ``n_stopped`` cells that ended before it)."""
    out = []
    for key, group in _group_iter(reported(cells)):
        rows = group[group["status"] != "not_damaged"]
        budget = float(group["budget_examples"].max())
        pretrain_examples = group["pretrain_examples"].iloc[0]
        unit_col, units = resample_units(group)
        unit_of_row = rows[unit_col].to_numpy()
        median, p = _stats(rows, np.ones(len(rows)), budget) if len(rows) else (math.nan, math.nan)
        medians, ps, probs = [], [], []
        if len(units) > 1 and len(rows):
            for weights, prob in cluster_resamples([units], max_resamples):
                w = np.array([weights.get(u, 0) for u in unit_of_row], dtype=float)
                m, q = _stats(rows, w, budget) if w.any() else (math.nan, math.nan)  # drew only undamaged cells
                medians.append(m)
                ps.append(q)
                probs.append(prob)
        m_lo, m_hi = weighted_interval(medians, probs) if probs else (median, median)
        p_lo, p_hi = weighted_interval(ps, probs) if probs else (p, p)
        censored = rows[rows["status"] != "recovered"]
        outcomes = group["outcome"].astype(str)
        # censored cells that ended short of their budget (the stall rule, a readout against the control)
        stopped = censored[censored["lower"].astype(float) < censored["budget_examples"].astype(float)]
        beyond = float(censored["lower"].astype(float).median()) if len(censored) and math.isinf(median) else math.nan
        out.append(
            {
                **key,
                "n_cells": len(group),
                "n_clusters": int(group["pretrain_seed"].nunique()),
                **{f"n_{s}": int((rows["status"] == s).sum()) for s in ("recovered", "censored", "diverged")},
                **{f"n_{o}": int((outcomes == o).sum()) for o in ("stalled", "still_falling", "not_damaged")},
                "n_baseline_not_converged": int(rows["baseline_not_converged"].sum()),
                "n_control_moved": int(rows["control_moved"].sum()),
                "budget_examples": budget,
                "pretrain_examples": pretrain_examples,
                "median_examples": median,
                "median_examples_lo": m_lo,
                "median_examples_hi": m_hi,
                "median_fraction": _fraction(median, pretrain_examples),
                "median_fraction_lo": _fraction(m_lo, pretrain_examples),
                "median_fraction_hi": _fraction(m_hi, pretrain_examples),
                "p_recover": p,
                "p_recover_lo": p_lo,
                "p_recover_hi": p_hi,
                "budget_fraction": _fraction(budget, pretrain_examples),
                "stall_gap_median": float(censored["stall_gap"].median()) if len(censored) else math.nan,
                "interval_over": unit_col if len(units) > 1 else "none",
                "interval_kind": interval_kind(len(units) if probs else 0),
                "n_resamples": len(probs),
                "n_stopped": len(stopped),
                "beyond_examples": beyond,
                "beyond_fraction": _fraction(beyond, pretrain_examples),
            }
        )
    return _typed(pd.DataFrame(out, columns=ESTIMATE_COLUMNS))


def recovered_curves(cells: pd.DataFrame) -> pd.DataFrame:
    """Per group, the NPMLE share of cells recovered (1 - S) at each examples value where it changes."""
    parts = []
    for key, rows in _group_iter(estimable(cells)):
        curve = _npmle(rows["lower"].to_numpy(float), rows["upper"].to_numpy(float), np.ones(len(rows)))
        curve = curve[np.isfinite(curve.index)]
        pretrain_examples = rows["pretrain_examples"].iloc[0]
        parts.append(
            pd.DataFrame(
                {
                    **{k: [v] * len(curve) for k, v in key.items()},
                    "examples": curve.index.astype(float),
                    "fraction": [_fraction(e, pretrain_examples) for e in curve.index],
                    "recovered_share": 1.0 - curve.to_numpy(float),
                }
            )
        )
    if not parts:
        return _typed(pd.DataFrame(columns=CURVE_COLUMNS))
    return _typed(pd.concat(parts, ignore_index=True)[CURVE_COLUMNS])


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    for column in ("layer", "depth", "n_layer", "d_model"):
        if column in table:
            table[column] = table[column].astype("Int64")
    for column in (
        "model",
        "family_kind",
        "target",
        "kind",
        "stack",
        "position",
        "regime",
        "policy",
        "init",
        "interval_kind",
    ):
        if column in table:
            table[column] = table[column].astype("string")
    for column in ("rel_depth", "threshold", "pretrain_examples", "beyond_examples", "beyond_fraction"):
        if column in table:
            table[column] = table[column].astype("Float64").astype(float)
    return table
