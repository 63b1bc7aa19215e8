"""Cost relative to the from-scratch run: where a network's own pretraining curve first reached the healed loss,
interpolated between its evaluations (``stats.first_crossing``), in summary.parquet (scratch_*, relative_*) and in
the answer's pretrain_reference, from the same function."""

import math

import numpy as np
import pandas as pd
import pytest

from selfheal import records
from selfheal.analysis import answer_tables, stats, tables
from selfheal.records import Baseline, CellResult, PretrainSummary, Recovery

# A pretraining curve: 6.0 at 0, 5.0 at 1000, 4.5 at 2000, 4.1 at 10000, 4.0 at 11000 examples.
EXAMPLES = [0, 1000, 2000, 10000, 11000]
LOSSES = [6.0, 5.0, 4.5, 4.1, 4.0]


def test_first_crossing_interpolates_and_flags_coarse_brackets():
    fine = stats.first_crossing(EXAMPLES, LOSSES, 4.8)  # between 1000 (5.0) and 2000 (4.5): 40 % of the way
    assert fine.examples == pytest.approx(1400.0) and fine[1:] == (1000, 2000, True)  # 1000 wide > 10 % of 1400
    late = stats.first_crossing(EXAMPLES, LOSSES, 4.06)  # between 10000 (4.1) and 11000 (4.0)
    assert late.examples == pytest.approx(10400.0) and (late.examples_lo, late.examples_hi) == (10000, 11000)
    assert not late.coarse  # 1000 <= 10 % of 10400
    exact = stats.first_crossing(EXAMPLES, LOSSES, 4.5)  # reached exactly at an evaluation
    assert exact.examples == 2000.0 and (exact.examples_lo, exact.examples_hi) == (1000, 2000)
    never = stats.first_crossing(EXAMPLES, LOSSES, 3.9)
    assert math.isnan(never.examples) and (never.examples_lo, never.examples_hi, never.coarse) == (11000, None, False)
    first = stats.first_crossing(EXAMPLES, LOSSES, 7.0)  # already there at the first evaluation
    assert first == stats.Crossing(0.0, 0, 0, False)
    assert stats.first_crossing(EXAMPLES, LOSSES, 4.8, resolution=0.8).coarse is False  # 1000 <= 80 % of 1400
    shuffled = stats.first_crossing(EXAMPLES[::-1], LOSSES[::-1], 4.8)  # order of the rows does not matter
    assert shuffled == fine
    bumpy = stats.first_crossing([0, 10, 20, 30], [5.0, 3.0, 6.0, 2.0], 4.0)  # the *first* crossing
    assert bumpy.examples == pytest.approx(5.0) and (bumpy.examples_lo, bumpy.examples_hi) == (0, 10)
    assert math.isnan(stats.first_crossing([], [], 1.0).examples)


def _summary(rows):
    """Summary rows of one cell per (model, pretrain_seed, threshold_loss, examples, examples_lo, examples_hi)."""
    table = pd.DataFrame(
        [
            {
                "model": m,
                "pretrain_seed": ps,
                "threshold": eps,
                "baseline_loss": base,
                "threshold_loss": base * (1 + eps),
                "examples": ex,
                "examples_lo": lo,
                "examples_hi": hi,
            }
            for m, ps, base, eps, ex, lo, hi in rows
        ]
    )
    for column in ("examples_lo", "examples_hi"):
        table[column] = table[column].astype("Int64")
    return table


def _curves(model, ps):
    return pd.DataFrame(
        {"kind": "pretrain", "model": model, "pretrain_seed": ps, "examples": EXAMPLES, "val_loss": LOSSES}
    )


def test_summary_scratch_columns():
    # baseline 4.0: eps 0.2 -> 4.8 (1400, coarse), eps 0.015 -> 4.06 (10400), eps 0.01 -> 4.04 (10600); eps 0 ->
    # 4.0 at the last evaluation; the adapted and the curve-less networks get nothing
    summary = _summary(
        [
            ("s", 0, 4.0, 0.2, 700, 350, 700),
            ("s", 0, 4.0, 0.015, 2080, 1040, 2080),
            ("s", 0, 4.0, 0.01, 3000, 3000, None),
            ("s", 0, 3.9, 0.0, 100, 0, 100),
            ("a", 0, 4.0, 0.2, 700, 350, 700),
            ("d", 0, 4.0, 0.2, 700, 350, 700),
        ]
    )
    curves = pd.concat([_curves("s", 0), _curves("a", 0)], ignore_index=True)
    networks = pd.DataFrame(
        {"model": ["s", "a", "d"], "pretrain_seed": [0, 0, 0], "source": ["scratch", "pretrained", "pretrained"]}
    )
    out = tables.add_scratch_reference(summary, curves, networks)
    s = out[out["model"] == "s"].reset_index(drop=True)
    assert s["scratch_examples"].iloc[:3].tolist() == pytest.approx([1400.0, 10400.0, 10600.0])
    assert s["scratch_examples_lo"].tolist() == [1000, 10000, 10000, 11000]
    assert s["scratch_examples_hi"].iloc[:3].tolist() == [2000, 11000, 11000] and pd.isna(s["scratch_examples_hi"][3])
    assert s["scratch_coarse"].tolist() == [True, False, False, False]
    assert math.isnan(s["scratch_examples"][3])  # 3.9 never reached: NaN, relative unknown
    assert s["relative_to_scratch"].iloc[:2].tolist() == pytest.approx([0.5, 0.2])
    assert s["relative_lo"].iloc[:2].tolist() == pytest.approx([0.25, 0.1])
    assert s["relative_hi"].iloc[:2].tolist() == pytest.approx([0.5, 0.2])
    assert s["relative_to_scratch"][2] == pytest.approx(3000 / 10600) and math.isnan(s["relative_hi"][2])  # censored
    assert s[["relative_to_scratch", "relative_lo", "relative_hi"]].iloc[3].isna().all()
    others = out[out["model"] != "s"]  # an adaptation is no from-scratch run; a network without a curve
    assert others["scratch_examples"].isna().all() and others["scratch_examples_lo"].isna().all()
    assert others["relative_to_scratch"].isna().all() and not others["scratch_coarse"].any()
    assert out["scratch_examples"].dtype == "float64" and str(out["scratch_examples_lo"].dtype) == "Int64"
    assert out["scratch_coarse"].dtype == bool


def test_pretrain_reference_uses_the_same_crossing():
    networks = pd.DataFrame(
        {
            "model": ["s"],
            "pretrain_seed": [0],
            "baseline_loss": [4.0],
            "pretrain_examples": pd.array([20000], dtype="Int64"),
        }
    )
    ref = answer_tables.pretrain_reference(_curves("s", 0), networks, [0.2, 0.015, -0.1])
    assert list(ref.columns) == answer_tables.REFERENCE_COLUMNS
    assert ref["examples"].iloc[:2].tolist() == pytest.approx([1400.0, 10400.0]) and np.isnan(ref["examples"][2])
    assert ref["fraction"].iloc[:2].tolist() == pytest.approx([0.07, 0.52])
    assert ref["coarse"].tolist() == [True, False, False]
    assert ref["examples_lo"].tolist() == [1000, 10000, 11000] and pd.isna(ref["examples_hi"][2])
    assert ref["fraction_hi"][0] == pytest.approx(0.1)
    summary = tables.add_scratch_reference(
        _summary([("s", 0, 4.0, 0.2, 1, 0, 1), ("s", 0, 4.0, 0.015, 1, 0, 1)]),
        _curves("s", 0),
        networks.assign(source="scratch"),
    )
    assert summary["scratch_examples"].tolist() == ref["examples"].iloc[:2].tolist()


def test_written_summary_has_the_scratch_columns(tmp_path):
    """tables.write: a network pretrained here, one cell, its pretraining curve; the Parquet has the columns."""
    pre = tmp_path / "pre.json"
    records.write(
        pre,
        PretrainSummary(
            "m",
            "gpt2",
            2,
            8,
            100,
            train_sequences=1000,
            epochs=11,
            context=16,
            tokens=176000,
            last_quarter_val_drop=0.0,
        ),
    )
    base = tmp_path / "base.json"
    records.write(
        base, Baseline("m", 4.0, 54.6, 8, 16, unigram_loss=5.5, bigram_loss=4.8, bigram_weight=0.5, bigram_margin=0.8)
    )
    curve = tmp_path / "pre.parquet"
    pd.DataFrame(
        {
            "examples": EXAMPLES,
            "tokens": [e * 16 for e in EXAMPLES],
            "steps": [e // 32 for e in EXAMPLES],
            "wall_s": [0.0, 1, 2, 3, 4],
            "val_loss": LOSSES,
            "train_loss": [None, 5, 4.6, 4.2, 4.1],
        }
    ).to_parquet(curve)
    cell = tmp_path / "cell.json"
    records.write(
        cell,
        CellResult(
            model="m",
            target="L0",
            policy="full",
            init="fresh",
            regime="frozen",
            seed=0,
            stack="",
            layer=0,
            depth=0,
            arch="gpt2",
            n_layer=2,
            d_model=8,
            pretrain_examples=11000,
            budget_examples=5000,
            baseline_loss=4.0,
            damaged_loss=6.0,
            final_loss=4.1,
            trainable_tensors=2,
            trainable_params=10,
            reset_tensors=2,
            recoveries=[Recovery(0.2, True, 700, 11200, 22, 1.0, 4.7, 350, 5600, 11)],
            diverged_step=None,
            prefix_cache_depth=None,
            train_tokens_per_s=1.0,
            eval_share=0.1,
        ),
    )
    cell_curve = tmp_path / "cell.parquet"
    pd.DataFrame(
        {
            "examples": [0, 350, 700],
            "tokens": [0, 5600, 11200],
            "steps": [0, 11, 22],
            "wall_s": [0.0, 0.5, 1.0],
            "val_loss": [6.0, 5.0, 4.7],
            "train_loss": [None, 5.5, 4.9],
        }
    ).to_parquet(cell_curve)
    out = {name: tmp_path / f"{name}.parquet" for name in ("summary", "curves", "networks")}
    files = {"recoveries": [str(cell)], "curves": [str(cell_curve)], "pretrain": [str(pre)]}
    files |= {"pretrain_curves": [str(curve)], "baselines": [str(base)], "unadapted": []}
    tables.write(
        files,
        {"m": [0.2]},
        str(out["summary"]),
        str(out["curves"]),
        str(out["networks"]),
    )
    summary = pd.read_parquet(out["summary"])
    assert list(summary.columns) == tables.SUMMARY_COLUMNS
    row = summary.iloc[0]
    assert row["threshold_loss"] == pytest.approx(4.8) and row["scratch_examples"] == pytest.approx(1400.0)
    assert (row["scratch_examples_lo"], row["scratch_examples_hi"], row["scratch_coarse"]) == (1000, 2000, True)
    assert row["relative_to_scratch"] == pytest.approx(0.5)
    assert row["fraction_of_pretrain"] == pytest.approx(700 / 11000)
    networks = pd.read_parquet(out["networks"])
    assert list(networks.columns) == tables.NETWORK_COLUMNS
    assert networks.iloc[0][["train_sequences", "epochs", "context", "pretrain_examples"]].tolist() == [
        1000,
        11,
        16,
        11000,
    ]
    assert networks.iloc[0]["bigram_margin"] == pytest.approx(0.8) and networks.iloc[0]["degenerate_reason"] == ""
