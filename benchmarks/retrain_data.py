"""Why the matched controls drift, and why the study still retrains on S: one of the reference study's networks,
with nothing reset, has a layer retrained from its trained values (a matched no-reset control, the workflow's own
``unit.heal_cell`` and retraining) on S, the sequences it was pretrained on, and on the train split's sequences
outside S, each for the same number of examples. The validation loss against the baseline along the way says
whether the drift comes from the retraining itself or from more passes over S.

    .venv/bin/python benchmarks/retrain_data.py results/study    # where config/study.yaml ran
    # [--model gpt2-n3-d64] [--seed 0] [--targets L0,L2] [--fraction 0.5] [--no-write]

Needs the network's folder (``models/<model>/p<seed>``), its baseline and the corpus under the results folder (the
study's own). Prints a markdown table (per layer and data: the drift at a few points and at the end, in % of the
baseline) and writes it into block `retrain-data` of docs/method.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch
import yaml
from common import BASE_CONFIG, ROOT, add_write_flag, machine, publish

from selfheal import config, grid, models, records
from selfheal.data import streams
from selfheal.heal import budget as budgets
from selfheal.heal import unit
from selfheal.records import Baseline, PretrainSummary
from selfheal.training import setup

MARKER, PAGE = "retrain-data", ROOT / "docs" / "method.md"
CONFIG = ROOT / "config" / "study.yaml"
POINTS = (0.05, 0.1, 0.25)  # fractions of S x E at which the table reads the drift, beside the end


def study_config(model: str, seed: int) -> tuple[dict, dict]:
    raw = yaml.safe_load(BASE_CONFIG.read_text()) | yaml.safe_load(CONFIG.read_text())
    cfg = config.resolve(raw)
    entry = next(m for m in cfg["models"] if m["name"] == model)
    return grid.network_config(entry, seed), cfg["eval"]


def outside_s(model_cfg: dict, tokens: str) -> torch.Tensor:
    """The train split's sequences that ``setup.train_sequences`` does not pick for S (same context, same seed)."""
    p = model_cfg["pretrain"]
    every = streams.train_sequences(tokens, model_cfg["context"], None, p["seed"])
    picked = streams.train_sequences(tokens, model_cfg["context"], p["train_sequences"], p["seed"])
    inside = {tuple(row.tolist()) for row in picked}
    return every[torch.tensor([tuple(row.tolist()) not in inside for row in every])]


def control_curve(results: Path, model_cfg: dict, eval_cfg: dict, target: str, data: str, fraction: float):
    """One matched control of ``target`` retrained on S (``data`` 'S') or outside it, for ``fraction`` x S x E."""
    model, seed = model_cfg["name"], model_cfg["pretrain"]["seed"]
    folder = results / "models" / model / f"p{seed}"
    tokens = str(results / "corpus" / "bpe" / "tokens.safetensors")
    pre = records.read(folder / "pretrain.json", PretrainSummary)
    baseline = records.read(results / "baselines" / model / f"p{seed}.json", Baseline).val_loss
    setup.seed_everything(0, 1)
    base = models.load(str(folder / "trained"))
    job = setup.prepare(base, model_cfg, eval_cfg, tokens)
    base.requires_grad_(False)
    train = setup.train_sequences(model_cfg, tokens) if data == "S" else outside_s(model_cfg, tokens)
    examples = round(fraction * pre.pretrain_examples)
    budget = budgets.Budget(examples, budgets.PRETRAIN_EXAMPLES, float(pre.pretrain_examples), fraction, None)
    cell = grid.Cell(model, target, "full", grid.TRAINED, "frozen", 0, pretrain_seed=seed)
    _, _, curve, _ = unit.heal_cell(
        base, job, train, model_cfg, cell, None, baseline, pre, None, None, examples, budget=budget,
        control_lr=model_cfg["retrain"]["lr"],  # the study's retraining lr: a control is not raced
    )  # fmt: skip
    curve = curve.assign(drift=curve["val_loss"] / baseline - 1, fraction=curve["examples"] / pre.pretrain_examples)
    return curve, len(train), baseline


def at(curve: pd.DataFrame, fraction: float) -> float:
    """The drift at the first evaluation at or past ``fraction`` of S x E."""
    past = curve[curve["fraction"] >= fraction]
    return float(past["drift"].iloc[0] if len(past) else curve["drift"].iloc[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the study's results folder")
    parser.add_argument("--model", default="gpt2-n3-d64")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", default="L0,L2")
    parser.add_argument("--fraction", type=float, default=0.5, help="how long each control trains, x S x E")
    add_write_flag(parser)
    a = parser.parse_args()
    model_cfg, eval_cfg = study_config(a.model, a.seed)
    t0 = time.perf_counter()
    rows, sizes = [], {}
    for target in a.targets.split(","):
        for data in ("S", "outside S"):
            curve, n, baseline = control_curve(a.results, model_cfg, eval_cfg, target, data, a.fraction)
            sizes[data] = n
            rows.append(
                [target, data]
                + [f"{100 * at(curve, f):+.2f} %" for f in POINTS]
                + [f"{100 * float(curve['drift'].iloc[-1]):+.2f} %"]
            )
    minutes = (time.perf_counter() - t0) / 60
    head = ["layer retrained", "data"] + [f"at {f:g} of S × E" for f in POINTS] + [f"at {a.fraction:g} (end)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    rec = model_cfg["recipe"]
    pre = records.read(a.results / "models" / a.model / f"p{a.seed}" / "pretrain.json", PretrainSummary)
    lines += [
        "",
        f"Network: {a.model}, pretraining seed {a.seed} (S = {sizes['S']:,} sequences × E = "
        f"{pre.epochs:.3g}, at its validation minimum; baseline {baseline:.4f}); nothing reset, "
        f"the layer's tensors retrained from their trained values with the study's retraining (schedule-free AdamW, "
        f"lr {rec['lrs'][0]:g}, batch {rec['batch_size']}), on S or on the {sizes['outside S']:,} "
        f"train-split sequences outside "
        f"it; drift: validation loss / baseline − 1. {len(rows)} runs in {minutes:.0f} minutes on {machine()} "
        f"(`.venv/bin/python benchmarks/retrain_data.py {a.results}`).",
    ]
    documented = (a.model, a.seed, a.targets, a.fraction) == ("gpt2-n3-d64", 0, "L0,L2", 0.5)
    publish(MARKER, "\n".join(lines), not a.no_write, PAGE, None if documented else "options other than the documented")


if __name__ == "__main__":
    main()
