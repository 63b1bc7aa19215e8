"""The GPU path, for the smallest and largest model of a GPU config (``--config``, by default config/gpu_study.yaml:
gpt2-n2-d64 and gpt2-n8-d256), in two parts.

**Copies per pass**: a healing step of layer 1 (frozen regime) with K copies of the layer in one pass
(``training.stacked``, as ``training.lockstep`` trains a race), K = 1, the race's grid (the copies a pass packs
today), and 16 and 64 (what more cells per pass would reach), in the config's precision: examples/s per GPU (copy
examples: K x batch per step) and model FLOP/s against the card's dense bf16 peak. The median of 20 steps after 5,
synchronised.

**The workflow**: a pretraining and a retrain cell of the same two models, run by the real workflow (`snakemake`) once with the GPU
settings (`hardware:` bf16 autocast, TF32, fused AdamW, `torch.compile` inductor; attention is PyTorch SDPA) and
once in plain fp32 (TF32 matmuls, no bf16, no compile), on the same data and seeds.

    .venv/bin/python benchmarks/gpu_check.py                      # on a CUDA machine   [--peak-tflops 989]
    .venv/bin/python benchmarks/gpu_check.py --device cpu --tiny  # smoke check: tiny models, CPU, seconds
                                                                  # [--no-write]

Prints per model and run: training tokens/s of the pretraining (`pretrain.json`: tokens / wall_s, evaluations
included) and of the retrain cell (`recovery.json`: `train_tokens_per_s`), model FLOPs utilisation against the
card's dense bf16 peak (fp32 runs against the same peak: the figure a user would compare), and the loss difference
of the fast run against the fp32 run (pretraining final val loss; retrain final val loss). Model FLOPs per token
(`flops_per_token`): pretraining 6 P + 12 n_layer T D (P: the layers' 12 D^2 each plus the V x D LM head; the
second term is attention's QK^T and AV); retraining layer L in the frozen regime: the forward (2 P + 4 n_layer T D),
the input gradients through the layers from L up and the head (2 P_above + 8 (n_layer - L) T D) and the weight
gradients of layer L alone (2 x 12 D^2).

Sizes (not the grid's own, which races to patience): S = 4,096 sequences, 1 epoch of pretraining;
the retrain cell resets L = 1 (frozen regime, fresh init, seed 0) and trains its whole budget (threshold 1e-4,
never reached, so both runs train the same number of steps). On a CUDA device with the full sizes it writes block
`gpu-check` of docs/performance.md; the smoke check writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "src"))
from common import add_write_flag, machine, publish  # noqa: E402

from selfheal.config.defaults import DEFAULTS  # noqa: E402

MARKER = "gpu-check"
PASS_STEPS, PASS_WARM = 20, 5

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}

# Dense bf16 tensor-core peak, TFLOP/s, by a substring of torch.cuda.get_device_name() (vendor data sheets).
PEAK_BF16_TFLOPS = {
    "H200": 989.0,
    "H100 PCIe": 756.0,
    "H100": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
    "A10": 125.0,
    "RTX 4090": 165.0,
    "RTX 3090": 71.0,
}

LAYER = 1  # the retrain cell's layer in every model: the input gradients run through all layers above it
# TF32 matmuls and fused AdamW are always on (training.hardware), in both
FAST = {"precision": "bf16", "compile": "inductor"}
FP32 = {"precision": "fp32", "compile": None}


def models_for(tiny: bool, config: Path = ROOT / "config" / "gpu_study.yaml") -> list[dict]:
    if tiny:  # tests/tiny.yaml's sizes
        return [
            {"name": "tiny-n2-d16", "arch": "gpt2", "n_layer": 2, "d_model": 16, "n_head": 2, "context": 32},
            {"name": "tiny-n2-d32", "arch": "gpt2", "n_layer": 2, "d_model": 32, "n_head": 2, "context": 32},
        ]
    full = yaml.safe_load(config.read_text())["models"]
    gpt2 = [m for m in full if m["arch"] == "gpt2"]
    size = lambda m: m["n_layer"] * m["d_model"] ** 2  # noqa: E731
    keep = ("name", "arch", "n_layer", "d_model", "n_head", "context")
    return [{k: m[k] for k in keep} | {"dropout": 0.0} for m in (min(gpt2, key=size), max(gpt2, key=size))]


def config_for(models: list[dict], hardware: dict, device: str, tiny: bool) -> dict:
    return {
        "corpus": {"source": "shakespeare"},
        "tokenizer": {"vocab_size": 300 if tiny else 260},  # the GPU config's byte-level vocabulary
        "models": models,
        "pretrain": {
            "max_epochs": 1,
            "train_sequences": 256 if tiny else 4096,
            "eval_every_examples": 128 if tiny else 2048,
            "seeds": [0],
        },
        "recipe": {  # one copy's lr is what this check times, at the lrs full.yaml races
            "lrs": [3e-3, 1e-2, 3e-2, 1e-1] if tiny else [1e-4, 3e-4, 1e-3, 3e-3],
            "max_lr_extensions": 0,
            "batch_size": 32 if tiny else 64,
            "warmup_steps": 5,
        },
        "eval": {"val_sequences": 32 if tiny else 480, "batch_size": 32 if tiny else 128},
        "grid": {
            "layers": [LAYER],
            "regimes": ["frozen"],
            "inits": ["fresh"],
            "seeds": [0],
            "controls": False,
            "matched_controls": "none",
        },
        "retrain": {
            "eval_every_examples": 128 if tiny else 2048,
            "budget_fraction": 1.0,
            "thresholds": [1e-4],
        },
        "hardware": {"device": device, **hardware},
        "threads": 2 if tiny else 8,
    }


def only_known_keys(cfg: dict) -> dict:
    """Drop keys this checkout's schema does not know yet (pretrain.seeds / grid.matched_controls arrived with
    pretraining seeds), so the check runs on either side of that change."""
    for section, key in (("pretrain", "seeds"), ("grid", "matched_controls")):
        if key not in DEFAULTS[section]:
            cfg[section].pop(key)
    return cfg


def run(workdir: Path, cfg: dict) -> dict[str, dict]:
    """One snakemake run (data, then each model's job: pretraining, baseline, the retrain cells); per model its
    figures."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(only_known_keys(cfg)))
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
        "--cores",
        str(cfg["threads"]),
        "--quiet",
        "--until",
        "model",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if proc.returncode:
        # the failed jobs' own logs (their `log:` files) say why; Snakemake's stderr only names the rule
        logs = [
            f"--- {p.relative_to(workdir)}\n{p.read_text()[-3000:]}"
            for p in sorted(workdir.rglob("*.log"))
            if ".snakemake" not in p.parts
        ]
        sys.exit("\n".join([proc.stderr[-3000:], *logs[-4:]]))
    results, out = workdir / "results", {}
    for model in cfg["models"]:
        (pre_path,) = results.glob(f"models/{model['name']}/**/pretrain.json")
        (rec_path,) = [p for p in results.glob(f"cells/{model['name']}/**/recovery.json") if "work" not in p.parts]
        pre, rec = json.loads(pre_path.read_text()), json.loads(rec_path.read_text())
        out[model["name"]] = {
            "pre_tokens_per_s": pre["tokens"] / pre["wall_s"],
            "pre_loss": pre["final_val_loss"],
            "re_tokens_per_s": rec["train_tokens_per_s"],
            "re_loss": rec["final_loss"],
        }
    return out


def flops_per_token(m: dict, vocab: int, layer: int | None = None) -> float:
    """Model FLOPs per trained token (see the module docstring)."""
    d, n, t = m["d_model"], m["n_layer"], m["context"]
    per_layer, head, attn = 12 * d * d, vocab * d, 12 * t * d  # attn: QK^T and AV, forward + backward, per layer
    total = n * per_layer + head
    if layer is None:
        return 6 * total + n * attn
    above = (n - layer) * per_layer + head
    return 2 * total + n * attn / 3 + 2 * above + (n - layer) * attn * 2 / 3 + 2 * per_layer


def pass_rows(chosen: list[dict], vocab: int, batch: int, ks: list[int], device: str, precision: str, peak):
    """Per model and K: ms per step, examples/s and model TFLOP/s of K copies of layer ``LAYER`` in one pass."""
    from selfheal import models
    from selfheal.models import families
    from selfheal.training import stacked
    from selfheal.training.hardware import Hardware

    special = {"vocab_size": vocab, "eos": 0, "pad": 1, "mask": 2}
    hw = Hardware(device=device, precision=precision)
    rows = []
    for m in chosen:
        model = models.build({**m, "dropout": 0.0}, special, seed=0)
        dev = hw.prepare(model)
        family = families.for_model(model)
        model.requires_grad_(False)
        generator = torch.Generator().manual_seed(0)
        batches = [
            {"input_ids": torch.randint(3, vocab, (batch, m["context"]), generator=generator).to(dev)}
            for _ in range(PASS_STEPS + PASS_WARM)
        ]
        for k in ks:
            copies = stacked.StackedLayer(family, model, LAYER, k)
            optimizer = stacked.ScheduleFreeK(copies.weights, [1e-3] * k, 0.0, 10, 1.0)
            times = []
            for i, item in enumerate(batches):
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                with hw.autocast(dev):
                    loss = copies.losses(item).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.clip()
                optimizer.step()
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                if i >= PASS_WARM:
                    times.append(time.perf_counter() - start)
            step = sorted(times)[len(times) // 2]
            examples = k * batch / step
            flops = flops_per_token(m, vocab, LAYER) * examples * m["context"]
            rows.append(
                {
                    "model": m["name"],
                    "k": k,
                    "ms_per_step": round(step * 1000, 2),
                    "examples_per_s": round(examples),
                    "model_tflops": round(flops / 1e12, 4),
                    "mfu": round(flops / (peak * 1e12), 4) if peak else None,
                }
            )
            print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def pass_markdown(table: pd.DataFrame, precision: str, batch: int) -> str:
    lines = ["| model | K | ms per step | examples/s | model TFLOP/s | MFU |", "|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        mfu = f"{r.mfu:.1%}" if r.mfu is not None and r.mfu == r.mfu else "n/a"
        lines.append(
            f"| {r.model} | {r.k} | {r.ms_per_step:.2f} | {r.examples_per_s:,} | {r.model_tflops:.3f} | {mfu} |"
        )
    return "\n".join(lines) + (
        f"\n\nA healing step of layer {LAYER} (frozen regime), K copies in one pass, batch {batch} per copy, "
        f"{precision}; the median of {PASS_STEPS} steps after {PASS_WARM}."
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tiny", action="store_true", help="tiny models and data: a smoke check in seconds")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the device's dense bf16 peak")
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--config", type=Path, default=ROOT / "config" / "gpu_study.yaml", help="the GPU config")
    parser.add_argument("--passes-only", action="store_true", help="only the copies-per-pass part")
    add_write_flag(parser)
    a = parser.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device visible: run on a GPU machine, or --device cpu --tiny for the smoke check")
    name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    peak = a.peak_tflops or next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    # the CPU smoke check skips torch.compile (its first compile alone takes most of a minute on a CPU)
    fast = FAST | ({"compile": None} if a.device == "cpu" else {})
    print(
        f"device {name}, torch {torch.__version__}, dense bf16 peak "
        f"{f'{peak:g} TFLOP/s' if peak else 'unknown (--peak-tflops)'}; fast = {fast}, reference = {FP32}"
    )
    chosen = models_for(a.tiny, a.config)
    study = yaml.safe_load(a.config.read_text()) if not a.tiny else {}
    precision = study.get("hardware", {}).get("precision", "fp32")
    batch, grid_size = 16, 4  # the default recipe's batch and grid (config/config.yaml)
    ks = [1, grid_size, 16] if a.tiny else [1, grid_size, 16, 64]
    passes = pass_rows(chosen, 260 if not a.tiny else 300, batch, ks, a.device, precision, peak)
    print(passes.to_string(index=False))
    pass_text = pass_markdown(passes, precision, batch)
    if a.passes_only:
        print(pass_text)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = a.keep or Path(tmp)
        for label, hardware in (("fast", fast), ("fp32", FP32)):
            cfg = config_for(chosen, hardware, a.device, a.tiny)
            t0 = time.perf_counter()
            figures = run(base / label, cfg)
            print(
                f"{label}: snakemake (data, {len(chosen)} pretrainings, baselines, retrain cells) "
                f"{time.perf_counter() - t0:.0f} s"
            )
            vocab = cfg["tokenizer"]["vocab_size"]
            for model in chosen:
                r = figures[model["name"]]
                for phase, tps, layer in (
                    ("pretrain", r["pre_tokens_per_s"], None),
                    ("retrain", r["re_tokens_per_s"], LAYER),
                ):
                    flops = flops_per_token(model, vocab, layer) * tps
                    rows.append(
                        {
                            "model": model["name"],
                            "run": label,
                            "phase": phase,
                            "tokens_per_s": round(tps),
                            "model_tflops": round(flops / 1e12, 4),
                            "mfu": round(flops / (peak * 1e12), 4) if peak else None,
                            "final_val_loss": r["pre_loss"] if phase == "pretrain" else r["re_loss"],
                        }
                    )
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    lines = [
        "| model | phase | fast tokens/s | fp32 tokens/s | speed-up | fast MFU | val loss fast − fp32 |",
        "|---|---|---|---|---|---|---|",
    ]
    for (model, phase), g in table.groupby(["model", "phase"], sort=False):
        f, ref = g.set_index("run").loc["fast"], g.set_index("run").loc["fp32"]
        print(
            f"{model} {phase}: fast {f['tokens_per_s'] / ref['tokens_per_s']:.2f}x the fp32 tokens/s; final val "
            f"loss fast - fp32 = {f['final_val_loss'] - ref['final_val_loss']:+.4f} "
            f"({(f['final_val_loss'] - ref['final_val_loss']) / ref['final_val_loss']:+.2%})"
        )
        mfu = f"{f['mfu']:.1%}" if f["mfu"] is not None and f["mfu"] == f["mfu"] else "n/a"
        lines.append(
            f"| {model} | {phase} | {f['tokens_per_s']:,.0f} | {ref['tokens_per_s']:,.0f} | "
            f"{f['tokens_per_s'] / ref['tokens_per_s']:.2f}× | {mfu} | "
            f"{(f['final_val_loss'] - ref['final_val_loss']) / ref['final_val_loss']:+.2%} |"
        )
    text = (
        f"`.venv/bin/python benchmarks/gpu_check.py` on {machine()} (dense bf16 peak "
        f"{f'{peak:g} TFLOP/s' if peak else 'unknown'}):\n\n" + pass_text + "\n\n" + "\n".join(lines)
    )
    publish(
        MARKER,
        text,
        not a.no_write,
        why_not="the smoke check's numbers are meaningless" if a.tiny or a.device != "cuda" else None,
    )


if __name__ == "__main__":
    main()
