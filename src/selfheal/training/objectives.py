"""Training objectives: how fixed-length token sequences become model batches.

Every objective makes training batches with a generator drawn per step, and the validation batches once, from a
fixed seed, so that every cell of the grid is scored on exactly the same inputs (masks included).

- ``causal_lm``: next-token prediction (GPT-2, Llama).
- ``masked_lm``: BERT's masked LM: 15 % of tokens chosen (a model's ``mask_probability``), of those 80 % -> <mask>,
  10 % -> random, 10 % kept.
- ``denoising``: BART's text infilling: spans with Poisson(3) lengths cover ~30 % of tokens, each span replaced
  by a single <mask>; the decoder reconstructs the original sequence.
"""

from __future__ import annotations

import torch

VAL_SEED = 1234


class CausalLM:
    name = "causal_lm"

    def __init__(self, special: dict[str, int]):
        self.special = special

    def batch(self, seqs: torch.Tensor, generator: torch.Generator) -> dict:
        return {"input_ids": seqs}

    def val_batches(self, seqs: torch.Tensor, batch_size: int) -> list[dict]:
        generator = torch.Generator().manual_seed(VAL_SEED)
        return [self.batch(seqs[i : i + batch_size], generator) for i in range(0, seqs.shape[0], batch_size)]


class MaskedLM(CausalLM):
    name = "masked_lm"
    probability = 0.15  # BERT's; a model's ``mask_probability`` overrides it

    def __init__(self, special: dict[str, int], probability: float | None = None):
        super().__init__(special)
        if probability is not None:
            self.probability = probability

    def batch(self, seqs, generator):
        ids = seqs.clone()
        labels = seqs.clone()
        chosen = torch.rand(ids.shape, generator=generator) < self.probability
        chosen &= ids != self.special["pad"]
        labels[~chosen] = -100
        roll = torch.rand(ids.shape, generator=generator)
        ids[chosen & (roll < 0.8)] = self.special["mask"]
        random_ids = torch.randint(0, self.special["vocab_size"], ids.shape, generator=generator)
        swap = chosen & (roll >= 0.8) & (roll < 0.9)
        ids[swap] = random_ids[swap]
        return {"input_ids": ids, "labels": labels}


class Denoising(CausalLM):
    name = "denoising"
    noise = 0.3
    mean_span = 3.0

    def _masks(self, seqs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Which tokens each row loses: spans of Poisson(mean_span) length (at least 1) at uniform starts, drawn
        for every row at once, until each row has lost at least ``noise`` of its tokens (a row that has stops
        taking spans; every row draws from the same stream, so a row's spans do not depend on the others')."""
        rows, n = seqs.shape
        budget = max(1, round(self.noise * n))
        position = torch.arange(n)
        masked = torch.zeros((rows, n), dtype=torch.bool)
        open_rows = torch.ones(rows, dtype=torch.bool)
        rate = torch.full((rows,), self.mean_span)
        while bool(open_rows.any()):
            length = torch.poisson(rate, generator=generator).clamp(min=1).long()
            start = torch.randint(0, n, (rows,), generator=generator)
            span = (position >= start[:, None]) & (position < (start + length)[:, None])
            masked |= span & open_rows[:, None]
            open_rows = masked.sum(1) < budget
        return masked

    def batch(self, seqs, generator):
        """Each lost span becomes one <mask>; the rows are packed to the left and padded to the longest."""
        masked = self._masks(seqs, generator)
        run_start = masked & ~torch.nn.functional.pad(masked[:, :-1], (1, 0))
        keep = ~masked | run_start
        tokens = torch.where(masked, torch.full_like(seqs, self.special["mask"]), seqs)
        lengths = keep.sum(1)
        ids = torch.full((seqs.shape[0], int(lengths.max())), self.special["pad"], dtype=seqs.dtype)
        attention = torch.zeros(ids.shape, dtype=torch.long)
        row = torch.arange(seqs.shape[0])[:, None].expand_as(keep)[keep]
        column = (keep.cumsum(1) - 1)[keep]
        ids[row, column] = tokens[keep]
        attention[row, column] = 1
        return {"input_ids": ids, "attention_mask": attention, "labels": seqs}


OBJECTIVES = {o.name: o for o in (CausalLM, MaskedLM, Denoising)}


def for_family(family, special: dict[str, int], model_cfg: dict | None = None):
    """The objective of ``family``, with the model's own settings (``mask_probability`` of a masked LM)."""
    if family.objective == MaskedLM.name:
        return MaskedLM(special, (model_cfg or {}).get("mask_probability"))
    return OBJECTIVES[family.objective](special)
