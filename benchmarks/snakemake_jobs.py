"""Where a Snakemake run's time went, from Snakemake's own job timestamps and the workflow's Parquet tables.

Snakemake records, for every output file, the rule and the start and end time of the job that wrote it
(`.snakemake/metadata/`, one JSON per output; `starttime` / `endtime`, seconds since the epoch). One job = one
(rule, log files): every rule has its own log. Inside the training jobs, the tables say how much was training and evaluating:
`curves.parquet` `wall_s` (the largest of each pretraining run and of each recovery curve: that run's wall
seconds, evaluations included; an evaluation made after the fact to locate a crossing is recorded later than the
one that closed its interval), and each cell's `recovery.json` (documented per-cell output) its `eval_share`.
Whatever a job spent besides that (process start, imports, loading the model and data, the damage and CKA
measurements, writing) is its fixed per-job cost.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

# network: the training job; model, make_network, cell (earlier job units) and pretrain, adapt, baseline, heal (an
# earlier layout) stay so that the shipped study's own job timestamps still read
TRAINING_RULES = ("model", "network", "make_network", "cell", "pretrain", "adapt", "baseline", "heal")
PRETRAINING_RULES = ("model", "network", "make_network", "pretrain", "adapt")  # the jobs that pretrain or adapt
HEALING_RULES = ("model", "network", "cell", "heal")  # the jobs that heal cells


@dataclass(frozen=True)
class Job:
    rule: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def _model_of(log: str, under: str) -> str | None:
    """The model a job's log belongs to (``<results_dir>/logs/<model>/...``), None for a job of the whole run."""
    parts = Path(log).relative_to(under).parts
    return parts[1] if len(parts) > 2 and parts[0] == "logs" else None


def jobs(workdir: Path, under: str | None = None, models: set[str] | None = None) -> list[Job]:
    """Every finished job of the runs made in ``workdir`` (the newest record per output). ``under``: only the jobs
    whose logs are still there, under that folder of ``workdir`` (a job whose outputs were removed is not counted);
    ``models`` (with ``under``): of those, only the jobs of these models and of the whole run (a results_dir that
    also holds models no longer in its config, e.g. a regime explored before the grid was fixed)."""
    found: dict[tuple, Job] = {}  # one job: its rule and log files (every rule has a log), newest run kept
    for path in (workdir / ".snakemake" / "metadata").glob("*"):
        record = json.loads(path.read_text())
        logs = record.get("log") or []
        if under is not None and not (
            logs and all(log.startswith(under.rstrip("/") + "/") and (workdir / log).exists() for log in logs)
        ):
            continue
        if (
            under is not None
            and models is not None
            and any(_model_of(log, under) not in {None, *models} for log in logs)
        ):
            continue
        if record.get("starttime") and record.get("endtime") and not record.get("incomplete"):
            key = (record["rule"], tuple(record.get("log") or [path.name]))
            if key not in found or found[key].start < record["starttime"]:
                found[key] = Job(record["rule"], record["starttime"], record["endtime"])
    found = set(found.values())
    return sorted(found, key=lambda j: j.start)


def pretraining_seconds(results: Path) -> pd.DataFrame:
    """Per network (model, pretrain_seed): ``main_s``, the pretraining run's wall seconds (its curve's last
    ``wall_s``), and ``check_s``, its plateau check's (``pretrain.plateau_check``: the same network trained again
    for ``plateau_examples``), which no curve records: estimated at the main run's seconds per example (0 without a
    check)."""
    curves = pd.read_parquet(results / "curves.parquet")
    keys = [k for k in ("model", "pretrain_seed") if k in curves]
    pretraining = curves[curves["kind"] == "pretrain"]
    raced = "lr" in pretraining and pretraining["lr"].notna().any()
    if raced:  # every copy of the race is in the curve, its plateau check its own run past its best: their sum
        copies = pretraining.groupby([*keys, "lr"]).agg(main_s=("wall_s", "max"), examples=("examples", "max"))
        pre = copies.groupby(level=keys).sum()
    else:
        pre = pretraining.groupby(keys).agg(main_s=("wall_s", "max"), examples=("examples", "max"))
    pre["check_s"] = 0.0
    networks_path = results / "networks.parquet"
    if networks_path.is_file() and len(pre) and not raced:
        networks = pd.read_parquet(networks_path).set_index(keys)
        if "plateau_examples" in networks:
            checked = pd.to_numeric(networks["plateau_examples"], errors="coerce").reindex(pre.index).astype(float)
            pre["check_s"] = (pre["main_s"] * checked / pre["examples"].astype(float)).fillna(0.0)
    return pre[["main_s", "check_s"]]


def breakdown(
    workdir: Path,
    results: Path,
    since: float = 0.0,
    pretrained: bool = True,
    under: str | None = None,
    threads: int = 1,
    tables: Path | None = None,
) -> dict[str, float]:
    """Core-seconds of the jobs that started at or after ``since``: by rule kind, and the training jobs split into
    pretraining, retraining (training), evaluation (retrain evaluations) and fixed per-job cost. ``pretrained``:
    whether those jobs pretrained their networks (False: they kept networks staged by an earlier run). ``under``:
    as in ``jobs``. ``threads``: the threads each training job ran with (the config's ``threads``, at most the
    cores): a second of such a job is that many core-seconds. ``tables``: where the aggregate's tables are (default
    ``results``; the readout of a study's finished part, ``partial: true``, has them under ``results/partial``)."""
    tables = results if tables is None else tables
    curves = pd.read_parquet(tables / "curves.parquet")
    run = [j for j in jobs(workdir, under, set(curves["model"].astype(str))) if j.start >= since]
    per_rule = defaultdict(float)
    for j in run:
        per_rule[j.rule] += j.seconds * (threads if j.rule in TRAINING_RULES else 1)
    out = {
        "jobs": len(run),
        "job_core_s": sum(per_rule.values()),
        "training_jobs": sum(1 for j in run if j.rule in TRAINING_RULES),
        "training_job_core_s": sum(v for r, v in per_rule.items() if r in TRAINING_RULES),
        "other_job_core_s": sum(v for r, v in per_rule.items() if r not in TRAINING_RULES),
    }
    keys = [c for c in ("model", "pretrain_seed", "target", "policy", "init", "regime", "seed") if c in curves]
    rec = curves[curves["kind"] == "recovery"].groupby(keys, dropna=False)
    pretraining_rules = set(PRETRAINING_RULES) & set(per_rule)
    seconds = pretraining_seconds(tables)
    made = pretrained and pretraining_rules
    pretrain_s = threads * float(seconds[["main_s", "check_s"]].to_numpy().sum()) if made else 0.0
    check_s = threads * float(seconds["check_s"].sum()) if made else 0.0
    walls = threads * rec["wall_s"].max() if set(HEALING_RULES) & set(per_rule) else pd.Series(dtype=float)
    walls = walls.astype(float)
    for path in results.rglob("race.parquet"):  # a raced cell: every copy it trained, not only its primary's curve
        cell = (
            json.loads((path.parent / "recovery.json").read_text())
            if (path.parent / "recovery.json").is_file()
            else None
        )
        key = tuple(cell.get(k) for k in keys) if cell else None
        if key in walls.index and "work" not in path.relative_to(results).parts:
            copies = pd.read_parquet(path, columns=["lr", "wall_s"]).groupby("lr")["wall_s"].max()
            walls.loc[key] = threads * float(copies.sum())
    retrain_s, eval_s, replay_s, shares = float(walls.sum()), 0.0, 0.0, []
    for path in results.rglob("recovery.json"):  # each cell's documented record (the staged copies under work/ too)
        cell = json.loads(path.read_text())
        key = tuple(cell.get(k) for k in keys)
        if cell.get("eval_share") is None or key not in walls.index or "work" in path.relative_to(results).parts:
            continue
        if cell.get("target") != "none":  # the no-reset control is one evaluation and no training: 100 % by itself
            shares.append(cell["eval_share"])
        eval_s += float(walls.loc[key]) * cell["eval_share"]
        replay_s += float(walls.loc[key]) * (cell.get("replay_share") or 0.0)
    recovery = curves[curves["kind"] == "recovery"]
    # evaluations made after the fact inside an interval already trained, to locate crossings (``replay`` column:
    # of weights kept at every step, or of a replayed interval); tables of older runs also had an ``ahead`` column
    counts = {
        "evaluations": int(len(recovery)),
        "located_evaluations": int(recovery["replay"].fillna(False).astype(bool).sum()) if "replay" in recovery else 0,
    }
    out.update(counts, replay_share_of_retrain=replay_s / retrain_s if retrain_s else float("nan"))
    out.update(
        pretrain_s=pretrain_s,
        plateau_check_s=check_s,
        retrain_train_s=retrain_s - eval_s,
        retrain_eval_s=eval_s,
        cells=int(len(walls)),
        eval_share_mean=(sum(shares) / len(shares)) if shares else float("nan"),
        eval_share_max=max(shares) if shares else float("nan"),
        eval_share_of_retrain=eval_s / retrain_s if retrain_s else float("nan"),
    )
    out["fixed_s"] = out["training_job_core_s"] - pretrain_s - retrain_s
    return out


def describe(b: dict[str, float], wall: float, cores: int) -> str:
    core = wall * cores
    return (
        f"{b['jobs']} jobs, {b['job_core_s']:.0f} job core-s of {core:.0f} ({cores} x {wall:.0f} s wall): "
        f"pretraining {b['pretrain_s']:.0f} s"
        + (
            f" (of which plateau checks {b['plateau_check_s']:.0f} s, at the main runs' speed)"
            if b.get("plateau_check_s")
            else ""
        )
        + f", retraining {b['retrain_train_s']:.0f} s + evaluation "
        f"{b['retrain_eval_s']:.0f} s ({b['cells']} cells; evaluation {b['eval_share_of_retrain']:.1%} of retraining, "
        f"per cell mean {b['eval_share_mean']:.1%}, max {b['eval_share_max']:.1%}, no-reset controls left out of "
        f"the mean; {b['evaluations']} evaluations, {b['located_evaluations']} of them made after the fact to "
        f"locate crossings; replays {b['replay_share_of_retrain']:.1%} of retraining), "
        + (
            f"fixed per-job cost of the {b['training_jobs']} training jobs {b['fixed_s']:.0f} s = "
            f"{b['fixed_s'] / core:.1%} of core time"
            if not resumed(b)
            else "fixed per-job cost not measured (jobs interrupted between pieces resumed from their checkpoints, "
            "and Snakemake's timestamps keep only each job's last attempt, while the networks and cells record "
            "all of their training)"
        )
        + f", data/report jobs {b['other_job_core_s']:.0f} s"
    )


def resumed(b: dict[str, float]) -> bool:
    """Whether the training jobs' timestamps hold less time than their networks and cells record: some were
    interrupted and resumed from their checkpoints, and only each job's last attempt has timestamps."""
    return b["fixed_s"] < 0


def recorded_core_s(b: dict[str, float]) -> float:
    """The core-seconds the networks and cells record (pretraining with its checks, retraining with its
    evaluations) and the data and report jobs: the run's core time however often its jobs were interrupted."""
    return b["pretrain_s"] + b["retrain_train_s"] + b["retrain_eval_s"] + b["other_job_core_s"]


if __name__ == "__main__":  # the breakdown of a finished run: snakemake_jobs.py WORKDIR --wall SECONDS [--cores 2]
    import argparse

    parser = argparse.ArgumentParser(description="where a finished Snakemake run's time went")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--wall", type=float, required=True, help="the run's wall seconds (default_grid.py prints it)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="the threads of each training job (config threads)")
    a = parser.parse_args()
    table = sorted(a.workdir.glob("results/**/curves.parquet"))[0]
    print(describe(breakdown(a.workdir, table.parent, threads=a.threads), a.wall, a.cores))
