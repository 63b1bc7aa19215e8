"""What BART's text-infilling batches cost on one core: `objectives.Denoising.batch` (every row's spans drawn at once)
against the loop a user would write (each sequence's spans drawn one at a time, then its masked runs collapsed in
Python), side by side on the same sequences, interleaved and repeated; and the share of lost tokens and of spans
per row of each, which must agree (the same distribution).

    .venv/bin/python benchmarks/masking.py [--repeats 5] [--no-write]

Batches of 32 sequences of 64 tokens (the study's retraining batch and context). Writes block `masking` of
docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_write_flag, interleaved, machine, publish  # noqa: E402

from selfheal.training import objectives  # noqa: E402

MARKER = "masking"
SPECIAL = {"vocab_size": 1024, "eos": 0, "pad": 1, "mask": 2}
BATCHES = 100


def per_sequence_batch(den: objectives.Denoising, seqs: torch.Tensor, generator: torch.Generator) -> dict:
    """The per-sequence loop: spans of Poisson(mean_span) length at uniform starts until the sequence has lost its
    share, each masked run collapsed to one <mask>, rows padded to the longest."""
    rows = []
    for seq in seqs:
        n = seq.numel()
        budget = max(1, round(den.noise * n))
        masked = torch.zeros(n, dtype=torch.bool)
        while int(masked.sum()) < budget:
            length = int(torch.poisson(torch.tensor([den.mean_span]), generator=generator).clamp(min=1).item())
            start = int(torch.randint(0, n, (1,), generator=generator).item())
            masked[start : start + length] = True
        out, previous = [], False
        for token, is_masked in zip(seq.tolist(), masked.tolist()):
            if not is_masked:
                out.append(token)
            elif not previous:
                out.append(den.special["mask"])
            previous = is_masked
        rows.append(torch.tensor(out, dtype=seqs.dtype))
    width = max(r.numel() for r in rows)
    ids = torch.full((len(rows), width), den.special["pad"], dtype=seqs.dtype)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : r.numel()] = r
        attention[i, : r.numel()] = 1
    return {"input_ids": ids, "attention_mask": attention, "labels": seqs}


def run(make) -> dict:
    den = objectives.Denoising(SPECIAL)
    seqs = torch.randint(3, SPECIAL["vocab_size"], (32, 64), generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    lost, spans = [], []
    t0 = time.perf_counter()
    batches = [make(den, seqs, generator) for _ in range(BATCHES)]
    ms = (time.perf_counter() - t0) / BATCHES * 1000
    for b in batches:
        mask = (b["input_ids"] == SPECIAL["mask"]) & (b["attention_mask"] == 1)
        kept = int(b["attention_mask"].sum() - mask.sum())
        lost.append(1 - kept / seqs.numel())
        spans.append(int(mask.sum()) / seqs.shape[0])
    return {"ms": ms, "lost": statistics.mean(lost), "spans": statistics.mean(spans)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    add_write_flag(parser)
    a = parser.parse_args()
    torch.set_num_threads(1)
    variants = {
        "per-sequence loop": lambda: run(per_sequence_batch),
        "selfheal (batched)": lambda: run(lambda den, seqs, g: den.batch(seqs, g)),
    }
    runs = interleaved(variants, a.repeats)
    load = os.getloadavg()[0]  # the ratio is side by side; the absolute times depend on what else ran
    rows = ["| variant | ms per batch | lost tokens | spans per row |", "|---|---|---|---|"]
    for name, rs in runs.items():
        rows.append(
            f"| {name} | {statistics.median(r['ms'] for r in rs):.2f} | {rs[0]['lost']:.3f} | {rs[0]['spans']:.2f} |"
        )
    loop, ours = (statistics.median(r["ms"] for r in runs[n]) for n in variants)
    note = (
        f"Measured on {machine()}, one thread (`.venv/bin/python benchmarks/masking.py`; {BATCHES} batches of 32 × "
        f"64 tokens per run, medians of {a.repeats} interleaved runs, load average {load:.1f}): **{loop / ours:.1f}× "
        "faster** than the "
        "per-sequence loop, with the same share of lost tokens and spans per row."
    )
    publish(MARKER, note + "\n\n" + "\n".join(rows), not a.no_write)


if __name__ == "__main__":
    main()
