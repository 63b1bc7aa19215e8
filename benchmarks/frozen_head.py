"""The fused cross-entropy through the frozen LM head (``models.families.frozen_head``) against the plain loss a
user would write (``lm_head`` then ``F.cross_entropy`` over the full logits), in a healing step as the race takes
it: GPT-2 N = 3, vocabulary 1,024, batch 32 x 64, the first layer reset and trained (schedule-free AdamW), fp32,
one thread. The two ways alternate step by step in one process; the figure is the median of 40 steps after 5.

    .venv/bin/python benchmarks/frozen_head.py            # [--no-write]
"""

from __future__ import annotations

import argparse

import schedulefree
import torch

from common import add_write_flag, interleaved_ms, machine, publish, step_batches
from selfheal import models
from selfheal.models import families
from selfheal.models.families import frozen_head

MARKER = "frozen-head"
SPECIAL = {"vocab_size": 1024, "eos": 0, "pad": 1, "mask": 2}
WIDTHS, STEPS, WARM = (64, 128), 40, 5


def _step(d_model: int, fused: bool):
    cfg = {"name": "s", "arch": "gpt2", "n_layer": 3, "d_model": d_model, "n_head": 4, "context": 64, "dropout": 0.0}
    model = models.build(cfg, SPECIAL, seed=0)
    family = families.for_model(model)
    model.requires_grad_(False)
    layer = family.stack_modules(model, "")[0]
    layer.requires_grad_(True)
    optimizer = schedulefree.AdamWScheduleFree(layer.parameters(), lr=1e-3, warmup_steps=10)
    optimizer.train()

    def step(batch):
        usable = frozen_head.usable
        if not fused:
            frozen_head.usable = lambda features, head: False
        try:
            loss = family.loss(model, batch, grad_from=0)
        finally:
            frozen_head.usable = usable
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_write_flag(parser)
    a = parser.parse_args()
    torch.set_num_threads(1)
    batches = step_batches(STEPS + WARM)
    rows = ["| D | plain loss, ms per step | fused frozen head, ms per step | speed-up |", "|---|---|---|---|"]
    for d_model in WIDTHS:
        ms = interleaved_ms({"plain": _step(d_model, False), "fused": _step(d_model, True)}, batches, WARM)
        plain, fused = ms["plain"], ms["fused"]
        rows.append(f"| {d_model} | {plain:.1f} | {fused:.1f} | {plain / fused:.2f}× |")
        print(rows[-1], flush=True)
    text = "\n".join(rows) + (
        f"\n\nGPT-2 N = 3, vocabulary 1,024, batch 32 × 64, layer 0 trained, fp32, one thread; median of {STEPS} "
        f"steps after {WARM}, the two ways alternating. {machine()} (`.venv/bin/python benchmarks/frozen_head.py`)."
    )
    publish(MARKER, text, not a.no_write)


if __name__ == "__main__":
    main()
