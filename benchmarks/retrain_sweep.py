"""The measured sweep behind the retraining optimiser and learning rate (docs/method.md, "A retraining that can
return"): for one network pretrained with the workflow's own code, each candidate (optimiser, lr) heals the first
and the last layer (fresh reset, frozen regime) to eps_min, and retrains each layer's matched no-reset control (the
same tensors from their trained values) over the whole budget. A candidate is usable when every control stays
within +-eps_min / 4 of the baseline at every evaluation after warm-up: then an intact network retrained the same
way stays where it was, and a reset network's return is not the optimiser's own drift.

    .venv/bin/python benchmarks/retrain_sweep.py results    # the documented network and candidates (DOCUMENTED)
    # [--candidates schedulefree:3e-3,schedulefree:1e-2,...] (the one recipe's optimiser) [--budget-scratch 1.25] [--workers 2] [--no-write]

The network is pretrained once per settings (kept in <results>/sweep/networks/). The budget is
``--budget-scratch`` x the examples its own pretraining needed to first reach baseline x (1 + eps_min). Prints a
markdown table (per candidate: the controls' worst drift after warm-up in % of the baseline, the first and last
layer's cost at eps 0.01 and 0.05 as a fraction of S x E and of the from-scratch cost, the seconds per step) and
writes it into block `retrain-sweep` of docs/method.md with the documented options (with `--study`, the
reference study's network and candidates, STUDY, into block `study-retrain` of docs/study.md); the rows go to
<results>/sweep/retrain_sweep.parquet (another network's to a file named after it; while the sweep runs, the rows
finished so far to `*.partial.parquet`), each run's curve to `curves/` beside its network. `--arch bart
--n-dec-layer N` sweeps an encoder-decoder: its first encoder and its last decoder layer. `--republish` writes the
block from the saved rows (those of an interrupted sweep too, saying how many of its runs finished); the same
command resumes an interrupted sweep, running only the runs its partial rows lack.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import time
from pathlib import Path

import pandas as pd
import yaml
from common import BASE_CONFIG, ROOT, add_write_flag, machine, publish

from selfheal import config, grid, models, records
from selfheal.heal import budget as budgets
from selfheal.heal import unit
from selfheal.records import Baseline, PretrainSummary
from selfheal.training import pretrain, recipe, setup

MARKER = "retrain-sweep"
# reset as deletion (--init zero_out --no-controls --candidates schedulefree:1e-3): the chosen retraining on the same
# network, the reset layer starting at zero output; its controls are the fresh sweep's (they reset nothing)
ZERO_OUT_MARKER = "retrain-zero-out"
ZERO_OUT_CANDIDATES = "schedulefree:1e-3"
PAGE = ROOT / "docs" / "method.md"
EPS = (0.01, 0.05)
DOCUMENTED = dict(
    n_layer=2,
    d_model=48,
    train_sequences=3865,
    epochs=48,  # pretrain.max_epochs: each copy of the lr race stops at its validation minimum (patience)
    candidates="schedulefree:2.7e-2,schedulefree:9e-3,schedulefree:3e-3,schedulefree:1e-3,schedulefree:3e-4",
    budget_scratch=1.25,
    patience=4.0,
    arch="gpt2",
    n_dec_layer=0,
    val_sequences=128,
)
# --study: the reference study's regime (config/study.yaml: its central size, S x E and validation set) and the
# retraining candidates it chose between, over budgets of 3 x the from-scratch cost
STUDY = dict(
    DOCUMENTED,
    n_layer=3,
    d_model=64,
    train_sequences=7730,
    candidates="schedulefree:1e-3,schedulefree:3e-3",
    budget_scratch=3.0,
    val_sequences=512,
)
STUDY_MARKER, STUDY_PAGE = "study-retrain", ROOT / "docs" / "study.md"


def model_config(a) -> dict:
    raw = yaml.safe_load(BASE_CONFIG.read_text())
    raw["models"] = [
        {
            "name": f"sweep-{a.arch}-n{a.n_layer}-d{a.d_model}",
            "arch": a.arch,
            "n_layer": a.n_layer,
            "d_model": a.d_model,
            "n_head": 4,
            "context": 64,
            **({"n_dec_layer": a.n_dec_layer} if a.n_dec_layer else {}),
        }
    ]
    raw["pretrain"].update(
        max_epochs=a.epochs,
        patience=a.patience,
        train_sequences=a.train_sequences or None,
        seeds=[0],
        plateau_check=None,
    )
    raw["eval"]["confirm_sequences"] = 0
    raw["eval"]["val_sequences"] = a.val_sequences
    cfg = config.resolve(raw)
    return grid.network_config(cfg["models"][0], 0), cfg["eval"]


def network_folder(a, results: Path) -> Path:
    """Where the network of these settings is kept."""
    S = a.train_sequences or "all"
    lr = "" if a.patience == DOCUMENTED["patience"] else f"-p{a.patience:g}"
    arch = "" if a.arch == "gpt2" else f"{a.arch}-"
    dec = f"+{a.n_dec_layer}" if a.n_dec_layer else ""
    val = "" if a.val_sequences == DOCUMENTED["val_sequences"] else f"-v{a.val_sequences}"
    return results / "sweep" / "networks" / f"{arch}n{a.n_layer}{dec}-d{a.d_model}-S{S}-E{a.epochs}{lr}{val}"


def network(a, results: Path):
    """The trained network (pretrained here once per settings): (folder, baseline loss, from-scratch examples to
    baseline x (1 + eps_min))."""
    model_cfg, eval_cfg = model_config(a)
    folder = network_folder(a, results)
    tokens = str(results / "corpus" / "bpe" / "tokens.safetensors")
    if not (folder / "baseline.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        pretrain.pretrain(
            model_cfg,
            eval_cfg,
            tokens,
            str(folder / "theta0"),
            str(folder / "trained"),
            str(folder / "curve.parquet"),
            str(folder / "pretrain.json"),
            baseline_path=str(folder / "baseline.json"),
        )
    base = records.read(folder / "baseline.json", Baseline).val_loss
    scratch = budgets.scratch_cost(pd.read_parquet(folder / "curve.parquet"), base, min(EPS))  # the fewest of any copy
    return folder, base, scratch


def run_cell(args) -> dict:
    """One cell (a reset layer, or its matched control over the whole budget) under one candidate."""
    a, results, optimizer, lr, target, control, init = args
    folder, base_loss, scratch = network(a, results)
    model_cfg, eval_cfg = model_config(a)
    pre = records.read(folder / "pretrain.json", PretrainSummary)
    budget = math.ceil(a.budget_scratch * scratch)
    if optimizer != recipe.OPTIMIZER:
        raise SystemExit(f"candidate {optimizer}:{lr}: the one recipe's optimiser is {recipe.OPTIMIZER}")
    model_cfg["retrain"].update(thresholds=list(EPS), budget_fraction=budget / pre.pretrain_examples)
    model_cfg["recipe"] = {
        **model_cfg["recipe"],
        "lrs": [lr],
        "max_lr_extensions": 0,
    }  # one candidate: a race of one lr
    tokens = str(results / "corpus" / "bpe" / "tokens.safetensors")
    setup.seed_everything(0, 1)
    base = models.load(str(folder / "trained"))
    job = setup.prepare(base, model_cfg, eval_cfg, tokens)
    base.requires_grad_(False)
    train_seqs = setup.train_sequences(model_cfg, tokens)
    cell = grid.Cell(model_cfg["name"], target, "full", grid.TRAINED if control else init, "frozen", 0, pretrain_seed=0)
    t0 = time.perf_counter()
    _, result, curve, _ = unit.heal_cell(
        base,
        job,
        train_seqs,
        model_cfg,
        cell,
        None,
        base_loss,
        pre,
        None,
        None,
        control_examples=budget if control else None,
    )
    wall = time.perf_counter() - t0
    curves = network_folder(a, results) / "curves"  # each run's curve, beside its network
    curves.mkdir(exist_ok=True)
    curve.to_parquet(curves / f"{optimizer}-{lr:g}-{target}-{'control' if control else init}.parquet")
    warm = model_cfg["recipe"]["warmup_steps"]
    after = curve[curve["steps"] > warm]
    row = {
        "optimizer": optimizer,
        "lr": lr,
        "target": target,
        "control": control,
        "init": init,
        "budget": budget,
        "scratch_examples": scratch,
        "pretrain_examples": pre.pretrain_examples,
        "baseline": base_loss,
        "s_per_step": wall / max(1, int(curve["steps"].max())),
        "worst_drift": float((after["val_loss"] / base_loss - 1).abs().max()) if len(after) else math.nan,
        "drift_min": float((after["val_loss"] / base_loss - 1).min()) if len(after) else math.nan,
        "drift_max": float((after["val_loss"] / base_loss - 1).max()) if len(after) else math.nan,
    }
    for rec in result.recoveries:
        row[f"examples_{rec.threshold:g}"] = rec.examples if rec.recovered else math.nan
    return row


FAMILY_NAMES = {"gpt2": "GPT-2", "bart": "BART", "bert": "BERT"}


def dec_words(a) -> str:
    return f" + {a.n_dec_layer} decoder layers" if a.n_dec_layer else ""


def table(rows: pd.DataFrame, a) -> str:
    lines = [
        "| optimiser | lr | controls' worst drift | first layer, ε 0.01 | last layer, ε 0.01 | first, ε 0.05 | "
        "last, ε 0.05 | s / step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (opt, lr), g in rows.groupby(["optimizer", "lr"], sort=False):
        controls = g[g["control"]] if g["control"].any() else g.iloc[:0]
        cells = g[~g["control"]].set_index("target")
        first, last = first_and_last(a)

        def cost(target, eps):
            if target not in cells.index:
                return "not run"
            r = cells.loc[target]
            x = r[f"examples_{eps:g}"]
            if math.isnan(x):
                return f"> {r['budget'] / r['pretrain_examples']:.2f} (budget)"
            return f"{x / r['pretrain_examples']:.3f} ({x / r['scratch_examples']:.2f} ×)"

        drift = controls["worst_drift"].max()
        lo, hi = controls["drift_min"].min(), controls["drift_max"].max()
        drift_words = f"{100 * drift:.2f} % ({100 * lo:+.2f} to {100 * hi:+.2f})" if len(controls) else "not run"
        lines.append(
            f"| {opt} | {lr:g} | {drift_words} | "
            f"{cost(first, 0.01)} | {cost(last, 0.01)} | {cost(first, 0.05)} | {cost(last, 0.05)} | "
            f"{g['s_per_step'].median():.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a results folder with the default corpus and tokens")
    for key, value in DOCUMENTED.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--init", default="fresh", help="the reset cells' init (e.g. zero_out: reset as deletion)")
    parser.add_argument("--no-controls", action="store_true", help="heal the reset cells only")
    parser.add_argument("--controls-only", action="store_true", help="retrain the matched controls only (drift)")
    parser.add_argument("--study", action="store_true", help="the reference study's network and candidates (STUDY)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--republish", action="store_true", help="write the block from the rows these options saved, without training"
    )
    add_write_flag(parser)
    a = parser.parse_known_args()[0]
    if a.study:  # the study's values are the defaults; options given still override them
        parser.set_defaults(**STUDY)
    a = parser.parse_args()
    suffix = ("" if a.init == "fresh" else "_" + a.init) + ("_controls" if a.controls_only else "")
    if any(getattr(a, k) != v for k, v in DOCUMENTED.items() if k != "candidates"):
        suffix += "_" + network_folder(a, a.results).name  # another network: its own rows
    out = a.results / "sweep" / f"retrain_sweep{suffix}.parquet"
    if a.republish:
        partial = out.with_suffix(".partial.parquet")
        return report(a, pd.read_parquet(out if out.is_file() else partial), None, planned=len(jobs_of(a)))
    network(a, a.results)  # pretrained once, before the workers read it
    partial = out.with_suffix(".partial.parquet")
    # an interrupted sweep keeps its finished rows in <out>.partial.parquet; the same command runs only the rest
    done = pd.read_parquet(partial).to_dict("records") if partial.is_file() else []
    finished = {run_key(r) for r in done}
    jobs = [j for j in jobs_of(a) if job_key(j) not in finished]
    t0 = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(a.workers) as pool:
        for row in pool.map(run_cell, jobs):  # in order; each finished row is kept at once
            done.append(row)
            pd.DataFrame(done).to_parquet(partial)
    order = {job_key(j): i for i, j in enumerate(jobs_of(a))}
    rows = pd.DataFrame(sorted(done, key=lambda r: order.get(run_key(r), len(order))))
    rows.to_parquet(out)
    partial.unlink()
    report(a, rows, (time.perf_counter() - t0) / 60, ran=len(jobs))
    print(f"written: {out}")


RUN_FIELDS = ("optimizer", "lr", "target", "control", "init")  # what tells one run of a sweep from another


def run_key(row: dict) -> tuple:
    """A run's identity, from a row of the sweep's table."""
    return (row["optimizer"], float(row["lr"]), row["target"], bool(row["control"]), row["init"])


def job_key(job: tuple) -> tuple:
    """The same identity, from a job of ``jobs_of`` (its fields after ``a`` and the results folder)."""
    return run_key(dict(zip(RUN_FIELDS, job[2:])))


def jobs_of(a) -> list[tuple]:
    """The runs of a sweep: per candidate, the first and the last layer, each reset and (or) as its control."""
    return [
        (a, a.results, opt, float(lr), target, control, a.init)
        for opt, lr in (c.split(":") for c in a.candidates.split(","))
        for target in first_and_last(a)
        for control in ((False,) if a.no_controls else (True,) if a.controls_only else (False, True))
    ]


def first_and_last(a) -> tuple[str, str]:
    """The first and the last layer's targets: L0 and L{N-1}; for an encoder-decoder, the first encoder layer and
    the last decoder layer."""
    if a.arch == "bart":
        return "enc.0", f"dec.{(a.n_dec_layer or a.n_layer) - 1}"
    return "L0", f"L{a.n_layer - 1}"


def report(a, rows: pd.DataFrame, minutes: float | None, planned: int | None = None, ran: int | None = None) -> None:
    """The block: the table and how it was measured (``planned``: the runs of the sweep, when fewer finished;
    ``ran``: the runs of this invocation, which ``minutes`` timed, when it resumed an interrupted sweep)."""
    _, base, scratch = network(a, a.results)
    S = f"{a.train_sequences:,}" if a.train_sequences else "the whole train split"
    text = (
        table(rows, a)
        + f"\n\nNetwork: {FAMILY_NAMES[a.arch]} N = {a.n_layer}{dec_words(a)}, D = {a.d_model}, S = {S} × E = "
        f"{a.epochs} (baseline {base:.3f}; from scratch to baseline × 1.01: {scratch:,.0f} examples); budget "
        f"{a.budget_scratch:g} × that; cost as a fraction of S × E (and × the from-scratch cost). "
        + (f"{len(rows)} of its {planned} runs finished" if planned and planned > len(rows) else f"{len(rows)} runs")
        + f", {a.workers} at a time"
        + (f", {minutes:.0f} minutes" if minutes is not None and (ran is None or ran >= len(rows)) else "")
        + (f" (the last {ran} in {minutes:.0f} minutes)" if minutes is not None and ran and ran < len(rows) else "")
        + f" on {machine()} (`.venv/bin/python benchmarks/retrain_sweep.py results"
        + (" --study" if a.study else "")
        + (" --controls-only" if a.controls_only else "")
        + (f" --init {a.init} --no-controls --candidates {a.candidates}" if a.init == "zero_out" else "")
        + "`, with the options above)."
    )
    preset = STUDY if a.study else DOCUMENTED
    same = all(getattr(a, k) == v for k, v in preset.items() if k != "candidates")
    if a.study:
        documented = same and a.candidates == STUDY["candidates"] and a.init == "fresh" and not a.no_controls
        documented = documented and not a.controls_only
        why_not = None if documented else "options other than the study's"
        return publish(STUDY_MARKER, text, not a.no_write, page=STUDY_PAGE, why_not=why_not)
    if a.init == "zero_out":
        documented = same and a.no_controls and a.candidates == ZERO_OUT_CANDIDATES
        marker = ZERO_OUT_MARKER
    else:
        documented = same and a.candidates == DOCUMENTED["candidates"] and a.init == "fresh" and not a.no_controls
        documented, marker = documented and not a.controls_only, MARKER
    publish(marker, text, not a.no_write, page=PAGE, why_not=None if documented else "options other than documented")


if __name__ == "__main__":
    main()
