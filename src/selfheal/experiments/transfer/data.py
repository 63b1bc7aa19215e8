"""Task data for finetuning: the fixed split on disk, each trial's training subsample, tokenised batches."""

from __future__ import annotations

import pandas as pd
import torch

from selfheal import results_io
from selfheal.experiments.transfer import tasks


def write_split(task: dict, test_fraction: float, seed: int, train_path: str, test_path: str) -> dict:
    """Hold out the task's fixed test split and write both parts (Parquet: text, [text_pair,] label)."""
    train, test = tasks.train_test(task, test_fraction, seed)
    overlap = set(train["text"]) & set(test["text"])
    if task["source"] == "package" and overlap:  # split() drops duplicates first; this must never happen
        raise AssertionError(f"{len(overlap)} test texts also in the training pool")
    results_io.write_parquet(train_path, train)
    results_io.write_parquet(test_path, test)
    return {
        "task": task["name"],
        "train_pool": len(train),
        "test": len(test),
        "classes": int(max(train["label"].max(), test["label"].max()) + 1),
    }


def subsample(train: pd.DataFrame, size: int, trial: int) -> pd.DataFrame:
    """The trial's training examples: a seeded draw of ``size`` from the pool, shared by every spec of the trial
    (so specs are compared on the same data) and by probing."""
    if size > len(train):
        raise ValueError(f"transfer.sizes: {size} examples asked, the training pool has {len(train)}")
    return train.sample(n=size, random_state=trial).reset_index(drop=True)


def test_subset(test: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    """The evaluated test rows: all, or the first ``limit`` of the (already shuffled) fixed test split."""
    return test if limit is None else test.head(limit).reset_index(drop=True)


def num_labels(*tables: pd.DataFrame) -> int:
    return int(max(t["label"].max() for t in tables)) + 1


def encode(tokenizer, table: pd.DataFrame, max_length: int) -> list[dict]:
    pairs = table["text_pair"].tolist() if "text_pair" in table else None
    enc = tokenizer(table["text"].tolist(), pairs, truncation=True, max_length=max_length)
    labels = table["label"].tolist()
    return [{**{k: enc[k][i] for k in enc.keys()}, "labels": labels[i]} for i in range(len(labels))]


def batches(tokenizer, examples: list[dict], batch_size: int, order: list[int] | None = None) -> list[dict]:
    """Batches padded to their own longest sequence (dynamic padding), in ``order`` (default: as given)."""
    order = list(range(len(examples))) if order is None else order
    out = []
    for start in range(0, len(order), batch_size):
        chunk = [examples[i] for i in order[start : start + batch_size]]
        out.append(dict(tokenizer.pad(chunk, return_tensors="pt")))
    return out


def epoch_order(n: int, trial: int, epoch: int) -> list[int]:
    return torch.randperm(n, generator=torch.Generator().manual_seed(trial * 100_003 + epoch)).tolist()
