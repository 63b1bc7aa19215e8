"""Where a healing step's time goes: `torch.profiler` over training steps of one cell as the race trains it (the
family's loss from the layer up, backward, global-norm clipping, the `schedulefree` package's step), GPT-2 N = 3,
vocabulary 1,024, batch 32 of 64 tokens, fp32, one thread, the first layer reset (everything above it needs
activation gradients), at D = 64 and D = 256. The operators' own CPU time is grouped by kind (matrix products,
attention, cross-entropy, element-wise, normalisation, optimiser, copies), beside the step's wall time and its
matrix products' GFLOP/s against this machine's fp32 GEMM rate (a 1,024² product, one thread).

    .venv/bin/python benchmarks/step_profile.py            # [--no-write]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import schedulefree
import torch
from torch.profiler import ProfilerActivity, profile

from common import add_write_flag, machine, publish
from selfheal import models
from selfheal.models import families

MARKER = "step-profile"
SPECIAL = {"vocab_size": 1024, "eos": 0, "pad": 1, "mask": 2}
WIDTHS, STEPS, WARM = (64, 256), 10, 3
# an operator's kind by its name (first match); the rest is "other" (dispatch, views, autograd bookkeeping)
KINDS = (
    ("matrix products", ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::baddbmm", "aten::linear")),
    ("attention", ("scaled_dot_product", "flash_attention")),
    ("cross-entropy", ("log_softmax", "nll_loss", "cross_entropy")),
    ("normalisation", ("layer_norm",)),
    ("GELU", ("gelu",)),
    ("optimiser", ("_foreach_", "lerp", "addcmul", "sqrt", "norm", "clamp")),
    ("copies and fills", ("copy_", "fill_", "zero_", "clone", "contiguous", "cat", "to_copy", "empty")),
    ("element-wise", ("aten::add", "aten::mul", "aten::div", "aten::sub", "aten::where", "aten::tanh", "aten::pow")),
)
LEAVES = {"aten::mm", "aten::bmm", "aten::addmm"}  # the products whose FLOPs are counted (no double counting)


def kind_of(name: str) -> str:
    for kind, needles in KINDS:
        if any(n in name for n in needles):
            return kind
    return "other"


def gemm_rate() -> float:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    for _ in range(3):
        a @ b
    start, n = time.perf_counter(), 10
    for _ in range(n):
        a @ b
    return 2 * 1024**3 * n / (time.perf_counter() - start) / 1e9


def one_width(d_model: int):
    cfg = {"name": "p", "arch": "gpt2", "n_layer": 3, "d_model": d_model, "n_head": 4, "context": 64, "dropout": 0.0}
    model = models.build(cfg, SPECIAL, seed=0)
    family = families.for_model(model)
    for p in model.parameters():
        p.requires_grad_(False)
    params = list(family.stack_modules(model, "")[0].parameters())
    for p in params:
        p.requires_grad_(True)
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    optimizer = schedulefree.AdamWScheduleFree(groups, lr=1e-2, warmup_steps=100)
    optimizer.train()
    generator = torch.Generator().manual_seed(0)
    batches = [{"input_ids": torch.randint(3, 1024, (32, 64), generator=generator)} for _ in range(STEPS + WARM)]

    def step(batch):
        loss = family.loss(model, batch, grad_from=0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    for batch in batches[:WARM]:
        step(batch)
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        start = time.perf_counter()
        for batch in batches[WARM:]:
            step(batch)
        wall = (time.perf_counter() - start) * 1000 / STEPS
    own, flops, calls = defaultdict(float), 0.0, 0
    for event in prof.key_averages():
        own[kind_of(event.key)] += event.self_cpu_time_total / 1000 / STEPS  # ms per step
        calls += event.count
        if event.key in LEAVES:
            flops += (event.flops or 0) / STEPS
    return wall, dict(own), flops, calls / STEPS


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_write_flag(parser)
    a = parser.parse_args()
    torch.set_num_threads(1)
    rate = gemm_rate()
    kinds = [k for k, _ in KINDS] + ["other"]
    rows = [
        "| D | step, ms | operator calls | " + " | ".join(kinds) + " | matrix products, GFLOP/s (of the GEMM rate) |",
        "|---|---|---|" + "---|" * len(kinds) + "---|",
    ]
    for d_model in WIDTHS:
        wall, own, flops, calls = one_width(d_model)
        total = sum(own.values())
        shares = " | ".join(f"{100 * own.get(k, 0.0) / total:.0f} %" for k in kinds)
        mm_ms = own.get("matrix products", 0.0)
        achieved = flops / (mm_ms / 1000) / 1e9 if mm_ms else float("nan")
        rows.append(
            f"| {d_model} | {wall:.1f} | {calls:.0f} | {shares} | {achieved:.0f} ({100 * achieved / rate:.0f} %) |"
        )
        print(rows[-1], flush=True)
    text = "\n".join(rows) + (
        f"\n\nShares: each kind's own CPU time over the operators' total (`torch.profiler`, {STEPS} steps after {WARM}); "
        f"GPT-2 N = 3, vocabulary 1,024, batch 32 × 64, L0 reset, fp32, one thread. This machine's fp32 GEMM rate "
        f"(1,024², one thread): {rate:.0f} GFLOP/s. {machine()} (`.venv/bin/python benchmarks/step_profile.py`)."
    )
    publish(MARKER, text, not a.no_write)


if __name__ == "__main__":
    main()
