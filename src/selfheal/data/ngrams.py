"""Frequency-table reference losses: what a model must beat to have learned anything beyond token statistics.

The unigram and bigram cross-entropies (nats per predicted token) of the validation targets under the counts of
the whole train split, computed on exactly the positions the model's own validation loss averages over (next
tokens for a causal LM, masked positions for a masked LM, every label for a denoising encoder-decoder).

- Unigram: add-one smoothed, p_uni(w) = (c(w) + 1) / (T + V).
- Bigram (the token before each target in the same original sequence): the maximum-
  likelihood bigram interpolated with that unigram, p(w | v) = λ c(v, w) / c(v) + (1 − λ) p_uni(w), where c(v)
  counts v as the left token of a train pair. A target with no left neighbour (the first of a sequence) or whose
  left token never starts a train pair gets the unigram. The weight λ is the one that minimises the validation
  cross-entropy itself (the loss is convex in λ: a grid of LAMBDA_STEP on [0, LAMBDA_MAX], then a grid of
  LAMBDA_STEP / 100 around its best point). Tuning on the validation set makes this an optimistic reference for
  the table, on purpose: a network worth healing must beat the best such table (analysis/tables.py,
  BIGRAM_MARGIN). At λ = 0 the bigram loss is the unigram loss, so the bigram is never worse than the unigram.
- A masked LM's bigram conditions each masked target on the original token before it. The network sees that
  token too, except where it was chosen as well (15 % of the time), and sees everything else around the target,
  so a masked LM worth healing beats this table as a causal LM does.

Counts of pairs are kept sparse (sorted pair keys, ``torch.searchsorted``), so large vocabularies cost no V x V table.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

LAMBDA_STEP = 0.01  # the coarse grid of λ
LAMBDA_MAX = 0.99  # λ = 1 would give an unseen pair zero probability (an infinite loss)
WEIGHT_CHUNK_ELEMENTS = 1 << 24  # (λ, target) values evaluated at once


class References(NamedTuple):
    """The reference losses of one validation set (nats per target)."""

    unigram: float
    bigram: float  # interpolated bigram at the validation-tuned weight
    bigram_weight: float  # that weight λ of the bigram's maximum-likelihood term


def _targets(batch: dict, objective: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(targets, the token before each target or -1 where there is none), flattened."""
    if objective == "causal_lm":
        ids = batch["input_ids"]
        return ids[:, 1:].reshape(-1), ids[:, :-1].reshape(-1)
    labels = batch["labels"]
    keep = labels != -100
    # the original sequence: a masked LM's labels hold it at the chosen positions, its input everywhere else
    original = torch.where(keep, labels, batch["input_ids"].to(labels.dtype)) if objective == "masked_lm" else labels
    previous = torch.cat([torch.full_like(original[:, :1], -1), original[:, :-1]], dim=1)
    return labels[keep], previous[keep]


def interpolated_loss(p_bigram: torch.Tensor, p_unigram: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean -log(λ p_bigram + (1 − λ) p_unigram) over the targets, for each λ in ``weights``. Targets with the
    same pair of probabilities are counted once with their multiplicity, and λ is taken in chunks, so the memory
    stays O(targets) whatever the grid."""
    distinct, counts = torch.unique(
        torch.stack([p_bigram.double(), p_unigram.double()], dim=1), dim=0, return_counts=True
    )
    share = counts.double() / counts.sum()
    out = []
    for w in weights.double().split(max(1, WEIGHT_CHUNK_ELEMENTS // max(1, len(distinct)))):
        mixture = w[:, None] * distinct[None, :, 0] + (1 - w[:, None]) * distinct[None, :, 1]
        out.append(-(mixture.log() * share[None, :]).sum(dim=1))
    return torch.cat(out)


def best_weight(p_bigram: torch.Tensor, p_unigram: torch.Tensor) -> tuple[float, float]:
    """(λ, loss) minimising the interpolated loss over [0, LAMBDA_MAX]: the coarse grid, then a fine grid of
    LAMBDA_STEP / 100 within one coarse step of its best point (the loss is convex in λ)."""
    coarse = torch.arange(0, round(LAMBDA_MAX / LAMBDA_STEP) + 1, dtype=torch.float64) * LAMBDA_STEP
    losses = interpolated_loss(p_bigram, p_unigram, coarse)
    best = float(coarse[int(torch.argmin(losses))])
    lo, hi = max(0.0, best - LAMBDA_STEP), min(LAMBDA_MAX, best + LAMBDA_STEP)
    fine = torch.linspace(lo, hi, int(round((hi - lo) / (LAMBDA_STEP / 100))) + 1, dtype=torch.float64)
    fine_losses = interpolated_loss(p_bigram, p_unigram, fine)
    i = int(torch.argmin(fine_losses))
    return float(fine[i]), float(fine_losses[i])


def reference_losses(
    train_stream: torch.Tensor, val_batches: list[dict], objective: str, vocab_size: int
) -> References:
    """The unigram loss, the interpolated bigram loss and its weight λ, of the validation targets under the train
    split's counts."""
    stream = train_stream.long()
    counts = torch.bincount(stream, minlength=vocab_size).double()
    unigram = (counts + 1) / (counts.sum() + vocab_size)
    targets, previous = zip(*(_targets(b, objective) for b in val_batches))
    targets = torch.cat(targets).long()
    p_uni = unigram[targets]
    uni = float(-p_uni.log().mean())
    previous = torch.cat(previous).long()
    pairs, pair_counts = torch.unique(stream[:-1] * vocab_size + stream[1:], return_counts=True)
    left = torch.bincount(stream[:-1], minlength=vocab_size).double()  # c(v): v as the left token of a pair
    v = previous.clamp(min=0)
    key = v * vocab_size + targets
    where = torch.searchsorted(pairs, key).clamp(max=len(pairs) - 1)
    pair = torch.where(pairs[where] == key, pair_counts[where], torch.zeros_like(key)).double()
    context = left[v]
    known = (previous >= 0) & (context > 0)
    # where the bigram is undefined the unigram stands in for it, so the mixture is the unigram whatever λ
    p_ml = torch.where(known, pair / context.clamp(min=1), p_uni)
    weight, loss = best_weight(p_ml, p_uni)
    return References(uni, loss, weight)
