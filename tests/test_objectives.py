"""Objectives: validation masks are fixed and shared by every cell; training masks are drawn per step."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from selfheal.training import objectives

SPECIAL = {"vocab_size": 300, "eos": 0, "pad": 1, "mask": 2}


def _seqs(n=64, length=32):
    return torch.randint(3, 300, (n, length), generator=torch.Generator().manual_seed(0))


def test_masked_lm_validation_masks_are_fixed():
    mlm = objectives.MaskedLM(SPECIAL)
    a, b = mlm.val_batches(_seqs(), 16), objectives.MaskedLM(SPECIAL).val_batches(_seqs(), 16)
    for x, y in zip(a, b):
        assert torch.equal(x["input_ids"], y["input_ids"]) and torch.equal(x["labels"], y["labels"])


def test_masked_lm_training_masks_change_per_step_and_follow_80_10_10():
    mlm = objectives.MaskedLM(SPECIAL)
    g = torch.Generator().manual_seed(0)
    seqs = _seqs(512)
    first, second = mlm.batch(seqs, g), mlm.batch(seqs, g)
    assert not torch.equal(first["labels"], second["labels"])
    chosen = first["labels"] != -100
    assert 0.13 < chosen.float().mean() < 0.17
    assert torch.equal(first["labels"][chosen], seqs[chosen])  # labels are the original tokens
    masked = (first["input_ids"] == SPECIAL["mask"]) & chosen
    assert 0.75 < masked.sum() / chosen.sum() < 0.85
    assert torch.equal(first["input_ids"][~chosen], seqs[~chosen])  # unchosen tokens untouched


def test_a_models_mask_probability_sets_the_chosen_share():
    seqs, g = _seqs(512), torch.Generator().manual_seed(0)
    family = type("Family", (), {"objective": "masked_lm"})
    mlm = objectives.for_family(family, SPECIAL, {"mask_probability": 0.4})
    assert 0.38 < (mlm.batch(seqs, g)["labels"] != -100).float().mean() < 0.42
    assert objectives.for_family(family, SPECIAL, {}).probability == 0.15  # BERT's when the model says nothing


def test_denoising_replaces_spans_by_single_masks():
    den = objectives.Denoising(SPECIAL)
    seqs = _seqs(32)
    batch = den.batch(seqs, torch.Generator().manual_seed(1))
    assert torch.equal(batch["labels"], seqs)
    lengths = batch["attention_mask"].sum(1)
    assert (lengths < seqs.shape[1]).all()  # spans collapsed
    for ids, n in zip(batch["input_ids"], lengths):
        row = ids[:n]
        assert (row == SPECIAL["mask"]).any()
        assert not ((row[1:] == SPECIAL["mask"]) & (row[:-1] == SPECIAL["mask"])).any()  # one mask per span
        assert (ids[n:] == SPECIAL["pad"]).all()
    kept = (batch["input_ids"] != SPECIAL["mask"]) & (batch["attention_mask"] == 1)
    assert 0.6 < kept.sum() / seqs.numel() < 0.75  # ~30 % of tokens removed
    lost = seqs.shape[1] - kept.sum(1)
    assert (lost >= round(den.noise * seqs.shape[1])).all()  # every row loses at least its share
    for ids, n, seq in zip(batch["input_ids"], lengths, seqs):  # what is kept is the sequence, in order
        survivors = ids[:n][ids[:n] != SPECIAL["mask"]].tolist()
        it = iter(seq.tolist())
        assert all(token in it for token in survivors)
    again = den.batch(seqs, torch.Generator().manual_seed(1))
    assert torch.equal(again["input_ids"], batch["input_ids"])  # same generator state, same masks


def test_causal_lm_batches_are_the_sequences():
    seqs = _seqs(8)
    assert torch.equal(objectives.CausalLM(SPECIAL).batch(seqs, torch.Generator())["input_ids"], seqs)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 12), length=st.integers(2, 80), seed=st.integers(0, 2**31 - 1))
def test_denoising_batches_of_any_shape(rows, length, seed):
    """Any batch shape: each row is its sequence's surviving tokens in order, with one <mask> per lost span (no two
    in a row) and at least the noise share of its tokens lost, then padding; a row's input does not depend on the
    tokens of the other rows."""
    den = objectives.Denoising(SPECIAL)
    seqs = torch.randint(3, 300, (rows, length), generator=torch.Generator().manual_seed(seed))
    batch = den.batch(seqs, torch.Generator().manual_seed(seed))
    assert torch.equal(batch["labels"], seqs)
    for ids, attention, seq in zip(batch["input_ids"], batch["attention_mask"], seqs):
        n = int(attention.sum())
        assert attention[:n].all() and not attention[n:].any() and (ids[n:] == SPECIAL["pad"]).all()
        row = ids[:n].tolist()
        masks = [t == SPECIAL["mask"] for t in row]
        assert any(masks) and not any(a and b for a, b in zip(masks, masks[1:]))
        survivors = [t for t, m in zip(row, masks) if not m]
        assert length - len(survivors) >= round(den.noise * length)
        it = iter(seq.tolist())
        assert all(t in it for t in survivors)
    if rows > 1:
        other = seqs.clone()
        other[1:] = torch.randint(3, 300, other[1:].shape, generator=torch.Generator().manual_seed(seed + 1))
        again = den.batch(other, torch.Generator().manual_seed(seed))
        first, first_again = batch["attention_mask"][0] == 1, again["attention_mask"][0] == 1
        assert torch.equal(again["input_ids"][0][first_again], batch["input_ids"][0][first])
