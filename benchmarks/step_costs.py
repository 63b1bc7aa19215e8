"""What one training step and one evaluation batch cost on a CPU, with and without glibc keeping freed memory
(`hardware.keep_freed_memory`, set by every job) and GPT-2's exact GELU in place of its tanh approximation. Each
variant runs in its own process (the heap setting is process-wide), the variants interleaved and repeated; medians
are printed side by side, with the ratio to the plain variant, and one call of each GELU at the model's MLP width.

    .venv/bin/python benchmarks/step_costs.py [RESULTS] [--model MODEL] [--layer 0] [--repeats 3] [--threads 1]
                                              [--configfile config/config.yaml] [--no-write]

RESULTS: a default run's results folder (default `results/`), or with `--configfile` that config's run (its widest
model unless `--model`). The step is one AdamW step of a freshly reset layer L
(frozen regime: layers below L run without autograd, the head and layers above give activation gradients) on 32
training sequences; the evaluation batch is 64 validation sequences, as the default config evaluates them. With
the documented options (the defaults) it writes block `step-costs` of docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    ROOT,
    add_config_flag,
    add_write_flag,
    is_documented,
    data_for,
    default_model,
    interleaved,
    json_child,
    load_setup,
    machine,  # noqa: E402
    medians,
    publish,
    reset_model,
    run_options,
)

MARKER = "step-costs"
DOCUMENTED = {"model": default_model(), "layer": 0, "repeats": 3, "threads": 1}

VARIANTS = {  # name: (keep freed memory, activation)
    "plain heap, tanh GELU": (False, "gelu_pytorch_tanh"),
    "kept heap, tanh GELU": (True, "gelu_pytorch_tanh"),
    "plain heap, exact GELU": (False, "gelu"),
    "kept heap, exact GELU (what jobs run)": (True, "gelu"),
}


def child(a) -> None:
    keep, activation = VARIANTS[a.variant]
    import torch

    from selfheal.training import hardware

    if keep:
        hardware.keep_freed_memory()
    torch.set_num_threads(a.threads)
    from transformers.activations import ACT2FN

    model_cfg, eval_cfg, trained, tokens, _ = load_setup(Path(a.results), a.model, configfile=a.configfile)
    model, family, names = reset_model(trained, f"L{a.layer}")
    for block in family.stack_modules(model, ""):
        block.mlp.act = ACT2FN[activation]
    for name, p in model.named_parameters():
        p.requires_grad_(name in names)
    train_seqs, val_seqs, _ = data_for(model_cfg, eval_cfg, tokens)
    optimizer = torch.optim.AdamW([p for n, p in model.named_parameters() if n in names], lr=1e-3, fused=True)
    generator = torch.Generator().manual_seed(0)

    def step():
        index = torch.randperm(train_seqs.shape[0], generator=generator)[:32]
        family.loss(model, {"input_ids": train_seqs[index]}, a.layer).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    @torch.no_grad()
    def evaluate():
        family.loss(model, {"input_ids": val_seqs[:64]}, family.n_layers(model) + 1)

    out = {}
    for name, fn in (("step_ms", step), ("eval_batch_ms", evaluate)):
        out[name] = per_call_ms(fn, 30)
    hidden = torch.randn(32, model_cfg["context"], 4 * model_cfg["d_model"])
    for act in ("gelu", "gelu_pytorch_tanh"):  # one call of each GELU on a training step's MLP activations
        out[f"{act}_ms"] = per_call_ms(lambda act=act: ACT2FN[act](hidden), 100)
    print(json.dumps(out))


def per_call_ms(fn, calls: int) -> float:
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", default=str(ROOT / "results"))
    add_config_flag(parser)
    parser.add_argument("--model", default=None, help="a model of the config (default: its widest)")
    parser.add_argument("--layer", type=int, default=DOCUMENTED["layer"])
    parser.add_argument("--repeats", type=int, default=DOCUMENTED["repeats"])
    parser.add_argument("--threads", type=int, default=DOCUMENTED["threads"])
    parser.add_argument("--variant", default=None, help=argparse.SUPPRESS)
    add_write_flag(parser)
    a = run_options(parser)
    if a.variant:
        return child(a)

    def run(variant):
        return lambda: json_child(
            [
                sys.executable,
                __file__,
                a.results,
                "--configfile",
                str(a.configfile),
                "--model",
                a.model,
                "--layer",
                str(a.layer),
                "--threads",
                str(a.threads),
                "--variant",
                variant,
            ]
        )

    keys = ("step_ms", "eval_batch_ms", "gelu_ms", "gelu_pytorch_tanh_ms")
    med = medians(interleaved({v: run(v) for v in VARIANTS}, a.repeats), keys)
    print(f"{a.model}, reset L{a.layer}, {a.threads} thread(s), median of {a.repeats} processes per variant:")
    plain = med[next(iter(VARIANTS))]
    for variant, m in med.items():
        print(
            f"  {variant:40s} step {m['step_ms']:6.1f} ms ({plain['step_ms'] / m['step_ms']:.2f}x)   "
            f"evaluation batch of 64 {m['eval_batch_ms']:6.1f} ms ({plain['eval_batch_ms'] / m['eval_batch_ms']:.2f}x)"
        )
    both, gelu, heap = (
        med["kept heap, exact GELU (what jobs run)"],
        med["plain heap, exact GELU"],
        med["kept heap, tanh GELU"],
    )
    tanh_ms, exact_ms = (median_over_variants(med, "gelu_pytorch_tanh_ms"), median_over_variants(med, "gelu_ms"))
    text = (
        f"`.venv/bin/python benchmarks/step_costs.py results` on {machine()} ({a.model}, reset L{a.layer}, "
        f"{a.threads} thread(s), median of {a.repeats} interleaved processes), with the kept heap and the exact "
        f"GELU against neither: a training step {plain['step_ms']:.1f} → {both['step_ms']:.1f} ms "
        f"({plain['step_ms'] / both['step_ms']:.2f}×; the exact GELU alone "
        f"{plain['step_ms'] / gelu['step_ms']:.2f}×, the heap alone {plain['step_ms'] / heap['step_ms']:.2f}×), "
        f"an evaluation batch of 64 sequences {plain['eval_batch_ms']:.1f} → {both['eval_batch_ms']:.1f} ms "
        f"({plain['eval_batch_ms'] / both['eval_batch_ms']:.2f}×). One call of PyTorch's tanh-approximated GELU "
        f"on a step's MLP activations took {tanh_ms:.2f} ms, the exact one {exact_ms:.2f} ms "
        f"({tanh_ms / exact_ms:.1f}×)."
    )
    publish(
        MARKER,
        text,
        not a.no_write,
        why_not=None if is_documented(a, DOCUMENTED) else f"options other than {DOCUMENTED}",
    )


def median_over_variants(med: dict, key: str) -> float:
    """The median over every variant's processes of a figure all variants measure alike (a GELU call)."""
    values = sorted(m[key] for m in med.values())
    return values[len(values) // 2]


if __name__ == "__main__":
    main()
