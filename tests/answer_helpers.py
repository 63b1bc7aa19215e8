"""Synthetic summary / curves / networks tables that follow the schemas of docs/outputs.md, with known structure,
for the answer statistics and page (tests/test_survival.py, tests/test_answer.py).

Every cell's validation loss decays as baseline * (1 + a * exp(-examples / tau)); its crossing of each threshold is
read from that curve at the evaluation grid, so intervals, censoring and damage are consistent with the curves.
tau = TAU * exp(depth_effect * relative depth + n_effect * log2(N / 2) + network effect + noise), so the true effect
of relative depth on log cost is ``depth_effect`` (cost = tau * log(a / eps)), of log2 N ``n_effect``, of log2(D / 64)
``d_effect``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis import tables

S, E = 8000, 5
SXE = S * E
EVAL_EVERY = 512
TAU = 1500.0


def _crossing(a: float, tau: float, eps: float, budget: int, grid: np.ndarray):
    """(lo, hi, recovered) of the first evaluation with a * exp(-e / tau) <= eps."""
    below = grid[a * np.exp(-grid / tau) <= eps]
    if not len(below):
        return budget, None, False
    hi = int(below[0])
    lo = int(grid[grid < hi][-1]) if hi > 0 else 0
    return lo, hi, True


def synthetic(
    depth_effect: float = 1.5,
    n_effect: float = 0.0,
    d_effect: float = 0.0,
    models=(("gpt2-n2-d64", 2, 64), ("gpt2-n4-d64", 4, 64)),
    first_layer_effect: float = 0.0,
    pretrain_seeds=(0, 1),
    seeds=(0, 1),
    thresholds=(0.01, 0.02, 0.05, 0.1),
    budget_fraction: float = 0.5,
    degenerate: tuple = (),
    off_plateau: tuple = (),
    family_kind: str = "decoder-only",
    extra_targets: bool = False,
    seed: int = 0,
):
    """(summary, curves, networks) DataFrames. ``degenerate`` / ``off_plateau``: (model, pretrain_seed) pairs to
    flag. ``first_layer_effect``: added to the first layer's log tau (large: every first-layer cell is censored).
    ``extra_targets`` adds an encoder swap and a cross-attention wipe cell (as for an encoder-decoder)."""
    rng = np.random.default_rng(seed)
    budget = round(budget_fraction * SXE)
    grid = np.unique(np.concatenate([np.arange(0, budget, EVAL_EVERY), [budget]]))
    summary_rows, curve_rows, network_rows = [], [], []
    for model, n_layer, d_model in models:
        for ps in pretrain_seeds:
            baseline = 4.0 + 0.01 * rng.standard_normal()
            net_effect = 0.3 * rng.standard_normal()
            flagged = (model, ps) in degenerate
            network_rows.append(
                {
                    "model": model,
                    "pretrain_seed": ps,
                    "arch": "gpt2",
                    "family_kind": family_kind,
                    "n_layer": n_layer,
                    "d_model": d_model,
                    "n_params": 12 * n_layer * d_model**2 + 1024 * d_model,
                    "pretrain_examples": SXE,
                    "pretrain_tokens": SXE * 64,
                    "baseline_loss": baseline,
                    "unigram_loss": 5.5,
                    "bigram_loss": 4.8,
                    "last_quarter_val_drop": 0.05,
                    "off_plateau": (model, ps) in off_plateau,
                    "degenerate": flagged,
                    "source": "scratch",
                    "train_sequences": S,
                    "epochs": E,
                    "context": 64,
                    "bigram_weight": 0.6,
                    "bigram_margin": 4.8 - baseline,
                    "degenerate_reason": "reset_all_harmless" if flagged else "",
                    "plateau_examples": round(1.5 * SXE),
                    "plateau_val_loss": baseline + 0.001,
                    "plateau_gain": -0.001,
                    "pretrain_lr": 1e-2,
                    "lr_at_edge": False,
                    "stopped_by": "patience",
                    "unfinished_lr": 3e-2 if ps == pretrain_seeds[-1] else None,  # a larger lr cut below it
                }
            )
            pre_grid = np.arange(0, SXE + 1, 4000)
            for e in pre_grid:
                curve_rows.append(
                    {
                        "kind": "pretrain",
                        "model": model,
                        "pretrain_seed": ps,
                        "examples": int(e),
                        "tokens": int(e) * 64,
                        "steps": int(e) // 32,
                        "fraction_of_pretrain": e / SXE,
                        "wall_s": e / 1000,
                        "val_loss": baseline + 2.9 * math.exp(-e / 6000),
                        "train_loss": None,
                        "replay": False,
                        "lr": 1e-2,  # the race's kept copy
                        "kept": True,
                    }
                )
            targets = [(f"L{i}", i) for i in range(n_layer)] + [("all", None)]
            if extra_targets:
                targets += [("swap32", None), ("dec", None)]
            for target, depth in targets:
                rel = (
                    depth / (n_layer - 1) if depth is not None and n_layer > 1 else (0.0 if depth is not None else 1.3)
                )
                policy = "cross_attn" if target == "dec" else "full"
                for seed_ in seeds:
                    tau = TAU * math.exp(
                        depth_effect * rel
                        + n_effect * math.log2(n_layer / 2)
                        + d_effect * math.log2(d_model / 64)
                        + net_effect
                        + (first_layer_effect if depth == 0 else 0.0)
                        + 0.15 * rng.standard_normal()
                    )
                    if flagged:
                        tau = 1.0  # a degenerate network "heals instantly"
                    a = 0.3 * math.exp(0.3 * rng.standard_normal()) * (2.0 if target == "all" else 1.0)
                    cell = {
                        "model": model,
                        "pretrain_seed": ps,
                        "arch": "gpt2",
                        "n_layer": n_layer,
                        "d_model": d_model,
                        "target": target,
                        "stack": "" if depth is not None else None,
                        "layer": depth,
                        "depth": depth,
                        "policy": policy,
                        "init": "fresh",
                        "regime": "frozen",
                        "seed": seed_,
                    }
                    _cell(
                        cell,
                        a,
                        tau,
                        baseline,
                        thresholds,
                        budget,
                        grid,
                        summary_rows,
                        curve_rows,
                        cka=0.9 - 0.2 * rel if depth is not None else None,
                        flagged=flagged,
                    )
                    if depth is not None:  # the matched no-reset control
                        _cell(
                            {**cell, "init": "trained"},
                            0.0,
                            1.0,
                            baseline,
                            thresholds,
                            budget,
                            grid,
                            summary_rows,
                            curve_rows,
                            cka=None,
                            flagged=flagged,
                        )
            for seed_ in seeds:  # the no-reset control
                _cell(
                    {
                        "model": model,
                        "pretrain_seed": ps,
                        "arch": "gpt2",
                        "n_layer": n_layer,
                        "d_model": d_model,
                        "target": "none",
                        "stack": None,
                        "layer": None,
                        "depth": None,
                        "policy": "none",
                        "init": "none",
                        "regime": "frozen",
                        "seed": seed_,
                    },
                    0.0,
                    1.0,
                    baseline,
                    thresholds,
                    budget,
                    grid,
                    summary_rows,
                    curve_rows,
                    cka=None,
                    flagged=flagged,
                )
    summary = pd.DataFrame(summary_rows)
    for column in (
        "layer",
        "depth",
        "examples_lo",
        "examples_hi",
        "tokens_lo",
        "tokens_hi",
        "steps_lo",
        "steps_hi",
        "pretrain_examples",
        "diverged_step",
    ):
        summary[column] = summary[column].astype("Int64")
    curves = pd.DataFrame(curve_rows)
    for column in ("layer", "depth", "seed"):
        curves[column] = curves[column].astype("Int64")
    summary = tables.add_outcomes(summary, curves)  # the outcome of each row, by the workflow's own rule
    summary = tables.add_control_crossings(summary, curves)  # and its crossing against its matched control
    networks = pd.DataFrame(network_rows)
    for column in ("pretrain_examples", "train_sequences", "context"):
        networks[column] = networks[column].astype("Int64")
    networks["epochs"] = networks["epochs"].astype("float64")
    # the columns aggregate derives from the others, derived here by the same code (the pretraining reference, how
    # far each network ended past its minimum)
    summary = tables.add_scratch_reference(summary, curves, networks)
    networks = tables.add_minimum(networks.reindex(columns=tables.NETWORK_COLUMNS), curves)
    return (
        _in_schema(summary, tables.SUMMARY_COLUMNS),
        _in_schema(curves, tables.CURVE_COLUMNS),
        _in_schema(networks, tables.NETWORK_COLUMNS),
    )


def _in_schema(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The table's columns in the schema's order (analysis/tables.py, the one list of them). A column the schema has
    and the synthetic table does not make comes out all missing, which tests/test_answer.py's schema test refuses:
    give it values here."""
    return table.reindex(columns=columns)


def toy_networks(baselines: dict, arch: str = "gpt2", source: str = "scratch") -> pd.DataFrame:
    """A networks.parquet-shaped table from {(model, n_layer, d_model): [baseline per pretraining seed]}: for the
    tables that read networks only (answer_tables.size_ordering)."""
    rows = []
    for (model, n_layer, d_model), losses in baselines.items():
        for ps, loss in enumerate(losses):
            rows.append(
                {
                    "model": model,
                    "pretrain_seed": ps,
                    "arch": arch,
                    "family_kind": "decoder-only",
                    "source": source,
                    "n_layer": n_layer,
                    "d_model": d_model,
                    "n_params": 12 * n_layer * d_model**2,
                    "train_sequences": S,
                    "epochs": E,
                    "context": 64,
                    "pretrain_examples": SXE,
                    "pretrain_tokens": SXE * 64,
                    "baseline_loss": loss,
                    "unigram_loss": 5.5,
                    "bigram_loss": 4.8,
                    "bigram_weight": 0.6,
                    "bigram_margin": 4.8 - loss,
                    "last_quarter_val_drop": 0.0,
                    "off_plateau": False,
                    "degenerate": False,
                    "degenerate_reason": "",
                }
            )
    table = pd.DataFrame(rows)
    for column in ("train_sequences", "epochs", "context", "pretrain_examples", "pretrain_tokens"):
        table[column] = table[column].astype("Int64")
    return table


def _cell(cell, a, tau, baseline, thresholds, budget, grid, summary_rows, curve_rows, cka, flagged):
    losses = baseline * (1 + a * np.exp(-grid / tau))
    for e, loss in zip(grid, losses):
        curve_rows.append(
            {
                "kind": "recovery",
                **cell,
                "examples": int(e),
                "tokens": int(e) * 64,
                "steps": int(e) // 32,
                "fraction_of_pretrain": e / SXE,
                "wall_s": e / 2000,
                "val_loss": float(loss),
                "train_loss": None,
                "replay": False,
                "lr": None,
                "kept": True,
            }
        )
    last = None
    for eps in thresholds:
        lo, hi, recovered = _crossing(a, tau, eps, budget, grid)
        at = hi if recovered else budget
        last = float(baseline * (1 + a * math.exp(-at / tau)))
        summary_rows.append(
            {
                **cell,
                "threshold": eps,
                "recovered": recovered,
                "diverged": False,
                "diverged_step": None,
                "examples": at,
                "tokens": at * 64,
                "steps": at // 32,
                "fraction_of_pretrain": at / SXE,
                "examples_lo": lo,
                "examples_hi": hi,
                "tokens_lo": lo * 64,
                "tokens_hi": None if hi is None else hi * 64,
                "steps_lo": lo // 32,
                "steps_hi": None if hi is None else hi // 32,
                "fraction_lo": lo / SXE,
                "fraction_hi": None if hi is None else hi / SXE,
                "baseline_loss": baseline,
                "damaged_loss": baseline * (1 + a),
                "final_loss": float(losses[-1]),
                "threshold_loss": baseline * (1 + eps),
                "wall_s": at / 2000,
                "budget_examples": budget,
                "pretrain_examples": SXE,
                "trainable_params": 1000,
                "control_loss": baseline * 0.999,
                "baseline_not_converged": False,
                "degenerate": flagged,
                "off_plateau": False,
                "cka": cka,
                "cka_floor": None if cka is None else 0.1,
                "n_params": 12 * cell["n_layer"] * cell["d_model"] ** 2 + 1024 * cell["d_model"],
                # the confirmation on the whole split: the final loss there a little higher, the baseline too
                "confirm_sequences": 2698,
                "confirm_loss": float(losses[-1]) + 0.01,
                "confirm_baseline_loss": baseline + 0.01,
                "confirmed": (float(losses[-1]) <= baseline * (1 + eps)) if recovered else None,
                "val_diff_se": 0.002,
                "budget_unit": "pretrain_examples",
                "stalled_examples": None,
                "lr": 3e-3 if recovered else 1e-3,  # the race's winner; censored: the primary copy's lr
                "lr_at_edge": False if recovered else None,
            }
        )
    return last
