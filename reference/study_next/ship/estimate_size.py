"""Estimate the final study page's size before its last cell ends: the finished part (``reference/study_next/
finished``) with bart-n2-d96's first finished network copied as each network still running (costs scaled, so
intervals appear) and, while its lr check has not finished, that check copied from gpt2-n3-d64's (targets renamed,
the swap included), read again without the partial readout's notes. Invented numbers, for the size only: never
shipped.

    .venv/bin/python reference/study_next/ship/estimate_size.py /tmp/estimate && wc -c /tmp/estimate/answer.md
"""

import shutil
import sys
from pathlib import Path

import pandas as pd

from selfheal import results

SCALED = [  # the summary's costs, scaled per copied network
    *(f"{c}{s}" for c in ("examples", "tokens", "steps") for s in ("", "_lo", "_hi")),
    *("fraction_of_pretrain", "fraction_lo", "fraction_hi", "relative_to_scratch", "relative_lo", "relative_hi"),
]
MODEL = "bart-n2-d96"
SWAP = "swap-bart-n2-d64"  # the swap its lr check also heals (retrain.lr_sensitivity_targets)


SEEDS = {0: 0.8, 1: 1.1, 2: 1.3}  # the model's pretraining seeds, and the factor on a copied network's costs


def copy_network(path: Path, scaled: list[str]) -> None:
    t = pd.read_parquet(path)
    mine = t[t["model"] == MODEL]
    first = mine[mine["pretrain_seed"] == mine["pretrain_seed"].min()]
    copies = [t]
    for seed, factor in ((s, f) for s, f in SEEDS.items() if s not in set(mine["pretrain_seed"])):
        c = first.assign(pretrain_seed=seed)
        for col in (x for x in scaled if x in c):
            c[col] = (c[col] * factor).round().astype(c[col].dtype) if c[col].dtype.kind in "iu" else c[col] * factor
        copies.append(c)
    pd.concat(copies, ignore_index=True).to_parquet(path)


def main(dest: str) -> None:
    dst = Path(dest)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(Path(__file__).parents[1] / "finished", dst)
    (dst / "answer" / "left_out.parquet").unlink(missing_ok=True)
    copy_network(dst / "summary.parquet", SCALED)
    copy_network(dst / "curves.parquet", [])
    copy_network(dst / "networks.parquet", [])
    lr = pd.read_parquet(dst / "answer" / "lr_sensitivity.parquet")
    if MODEL not in set(lr["model"]):
        bart = lr.assign(model=MODEL, pretrain_seed=0, target=lr["target"].map({"L0": "enc.0", "L2": "dec.1"}))
        swap = bart[bart["target"] == "dec.1"].assign(target=SWAP, depth=pd.NA)
        pd.concat([lr, bart, swap], ignore_index=True).to_parquet(dst / "answer" / "lr_sensitivity.parquet")
    results.reread(dst)


if __name__ == "__main__":
    main(sys.argv[1])
