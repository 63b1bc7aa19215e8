"""The reference study's wall time and where it went (config/study.yaml, `snakemake --cores 2`; target: at most
5 hours on the 2-core development machine, in as many invocations as it takes: the grid is incremental).

    .venv/bin/python benchmarks/study.py            # the breakdown of the study run in this checkout
    .venv/bin/python benchmarks/study.py --run      # run (or finish) the study first, then the breakdown
    # [--config config/study.yaml]                   # another study config (its results_dir); printed, not written
    # [--partial]                                    # its finished part (partial: true); printed, not written

The wall time is the time some job of the study was running (the union of the jobs' intervals from Snakemake's own
timestamps, `.snakemake/metadata`), so idle gaps between invocations do not count. The core time splits as in
`default_grid.py` (benchmarks/snakemake_jobs.py: pretraining, retraining, evaluation, fixed per-job cost); per
model, the tables give its pretraining and retraining core time and the cost of one pretraining step (the
pretraining curve's wall seconds over its steps), the figures that decide what pays on this CPU. Writes the block
`study-breakdown` of docs/study.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml
from common import ROOT, add_write_flag, machine, publish, snakemake_command, snakemake_env
from snakemake_jobs import breakdown, describe, jobs, pretraining_seconds, recorded_core_s, resumed

STUDY_PAGE = ROOT / "docs" / "study.md"
CONFIG = ROOT / "config" / "study.yaml"


def busy_wall(workdir: Path, under: str, models: set[str] | None = None) -> float:
    """Seconds during which at least one job of the runs in ``workdir`` with its log under ``under`` (of ``models``
    and the whole run, as in ``snakemake_jobs.jobs``) was running."""
    total, end = 0.0, float("-inf")
    for j in sorted(jobs(workdir, under, models), key=lambda j: j.start):
        if j.start > end:
            total += j.end - j.start
        elif j.end > end:
            total += j.end - end
        end = max(end, j.end)
    return total


def per_model(results: Path) -> pd.DataFrame:
    """Per model: networks, parameters, pretraining core-s (with the plateau checks, ``pretraining_seconds``) and ms
    per pretraining step, cells, retraining core-s."""
    curves = pd.read_parquet(results / "curves.parquet")
    networks = pd.read_parquet(results / "networks.parquet")
    pre = (
        curves[curves["kind"] == "pretrain"]
        .groupby(["model", "pretrain_seed"])
        .agg(wall=("wall_s", "max"), steps=("steps", "max"))
    )
    pre["with_check"] = pretraining_seconds(results).sum(axis=1).reindex(pre.index)
    keys = ["model", "pretrain_seed", "target", "policy", "init", "regime", "seed"]
    rec = curves[curves["kind"] == "recovery"].groupby(keys, dropna=False)["wall_s"].max().groupby("model")
    rows = []
    for model, g in pre.groupby("model"):
        net = networks[networks["model"] == model].iloc[0]
        rows.append(
            {
                "model": model,
                "networks": len(g),
                "params": int(net["n_params"]),
                "pretrain_core_s": float(g["with_check"].sum()),
                "ms_per_step": float((g["wall"] / g["steps"]).median() * 1000),
                "cells": int(rec.size().get(model, 0)),
                "retrain_core_s": float(rec.sum().get(model, 0.0)),
            }
        )
    return pd.DataFrame(rows).sort_values("params")


def stall_stops(tables: Path) -> str:
    """What the stall rule (``retrain.stop_stalled``) saved: the cells it stopped before their budget, where (× their
    from-scratch cost, against their budgets' multiple), and their retraining core time beside what running them to
    the budget would have taken (each one's core-s per example, from its curve, carried to its budget)."""
    summary = pd.read_parquet(tables / "summary.parquet")
    curves = pd.read_parquet(tables / "curves.parquet")
    keys = ["model", "pretrain_seed", "target", "policy", "init", "regime", "seed"]
    ran = (
        curves[curves["kind"] == "recovery"]
        .groupby(keys, dropna=False)
        .agg(ran_examples=("examples", "max"), wall=("wall_s", "max"))
    )
    cells = summary.drop_duplicates(keys).set_index(keys).join(ran, how="inner")
    stopped = cells[cells["stalled_examples"].notna() & (cells["ran_examples"] < cells["budget_examples"])]
    if stopped.empty:
        return "The stall rule (`retrain.stop_stalled`) stopped no cell before its budget."
    at = stopped["ran_examples"] / stopped["scratch_examples"]
    budget = (stopped["budget_examples"] / stopped["scratch_examples"]).round(1).unique()
    full = stopped["wall"] * stopped["budget_examples"] / stopped["ran_examples"]
    n = len(stopped)
    return (
        f"The stall rule (`retrain.stop_stalled`) stopped {n} cell{'s' * (n != 1)} at {at.min():.1f} to {at.max():.1f} "
        f"× their from-scratch cost (budgets {' and '.join(f'{b:g} ×' for b in sorted(budget))}): "
        f"{stopped['wall'].sum() / 3600:.1f} core-hours of retraining where running them to the budget would take "
        f"about {full.sum() / 3600:.1f} (each cell's time per example carried to its budget)."
    )


def block(workdir: Path, results: Path, cores: int, tables: Path) -> str:
    """The breakdown of the study's jobs in ``workdir`` (its results_dir ``results``), for the models in the
    aggregate's tables under ``tables`` (``results``, or the readout of its finished part)."""
    under = str(results.relative_to(workdir))
    models = set(pd.read_parquet(tables / "networks.parquet")["model"].astype(str))
    busy = busy_wall(workdir, under, models)
    b = breakdown(workdir, results, under=under, tables=tables)
    table = per_model(tables)
    # jobs interrupted between pieces resume from their checkpoints; their earlier attempts have no timestamps, so
    # the wall time is then at least the recorded core time over the cores
    wall = max(busy, recorded_core_s(b) / cores) if resumed(b) else busy
    how = (
        f"the recorded core time over {cores} cores, {recorded_core_s(b):.0f} core-s: more than the "
        f"{busy:.0f} s in which Snakemake's timestamps have a job running, as some jobs resumed after an "
        "interruption"
        if wall > busy
        else f"{wall:.0f} s"
    )
    lines = [
        f"Measured on {machine()} (`.venv/bin/python benchmarks/study.py`): **{wall / 60:.0f} min** of wall time "
        f"with a job running ({how}; target 5 hours) for {b['cells']} cells on "
        f"{int(table['networks'].sum())} networks, `--cores {cores}`. From Snakemake's job timestamps: "
        f"{describe(b, wall, cores)}. {stall_stops(tables)}",
        "",
        "| model | parameters | networks | pretraining core-min (with checks) | ms per pretraining step | cells | "
        "retraining core-min |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        lines.append(
            f"| {r['model']} | {r['params']:,} | {r['networks']} | {r['pretrain_core_s'] / 60:.1f} | "
            f"{r['ms_per_step']:.0f} | {r['cells']} | {r['retrain_core_s'] / 60:.1f} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=ROOT, help="where the study runs (default: this checkout)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--run", action="store_true", help="run (or finish) the study first")
    parser.add_argument("--config", type=Path, default=CONFIG, help="the study's config (default: config/study.yaml)")
    parser.add_argument(
        "--partial",
        action="store_true",
        help="the finished part of a study still running: its models as read by `snakemake --config partial=True` "
        "(the tables under results_dir/partial/, made first if missing); printed, not written",
    )
    add_write_flag(parser)
    a = parser.parse_args()
    if a.run:
        t0 = time.perf_counter()
        proc = subprocess.run(
            snakemake_command(a.workdir, "--cores", str(a.cores), "--configfile", str(a.config)),
            env=snakemake_env(),
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
        print(f"this invocation: {time.perf_counter() - t0:.0f} s")
    results = a.workdir / yaml.safe_load(a.config.read_text())["results_dir"]
    tables = results / "partial" if a.partial else results
    if a.partial and not (tables / "networks.parquet").is_file():
        args = ("--cores", str(a.cores), "--configfile", str(a.config), "--config", "partial=True")
        proc = subprocess.run(snakemake_command(a.workdir, *args), env=snakemake_env(), capture_output=True, text=True)
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
    documented = a.workdir.resolve() == ROOT and a.cores == 2 and a.config.resolve() == CONFIG and not a.partial
    publish(
        "study-breakdown",
        block(a.workdir, results, a.cores, tables),
        not a.no_write,
        page=STUDY_PAGE,
        why_not=None if documented else "not the documented run",
    )


if __name__ == "__main__":
    main()
