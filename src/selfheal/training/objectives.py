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

    def _corrupt(self, seq: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        n = seq.numel()
        budget = max(1, round(self.noise * n))
        masked = torch.zeros(n, dtype=torch.bool)
        while int(masked.sum()) < budget:
            length = int(torch.poisson(torch.tensor([self.mean_span]), generator=generator).clamp(min=1).item())
            start = int(torch.randint(0, n, (1,), generator=generator).item())
            masked[start : start + length] = True
        out, previous = [], False
        for token, is_masked in zip(seq.tolist(), masked.tolist()):
            if is_masked:
                if not previous:
                    out.append(self.special["mask"])
            else:
                out.append(token)
            previous = is_masked
        return torch.tensor(out, dtype=seq.dtype)

    def batch(self, seqs, generator):
        corrupted = [self._corrupt(s, generator) for s in seqs]
        width = max(c.numel() for c in corrupted)
        ids = torch.full((len(corrupted), width), self.special["pad"], dtype=seqs.dtype)
        attention = torch.zeros((len(corrupted), width), dtype=torch.long)
        for i, c in enumerate(corrupted):
            ids[i, : c.numel()] = c
            attention[i, : c.numel()] = 1
        return {"input_ids": ids, "attention_mask": attention, "labels": seqs}


OBJECTIVES = {o.name: o for o in (CausalLM, MaskedLM, Denoising)}


def for_family(family, special: dict[str, int], model_cfg: dict | None = None):
    """The objective of ``family``, with the model's own settings (``mask_probability`` of a masked LM)."""
    if family.objective == MaskedLM.name:
        return MaskedLM(special, (model_cfg or {}).get("mask_probability"))
    return OBJECTIVES[family.objective](special)
