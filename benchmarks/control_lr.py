"""How far the retraining alone moves an intact network, by the lr it retrains at: every matched no-reset control of
a finished run (init ``trained``: nothing reset, the cell's tensors retrained from their trained values at the lr of
the longest of its cells' race winners), grouped by that lr over the network's own pretraining lr.

Per ratio it prints the controls' drift (validation loss / baseline − 1) at their first evaluation after the
restart, their worst anywhere and at their end (median and largest over the controls), and per ε of the run's grid
the share of controls whose worst drift stays within ε / 4, the bound under which the answer page states an ε
(docs/method.md, "Which ε the headline states"). It reads only the run's tables and trains nothing.

    .venv/bin/python benchmarks/control_lr.py results/study_next    # a finished run's results folder [--no-write]

Writes block ``control-lr`` of docs/method.md for the documented run (``results/study_next``, the study re-run of
config/study_next.yaml, whose finished jobs reference/study_next/ keeps: ``keep.py resume .`` and a Snakemake run
remake its tables in minutes).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from common import ROOT, add_write_flag, publish

DOCUMENTED = "results/study_next"
KEYS = ["model", "pretrain_seed", "target", "policy"]


def control_drift(results: Path) -> tuple[pd.DataFrame, list[float]]:
    """One row per matched control that trained (evaluated after 0 examples): its lr over its network's pretraining lr (``ratio``), and its drift at its
    first evaluation after 0 examples (``first``), its worst (``worst``) and at its end (``end``); and the grid's ε."""
    summary = pd.read_parquet(results / "summary.parquet")
    networks = pd.read_parquet(results / "networks.parquet")[["model", "pretrain_seed", "pretrain_lr", "baseline_loss"]]
    curves = pd.read_parquet(results / "curves.parquet")
    lrs = summary[summary["init"] == "trained"].groupby(KEYS, as_index=False)["lr"].first()
    rows = curves[(curves["kind"] == "recovery") & (curves["init"] == "trained")].drop(columns=["lr"])
    rows = rows.merge(lrs, on=KEYS).merge(networks, on=["model", "pretrain_seed"]).sort_values([*KEYS, "examples"])
    rows["drift"] = rows["val_loss"] / rows["baseline_loss"] - 1
    per = rows.groupby(KEYS, as_index=False).agg(
        ratio=("lr", "first"),
        pretrain_lr=("pretrain_lr", "first"),
        first=("drift", lambda d: d.iloc[1] if len(d) > 1 else np.nan),
        worst=("drift", "max"),
        end=("drift", "last"),
    )
    evaluations = rows.groupby(KEYS).size().reindex(pd.MultiIndex.from_frame(per[KEYS])).to_numpy()
    per = per[evaluations > 1]  # a control whose cells all crossed at 0 examples trained nothing
    per["ratio"] = (per["ratio"] / per["pretrain_lr"]).round(2)
    eps = sorted(summary["threshold"].dropna().astype(float).unique())
    return per, eps


def table(per: pd.DataFrame, eps: list[float]) -> str:
    pct = lambda x: f"{100 * x:+.2f} %"  # noqa: E731
    head = ["lr ÷ the network's own", "controls", "first evaluation: median, largest", "worst: median, largest"]
    head += ["at the end: median, largest", *(f"within ε / 4 at ε {e:g}" for e in eps)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ratio, g in per.groupby("ratio"):
        first = g["first"].dropna()
        cells = [
            f"{ratio:g}",
            str(len(g)),
            f"{pct(first.median())}, {pct(first.max())}" if len(first) else "n/a",
            f"{pct(g['worst'].median())}, {pct(g['worst'].max())}",
            f"{pct(g['end'].median())}, {pct(g['end'].max())}",
            *(f"{int((g['worst'] <= e / 4).sum())} of {len(g)}" for e in eps),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    add_write_flag(parser)
    a = parser.parse_args()
    per, eps = control_drift(a.results)
    networks = per.groupby(["model", "pretrain_seed"]).ngroups
    note = (
        f"{len(per)} matched controls of {networks} networks (`{a.results}`); drift: validation loss / baseline − 1; "
        "first evaluation: the first after the restart; worst: the largest anywhere along the control "
        f"(`.venv/bin/python benchmarks/control_lr.py {a.results}`)."
    )
    documented = a.results.resolve() == (ROOT / DOCUMENTED).resolve()
    why_not = None if documented else f"not the documented run ({DOCUMENTED})"
    publish("control-lr", table(per, eps) + "\n\n" + note, not a.no_write, ROOT / "docs" / "method.md", why_not)


if __name__ == "__main__":
    main()
