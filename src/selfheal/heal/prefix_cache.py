"""The frozen prefix, computed once per heal unit: hidden states entering layer L for every training and validation
sequence.

In the ``frozen`` (and ``layer``) regime of a single-layer reset, layers below L never change: their output is a
fixed function of the input. For a causal LM without dropout the heal unit (``heal.unit``) computes it once, in
memory, for the cells of its unit that reset a layer at depth L, and frees it after the last of them.

Size: (S + V) x context x d_model x 4 bytes (float32, so losses match the plain forward to float tolerance). It is
built only where it pays for itself (``worth_building``) and fits ``PREFIX_CACHE_MB`` (``plan``); elsewhere the cells
run the plain forward.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from selfheal.grid import Target
from selfheal.models import families

log = logging.getLogger("selfheal")
CHUNK = 256  # sequences per forward when building
PREFIX_CACHE_MB = 4096  # the largest cache built (one cache's footprint, MB); a larger one runs the plain forward


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


def worth_building(model_cfg: dict, cells_sharing: int, budget_epochs: float | None = None) -> bool:
    """Building costs one prefix forward over the S train sequences; each sharing cell saves one per example of
    its budget (``budget_epochs``: the budget over S, ``heal.budget``; by default budget_fraction x E, or
    budget_fraction for a downloaded model). Build when the cells would together spend at least S examples:
    cells x budget_epochs >= 1."""
    if budget_epochs is None:
        epochs = model_cfg["pretrain"]["max_epochs"] if model_cfg["source"] == "scratch" else 1
        budget_epochs = model_cfg["retrain"]["budget_fraction"] * epochs
    return cells_sharing * budget_epochs >= 1


def footprint_mb(sequences: int, context: int, width: int) -> float:
    """Memory of one cache in MB: sequences (S + V) x context x width x 4 bytes."""
    return sequences * context * width * 4 / 1e6


def plan(model_cfg: dict, cells: list, mb: float, budget_epochs: float | None = None) -> dict:
    """Which cells of one heal unit start from a prefix cache: {cell: depth} for the cells where the cache is
    valid (``cache_depth``), pays for itself (``worth_building``, counted over the job's cells sharing a depth) and
    fits the budget (``mb``, one cache's footprint, at most ``PREFIX_CACHE_MB``); the other cells run the plain
    forward."""
    if mb > PREFIX_CACHE_MB:
        return {}
    depths = {c: cache_depth(model_cfg, c.target, c.policy, c.regime) for c in cells}
    depths = {c: d for c, d in depths.items() if d is not None}
    sharing = {d: sum(1 for x in depths.values() if x == d) for d in set(depths.values())}
    return {c: d for c, d in depths.items() if worth_building(model_cfg, sharing[d], budget_epochs)}


@dataclass
class PrefixCache:
    depth: int
    train: torch.Tensor  # [S, T, D] float32
    val: torch.Tensor  # [V, T, D] float32

    @classmethod
    @torch.no_grad()
    def build(
        cls,
        model,
        family,
        train_seqs: torch.Tensor,
        val_batches: list[dict],
        depth: int,
        device: torch.device,
        shallower: "PrefixCache | None" = None,
    ) -> "PrefixCache":
        """Run the frozen layers below ``depth`` once over the train sequences and the validation batches (fp32
        on any device: exact). From ``shallower``, a cache at a lower depth, only the layers between the two run:
        the same layer calls on the same chunks, so the cache is bit-identical to one built from the embeddings."""
        val_seqs = torch.cat([batch["input_ids"] for batch in val_batches])  # causal LM: the sequences themselves
        start = shallower if shallower is not None and shallower.depth < depth else None

        def prefix(seqs: torch.Tensor, cached: torch.Tensor | None) -> torch.Tensor:
            chunks = []
            for i in range(0, seqs.shape[0], CHUNK):
                batch = {"input_ids": seqs[i : i + CHUNK].to(device)}
                if cached is None:
                    hidden = family.prefix(model, batch, depth)
                else:
                    hidden = family.prefix(model, batch, depth, cached[i : i + CHUNK].to(device), start.depth)
                chunks.append(hidden.float().cpu())
            return torch.cat(chunks)

        cache = cls(
            depth, prefix(train_seqs, start.train if start else None), prefix(val_seqs, start.val if start else None)
        )
        log.info(
            "prefix cache at depth %d%s: %d train + %d val sequences, %.1f MB in memory",
            depth,
            f" (from depth {start.depth})" if start else "",
            cache.train.shape[0],
            cache.val.shape[0],
            (cache.train.nbytes + cache.val.nbytes) / 1e6,
        )
        return cache

    def train_rows(self, index: torch.Tensor) -> torch.Tensor:
        return self.train[index]

    def val_rows(self, start: int, stop: int) -> torch.Tensor:
        return self.val[start:stop]
