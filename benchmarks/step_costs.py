"""What one training step and one evaluation batch cost on a CPU, with and without the two changes of the eighth
session: glibc keeping freed memory (`hardware.keep_freed_memory`, set by every job) and GPT-2's exact GELU in
place of its tanh approximation. Each variant runs in its own process (the heap setting is process-wide), the
variants interleaved and repeated; medians are printed side by side, with the ratio to the plain variant.

    .venv/bin/python benchmarks/step_costs.py [RESULTS] [--model gpt2-n4-d64] [--layer 0] [--repeats 3] [--threads 1]

RESULTS: a default run's results folder (default `results/`). The step is one AdamW step of a freshly reset layer L
(frozen regime: layers below L run without autograd, the head and layers above give activation gradients) on 32
training sequences; the evaluation batch is 64 validation sequences, as the default config evaluates them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, data_for, load_setup, reset_model  # noqa: E402

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

    model_cfg, eval_cfg, trained, tokens, _ = load_setup(Path(a.results), a.model)
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
        for _ in range(3):
            fn()
        t0 = time.perf_counter()
        for _ in range(30):
            fn()
        out[name] = (time.perf_counter() - t0) / 30 * 1000
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", default=str(ROOT / "results"))
    parser.add_argument("--model", default="gpt2-n4-d64")
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--variant", default=None, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.variant:
        return child(a)
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for _ in range(a.repeats):
        for variant in VARIANTS:
            cmd = [sys.executable, __file__, a.results, "--model", a.model, "--layer", str(a.layer),
                   "--threads", str(a.threads), "--variant", variant]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(proc.stderr[-3000:])
            runs[variant].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"{a.model}, reset L{a.layer}, {a.threads} thread(s), median of {a.repeats} processes per variant:")
    plain = {k: statistics.median(r[k] for r in runs[next(iter(VARIANTS))]) for k in ("step_ms", "eval_batch_ms")}
    for variant, rs in runs.items():
        step = statistics.median(r["step_ms"] for r in rs)
        ev = statistics.median(r["eval_batch_ms"] for r in rs)
        print(f"  {variant:40s} step {step:6.1f} ms ({plain['step_ms'] / step:.2f}x)   "
              f"evaluation batch of 64 {ev:6.1f} ms ({plain['eval_batch_ms'] / ev:.2f}x)")


if __name__ == "__main__":
    main()
