"""fp32 against bf16 on the default grid's cells: the default config run cold twice, side by side in one session,
`hardware.precision: fp32` then `bf16` (autocast in training, attention in fp32, every evaluation in fp32), with the
same seeds. Per ε: the cells back within ε under both, the median bf16 / fp32 cost ratio, and how many costs differ
by more than the crossing's resolution (the wider of the two located crossing intervals); the networks' baselines;
the wall time of each run. The default stays fp32 unless the costs agree within the crossings' resolution.

    .venv/bin/python benchmarks/precision.py               # [--no-write]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd

from common import add_write_flag, machine, publish, snakemake_command, snakemake_env, timed_process

MARKER = "precision"
KEYS = ["model", "pretrain_seed", "target", "policy", "init", "regime", "seed", "threshold"]


def run(workdir: Path, precision: str) -> tuple[float, pd.DataFrame, pd.DataFrame]:
    workdir.mkdir(parents=True)
    config = workdir / "precision.yaml"
    config.write_text(f"hardware: {{precision: {precision}}}\n")
    cmd = snakemake_command(workdir, "--cores", "2", "--quiet", "--configfile", str(config))
    wall, _ = timed_process(cmd, env=snakemake_env())
    results = workdir / "results"
    return wall, pd.read_parquet(results / "summary.parquet"), pd.read_parquet(results / "networks.parquet")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_write_flag(parser)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = {p: run(Path(tmp) / p, p) for p in ("fp32", "bf16")}
    (w32, s32, n32), (w16, s16, n16) = runs["fp32"], runs["bf16"]
    cells = s32.merge(s16, on=KEYS, suffixes=("_32", "_16"))
    cells = cells[(cells["init"] == "fresh") & (cells["target"] != "none")]
    rows = [
        "| ε | back within ε in both | median bf16 / fp32 cost | beyond the crossings' resolution |",
        "|---|---|---|---|",
    ]
    for eps, g in cells.groupby("threshold"):
        both = g[g["recovered_32"].astype(bool) & g["recovered_16"].astype(bool) & (g["examples_hi_32"] > 0)]
        ratio = (both["examples_16"] / both["examples_32"]).median() if len(both) else float("nan")
        width = pd.concat(
            [both["examples_hi_32"] - both["examples_lo_32"], both["examples_hi_16"] - both["examples_lo_16"]], axis=1
        ).max(axis=1)
        apart = int(((both["examples_16"] - both["examples_32"]).abs() > width).sum())
        rows.append(f"| {eps:g} | {len(both)} of {len(g)} | {ratio:.2f} | {apart} of {len(both)} |")
    nets = n32.merge(n16, on=["model", "pretrain_seed"], suffixes=("_32", "_16"))
    drift = (nets["baseline_loss_16"] / nets["baseline_loss_32"] - 1).abs()
    text = "\n".join(rows) + (
        f"\n\nThe default grid cold, fp32 then bf16, the same seeds: {w32 / 60:.1f} min against {w16 / 60:.1f} min "
        f"({w32 / w16:.2f}× faster in bf16); the {len(nets)} networks' baselines differ by up to {drift.max():.2%}. "
        f"{machine()} (`.venv/bin/python benchmarks/precision.py`)."
    )
    print(text)
    publish(MARKER, text, not a.no_write)


if __name__ == "__main__":
    main()
