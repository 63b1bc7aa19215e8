"""Collecting per-cell results into the two tidy tables the plots and users read.

``summary.parquet``: one row per (cell, threshold). ``curves.parquet``: every recovery curve and every pretraining
curve, one row per evaluation. Both schemas are documented in the README and fixed by SUMMARY_COLUMNS /
CURVE_COLUMNS below.
"""

from __future__ import annotations

import pandas as pd

from dataclasses import asdict

from selfheal import records, results_io
from selfheal.records import CellResult, PretrainSummary

SUMMARY_COLUMNS = [
    "model", "arch", "n_layer", "d_model", "target", "stack", "layer", "depth", "policy", "init", "regime", "seed",
    "threshold",
    "recovered", "diverged", "diverged_step", "examples", "tokens", "steps", "fraction_of_pretrain", "baseline_loss", "damaged_loss",
    "final_loss", "threshold_loss", "wall_s", "budget_examples", "pretrain_examples", "trainable_params",
]
CURVE_COLUMNS = [
    "kind", "model", "target", "stack", "layer", "depth", "policy", "init", "regime", "seed", "examples", "tokens", "steps",
    "fraction_of_pretrain", "wall_s", "val_loss", "train_loss",
]
CELL_KEYS = ["model", "target", "policy", "init", "regime", "seed"]


def _fraction(examples, pretrain_examples):
    """examples / (S x E), or missing when S x E is unknown (a downloaded model)."""
    return examples / pretrain_examples if pretrain_examples else None


def summary_table(recovery_paths: list[str]) -> pd.DataFrame:
    rows = []
    for path in recovery_paths:
        cell = asdict(records.read(path, CellResult))
        for rec in cell["recoveries"]:
            rows.append({
                **{k: cell[k] for k in CELL_KEYS},
                "arch": cell["arch"], "n_layer": cell["n_layer"], "d_model": cell["d_model"],
                "stack": cell["stack"], "layer": cell["layer"], "depth": cell["depth"],
                "threshold": rec["threshold"], "recovered": rec["recovered"],
                "diverged": cell.get("diverged_step") is not None, "diverged_step": cell.get("diverged_step"),
                "examples": rec["examples"], "tokens": rec["tokens"], "steps": rec["steps"],
                "fraction_of_pretrain": _fraction(rec["examples"], cell["pretrain_examples"]),
                "baseline_loss": cell["baseline_loss"], "damaged_loss": cell["damaged_loss"],
                "final_loss": cell["final_loss"],
                "threshold_loss": cell["baseline_loss"] * (1 + rec["threshold"]),
                "wall_s": rec["wall_s"], "budget_examples": cell["budget_examples"],
                "pretrain_examples": cell["pretrain_examples"], "trainable_params": cell["trainable_params"],
            })
    table = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    for column in ("layer", "depth", "pretrain_examples", "diverged_step"):
        table[column] = table[column].astype("Int64")
    table["fraction_of_pretrain"] = table["fraction_of_pretrain"].astype("float64")
    return table.sort_values(["model", "regime", "policy", "init", "target", "seed", "threshold"], ignore_index=True)


def curves_table(recovery_paths: list[str], recovery_curve_paths: list[str],
                 pretrain_summaries: list[str], pretrain_curve_paths: list[str]) -> pd.DataFrame:
    parts = []
    for summary_path, curve_path in zip(pretrain_summaries, pretrain_curve_paths):
        pre = records.read(summary_path, PretrainSummary)
        curve = pd.read_parquet(curve_path)
        curve["kind"] = "pretrain"
        curve["model"] = pre.model
        curve["fraction_of_pretrain"] = curve["examples"] / pre.pretrain_examples
        parts.append(curve)
    for recovery_path, curve_path in zip(recovery_paths, recovery_curve_paths):
        cell = asdict(records.read(recovery_path, CellResult))
        curve = pd.read_parquet(curve_path)
        curve["kind"] = "recovery"
        for k in CELL_KEYS:
            curve[k] = cell[k]
        for k in ("stack", "layer", "depth"):
            curve[k] = cell[k]
        curve["fraction_of_pretrain"] = _fraction(curve["examples"], cell["pretrain_examples"])
        parts.append(curve)
    table = pd.concat(parts, ignore_index=True).reindex(columns=CURVE_COLUMNS)
    for column in ("layer", "depth", "seed"):
        table[column] = table[column].astype("Int64")
    table["fraction_of_pretrain"] = table["fraction_of_pretrain"].astype("float64")
    return table


def write(recovery_paths, recovery_curve_paths, pretrain_summaries, pretrain_curve_paths,
          summary_out: str, curves_out: str) -> None:
    results_io.write_parquet(summary_out, summary_table(recovery_paths))
    results_io.write_parquet(
        curves_out, curves_table(recovery_paths, recovery_curve_paths, pretrain_summaries, pretrain_curve_paths)
    )
