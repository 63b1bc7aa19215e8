"""Frequency-table reference losses: what a model must beat to have learned anything beyond token statistics.

The unigram and bigram cross-entropies (nats per predicted token) of the validation targets under the counts of
the whole train split, computed on exactly the positions the model's own validation loss averages over (next
tokens for a causal LM, masked positions for a masked LM, every label for a denoising encoder-decoder). Unigram:
add-one smoothed. Bigram (causal and denoising objectives; the token before each target in the same sequence; the
first target of a sequence falls back to the unigram): Dirichlet-smoothed with the unigram as its prior,
p(w | v) = (c(v, w) + ALPHA p(w)) / (c(v) + ALPHA). A masked LM's targets have no left neighbour it conditions on
alone, so it gets no bigram. Counts of pairs are kept sparse, so large vocabularies cost no V x V table.
"""

from __future__ import annotations

import torch

ALPHA = 10.0  # Dirichlet prior strength of the bigram model


def _targets(batch: dict, objective: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(targets, the token before each target or -1 where there is none), flattened."""
    if objective == "causal_lm":
        ids = batch["input_ids"]
        return ids[:, 1:].reshape(-1), ids[:, :-1].reshape(-1)
    labels = batch["labels"]
    keep = labels != -100
    if objective == "masked_lm":
        return labels[keep], None
    previous = torch.cat([torch.full_like(labels[:, :1], -1), labels[:, :-1]], dim=1)
    return labels[keep], previous[keep]


def reference_losses(train_stream: torch.Tensor, val_batches: list[dict], objective: str,
                     vocab_size: int) -> tuple[float, float | None]:
    """(unigram loss, bigram loss or None) of the validation targets under the train split's counts."""
    stream = train_stream.long()
    counts = torch.bincount(stream, minlength=vocab_size).double()
    unigram = (counts + 1) / (counts.sum() + vocab_size)
    pairs, pair_counts = torch.unique(stream[:-1] * vocab_size + stream[1:], return_counts=True)
    targets, previous = zip(*(_targets(b, objective) for b in val_batches))
    targets = torch.cat(targets)
    uni = float(-unigram[targets].log().mean())
    if previous[0] is None:
        return uni, None
    previous = torch.cat(previous)
    has = previous >= 0
    key = previous.clamp(min=0) * vocab_size + targets
    where = torch.searchsorted(pairs, key).clamp(max=len(pairs) - 1)
    pair = torch.where(pairs[where] == key, pair_counts[where], torch.zeros_like(key)).double()
    context = counts[previous.clamp(min=0)]
    bigram = (pair + ALPHA * unigram[targets]) / (context + ALPHA)
    p = torch.where(has, bigram, unigram[targets])
    return uni, float(-p.log().mean())
