"""The n-gram references a network must beat: the interpolated bigram with its validation-tuned weight, on streams
small enough to check by hand; the degenerate flag when a baseline does not beat it by BIGRAM_MARGIN; records
written before the bigram changed still read."""

import json
import math

import pandas as pd
import pytest
import torch

from selfheal import records
from selfheal.analysis import tables
from selfheal.data import ngrams
from selfheal.records import Baseline, PretrainSummary

# Train: a strict alternation 5 6 5 6 ... (1000 tokens, V = 8): c(5) = c(6) = 500, every pair is (5, 6) or (6, 5).
STREAM = torch.tensor([5, 6] * 500)
U = 501 / 1008  # the add-one unigram of 5 and of 6
# Validation 5 6 5 5: targets 6 | 5 (seen pair, p_ML = 1), 5 | 6 (seen, 1), 5 | 5 (never seen, p_ML = 0).
TOY = [{"input_ids": torch.tensor([[5, 6, 5, 5]])}]
# Loss(λ) = -(2 log(λ + (1 - λ) U) + log((1 - λ) U)) / 3, whose minimum is at λ* = 2/3 - (1/3) U / (1 - U).
LAMBDA = 2 / 3 - (U / (1 - U)) / 3


def _loss(lam: float) -> float:
    return -(2 * math.log(lam + (1 - lam) * U) + math.log((1 - lam) * U)) / 3


def test_interpolated_bigram_by_hand():
    ref = ngrams.reference_losses(STREAM, TOY, "causal_lm", vocab_size=8)
    assert LAMBDA == pytest.approx(513 / 1521)
    assert ref.unigram == pytest.approx(-math.log(U), rel=1e-12)
    assert ref.bigram_weight == pytest.approx(LAMBDA, abs=1e-4)  # the validation minimum
    assert ref.bigram == pytest.approx(_loss(LAMBDA), abs=1e-8)
    # no λ on a fine grid does better: it is the minimum, and λ = 0 is the unigram
    assert all(ref.bigram <= _loss(lam) + 1e-12 for lam in [i / 1000 for i in range(1000)])
    weights = torch.tensor([0.0, LAMBDA, 0.9], dtype=torch.float64)
    p_ml, p_uni = torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64), torch.full((3,), U, dtype=torch.float64)
    at = ngrams.interpolated_loss(p_ml, p_uni, weights)
    assert float(at[0]) == pytest.approx(ref.unigram, rel=1e-12)
    assert float(at[1]) == pytest.approx(_loss(LAMBDA), rel=1e-12) and float(at[2]) == pytest.approx(_loss(0.9))


def test_bigram_weight_follows_the_validation_set():
    # validation that only follows the alternation: the bigram is right everywhere, λ goes to its upper bound
    follows = ngrams.reference_losses(STREAM, [{"input_ids": torch.tensor([[5, 6, 5, 6, 5, 6]] * 4)}], "causal_lm", 8)
    assert follows.bigram_weight == pytest.approx(ngrams.LAMBDA_MAX)
    assert follows.bigram == pytest.approx(-math.log(ngrams.LAMBDA_MAX + (1 - ngrams.LAMBDA_MAX) * U))
    # validation that never follows it: the bigram is useless, λ = 0 and the bigram loss is the unigram loss
    breaks = ngrams.reference_losses(STREAM, [{"input_ids": torch.tensor([[5, 5, 6, 6]])}], "causal_lm", 8)
    assert breaks.bigram_weight == 0.0 and breaks.bigram == pytest.approx(breaks.unigram, rel=1e-12)
    # a left token never seen as a left token, and the first target of a denoising sequence: the unigram
    unseen = ngrams.reference_losses(STREAM, [{"input_ids": torch.tensor([[7, 5]])}], "causal_lm", 8)
    assert unseen.bigram == pytest.approx(unseen.unigram, rel=1e-12)
    denoise = [{"input_ids": torch.zeros(1, 2), "labels": torch.tensor([[5, -100]])}]
    first = ngrams.reference_losses(STREAM, denoise, "denoising", 8)
    assert first.bigram == pytest.approx(first.unigram, rel=1e-12)

    # a masked LM: each masked target conditioned on the original token before it (its label where that was
    # chosen too, else the input); what the input holds at a chosen position does not matter
    def masked(inputs, labels):
        return ngrams.reference_losses(
            STREAM, [{"input_ids": torch.tensor([inputs]), "labels": torch.tensor([labels])}], "masked_lm", 8
        )

    seen = masked([0, 5, 0, 0], [5, -100, 6, 5])  # 6 | 5 (visible) and 5 | 6 (chosen too): both seen pairs
    assert seen.bigram < seen.unigram
    assert masked([3, 5, 1, 2], [5, -100, 6, 5]) == seen  # chosen positions' inputs do not matter
    assert masked([0, 6, 0, 0], [5, -100, 6, 5]).bigram > seen.bigram  # the visible left token does: 6 | 6


def test_large_vocabulary_stays_sparse():
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(0, 50_000, (200_000,), generator=g)
    val = [{"input_ids": torch.randint(0, 50_000, (8, 65), generator=g)}]
    ref = ngrams.reference_losses(stream, val, "causal_lm", vocab_size=50_000)
    assert 0.0 <= ref.bigram_weight <= ngrams.LAMBDA_MAX and ref.bigram <= ref.unigram + 1e-12


def _network(tmp_path, name, val_loss, unigram, bigram, damaged=None):
    pre = tmp_path / f"{name}-pre.json"
    base = tmp_path / f"{name}-base.json"
    records.write(
        pre,
        PretrainSummary(
            name, "gpt2", 2, 16, 1000, train_sequences=100, epochs=3, context=16, tokens=4800, last_quarter_val_drop=0.0
        ),
    )
    records.write(
        base,
        Baseline(
            name,
            val_loss,
            1.0,
            8,
            16,
            unigram_loss=unigram,
            bigram_loss=bigram,
            bigram_weight=None if bigram is None else 0.5,
            bigram_margin=None if bigram is None else bigram - val_loss,
        ),
    )
    return str(pre), str(base)


def test_degenerate_when_the_bigram_is_not_beaten_by_the_margin(tmp_path):
    pairs = [
        _network(tmp_path, "beats", 4.0, 5.0, 4.2),  # margin 0.2: fine
        _network(tmp_path, "close", 4.15, 5.0, 4.2),  # margin 0.05 < 0.1: degenerate
        _network(tmp_path, "worse", 4.3, 5.0, 4.2),  # margin -0.1: loses to the bigram
        _network(tmp_path, "masked", 4.15, 5.0, None),  # a record without a bigram: only the unigram condition
        _network(tmp_path, "both", 4.9, 5.0, 4.95),
    ]
    summary = pd.DataFrame(
        {
            "model": ["both"],
            "pretrain_seed": [0],
            "target": ["all"],
            "policy": ["full"],
            "init": ["fresh"],
            "regime": ["frozen"],
            "seed": [0],
            "damaged_loss": [4.91],
        }
    )
    table = tables.networks_table(
        [p for p, _ in pairs],
        [b for _, b in pairs],
        summary,
        {m: [0.01] for m in ("beats", "close", "worse", "masked", "both")},
    )
    assert list(table.columns) == tables.NETWORK_COLUMNS
    rows = table.set_index("model")
    assert rows.loc["beats", "bigram_margin"] == pytest.approx(0.2) and rows.loc["worse", "bigram_margin"] < 0
    assert rows["degenerate"].to_dict() == {"beats": False, "both": True, "close": True, "masked": False, "worse": True}
    assert rows["degenerate_reason"].to_dict() == {
        "beats": "",
        "both": "unigram,bigram,reset_all_harmless",
        "close": "bigram",
        "masked": "",
        "worse": "bigram",
    }
    assert pd.isna(rows.loc["masked", "bigram_margin"]) and pd.isna(rows.loc["masked", "bigram_weight"])
    assert rows.loc[
        "beats", ["train_sequences", "epochs", "context", "pretrain_examples", "pretrain_tokens"]
    ].tolist() == [100, 3, 16, 300, 4800]
    assert str(table["train_sequences"].dtype) == "Int64" and table["bigram_weight"].dtype == "float64"


def test_old_baseline_records_read_with_defaults(tmp_path):
    """A baseline written before bigram_weight / bigram_margin existed reads with None; its margin is derived."""
    pre = tmp_path / "old-pre.json"
    records.write(pre, PretrainSummary("old", "gpt2", 2, 16, 1000, source="pretrained"))  # as downloaded
    base = tmp_path / "old-base.json"
    base.write_text(
        json.dumps(
            {
                "model": "old",
                "val_loss": 4.0,
                "perplexity": 54.6,
                "val_sequences": 8,
                "context": 16,
                "pretrain_seed": 0,
                "unigram_loss": 5.0,
                "bigram_loss": 4.5,
            }
        )
    )
    read = records.read(base, Baseline)
    assert read.bigram_weight is None and read.bigram_margin is None
    table = tables.networks_table(
        [str(pre)], [str(base)], pd.DataFrame(columns=tables.CELL_KEYS + ["damaged_loss"]), {"old": [0.01]}
    )
    row = table.iloc[0]
    assert row["bigram_margin"] == pytest.approx(0.5) and not row["degenerate"]
    assert all(pd.isna(row[c]) for c in ("train_sequences", "epochs", "context", "pretrain_examples"))
