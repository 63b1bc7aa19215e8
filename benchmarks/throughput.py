"""Training throughput of selfheal's retrain against the matrix-multiply rate this machine reaches, measured in
one run: the ceiling (a large fp32 GEMM, and GEMMs of the model's own shapes), then the retrain step (frozen
regime, L = N/2, prefix cache) of the default model, reported as tokens/s, FLOP/s and fractions of both ceilings,
with a per-step breakdown (forward, backward, optimizer) and the cost of one evaluation, plain and cached.

    .venv/bin/snakemake --cores 2                    # the default grid: trained models and data
    .venv/bin/python benchmarks/throughput.py        # [--model MODEL] [--threads 2] [--steps 150] [--no-write]

With the documented options (the defaults) it writes block `throughput` of docs/performance.md. `--results` and
`--configfile` point it at another run (its config's widest model unless `--model`).
"""

from __future__ import annotations

import argparse
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
)

from selfheal.training import flops
from selfheal.training import loop
from selfheal.training import state, evaluation

MARKER = "throughput"
DOCUMENTED = {"model": default_model(), "threads": 2, "steps": 150}


def gemm_rate(m: int, k: int, n: int, seconds: float = 2.0) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(3):
        a @ b
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        count += 1
    return 2 * m * k * n * count / (time.perf_counter() - t0)


def step_breakdown(model, family, names, batch, cache, index, depth, repeats=30):
    """Mean milliseconds of forward, backward and optimizer for one training step."""
    params = [p for n, p in model.named_parameters() if n in names]
    for n, p in model.named_parameters():
        p.requires_grad_(n in names)
    optimizer = torch.optim.AdamW(params, lr=1e-4, fused=True)
    totals = [0.0, 0.0, 0.0]
    for i in range(repeats + 5):
        t0 = time.perf_counter()
        if cache is None:
            loss = family.loss(model, batch, depth)
        else:
            loss = family.loss(model, batch, depth, hidden=cache.train_rows(index), from_depth=depth)
        t1 = time.perf_counter()
        optimizer.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        loss.item()
        t3 = time.perf_counter()
        if i >= 5:  # warm-up steps excluded
            totals = [a + b for a, b in zip(totals, (t1 - t0, t2 - t1, t3 - t2))]
    return [1000 * t / repeats for t in totals]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    add_config_flag(parser)
    parser.add_argument("--model", default=None, help="a model of the config (default: its widest)")
    parser.add_argument("--threads", type=int, default=DOCUMENTED["threads"])
    parser.add_argument("--steps", type=int, default=DOCUMENTED["steps"])
    add_write_flag(parser)
    a = run_options(parser)
    torch.set_num_threads(a.threads)
    model_cfg, eval_cfg, trained, tokens, _ = load_setup(a.results, a.model, configfile=a.configfile)
    r, d, t = model_cfg["retrain"], model_cfg["d_model"], model_cfg["context"]
    rows = r["batch_size"] * t

    big = gemm_rate(2048, 2048, 2048)
    shaped = min(gemm_rate(rows, d, 4 * d), gemm_rate(rows, 4 * d, d), gemm_rate(rows, d, 3 * d))
    print(
        f"{a.threads} threads. matmul ceiling: {big / 1e9:.1f} GFLOP/s (2048^3 fp32 GEMM); "
        f"{shaped / 1e9:.1f} GFLOP/s at the model's shapes ({rows} x {d} x {4 * d})"
    )

    target = f"L{model_cfg['n_layer'] // 2}"
    depth = model_cfg["n_layer"] // 2
    train_seqs, val_seqs, objective = data_for(model_cfg, eval_cfg, tokens)
    cache = prefix_cache_for(model_cfg, eval_cfg, trained, tokens, depth)
    measured = {}
    for label, use_cache in (("plain forward", None), ("prefix cache", cache)):
        model, family, names = reset_model(trained, target)
        examples = a.steps * r["batch_size"]
        settings = state.Settings(
            lr=r["lr"],
            batch_size=r["batch_size"],
            weight_decay=0.0,
            grad_clip=1.0,
            eval_every_examples=examples,
            max_examples=examples,
            warmup_steps=10,
        )
        val_batches = objective.val_batches(val_seqs[:8], 8)  # evaluation is not what is measured here
        result = loop.run(model, family, objective, train_seqs, val_batches, set(names), settings, cache=use_cache)
        tps = result.train_tokens_per_s
        per_token = flops.train_flops_per_token(model, family, set(names), depth, t, use_cache is not None)
        achieved = tps * per_token
        print(
            f"{model_cfg['name']} retrain {target} ({label}): {tps:,.0f} tokens/s, "
            f"{per_token / 1e6:.2f} MFLOP/token -> {achieved / 1e9:.2f} GFLOP/s = "
            f"{achieved / big:.1%} of the GEMM ceiling, {achieved / shaped:.1%} of the model-shaped one"
        )
        index = torch.arange(r["batch_size"])
        fwd, bwd, opt = step_breakdown(
            model, family, set(names), {"input_ids": train_seqs[index]}, use_cache, index, depth
        )
        full_val = objective.val_batches(val_seqs, eval_cfg["batch_size"])
        t0 = time.perf_counter()
        evaluation.evaluate(model, family, full_val, use_cache)
        eval_ms = 1000 * (time.perf_counter() - t0)
        print(
            f"  per step of {r['batch_size']} sequences: forward {fwd:.1f} ms, backward {bwd:.1f} ms, "
            f"optimizer {opt:.1f} ms; one evaluation of {val_seqs.shape[0]} sequences: {eval_ms:.0f} ms"
        )
        measured[label] = {"tps": tps, "achieved": achieved, "fwd": fwd, "bwd": bwd, "opt": opt}
    plain, cached = measured["plain forward"], measured["prefix cache"]
    text = (
        f"`.venv/bin/python benchmarks/throughput.py` on {machine()}, {a.threads} threads, {model_cfg['name']} "
        f"retrain {target} with the prefix cache: {cached['tps']:,.0f} tokens/s = "
        f"{cached['achieved'] / 1e9:.1f} GFLOP/s, {cached['achieved'] / big:.0%} of the machine's "
        f"{big / 1e9:.0f} GFLOP/s fp32 GEMM ceiling ({cached['achieved'] / shaped:.0%} of the "
        f"{shaped / 1e9:.0f} GFLOP/s reached at the model's own shapes); plain forward {plain['tps']:,.0f} "
        f"tokens/s. Per training step of {r['batch_size']} sequences: forward {plain['fwd']:.1f} ms plain, "
        f"{cached['fwd']:.1f} ms from the cache (the frozen prefix: the difference); backward through the layers "
        f"above L and the LM head {cached['bwd']:.1f} ms; optimizer {cached['opt']:.1f} ms."
    )
    publish(
        MARKER,
        text,
        not a.no_write,
        why_not=None if is_documented(a, DOCUMENTED) else f"options other than {DOCUMENTED}",
    )


if __name__ == "__main__":
    main()
