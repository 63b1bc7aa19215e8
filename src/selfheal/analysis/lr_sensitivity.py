"""The lr-sensitivity table (``results/answer/lr_sensitivity.parquet``, schema in docs/outputs.md): per run of the
lr-sensitivity check (``heal.lr_sensitivity``: a grid cell healed again at ``retrain.lr`` x a multiplier) and
threshold, its crossing as the grid records it (``tables.summary_table``, the same columns as summary.parquet's)
beside the same cell's cost at the chosen lr, read from summary.parquet, and their ratio. Only the ``answer``
page reads it; no estimate of the grid does.
"""

from __future__ import annotations

import pandas as pd

from selfheal import results_io
from selfheal.analysis import tables
from selfheal.analysis.stats import flag, typed

KEYS = [*tables.CELL_KEYS, "threshold"]
COLUMNS = [
    *tables.CELL_KEYS,
    "depth",
    "threshold",
    "lr_multiplier",
    "lr",
    "chosen_lr",
    "recovered",
    "examples",
    "examples_lo",
    "examples_hi",
    "fraction_of_pretrain",
    "budget_examples",
    "pretrain_examples",
    "chosen_recovered",
    "chosen_examples",
    "chosen_fraction_of_pretrain",
    "ratio",
]


def table(summary: pd.DataFrame, runs: list[dict]) -> pd.DataFrame:
    """``runs``: each run's ``recovery`` (its recovery.json), ``multiplier`` and ``chosen_lr`` (the grid's
    retrain.lr of its model). ``ratio``: the run's crossing (examples) over the chosen lr's, where both recovered and the chosen lr's is
    above 0 (null otherwise)."""
    parts = []
    for r in runs:
        rows = tables.summary_table([r["recovery"]])
        rows["lr_multiplier"] = float(r["multiplier"])
        rows["chosen_lr"] = float(r["chosen_lr"])
        rows["lr"] = float(r["chosen_lr"]) * float(r["multiplier"])
        parts.append(rows)
    runs_table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=tables.SUMMARY_COLUMNS)
    chosen = summary[[*KEYS, "recovered", "examples", "fraction_of_pretrain"]].rename(
        columns={
            "recovered": "chosen_recovered",
            "examples": "chosen_examples",
            "fraction_of_pretrain": "chosen_fraction_of_pretrain",
        }
    )
    out = runs_table.merge(chosen, on=KEYS, how="left", validate="many_to_one")
    both = out["recovered"].astype(bool) & flag(out["chosen_recovered"])
    both &= out["chosen_examples"].fillna(0).astype("float64") > 0  # a cost of 0 (not damaged beyond eps): none
    out["ratio"] = (out["examples"].astype("float64") / out["chosen_examples"].astype("float64")).where(both)
    out = typed(
        out.reindex(columns=COLUMNS),
        Int64=[
            "depth",
            "examples",
            "examples_lo",
            "examples_hi",
            "chosen_examples",
            "budget_examples",
            "pretrain_examples",
        ],
        float64=["fraction_of_pretrain", "chosen_fraction_of_pretrain", "ratio", "lr", "chosen_lr", "lr_multiplier"],
        boolean=["chosen_recovered"],
    )
    return out.sort_values(["model", "pretrain_seed", "target", "lr_multiplier", "threshold"], ignore_index=True)


def write(summary_path: str, runs: list[dict], out_path: str) -> None:
    results_io.write_parquet(out_path, table(pd.read_parquet(summary_path), runs))
