"""The transfer experiments' tables: every score of every trial (``scores.parquet``), and per condition the mean
with its t-distribution 95 % interval over trials (``summary.parquet``). Each finetuning run is keyed by its spec,
so one run can appear under several experiments."""

from __future__ import annotations

import pandas as pd

from selfheal import results_io
from selfheal.analysis import stats

SCORE_COLUMNS = [
    "experiment",
    "condition",
    "x",
    "spec",
    "reinit_layers",
    "layer_order",
    "keep_layernorm",
    "reinit_lr_multiplier",
    "init",
    "task",
    "size",
    "trial",
    "accuracy",
    "mcc",
    "test_examples",
    "epochs",
    "steps",
    "train_s",
]
TRANSFER_SUMMARY_COLUMNS = [
    "experiment",
    "condition",
    "x",
    "task",
    "size",
    "metric",
    "mean",
    "ci_low",
    "ci_high",
    "trials",
]
METRICS = ("accuracy", "mcc")


def scores(conditions: list[dict], runs: list[dict], probes: list[pd.DataFrame]) -> pd.DataFrame:
    """conditions: {experiment, label, x, spec}; runs: finetuning results (finetune.run); probes: probing tables."""
    by_spec: dict[str, list[dict]] = {}
    for r in runs:
        by_spec.setdefault(r["spec"], []).append(r)
    rows = []
    for c in conditions:
        for r in by_spec.get(c["spec"], []):
            rows.append(
                {
                    "experiment": c["experiment"],
                    "condition": c["label"],
                    "x": c["x"],
                    "spec": c["spec"],
                    "reinit_layers": ",".join(map(str, r["reinit"])),
                    "layer_order": None if r["order"] is None else ",".join(map(str, r["order"])),
                    "keep_layernorm": r["keep_layernorm"],
                    "reinit_lr_multiplier": r["reinit_lr_multiplier"],
                    "init": r["init"],
                    "task": r["task"],
                    "size": r["size"],
                    "trial": r["trial"],
                    "accuracy": r["accuracy"],
                    "mcc": r["mcc"],
                    "test_examples": r["test_examples"],
                    "epochs": r["epochs"],
                    "steps": r["steps"],
                    "train_s": r["train_s"],
                }
            )
    for table in probes:
        for p in table.to_dict("records"):
            rows.append(
                {
                    "experiment": "probing",
                    "condition": f"k={p['layer']}",
                    "x": p["layer"],
                    "spec": "probe",
                    "reinit_layers": None,
                    "layer_order": None,
                    "keep_layernorm": None,
                    "reinit_lr_multiplier": None,
                    "init": None,
                    "task": p["task"],
                    "size": p["size"],
                    "trial": p["trial"],
                    "accuracy": p["accuracy"],
                    "mcc": p["mcc"],
                    "test_examples": p["test_examples"],
                    "epochs": None,
                    "steps": None,
                    "train_s": None,
                }
            )
    out = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    return out.sort_values(["experiment", "task", "size", "x", "condition", "trial"], kind="stable", ignore_index=True)


def summary(table: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    rows = []
    for key, group in table.groupby(["experiment", "condition", "x", "task", "size"], sort=True):
        for metric in METRICS:
            mean, low, high = stats.mean_ci(group[metric].tolist(), level)
            rows.append(
                {
                    **dict(zip(["experiment", "condition", "x", "task", "size"], key)),
                    "metric": metric,
                    "mean": mean,
                    "ci_low": low,
                    "ci_high": high,
                    "trials": len(group),
                }
            )
    return pd.DataFrame(rows, columns=TRANSFER_SUMMARY_COLUMNS)


def aggregate(
    conditions: list[dict], run_paths: list[str], probe_paths: list[str], scores_path: str, summary_path: str
) -> pd.DataFrame:
    runs = [results_io.read_json(p) for p in run_paths]
    table = scores(conditions, runs, [pd.read_parquet(p) for p in probe_paths])
    results_io.write_parquet(scores_path, table)
    results_io.write_parquet(summary_path, summary(table))
    return table
