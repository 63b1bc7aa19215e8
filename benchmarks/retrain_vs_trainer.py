"""selfheal's retrain-to-threshold against what a user would otherwise write: a transformers model with every
other parameter frozen, trained by ``transformers.Trainer`` with a callback that evaluates on the validation set
every k examples and stops at the threshold. Same cell (fresh reset of layer L, seed 0), same data order, batch
size, optimizer (AdamW, betas 0.9/0.95, no weight decay, warmup then constant lr, clip 1.0) and evaluation
cadence. Measured side by side in one run, for every layer L of the model.

    .venv/bin/snakemake --cores 2                     # the default grid: trained models and data
    .venv/bin/python benchmarks/retrain_vs_trainer.py  # [--model MODEL] [--threshold 0.01] [--threads 2]
                                                       # [--layers 0,2] [--no-write]

Prints, per L: wall seconds to the threshold for both, their ratio, and the examples each needed (which must
agree within one evaluation interval, or neither reach it: a correctness check of the fast path). selfheal's time
includes building the frozen-prefix cache where the workflow would build it for the default grid's retrain seeds
(prefix_cache.worth_building), and separately shows it amortised over the cells that share it. With the
documented options (the defaults) it writes block `retrain-vs-trainer` of docs/performance.md. `--results` and
`--configfile` point it at another run (its config's widest model unless `--model`).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import torch
from common import (
    ROOT,
    add_config_flag,
    add_write_flag,
    is_documented,
    data_for,
    default_model,
    load_setup,
    machine,
    prefix_cache_for,
    publish,
    reset_model,
    run_options,
    workflow_config,
)

from selfheal.heal import thresholds
from selfheal.heal import prefix_cache
from selfheal.training import loop
from selfheal.training import state, setup

MARKER = "retrain-vs-trainer"
DOCUMENTED = {"model": default_model(), "threshold": 0.01, "threads": 2, "layers": None}


def selfheal_run(model_cfg, eval_cfg, trained, tokens, target, baseline, threshold, workdir, sharing):
    """One cell as a heal unit runs it: the prefix cache is built where the workflow would build it for
    ``sharing`` cells at this depth (prefix_cache.worth_building)."""
    r = model_cfg["retrain"]
    train_seqs, val_seqs, objective = data_for(model_cfg, eval_cfg, tokens)
    depth = int(target[1:])
    t0 = time.perf_counter()
    cache = None
    if prefix_cache.cache_depth(model_cfg, target, "full", "frozen") is not None and prefix_cache.worth_building(
        model_cfg, sharing
    ):
        cache = prefix_cache_for(model_cfg, eval_cfg, trained, tokens, depth)
    cache_s = time.perf_counter() - t0
    model, family, names = reset_model(trained, target)
    settings = state.Settings(
        lr=r["lr"],
        batch_size=r["batch_size"],
        weight_decay=0.0,
        grad_clip=r["grad_clip"],
        eval_every_examples=r["eval_every_examples"],
        max_examples=budget(model_cfg, train_seqs),
        warmup_steps=r["warmup_steps"],
        data_seed=0,
    )
    val_batches = objective.val_batches(val_seqs, eval_cfg["batch_size"])
    setup.seed_everything(0)
    result = loop.run(
        model,
        family,
        objective,
        train_seqs,
        val_batches,
        set(names),
        settings,
        should_stop=lambda curve: thresholds.all_reached(curve[-1].val_loss, baseline, [threshold]),
        cache=cache,
    )
    (rec,) = thresholds.recoveries(result.curve, baseline, [threshold])
    return rec, cache_s


def budget(model_cfg, train_seqs):
    """budget_fraction x S x E examples, S the train sequences used (the whole split when not set)."""
    p = model_cfg["pretrain"]
    sequences = p["train_sequences"] or train_seqs.shape[0]
    return round(model_cfg["retrain"]["budget_fraction"] * sequences * p["epochs"])


def trainer_run(model_cfg, eval_cfg, trained, tokens, target, baseline, threshold, workdir):
    from torch.utils.data import SequentialSampler
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from selfheal.data import streams

    r = model_cfg["retrain"]
    train_seqs, val_seqs, _ = data_for(model_cfg, eval_cfg, tokens)
    model, _, names = reset_model(trained, target)
    for name, p in model.named_parameters():
        p.requires_grad_(name in names)
    # the same example order as selfheal: epochs of a seeded permutation, cut at the budget
    examples = budget(model_cfg, train_seqs)
    order = torch.cat(
        [streams.epoch_order(train_seqs.shape[0], 0, e) for e in range(math.ceil(examples / train_seqs.shape[0]))]
    )
    dataset = [{"input_ids": train_seqs[i], "labels": train_seqs[i]} for i in order[:examples]]
    limit = baseline * (1 + threshold)
    every = r["eval_every_examples"] // r["batch_size"]
    found = {}

    @torch.no_grad()
    def val_loss(m):
        m.eval()
        total = 0.0
        for i in range(0, val_seqs.shape[0], eval_cfg["batch_size"]):
            batch = val_seqs[i : i + eval_cfg["batch_size"]]
            total += m(input_ids=batch, labels=batch).loss.item() * batch.shape[0]
        m.train()
        return total / val_seqs.shape[0]

    class StopAtThreshold(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kw):
            self.t0 = time.perf_counter()
            if val_loss(model) <= limit:
                found.update(examples=0, wall_s=0.0)
                control.should_training_stop = True

        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step % every == 0 and "examples" not in found:
                if val_loss(model) <= limit:
                    found.update(examples=state.global_step * r["batch_size"], wall_s=time.perf_counter() - self.t0)
                    control.should_training_stop = True

    class InOrder(Trainer):
        def _get_train_sampler(self, *args, **kwargs):
            return SequentialSampler(self.train_dataset)

    args = TrainingArguments(
        output_dir=str(workdir),
        per_device_train_batch_size=r["batch_size"],
        learning_rate=r["lr"],
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=r["warmup_steps"],
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.95,
        max_grad_norm=r["grad_clip"],
        optim="adamw_torch",
        max_steps=math.ceil(examples / r["batch_size"]),
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = InOrder(model=model, args=args, train_dataset=dataset, callbacks=[StopAtThreshold()])
    t0 = time.perf_counter()
    trainer.train()
    if "examples" not in found:
        found.update(examples=None, wall_s=time.perf_counter() - t0)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    add_config_flag(parser)
    parser.add_argument("--model", default=None, help="a model of the config (default: its widest)")
    parser.add_argument("--threshold", type=float, default=DOCUMENTED["threshold"])
    parser.add_argument("--threads", type=int, default=DOCUMENTED["threads"])
    parser.add_argument("--layers", default=DOCUMENTED["layers"], help="comma-separated layer indices (default: all)")
    add_write_flag(parser)
    a = run_options(parser)
    torch.set_num_threads(a.threads)
    model_cfg, eval_cfg, trained, tokens, baseline = load_setup(a.results, a.model, configfile=a.configfile)
    n = model_cfg["n_layer"]
    layers = [int(x) for x in a.layers.split(",")] if a.layers else list(range(n))
    sharing = len(config_seeds(a.configfile))
    print(
        f"model {model_cfg['name']} (N={n}, D={model_cfg['d_model']}), threshold {a.threshold:g}, "
        f"baseline {baseline:.4f}, {a.threads} threads, eval every {model_cfg['retrain']['eval_every_examples']} "
        f"examples; cache amortised over {sharing} seeds"
    )
    print(
        f"{'L':>3} {'selfheal_s':>10} {'(cache_s)':>9} {'amortised_s':>11} {'trainer_s':>9} {'ratio':>6} "
        f"{'ratio_amort':>11} {'examples':>8} {'peer_ex':>8} {'agree':>5}"
    )
    rows = []
    for layer in layers:
        target = f"L{layer}"
        with tempfile.TemporaryDirectory() as tmp:
            rec, cache_s = selfheal_run(
                model_cfg, eval_cfg, trained, tokens, target, baseline, a.threshold, tmp, sharing
            )
            peer = trainer_run(model_cfg, eval_cfg, trained, tokens, target, baseline, a.threshold, tmp)
        ours = rec.wall_s + cache_s
        amortised = rec.wall_s + cache_s / sharing
        agree = (peer["examples"] is None and not rec.recovered) or (  # neither crossed, or both within a step
            peer["examples"] is not None
            and rec.recovered
            and abs(peer["examples"] - rec.examples) <= model_cfg["retrain"]["eval_every_examples"]
        )
        marker = " <- L = N/2" if layer == n // 2 else ""
        print(
            f"{layer:>3} {ours:>10.1f} {cache_s:>9.1f} {amortised:>11.1f} {peer['wall_s']:>9.1f} "
            f"{peer['wall_s'] / ours:>6.2f} {peer['wall_s'] / amortised:>11.2f} "
            f"{rec.examples if rec.recovered else 'cens.':>8} "
            f"{'cens.' if peer['examples'] is None else peer['examples']:>8} {str(agree):>5}{marker}"
        )
        at = f"at L = {layer}{' = N/2' if layer == n // 2 else ''}"
        if rec.recovered and rec.examples == 0 and peer["examples"] == 0:  # within the threshold at the reset
            rows.append(f"nothing to time {at} (the reset leaves it within the threshold: no retraining)")
            continue
        rows.append(
            f"{peer['wall_s'] / ours:.2f}× {at} "
            f"({peer['wall_s'] / amortised:.2f}× with the cache amortised over the cells that share it)"
            + ("" if agree else ", examples to the threshold NOT within one evaluation interval")
        )
    text = (
        f"`.venv/bin/python benchmarks/retrain_vs_trainer.py` on {machine()}, {model_cfg['name']}, threshold "
        f"{a.threshold:g}, {a.threads} threads; the Trainer's time over selfheal's: " + "; ".join(rows) + "."
    )
    publish(
        MARKER,
        text,
        not a.no_write,
        why_not=None if is_documented(a, DOCUMENTED) else f"options other than {DOCUMENTED}",
    )


def config_seeds(configfile: Path):
    return workflow_config(configfile)["grid"]["seeds"]


if __name__ == "__main__":
    main()
