"""Grid level against the peer: every layer x retrain seed cell of a model, produced the way a user runs selfheal
(`snakemake`, process start-ups, loading and caches included) against the loop a researcher would write instead:
one Python process that loads the trained model once and, per cell, re-draws layer L, freezes the rest and runs
`transformers.Trainer` with a threshold callback. Under the method the workflow answers with (a config's own
retraining: schedule-free AdamW evaluated at its averaged weights, and budgets past each network's from-scratch
cost), both sides use the same optimiser, lr, warm-up, clipping, data order, batch, thread count and budget per
network (the peer reads each network's budget from selfheal's own summary).

- the *same-information* peer (the target's): it gives what selfheal gives, every threshold's crossing
  (`retrain.thresholds`) located to 10 % of its examples or one step, by a geometric evaluation cadence (every
  step at first, then every 10 % of the steps so far) and stops when the last threshold is crossed;
- with --one-threshold-peer also the *one-threshold* peer: it evaluates every `retrain.eval_every_examples`
  examples and stops at --threshold, located to that interval only (less information than selfheal's).

Target: selfheal >= 1.5x the same-information peer's speed at grid level (start-up included), the median of
--pairs paired runs (selfheal, then the peer, on the same idle machine).

    .venv/bin/python benchmarks/grid_vs_peer.py   # the documented run: config/fully_trained.yaml, gpt2-n2-d48,
                                                  # pretraining seed 0, one thread, 3 pairs
    # [--config config/config.yaml --models gpt2-n4-d64 --seeds all] [--threads 1] [--pairs 3] [--threshold 0.01]
    # [--one-threshold-peer] [--keep DIR] [--no-write]

1. In a fresh folder, the real workflow runs each model's job once with a hundredth of the budget (`snakemake
   --until model`; not timed: both sides start from the trained networks), with `grid.controls` (and `grid.matched_controls`) off so that the grid
   is exactly the layer x seed cells, `pretrain.plateau_check` off (the check trains each network again and is not
   what is timed) and `threads` set to --threads.
2. Per pair: the healed cells are removed (their outputs and their staged copies under `results/work/`; the
   trained networks stay staged); selfheal, timed: `snakemake --until model --forcerun model --cores <threads>`
   (wall clock of the whole command), each model's job keeping its staged networks and healing every cell; then,
   untimed, `--until aggregate` for the tables. Then the peer, timed: one `python` process per model (its start-up
   and imports included), --threads threads. The breakdown of selfheal's time comes from Snakemake's job
   timestamps (benchmarks/snakemake_jobs.py).

Prints per pair and model the wall times and ratios, and per cell the examples to the thresholds of both (the
one-threshold peer's must agree within one evaluation interval, the same-information peer's within 10 % or one
step). Reads only the CLI's outputs: `summary.parquet`, `curves.parquet`, and the model folder found by name under
`results/models/<model>/`.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import shutil
import statistics
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
from common import add_write_flag, machine, publish, snakemake_env, workflow_config  # noqa: E402
from snakemake_jobs import breakdown, describe  # noqa: E402

from selfheal import grid, models  # noqa: E402
from selfheal.config.defaults import DEFAULTS  # noqa: E402
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


def grid_config(base: Path, names: list[str], threads: int, seeds: list[int] | None) -> dict:
    """The config file ``base`` (frozen-random variants dropped), layer x seed cells only, its networks trained
    without the plateau check (not what is timed), in ``results/`` of the work folder."""
    raw = yaml.safe_load(base.read_text())
    chosen = [{k: v for k, v in m.items() if k != "frozen_random"} for m in raw["models"] if m["name"] in names]
    if len(chosen) != len(names):
        sys.exit(f"--models: not all of {names} are in {base}")
    cells_only = {**raw.get("grid", {}), "controls": False}
    if "matched_controls" in DEFAULTS["grid"]:
        cells_only["matched_controls"] = "none"
    pretrain = {**raw.get("pretrain", {}), "plateau_check": None}
    if seeds is not None:
        pretrain["seeds"] = seeds
    retrain = {k: v for k, v in raw.get("retrain", {}).items() if k != "lr_sensitivity"}  # the chosen lr only
    # one job per model (job_unit: auto would pick from --cores): the layout this benchmark times
    return {
        **raw,
        "models": chosen,
        "grid": cells_only,
        "pretrain": pretrain,
        "retrain": retrain,
        "threads": threads,
        "job_unit": "model",
        "results_dir": "results",
    }


def shortened(chosen: dict) -> dict:
    """``chosen`` with a hundredth of its retraining budget (for the untimed run that trains the networks)."""
    resolved = workflow_config(chosen)
    retrain = dict(chosen["retrain"])
    if resolved["retrain"].get("budget_scratch"):
        retrain["budget_scratch"] = resolved["retrain"]["budget_scratch"] / 100
    else:
        retrain["budget_fraction"] = resolved["retrain"]["budget_fraction"] / 100
    return {**chosen, "retrain": retrain}


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
    cfg = workflow_config(Path(job["config"]))  # the config the workflow ran
    model_cfg = grid.model_by_name(cfg, job["model"])
    r, ev = model_cfg["retrain"], cfg["eval"]
    tokens = job["tokens"]
    val_seqs = streams.val_sequences(tokens, model_cfg["context"], ev["val_sequences"])
    every = r["eval_every_examples"] // r["batch_size"]

    out = []
    for network in job["networks"]:  # each pretraining seed's trained model
        p = {**model_cfg["pretrain"], "seed": network["pretrain_seed"]}
        train_seqs = setup.train_sequences({**model_cfg, "pretrain": p}, tokens)  # as its heal jobs take them
        budget = network["budget"]  # selfheal's own budget for this network (summary.parquet's budget_examples)
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


DOCUMENTED = {"config": "config/fully_trained.yaml", "models": "gpt2-n2-d48", "seeds": "0", "threads": 1}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=DOCUMENTED["config"], help="the config file whose models and method run")
    parser.add_argument("--models", default=DOCUMENTED["models"], help="comma-separated models of --config")
    parser.add_argument("--seeds", default=DOCUMENTED["seeds"], help="pretraining seeds (comma-separated, or all)")
    parser.add_argument("--threads", type=int, default=DOCUMENTED["threads"], help="threads (and cores) per side")
    parser.add_argument("--pairs", type=int, default=3, help="paired runs (selfheal, then the peer); the median")
    parser.add_argument("--threshold", type=float, default=0.01)
    parser.add_argument("--one-threshold-peer", action="store_true", help="also time the one-threshold peer")
    parser.add_argument("--keep", type=Path, default=None, help="work here (reused: pretraining is skipped)")
    add_write_flag(parser)
    parser.add_argument("--peer", default=None, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.peer:
        return peer(a)
    names = a.models.split(",")
    seeds = None if a.seeds == "all" else [int(x) for x in a.seeds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = (a.keep or Path(tmp)).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        chosen = grid_config(ROOT / a.config, names, a.threads, seeds)
        # the trained networks and baselines for both sides, not timed: the model jobs run once with a budget of a
        # hundredth (their cells end at once); the timed runs keep the staged networks and heal every cell anew
        (workdir / "config.yaml").write_text(yaml.safe_dump(shortened(chosen)))
        snakemake(workdir, "--until", "model", "--cores", "2")
        (workdir / "config.yaml").write_text(yaml.safe_dump(chosen))
        results = workdir / "results"
        resolved = workflow_config(workdir / "config.yaml")
        cadences = ("geometric", "interval") if a.one_threshold_peer else ("geometric",)
        ratios, walls = {c: [] for c in cadences}, {c: [] for c in ("selfheal", *cadences)}
        for pair in range(a.pairs):
            ours, summary, everything = time_selfheal(workdir, results, names, a)
            walls["selfheal"].append(ours)
            for cadence in cadences:
                theirs = 0.0
                for model in names:
                    seconds, agree = time_peer(workdir, results, resolved, everything, summary, model, cadence, a)
                    theirs += seconds
                    print(f"pair {pair + 1}, {model}, {cadence} peer: {seconds:.1f} s; {agree}")
                walls[cadence].append(theirs)
                ratios[cadence].append(theirs / ours)
                print(f"pair {pair + 1}: selfheal {ours:.1f} s, {cadence} peer {theirs:.1f} s -> {theirs / ours:.2f}x")
        median = {c: statistics.median(v) for c, v in ratios.items()}
        spread = {c: f"{min(v):.2f}-{max(v):.2f}" for c, v in ratios.items()}
        retrain = grid.model_by_name(resolved, names[0])["retrain"]
        budget = (
            f"{retrain['budget_scratch']:g} x each network's from-scratch cost"
            if retrain.get("budget_scratch")
            else f"{retrain['budget_fraction']:g} x S x E"
        )
        figure = (
            f"Grid level ({a.config}: {', '.join(names)}, pretraining seeds {a.seeds}; {len(summary)} cells; "
            f"{retrain['optimizer']} at lr {retrain['lr']:g}, budget {budget}; {a.threads} thread(s), start-up "
            f"included; {a.pairs} paired runs on {machine()}): selfheal {statistics.median(walls['selfheal']):.1f} s, "
            f"the same-information peer (every threshold to 10 % or a step) "
            f"{statistics.median(walls['geometric']):.1f} s (medians): **{median['geometric']:.2f}x the peer's speed** "
            f"(pairs {spread['geometric']}; target 1.5x)"
            + (
                f"; the one-threshold peer ({a.threshold:g}, to {retrain['eval_every_examples']} examples) "
                f"{median['interval']:.2f}x (pairs {spread['interval']})."
                if "interval" in median
                else "."
            )
        )
        documented = all(str(getattr(a, k)) == str(v) for k, v in DOCUMENTED.items()) and a.threshold == 0.01
        publish(
            "grid-vs-peer",
            f"`.venv/bin/python benchmarks/grid_vs_peer.py`: {figure}",
            not a.no_write,
            why_not=None if documented else f"not the documented run ({DOCUMENTED}, ε = 0.01)",
        )


def time_selfheal(workdir: Path, results: Path, names: list[str], a) -> tuple[float, pd.DataFrame, pd.DataFrame]:
    """selfheal's timed run of every cell of ``names`` from the staged networks (the healed cells removed first):
    its wall seconds, the summary's rows at --threshold and the whole summary."""
    for name in names:  # the healed cells go, the staged networks stay
        shutil.rmtree(results / "cells" / name, ignore_errors=True)
        for staged in (results / "work" / name).glob("p*/*"):
            if staged.name != "network":
                shutil.rmtree(staged)
    since = time.time()
    ours = snakemake(workdir, "--until", "model", "--forcerun", "model", "--cores", str(a.threads))
    snakemake(workdir, "--until", "aggregate", "--cores", "2")
    b = breakdown(workdir, results, since, pretrained=False, threads=a.threads)
    everything = pd.read_parquet(results / "summary.parquet")
    summary = everything[everything["threshold"].round(6) == round(a.threshold, 6)]
    print(
        f"selfheal `snakemake --until model --forcerun model --cores {a.threads}`: {ours:.1f} s wall for "
        f"{len(summary)} cells; {describe(b, ours, a.threads)}"
    )
    return ours, summary, everything


def time_peer(workdir, results, resolved, everything, summary, model, cadence, a) -> tuple[float, str]:
    """One peer's timed process for ``model``'s cells: its wall seconds and how its crossings agree with
    selfheal's (the table printed)."""
    cells = summary[summary["model"] == model]
    tokens = next(iter(sorted(results.glob("corpus/bpe/**/tokens.safetensors"))))
    networks = [
        {
            "pretrain_seed": int(ps),
            "trained": str(trained_dir(results, model, int(ps))),
            "baseline": float(g["baseline_loss"].iloc[0]),
            "budget": int(g["budget_examples"].iloc[0]),
        }
        for ps, g in cells.groupby("pretrain_seed")
    ]
    retrain = grid.model_by_name(resolved, model)["retrain"]
    keys = ["pretrain_seed", "target", "seed"]
    job = {
        "config": str(workdir / "config.yaml"),
        "model": model,
        "tokens": str(tokens),
        "networks": networks,
        "threshold": a.threshold,
        "cadence": cadence,
    }
    theirs, peer_cells = run_peer(job, a.threads)
    if cadence == "interval":
        interval = retrain["eval_every_examples"]
        merged = cells[[*keys, "recovered", "examples"]].merge(peer_cells, on=keys, suffixes=("", "_peer"))
        merged["agree"] = [  # both crossed within one interval of each other, or neither crossed
            (not rec and (e2 is None or pd.isna(e2)))
            or (bool(rec) and e2 is not None and not pd.isna(e2) and abs(e - e2) <= interval)
            for rec, e, e2 in zip(merged["recovered"], merged["examples"], merged["examples_peer"])
        ]
        agree = f"examples agree within {interval} at {int(merged['agree'].sum())}/{len(merged)} cells"
    else:
        merged = same_information(everything[everything["model"] == model], peer_cells, keys, retrain["batch_size"])
        agree = (
            f"crossings agree within 10 % or a step at {int(merged['agree'].sum())}/{len(merged)} "
            f"cell-thresholds; {int(peer_cells['evaluations'].sum())} peer evaluations"
        )
    print(merged.drop(columns=["crossings"], errors="ignore").rename(columns={"wall_s": "peer_cell_s"}).to_string())
    return theirs, agree


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
