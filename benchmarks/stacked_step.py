"""K copies of a reset layer per training step: one pass over the stacked copies (``training.stacked``) against
what a race does now, K separate steps one after another (each copy its own model and the ``schedulefree``
package's optimiser). GPT-2 N = 3 at D = 64 and 128, vocabulary 1,024, batch 32 of 64 tokens, one thread, in fp32
and in bf16 (``hardware.precision: bf16``: autocast, attention in fp32);
the first layer (the frozen prefix is the embeddings alone) and the last (two frozen layers below it, computed
under no_grad each step, as without a prefix cache). The two ways alternate, step by step, in one process; the
figure is the median of 30 steps after 5 warm-up steps, in ms per copy-step.

    .venv/bin/python benchmarks/stacked_step.py            # [--no-write]
"""

from __future__ import annotations

import argparse
import itertools

import torch

from common import add_write_flag, interleaved_ms, machine, publish, step_batches
from selfheal import models
from selfheal.models import families
from selfheal.training import loop, recipe, stacked
from selfheal.training.hardware import Hardware

MARKER = "stacked-step"
SPECIAL = {"vocab_size": 1024, "eos": 0, "pad": 1, "mask": 2}
KS, WIDTHS, STEPS, WARM = (1, 4, 8), (64, 128), 30, 5
PRECISIONS = ("fp32", "bf16")
LR, DECAY, WARMUP, CLIP = 1e-2, 0.1, 100, 1.0


def _model(d_model: int, hw: Hardware):
    cfg = {"name": "s", "arch": "gpt2", "n_layer": 3, "d_model": d_model, "n_head": 4, "context": 64, "dropout": 0.0}
    model = models.build(cfg, SPECIAL, seed=0)
    hw.fp32_attention(model)
    for p in model.parameters():
        p.requires_grad_(False)
    return model, families.for_model(model)


def _sequential(d_model: int, depth: int, k: int, hw: Hardware):
    """K models, each with its layer trainable and the race's own optimiser (``loop._optimizer``): one step of each."""
    runs = []
    settings = recipe.settings(
        {"batch_size": 32, "weight_decay": DECAY, "warmup_steps": WARMUP}, LR, eval_every_examples=32, max_examples=0
    )
    for _ in range(k):
        model, family = _model(d_model, hw)
        layer = family.stack_modules(model, "")[depth]
        params = list(layer.parameters())
        for p in params:
            p.requires_grad_(True)
        trainable = {n for n, p in model.named_parameters() if p.requires_grad}
        runs.append((model, family, params, loop._optimizer(model, trainable, settings)))  # the race's own

    def step(batch):
        for model, family, params, optimizer in runs:
            with hw.autocast(torch.device("cpu")):
                loss = family.loss(model, batch, grad_from=depth)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, CLIP)
            optimizer.step()

    return step


def _stacked(d_model: int, depth: int, k: int, hw: Hardware):
    model, family = _model(d_model, hw)
    copies = stacked.StackedLayer(family, model, depth, k)
    optimizer = stacked.ScheduleFreeK(copies.weights, [LR] * k, DECAY, WARMUP, CLIP)

    def step(batch):
        with hw.autocast(torch.device("cpu")):
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
    batches = step_batches(STEPS + WARM)
    rows = [
        "| precision | D | layer | K | K separate steps, ms per copy-step | one pass, ms per copy-step | speed-up |",
        "|---|---|---|---|---|---|---|",
    ]
    layers = ((0, "first (L0)"), (2, "last (L2)"))
    for precision, d_model, (depth, name), k in itertools.product(PRECISIONS, WIDTHS, layers, KS):
        hw = Hardware(device="cpu", precision=precision)
        ways = {"separate": _sequential(d_model, depth, k, hw), "stacked": _stacked(d_model, depth, k, hw)}
        ms = interleaved_ms(ways, batches, WARM, per=k)
        sep, one = ms["separate"], ms["stacked"]
        rows.append(f"| {precision} | {d_model} | {name} | {k} | {sep:.1f} | {one:.1f} | {sep / one:.2f}× |")
        print(rows[-1], flush=True)
    text = "\n".join(rows) + (
        f"\n\nGPT-2 N = 3, vocabulary 1,024, batch 32 × 64, one thread (bf16: autocast, attention in fp32); median of {STEPS} steps after {WARM}, "
        f"the two ways alternating step by step. {machine()} (`.venv/bin/python benchmarks/stacked_step.py`)."
    )
    publish(MARKER, text, not a.no_write)


if __name__ == "__main__":
    main()
