"""Grid level against the peer: every layer x retrain seed cell of a model, produced the way a user runs selfheal
(`snakemake`, process start-ups, loading and caches included) against the loop a researcher would write instead:
one Python process that loads the trained model once and, per cell, re-draws layer L, freezes the rest and runs
`transformers.Trainer` with a threshold callback. Two peers, each measured side by side with selfheal in one run:

- the *same-information* peer (the target's): it gives what selfheal gives, every threshold's crossing
  (`retrain.thresholds`) located to 10 % of its examples or one step, by a geometric evaluation cadence (every
  step at first, then every 10 % of the steps so far) and stops when the last threshold is crossed;
- the *one-threshold* peer: it evaluates every `retrain.eval_every_examples` examples and stops at --threshold,
  located to that interval only (less information than selfheal's).

Same cells, data order, batch, lr, warmup, clipping and thread count. Target: selfheal >= 1.3x the
same-information peer's speed at grid level (every model, start-up included).

    .venv/bin/python benchmarks/grid_vs_peer.py   # [--models gpt2-n4-d64] [--threads 1] [--threshold 0.01]
                                                  # [--keep DIR] [--no-write]

1. In a fresh folder, the real workflow runs each model's job once (`snakemake --until model`; not timed: both
   sides start from the trained networks), with `grid.controls` (and `grid.matched_controls`) off so that the grid
   is exactly the layer x seed cells, and `threads` set to --threads. Then the healed cells are removed (their
   outputs and their staged copies under `results/work/`), the trained networks stay staged.
2. selfheal, timed: `snakemake --until model --forcerun model --cores <threads>` (wall clock of the whole
   command): each model's job keeps its staged networks and heals every cell. Then, untimed, `--until aggregate`
   for the tables. The breakdown of its time comes from Snakemake's job timestamps (benchmarks/snakemake_jobs.py).
3. Each peer, timed: one `python` process per model (its start-up and imports included), --threads threads.

Prints per model and for the grid the wall times and ratios, and per cell the examples to the thresholds of both
(the one-threshold peer's must agree within one evaluation interval, the same-information peer's within 10 % or
one step). Reads only the CLI's outputs: `summary.parquet`, `curves.parquet`, and
the model folder found by name under `results/models/<model>/`.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
import yaml
from torch.utils.data import SequentialSampler
from transformers import Trainer, TrainerCallback, TrainingArguments

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "src"))
from common import add_write_flag, publish, snakemake_env  # noqa: E402
from snakemake_jobs import breakdown, describe  # noqa: E402

from selfheal import config, grid, models  # noqa: E402
from selfheal.config.defaults import DEFAULTS  # noqa: E402
from selfheal.config.merge import merge  # noqa: E402
from selfheal.data import streams  # noqa: E402
from selfheal.heal import reset  # noqa: E402
from selfheal.models import families  # noqa: E402
from selfheal.training import setup  # noqa: E402

ENV = snakemake_env(str(ROOT / "src"))  # the peer runs in it too


def snakemake(workdir: Path, *args: str) -> float:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        "--quiet",
        *args,
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    return time.perf_counter() - t0


def grid_config(names: list[str], threads: int) -> dict:
    """config/config.yaml's models (frozen-random variants dropped), layer x seed cells only."""
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    chosen = [{k: v for k, v in m.items() if k != "frozen_random"} for m in base["models"] if m["name"] in names]
    if len(chosen) != len(names):
        sys.exit(f"--models: not all of {names} are in config/config.yaml")
    cells_only = {"controls": False}
    if "matched_controls" in DEFAULTS["grid"]:
        cells_only["matched_controls"] = "none"
    # one job per model (job_unit: auto would pick from --cores): the layout this benchmark times
    return {"models": chosen, "grid": cells_only, "threads": threads, "job_unit": "model"}


def trained_dir(results: Path, model: str, pretrain_seed: int) -> Path:
    """A network's trained weights: `trained/` under its model's folder, in `p<pretrain seed>/` where the layout
    has one folder per pretraining seed."""
    found = sorted(results.glob(f"models/{model}/**/trained"))
    per_seed = [p for p in found if f"p{pretrain_seed}" in p.parts]
    if not (per_seed or len(found) == 1):
        sys.exit(f"no trained model for {model}, pretraining seed {pretrain_seed}, under {results}/models")
    return (per_seed or found)[0]


def peer(args) -> None:
    """The peer loop, run in its own process: every cell of one model, Trainer + threshold callback."""
    torch.set_num_threads(args.threads)
    job = json.loads(args.peer)
    # the config the workflow ran: its own config file merged over config/config.yaml, as Snakemake merges them
    # (the default's retrain section, lr 3e-3 and budget 0.25, is not in the benchmark's file)
    cfg = config.resolve(
        merge(
            yaml.safe_load((ROOT / "config" / "config.yaml").read_text()),
            yaml.safe_load(Path(job["config"]).read_text()),
        )
    )
    model_cfg = grid.model_by_name(cfg, job["model"])
    r, ev = model_cfg["retrain"], cfg["eval"]
    tokens = job["tokens"]
    val_seqs = streams.val_sequences(tokens, model_cfg["context"], ev["val_sequences"])
    every = r["eval_every_examples"] // r["batch_size"]

    out = []
    for network in job["networks"]:  # each pretraining seed's trained model
        p = {**model_cfg["pretrain"], "seed": network["pretrain_seed"]}
        train_seqs = setup.train_sequences({**model_cfg, "pretrain": p}, tokens)  # as its heal jobs take them
        budget = round(r["budget_fraction"] * train_seqs.shape[0] * p["epochs"])
        trained = models.load(network["trained"])
        family = families.for_model(trained)
        thresholds = r["thresholds"] if job["cadence"] == "geometric" else [job["threshold"]]
        limits = {eps: network["baseline"] * (1 + eps) for eps in thresholds}
        for layer in range(model_cfg["n_layer"]):
            for seed in cfg["grid"]["seeds"]:
                out.append(
                    peer_cell(
                        trained,
                        family,
                        train_seqs,
                        val_seqs,
                        model_cfg,
                        ev,
                        budget,
                        limits,
                        every if job["cadence"] == "interval" else None,
                        layer,
                        seed,
                    )
                    | {"pretrain_seed": network["pretrain_seed"]}
                )
    print(json.dumps(out))


def next_evaluation(step: int, every: int | None) -> int:
    """The step of the evaluation after one at ``step``: ``every`` steps later (the one-threshold peer), or the
    geometric cadence (every step at first, then every 10 % of the steps so far), which locates each crossing
    to 10 % of its steps or one step."""
    return step + every if every else step + max(1, step // 10)


def peer_cell(trained, family, train_seqs, val_seqs, model_cfg, ev, budget, limits, every, layer, seed) -> dict:
    """One cell as the peer writes it: copy, re-draw layer L, freeze the rest, Trainer with a callback that
    evaluates at ``next_evaluation``'s steps and stops when every threshold (``limits``: the loss of each) is
    crossed. Each crossing is the interval (lo, hi] of examples between the evaluation before and the first at or
    below its limit."""
    r = model_cfg["retrain"]

    @torch.no_grad()
    def val_loss(m):
        m.eval()
        total = 0.0
        for i in range(0, val_seqs.shape[0], ev["batch_size"]):
            batch = val_seqs[i : i + ev["batch_size"]]
            total += m(input_ids=batch, labels=batch).loss.item() * batch.shape[0]
        m.train()
        return total / val_seqs.shape[0]

    class InOrder(Trainer):
        def _get_train_sampler(self, *a, **kw):
            return SequentialSampler(self.train_dataset)

    t0 = time.perf_counter()
    torch.manual_seed(seed)
    model = copy.deepcopy(trained)
    names = set(reset.draw(model, family, f"L{layer}", "full", "fresh", seed))
    for name, param in model.named_parameters():
        param.requires_grad_(name in names)
    order = torch.cat(
        [streams.epoch_order(train_seqs.shape[0], seed, e) for e in range(math.ceil(budget / train_seqs.shape[0]))]
    )[:budget]
    dataset = [{"input_ids": train_seqs[i], "labels": train_seqs[i]} for i in order]
    found: dict[float, list[int]] = {}
    at = {"last": 0, "next": 0, "evals": 0}

    schedule_free = r["optimizer"] == "schedulefree"

    def evaluate(model, step: int, optimizer) -> bool:
        if schedule_free:  # evaluated at its averaged weights, as the package's documentation asks
            optimizer.eval()
        loss = val_loss(model)
        if schedule_free:
            optimizer.train()
        at["evals"] += 1
        for eps, limit in limits.items():
            if eps not in found and loss <= limit:
                found[eps] = [at["last"] * r["batch_size"], step * r["batch_size"]]
        at["last"], at["next"] = step, next_evaluation(step, every)
        return len(found) == len(limits)

    class StopAtThresholds(TrainerCallback):
        def on_train_begin(self, a, state, control, model=None, optimizer=None, **kw):
            if evaluate(model, 0, optimizer):
                control.should_training_stop = True

        def on_step_end(self, a, state, control, model=None, optimizer=None, **kw):
            last = state.global_step >= state.max_steps  # the budget's end: a crossing there is found too
            if (state.global_step >= at["next"] or last) and evaluate(model, state.global_step, optimizer):
                control.should_training_stop = True

    with tempfile.TemporaryDirectory() as tmp:
        targs = TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=r["batch_size"],
            learning_rate=r["lr"],
            # the same optimiser: AdamW (0.9, 0.95) warmed up then constant, or schedule-free AdamW (its default
            # betas, its own warmup)
            lr_scheduler_type="constant" if schedule_free else "constant_with_warmup",
            warmup_steps=r["warmup_steps"],
            weight_decay=0.0,
            adam_beta1=0.9,
            adam_beta2=0.999 if schedule_free else 0.95,
            max_grad_norm=r["grad_clip"],
            optim="schedule_free_adamw" if schedule_free else "adamw_torch",
            max_steps=math.ceil(budget / r["batch_size"]),
            logging_strategy="no",
            save_strategy="no",
            eval_strategy="no",
            report_to="none",
            use_cpu=True,
            disable_tqdm=True,
            dataloader_num_workers=0,
            seed=seed,
        )
        InOrder(model=model, args=targs, train_dataset=dataset, callbacks=[StopAtThresholds()]).train()
    first = min(limits)
    return {
        "target": f"L{layer}",
        "seed": seed,
        "examples": found[first][1] if first in found else None,
        "crossings": {str(eps): found.get(eps) for eps in limits},
        "evaluations": at["evals"],
        "wall_s": time.perf_counter() - t0,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gpt2-n4-d64", help="comma-separated models of config/config.yaml")
    parser.add_argument("--threads", type=int, default=1, help="threads (and Snakemake cores) for both sides")
    parser.add_argument("--threshold", type=float, default=0.01)
    parser.add_argument("--keep", type=Path, default=None, help="work here (reused: pretraining is skipped)")
    add_write_flag(parser)
    parser.add_argument("--peer", default=None, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.peer:
        return peer(a)
    names = a.models.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = (a.keep or Path(tmp)).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "config.yaml").write_text(yaml.safe_dump(grid_config(names, a.threads)))
        snakemake(workdir, "--until", "model", "--cores", "2")  # trained networks and baselines for both, not timed
        results = workdir / "results"
        for name in names:  # the healed cells go, the staged networks stay
            shutil.rmtree(results / "cells" / name, ignore_errors=True)
            for staged in (results / "work" / name).glob("p*/*"):
                if staged.name != "network":
                    shutil.rmtree(staged)
        since = time.time()
        ours = snakemake(workdir, "--until", "model", "--forcerun", "model", "--cores", str(a.threads))
        snakemake(workdir, "--until", "aggregate", "--cores", "2")
        b = breakdown(workdir, results, since, pretrained=False)
        summary = pd.read_parquet(results / "summary.parquet")
        summary = summary[summary["threshold"].round(6) == round(a.threshold, 6)]
        print(
            f"selfheal `snakemake --until model --forcerun model --cores {a.threads}`: {ours:.1f} s wall for {len(summary)} cells "
            f"of {', '.join(names)}; {describe(b, ours, a.threads)}"
        )
        resolved = config.resolve(
            merge(
                yaml.safe_load((ROOT / "config" / "config.yaml").read_text()),
                yaml.safe_load((workdir / "config.yaml").read_text()),
            )
        )
        everything = pd.read_parquet(results / "summary.parquet")
        totals = {"interval": 0.0, "geometric": 0.0}
        for model in names:
            cells = summary[summary["model"] == model]
            tokens = next(iter(sorted(results.glob("corpus/bpe/**/tokens.safetensors"))))
            seeds = sorted(cells["pretrain_seed"].unique()) if "pretrain_seed" in cells else [0]
            networks = [
                {
                    "pretrain_seed": int(ps),
                    "trained": str(trained_dir(results, model, int(ps))),
                    "baseline": float(cells[cells.get("pretrain_seed", 0) == ps]["baseline_loss"].iloc[0]),
                }
                for ps in seeds
            ]
            retrain = grid.model_by_name(resolved, model)["retrain"]
            interval = retrain["eval_every_examples"]
            keys = ["pretrain_seed", "target", "seed"] if "pretrain_seed" in cells else ["target", "seed"]
            share = len(cells) / len(summary)  # selfheal's time for this model: its share of the snakemake wall
            for cadence in ("interval", "geometric"):
                job = {
                    "config": str(workdir / "config.yaml"),
                    "model": model,
                    "tokens": str(tokens),
                    "networks": networks,
                    "threshold": a.threshold,
                    "cadence": cadence,
                }
                theirs, peer_cells = run_peer(job, a.threads)
                totals[cadence] += theirs
                if cadence == "interval":
                    merged = cells[[*keys, "recovered", "examples"]].merge(peer_cells, on=keys, suffixes=("", "_peer"))
                    merged["agree"] = [  # both crossed within one interval of each other, or neither crossed
                        (not rec and (e2 is None or pd.isna(e2)))
                        or (bool(rec) and e2 is not None and not pd.isna(e2) and abs(e - e2) <= interval)
                        for rec, e, e2 in zip(merged["recovered"], merged["examples"], merged["examples_peer"])
                    ]
                    what = f"one threshold ({a.threshold:g}) to {interval} examples"
                    agree = f"examples agree within {interval} at {int(merged['agree'].sum())}/{len(merged)} cells"
                else:
                    merged = same_information(
                        everything[everything["model"] == model], peer_cells, keys, retrain["batch_size"]
                    )
                    what = f"every threshold ({', '.join(f'{t:g}' for t in retrain['thresholds'])}) to 10 % or a step"
                    agree = (
                        f"crossings agree within 10 % or a step at {int(merged['agree'].sum())}/{len(merged)} "
                        f"cell-thresholds; {int(peer_cells['evaluations'].sum())} peer evaluations"
                    )
                print(
                    f"\n{model}, {cadence} peer ({what}): peer {theirs:.1f} s (one process, Trainer + callback, "
                    f"{a.threads} thread(s)), selfheal {ours * share:.1f} s (snakemake) -> selfheal "
                    f"{theirs / (ours * share):.2f}x the peer's speed; {agree}"
                )
                print(
                    merged.drop(columns=["crossings"], errors="ignore")
                    .rename(columns={"wall_s": "peer_cell_s"})
                    .to_string(index=False)
                )
        figure = (
            f"Grid level ({', '.join(names)}; {len(summary)} cells, {a.threads} thread(s), start-up included): "
            f"selfheal {ours:.1f} s; the same-information peer (every threshold to 10 % or a step) "
            f"{totals['geometric']:.1f} s: **{totals['geometric'] / ours:.2f}x the peer's speed** (target "
            f"1.3x); the one-threshold peer ({a.threshold:g}, to {interval} examples) {totals['interval']:.1f} s: "
            f"{totals['interval'] / ours:.2f}x."
        )
        documented = a.models == "gpt2-n4-d64" and a.threads == 1 and a.threshold == 0.01
        publish(
            "grid-vs-peer",
            f"`.venv/bin/python benchmarks/grid_vs_peer.py`: {figure}",
            not a.no_write,
            why_not=None if documented else "not the documented run (gpt2-n4-d64, one thread, ε = 0.01)",
        )


def run_peer(job: dict, threads: int) -> tuple[float, pd.DataFrame]:
    """One peer's process for one model, timed (start-up and imports included): its wall seconds and cells."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--threads", str(threads), "--peer", json.dumps(job)],
        capture_output=True,
        text=True,
        env=ENV,
    )
    seconds = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    return seconds, pd.DataFrame(json.loads(proc.stdout.strip().splitlines()[-1]))


def same_information(summary: pd.DataFrame, peer_cells: pd.DataFrame, keys: list[str], batch: int) -> pd.DataFrame:
    """selfheal's crossings (every threshold) beside the same-information peer's: they agree when both are censored,
    or both crossed with upper ends within 10 % of the larger or one step."""
    rows = []
    for _, p in peer_cells.iterrows():
        for eps, crossing in p["crossings"].items():
            mine = summary[
                (summary[keys] == p[keys]).all(axis=1) & (summary["threshold"].round(6) == round(float(eps), 6))
            ]
            if mine.empty:
                continue
            ours = mine.iloc[0]
            hi = int(ours["examples_hi"]) if bool(ours["recovered"]) else None
            peer_hi = crossing[1] if crossing else None
            agree = (hi is None and peer_hi is None) or (
                hi is not None and peer_hi is not None and abs(hi - peer_hi) <= max(0.1 * max(hi, peer_hi), batch)
            )
            rows.append(
                {
                    **{k: p[k] for k in keys},
                    "threshold": float(eps),
                    "examples_hi": hi,
                    "peer_lo": crossing[0] if crossing else None,
                    "peer_hi": peer_hi,
                    "agree": agree,
                }
            )
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
