"""The measured sweep behind the default config's pretraining settings: each row pretrains one GPT-2 network with
the workflow's own code (`selfheal.training.pretrain`) on the default corpus and tokenizer, and reports its
validation loss against the unigram and the validation-tuned interpolated bigram of the train split, the plateau
check (val loss drop over the last quarter) and its wall time. Rows run two at a time, one thread each.

    .venv/bin/python benchmarks/pretrain_sweep.py results           # the default grid's data (run it first)
    .venv/bin/python benchmarks/pretrain_sweep.py results --only 'n=2 d=64'   # rows whose label contains this

    .venv/bin/python benchmarks/pretrain_sweep.py results --plateau      # GPT-2's fully trained regime
    .venv/bin/python benchmarks/pretrain_sweep.py results --families     # BERT's and BART's
    .venv/bin/python benchmarks/pretrain_sweep.py results --study        # the reference study's size grid
    # [--seeds 0 1 2]: each row from several pretraining seeds (one seed's network can pass where another fails)

Prints a markdown table, writes it into block `pretrain-sweep` (`pretrain-plateau`, `pretrain-families`) of
docs/method.md ("Choosing the default"; `--study`: block `study-regime` of docs/study.md; not with --only or
--no-write) and writes `<results>/sweep/pretrain_sweep.parquet` (`pretrain_plateau`, `pretrain_families`,
`pretrain_study`). A row's numbers depend only on its
settings (same machine, same numbers).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml
from common import ROOT, add_write_flag, machine, publish

from selfheal import config, grid, records
from selfheal.records import Baseline
from selfheal.training import pretrain

MARKER = "pretrain-sweep"
PAGE = ROOT / "docs" / "method.md"

# (n_layer, d_model, lr, batch_size, context, S or None = the whole train split, epochs)
ROWS = [
    (2, 32, 3e-3, 32, 64, None, 1),
    (4, 64, 3e-3, 32, 64, None, 1),  # the old learning rate, one epoch
    (2, 32, 1e-2, 32, 64, None, 1),
    (4, 64, 1e-2, 32, 64, None, 1),
    (2, 64, 1e-2, 32, 64, None, 1),
    (2, 96, 1e-2, 32, 64, None, 1),
    (2, 128, 1e-2, 32, 64, None, 1),  # D = 128 diverges at 1e-2
    (2, 128, 4e-3, 32, 64, None, 1),
    (2, 128, 6e-3, 32, 64, None, 1),
    (4, 128, 5e-3, 32, 64, None, 1),
    (2, 32, 1e-2, 32, 128, None, 1),
    (2, 64, 1e-2, 32, 128, None, 1),  # context 128: half the steps
    (2, 32, 1e-2, 16, 64, None, 1),
    (4, 32, 1e-2, 16, 64, None, 1),  # batch 16: twice the steps
    (2, 64, 6e-3, 16, 64, None, 1),
    (4, 64, 6e-3, 16, 64, None, 1),
    (2, 128, 6e-3, 16, 64, None, 1),
]
# The fully-trained regime: a subset S seen E times, each checked by the same network pretrained 1.5 x E epochs
# (pretrain.plateau_check): it passes when the longer run is not lower by more than eps_min x loss / 4.
PLATEAU_ROWS = [
    (2, 64, 6e-3, 16, 64, 3865, 24, 1.5),
    (2, 64, 6e-3, 16, 64, 2000, 24, 1.5),
    (2, 64, 6e-3, 16, 64, 2000, 16, 1.5),
    (1, 64, 6e-3, 16, 64, 3865, 24, 1.5),
    (2, 32, 6e-3, 16, 64, 3865, 24, 1.5),
    (2, 32, 1e-2, 16, 64, 3865, 24, 1.5),
    (2, 48, 6e-3, 16, 64, 3865, 24, 1.5),
    (2, 32, 1e-2, 16, 64, 7730, 16, 1.5),
]
# The reference study's size grid: which (S, E) leaves every size of the grid fully trained (each checked at
# 1.5 x E) with a loss that depends on its size. At S = 3,865 x 24 the loss is set by S (N = 1 and 2 end within
# 0.01 nats); a larger S seen fewer times gives a larger network room to use its size.
STUDY_ROWS = [
    (2, 48, 6e-3, 16, 64, 7730, 12, 1.5),
    (2, 64, 6e-3, 16, 64, 7730, 12, 1.5),
    (2, 96, 6e-3, 16, 64, 7730, 12, 1.5),
    (4, 64, 6e-3, 16, 64, 7730, 12, 1.5),
    (4, 64, 6e-3, 16, 64, 3865, 24, 1.5),
    (2, 96, 6e-3, 16, 64, 3865, 24, 1.5),
    # twice the epochs at S = 7,730: which sizes stop improving by 1.5 x E
    (2, 48, 6e-3, 16, 64, 7730, 24, 1.5),
    (2, 64, 6e-3, 16, 64, 7730, 24, 1.5),
    (3, 64, 6e-3, 16, 64, 7730, 24, 1.5),
]
# The families' fully-trained regime at (N, D) = (2, 64): (arch, lr, S, E, extra model keys), each with its check
# at 1.5 x E. At GPT-2's S = 3,865 x 24 neither is trained: BERT ends worse than the bigram and BART still falls
# 16 % at 1.5 x E.
FAMILY_ROWS = [
    ("bert", 3e-3, 7730, 32, {"mask_probability": 0.4}),
    ("bart", 3e-3, 3865, 64, {"n_dec_layer": 2}),
    ("bert", 6e-3, 3865, 48, {"mask_probability": 0.4}),
    ("bart", 6e-3, 7730, 24, {"n_dec_layer": 2}),
]
EPS_MIN = 0.01


def family_row(row) -> tuple:
    """A FAMILY_ROWS entry as a sweep row: (2, 64, lr, batch 16, context 64, S, E, check 1.5, arch, extra)."""
    arch, lr, S, E, extra = row
    return (2, 64, lr, 16, 64, S, E, 1.5, arch, extra)


# the row sets run with their plateau checks: option -> (rows, block, page it is written into)
MODES = {
    "plateau": (PLATEAU_ROWS, "pretrain-plateau", PAGE),
    "families": ([family_row(r) for r in FAMILY_ROWS], "pretrain-families", PAGE),
    "study": (STUDY_ROWS, "study-regime", ROOT / "docs" / "study.md"),
}


def label(row) -> str:
    n, d, lr, batch, context, S, E, *check = row
    if len(check) > 1:  # a family row
        return f"{check[1]} " + label((n, d, lr, batch, context, S, E, check[0]))
    check_text = f" check={check[0]:g}" if check else ""
    return f"n={n} d={d} lr={lr:g} batch={batch} context={context} S={'all' if S is None else S} E={E}{check_text}"


def run_one(row, results: str, seed: int = 0) -> dict:
    n, d, lr, batch, context, S, E, *check = row
    arch, extra = (check[1], check[2]) if len(check) > 1 else ("gpt2", {})
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    model = {"name": "sweep", "arch": arch, "n_layer": n, "d_model": d, "n_head": 4, "context": context, **extra}
    raw["models"] = [model]
    raw["pretrain"].update(
        epochs=E, train_sequences=S, lr=lr, batch_size=batch, seeds=[seed], plateau_check=check[0] if check else None
    )
    cfg = config.resolve(raw)
    model_cfg = grid.network_config(grid.model_by_name(cfg, "sweep"), seed)
    tokens = f"{results}/corpus/bpe/tokens.safetensors"
    with tempfile.TemporaryDirectory() as d_:
        t0 = time.perf_counter()
        summary = pretrain.pretrain(
            model_cfg,
            cfg["eval"],
            tokens,
            f"{d_}/theta0",
            f"{d_}/trained",
            f"{d_}/curve.parquet",
            f"{d_}/pretrain.json",
            threads=1,
            baseline_path=f"{d_}/baseline.json",
        )
        wall = time.perf_counter() - t0
        base = records.read(f"{d_}/baseline.json", Baseline)
    return {
        "setting": label(row),
        "seed": seed,
        "arch": arch,
        "n_layer": n,
        "d_model": d,
        "lr": lr,
        "batch_size": batch,
        "context": context,
        "S": summary.train_sequences,
        "E": E,
        "params": summary.params,
        "val_loss": base.val_loss,
        "unigram_loss": base.unigram_loss,
        "bigram_loss": base.bigram_loss,
        "bigram_margin": base.bigram_loss - base.val_loss,
        "last_quarter_val_drop": summary.last_quarter_val_drop,
        "plateau_check": check[0] if check else None,
        "plateau_val_loss": summary.plateau_val_loss,
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a results folder with the default corpus and tokens")
    parser.add_argument("--only", default="", help="run only rows whose label contains this text")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--plateau",
        action="store_true",
        help="run the fully-trained regime rows (each with its plateau check) into block pretrain-plateau instead",
    )
    parser.add_argument(
        "--families",
        action="store_true",
        help="run the BERT and BART fully-trained regime rows (each with its plateau check) into block "
        "pretrain-families instead",
    )
    parser.add_argument(
        "--study",
        action="store_true",
        help="run the reference study's size-grid rows (each with its plateau check) into block study-regime of "
        "docs/study.md instead",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0],
        help="pretraining seeds per row (default 0): a regime is fully trained only if every seed's network is",
    )
    add_write_flag(parser)
    a = parser.parse_args()
    mode = "families" if a.families else "study" if a.study else "plateau" if a.plateau else None
    pool_rows = MODES[mode][0] if mode else ROWS
    rows = [r for r in pool_rows if a.only in label(r)]
    if not rows:
        parser.error(f"--only {a.only!r} matches no row; the rows are:\n" + "\n".join(map(label, pool_rows)))
    t0 = time.perf_counter()
    jobs = [(row, seed) for row in rows for seed in a.seeds]
    with concurrent.futures.ProcessPoolExecutor(a.workers) as pool:
        table = pd.DataFrame(
            list(pool.map(run_one, [r for r, _ in jobs], [str(a.results)] * len(jobs), [s for _, s in jobs]))
        )
    wall = time.perf_counter() - t0
    out = a.results / "sweep" / f"pretrain_{mode or 'sweep'}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(out)
    if mode:
        return publish_plateau(table, jobs, wall, a, out, mode)
    lines = [
        "| N | D | lr | batch | context | S | E | params | val loss | bigram | margin | last-quarter drop |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.n_layer} | {r.d_model} | {r.lr:g} | {r.batch_size} | {r.context} | {r.S:,} | {r.E} | "
            f"{r.params:,} | {r.val_loss:.3f} | {r.bigram_loss:.3f} | {r.bigram_margin:+.3f} | "
            f"{r.last_quarter_val_drop:.3f} |"
        )
    text = "\n".join(lines) + (
        f"\n\n{len(rows)} runs, {a.workers} at a time, {wall / 60:.0f} minutes on "
        f"{machine()} (`.venv/bin/python benchmarks/pretrain_sweep.py results`)."
    )
    publish(MARKER, text, not a.no_write, page=PAGE, why_not="--only: not every row" if a.only else None)
    print(f"written: {out}")


def publish_plateau(table: pd.DataFrame, rows, wall: float, a, out: Path, mode: str) -> None:
    _, marker, page = MODES[mode]
    flag = f"--{mode}"
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
        f"\n\n{len(rows)} runs, {a.workers} at a time, {wall / 60:.0f} minutes on "
        f"{machine()} (`.venv/bin/python benchmarks/pretrain_sweep.py results {flag}"
        + (f" --seeds {' '.join(map(str, a.seeds))}" if a.seeds != [0] else "")
        + "`)."
    )
    publish(marker, text, not a.no_write, page=page, why_not="--only: not every row" if a.only else None)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
