"""The frozen prefix, computed once: hidden states entering layer L for every training and validation sequence.

In the ``frozen`` (and ``layer``) regime of a single-layer reset, layers below L never change: their output is a
fixed function of the input. For a causal LM it is computed once per (model, L), written as a Snakemake output
(``results/cache/{model}/depth{L}/``), and shared by every cell with that model and L: all seeds, policies and
inits. It is invalidated like any output: when the model, the data or L change.

Size: (S + V) x context x d_model x 4 bytes (float32, so losses match the plain forward to float tolerance).
It is written in chunks and read through a memory map, so RAM use stays bounded by the OS page cache whatever
its size: rows are paged in as batches ask for them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from selfheal import grid, models
from selfheal.grid import Target
from selfheal.models import families
from selfheal.training import setup

log = logging.getLogger("selfheal")
CHUNK = 256  # sequences per forward when building


def cache_depth(model_cfg: dict, target: str, policy: str, regime: str) -> int | None:
    """The depth at which a cell can start from the cache, or None when the cell must run the plain forward.

    Needs: a single-stack causal LM (training inputs are the fixed sequences themselves), a one-layer target
    L > 0 in a regime that freezes everything below it, and no dropout (so the prefix is a fixed function)."""
    family = families.FAMILIES[model_cfg["arch"]]
    if not issubclass(family, families.SingleStack) or family.objective != "causal_lm":
        return None
    parsed = Target.parse(target)
    if regime not in ("frozen", "layer") or policy == "embeddings" or not parsed.is_layer:
        return None
    depth = parsed.depth(model_cfg)
    if depth == 0:
        return None
    has_dropout = model_cfg.get("dropout", 0) > 0 if model_cfg["source"] == "scratch" else family.may_have_dropout
    return None if has_dropout else depth


def worth_building(model_cfg: dict, cells_sharing: int) -> bool:
    """Building costs one prefix forward over the S train sequences; each sharing cell saves one per example of
    its budget (budget_fraction x S x E, or x S for a downloaded model). Build when the cells would together
    spend at least S examples: cells x budget_fraction x E >= 1."""
    epochs = model_cfg["pretrain"]["epochs"] if model_cfg["source"] == "scratch" else 1
    return cells_sharing * model_cfg["retrain"]["budget_fraction"] * epochs >= 1


def plan(config: dict, cells: list) -> dict[tuple[str, str, str, str], int]:
    """Which cells start from a prefix cache: {(model, target, policy, regime): depth} for the cells where the
    cache is valid (``cache_depth``) and pays for itself (``worth_building``, counted over every cell sharing the
    (model, depth) cache); cells not in it run the plain forward."""
    depths, sharing = {}, {}
    for c in cells:
        depth = cache_depth(grid.model_by_name(config, c.model), c.target, c.policy, c.regime)
        if depth is not None:
            depths[(c.model, c.target, c.policy, c.regime)] = depth
            sharing[(c.model, depth)] = sharing.get((c.model, depth), 0) + 1
    return {key: depth for key, depth in depths.items()
            if worth_building(grid.model_by_name(config, key[0]), sharing[(key[0], depth)])}


def _write(path: str, shape: tuple, fill) -> None:
    tmp = f"{path}.tmp.npy"
    array = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=shape)
    fill(array)
    array.flush()
    del array
    os.replace(tmp, path)


def build(model_cfg: dict, eval_cfg: dict, tokens_path: str, trained_dir: str, depth: int,
          train_path: str, val_path: str, threads: int = 1) -> None:
    setup.seed_everything(0, threads)
    job = setup.prepare(models.load(trained_dir), model_cfg, eval_cfg, tokens_path)  # fp32 on any device: exact
    model, family, device = job.model, job.family, job.device
    train_seqs = setup.train_sequences(model_cfg, tokens_path)
    val_seqs = torch.cat([batch["input_ids"] for batch in job.val_batches])  # causal LM: the sequences themselves
    width = int(family.prefix(model, {"input_ids": train_seqs[:1].to(device)}, depth).shape[-1])

    def fill_from(seqs):
        def fill(array):
            for i in range(0, seqs.shape[0], CHUNK):
                batch = {"input_ids": seqs[i : i + CHUNK].to(device)}
                array[i : i + CHUNK] = family.prefix(model, batch, depth).float().cpu().numpy()
        return fill

    Path(train_path).parent.mkdir(parents=True, exist_ok=True)
    _write(train_path, (train_seqs.shape[0], train_seqs.shape[1], width), fill_from(train_seqs))
    _write(val_path, (val_seqs.shape[0], val_seqs.shape[1], width), fill_from(val_seqs))
    size = (train_seqs.shape[0] + val_seqs.shape[0]) * train_seqs.shape[1] * width * 4
    log.info("prefix cache %s depth %d: %d train + %d val sequences, %.1f MB on disk (memory-mapped when read)",
             model_cfg["name"], depth, train_seqs.shape[0], val_seqs.shape[0], size / 1e6)


@dataclass
class PrefixCache:
    depth: int
    train: np.ndarray  # memory-mapped [S, T, D]
    val: np.ndarray  # memory-mapped [V, T, D]

    @classmethod
    def open(cls, depth: int, train_path: str, val_path: str) -> "PrefixCache":
        # allow_pickle stays False: .npy arrays of float32 only, nothing is unpickled
        return cls(depth, np.load(train_path, mmap_mode="r"), np.load(val_path, mmap_mode="r"))

    def train_rows(self, index: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(self.train[index.numpy()]))

    def val_rows(self, start: int, stop: int) -> torch.Tensor:
        return torch.from_numpy(np.array(self.val[start:stop]))  # a copy: the map is read-only

