"""K copies of a reset layer per training step: one pass over the stacked copies (``training.stacked``) against
what a race does now, K separate steps one after another (each copy its own model and the ``schedulefree``
package's optimiser). GPT-2 N = 3 at D = 64 and 128, vocabulary 1,024, batch 32 of 64 tokens, fp32, one thread;
the first layer (the frozen prefix is the embeddings alone) and the last (two frozen layers below it, computed
under no_grad each step, as without a prefix cache). The two ways alternate, step by step, in one process; the
figure is the median of 30 steps after 5 warm-up steps, in ms per copy-step.

    .venv/bin/python benchmarks/stacked_step.py            # [--no-write]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from common import add_write_flag, machine, publish
from selfheal import models
from selfheal.models import families
from selfheal.training import loop, recipe, stacked

MARKER = "stacked-step"
SPECIAL = {"vocab_size": 1024, "eos": 0, "pad": 1, "mask": 2}
KS, WIDTHS, STEPS, WARM = (1, 4, 8), (64, 128), 30, 5
LR, DECAY, WARMUP, CLIP = 1e-2, 0.1, 100, 1.0


def _model(d_model: int):
    cfg = {"name": "s", "arch": "gpt2", "n_layer": 3, "d_model": d_model, "n_head": 4, "context": 64, "dropout": 0.0}
    model = models.build(cfg, SPECIAL, seed=0)
    for p in model.parameters():
        p.requires_grad_(False)
    return model, families.for_model(model)


def _sequential(d_model: int, depth: int, k: int):
    """K models, each with its layer trainable and the race's own optimiser (``loop._optimizer``): one step of each."""
    runs = []
    settings = recipe.settings(
        {"batch_size": 32, "weight_decay": DECAY, "warmup_steps": WARMUP}, LR, eval_every_examples=32, max_examples=0
    )
    for _ in range(k):
        model, family = _model(d_model)
        layer = family.stack_modules(model, "")[depth]
        params = list(layer.parameters())
        for p in params:
            p.requires_grad_(True)
        trainable = {n for n, p in model.named_parameters() if p.requires_grad}
        runs.append((model, family, params, loop._optimizer(model, trainable, settings)))  # the race's own

    def step(batch):
        for model, family, params, optimizer in runs:
            loss = family.loss(model, batch, grad_from=depth)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, CLIP)
            optimizer.step()

    return step


def _stacked(d_model: int, depth: int, k: int):
    model, family = _model(d_model)
    copies = stacked.StackedLayer(family, model, depth, k)
    optimizer = stacked.ScheduleFreeK(copies.weights, [LR] * k, DECAY, WARMUP, CLIP)

    def step(batch):
        loss = copies.losses(batch)
        optimizer.zero_grad()
        loss.sum().backward()
        optimizer.clip()
        optimizer.step()

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_write_flag(parser)
    a = parser.parse_args()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    batches = [{"input_ids": torch.randint(3, 1024, (32, 64), generator=generator)} for _ in range(STEPS + WARM)]
    rows = [
        "| D | layer | K | K separate steps, ms per copy-step | one pass, ms per copy-step | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for d_model in WIDTHS:
        for depth, name in ((0, "first (L0)"), (2, "last (L2)")):
            for k in KS:
                ways = {"separate": _sequential(d_model, depth, k), "stacked": _stacked(d_model, depth, k)}
                times = {w: [] for w in ways}
                for i, batch in enumerate(batches):
                    for way, step in ways.items():
                        start = time.perf_counter()
                        step(batch)
                        if i >= WARM:
                            times[way].append((time.perf_counter() - start) * 1000 / k)
                sep, one = statistics.median(times["separate"]), statistics.median(times["stacked"])
                rows.append(f"| {d_model} | {name} | {k} | {sep:.1f} | {one:.1f} | {sep / one:.2f}× |")
                print(rows[-1], flush=True)
    text = "\n".join(rows) + (
        f"\n\nGPT-2 N = 3, vocabulary 1,024, batch 32 × 64, fp32, one thread; median of {STEPS} steps after {WARM}, "
        f"the two ways alternating step by step. {machine()} (`.venv/bin/python benchmarks/stacked_step.py`)."
    )
    publish(MARKER, text, not a.no_write)


if __name__ == "__main__":
    main()
