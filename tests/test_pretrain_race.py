"""Pretraining to the validation minimum (docs/method.md, "Pretraining to the validation minimum"): the patience
rule on hand-written curves, the edge extension of the lr race, the from-scratch cost as the fewest examples of
any copy, and real races of a tiny GPT-2 whose network is the best checkpoint of the winning copy."""

import math

import pandas as pd
import pytest
import torch
from safetensors.torch import save_file
from test_frozen_random import GPT2, SPECIAL, TINY_RECIPE

from selfheal import models, records
from selfheal.heal import budget, thresholds
from selfheal.records import Baseline, PretrainSummary
from selfheal.training import evaluation, patience, pretrain, race, setup

# -- the patience rule ------------------------------------------------------------------------------------------


def test_the_best_is_the_lowest_and_the_clock_restarts_only_beyond_the_noise():
    examples = [0, 100, 200, 300, 400, 500, 600]
    losses = [5.0, 4.0, 3.5, 3.45, 3.44, 3.6, 3.7]
    noise = [0.0, 0.05, 0.05, 0.1, 0.1, 0.0, 0.0]  # 3.45 and 3.44 are below 3.5 by less than their noise
    state = patience.stopping(examples, losses, noise, patience=300)
    assert (state.anchor, state.anchor_examples, state.anchor_loss) == (2, 200, 3.5)  # the last real improvement
    assert (state.best, state.best_examples, state.best_loss) == (4, 400, 3.44)  # the lowest loss: the network
    assert state.stop and examples.index(500) == 5  # 500 - 200 >= 300: stops at the sixth evaluation
    # without the noise each fall improves: the clock restarts at 400 and the curve ends unstopped at 600
    plain = patience.stopping(examples, losses, [0.0] * 7, patience=300)
    assert (plain.anchor, plain.best, plain.stop) == (4, 4, False)


def test_patience_counts_examples_from_the_anchor_and_at_least_waits_for_a_multiple_of_the_best():
    examples, losses, noise = [0, 10, 20, 30, 40, 50], [4.0, 3.0, 3.1, 3.2, 3.3, 3.4], [0.0] * 6
    assert patience.stopping(examples, losses, noise, patience=20).best == 1
    assert patience.stopping(examples, losses, noise, patience=20) == patience.State(
        1, 10, 3.0, 1, 10, 3.0, True, False
    )
    # index 3 (30 examples) is the first 20 after the anchor at 10; at_least 4: not before 4 x 10 = 40
    stopped = patience.stopping(examples, losses, noise, patience=20)
    assert examples[3] - stopped.anchor_examples >= 20
    late = patience.stopping(examples, losses, noise, patience=20, at_least=4.0)
    assert late.stop and late.best == 1
    steps = [patience.step(None, 0, 0, 4.0, 0.0, 20, 4.0)]
    for i in range(1, 6):
        steps.append(patience.step(steps[-1], i, examples[i], losses[i], 0.0, 20, 4.0))
    assert [s.stop for s in steps] == [False, False, False, False, True, True]  # 40 = 4 x 10 and 30 after 10


def test_a_non_finite_loss_never_improves_nor_becomes_the_best():
    state = patience.stopping([0, 10, 20], [4.0, math.nan, 3.9], [0.0, 0.0, 0.0], patience=100)
    assert (state.best, state.anchor, state.best_loss) == (2, 2, 3.9)
    assert patience.stopping([0, 10], [4.0, math.inf], [0.0, 0.0], patience=5).best == 0


def test_the_noise_is_the_standard_error_of_the_paired_differences():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    b = torch.tensor([1.5, 2.0, 3.5, 4.0])  # differences -0.5, 0, -0.5, 0: sd 0.2887, se 0.1443
    assert patience.paired_se(a, b) == pytest.approx(math.sqrt(1 / 12) / 2)
    assert patience.paired_se(a, a + 0.25) == 0.0  # a constant shift: no noise at all


# -- the edge extension -----------------------------------------------------------------------------------------

GRID = [1e-3, 3e-3, 1e-2, 3e-2]


def test_an_edge_winner_extends_the_race_by_three_up_to_the_limit():
    assert race.beyond(GRID, [3e-2], GRID, 2) == pytest.approx(9e-2)
    assert race.beyond(GRID, [1e-3], GRID, 2) == pytest.approx(1e-3 / 3)
    assert race.beyond(GRID, [3e-3], GRID, 2) is None  # inside the grid
    assert race.beyond([*GRID, 9e-2], [9e-2], GRID, 2) == pytest.approx(0.27)
    assert race.beyond([*GRID, 9e-2, 0.27], [0.27], GRID, 2) is None  # two extensions above: spent
    assert race.beyond([*GRID, 9e-2], [3e-2], GRID, 2) is None  # the extension lost: the winner is inside
    assert race.beyond(GRID, [3e-2], GRID, 0) is None
    assert race.is_edge([*GRID, 9e-2], 9e-2) and not race.is_edge([*GRID, 9e-2], 3e-2)


# -- the from-scratch cost over copies --------------------------------------------------------------------------


def test_the_from_scratch_cost_is_the_fewest_examples_of_any_copy():
    curve = pd.DataFrame(
        {
            "lr": [1e-3] * 4 + [1e-2] * 4,
            "examples": [0, 100, 200, 300] * 2,
            "val_loss": [6.0, 5.0, 4.0, 3.0, 6.0, 4.0, 3.5, 3.6],  # the fast copy reaches 4.5 at 50 examples
        }
    )
    copies = thresholds.copies(curve)
    assert len(copies) == 2
    fast = thresholds.fewest_crossing(copies, 4.5)
    assert fast.examples == pytest.approx(75.0) and (fast.examples_lo, fast.examples_hi) == (0, 100)
    slow_only = thresholds.fewest_crossing(copies, 3.2)  # only the slow copy gets there, at 280
    assert slow_only.examples == pytest.approx(280.0)
    never = thresholds.fewest_crossing(copies, 1.0)
    assert math.isnan(never.examples) and never.examples_lo == 300
    # heal.budget's unit: baseline 4.0 x 1.125 = 4.5
    assert budget.scratch_cost(curve, 4.0, 0.125) == pytest.approx(75.0)
    assert budget.scratch_cost(curve.drop(columns="lr").iloc[:4], 4.0, 0.125) == pytest.approx(150.0)


# -- real races -------------------------------------------------------------------------------------------------


def _tokens(tmp_path):
    """Random tokens, the validation ones drawn apart from the training ones: past the unigram there is nothing to
    learn, so every copy overfits and the patience rule stops it."""
    g = torch.Generator().manual_seed(0)
    train = torch.randint(3, 64, (16 * 80,), generator=g, dtype=torch.int32)
    val = torch.randint(3, 64, (16 * 8,), generator=g, dtype=torch.int32)
    path = tmp_path / "tokens.safetensors"
    save_file({"train": train, "val": val}, str(path), metadata={k: str(v) for k, v in SPECIAL.items()})
    return str(path)


EVAL = {"val_sequences": 8, "batch_size": 8}


def _pretrain(tmp_path, pre: dict, rec: dict = TINY_RECIPE, tokens=None):
    cfg = {
        **GPT2,
        "pretrain": {"train_sequences": 64, "eval_every_examples": 32, "checkpoint_every_steps": 0, "seed": 0, **pre},
        "recipe": rec,
        "retrain": {"thresholds": [0.01, 0.05]},
    }
    out = tmp_path / "net"
    summary = pretrain.pretrain(
        cfg,
        EVAL,
        tokens or _tokens(tmp_path),
        str(out / "theta0"),
        str(out / "trained"),
        str(out / "curve.parquet"),
        str(out / "pretrain.json"),
        baseline_path=str(out / "baseline.json"),
    )
    return cfg, summary, pd.read_parquet(out / "curve.parquet"), out


def test_the_network_is_the_best_checkpoint_of_the_winning_copy(tmp_path, caplog):
    with caplog.at_level("INFO", logger="selfheal"):
        cfg, summary, curve, out = _pretrain(tmp_path, {"max_epochs": 20, "patience": 2})
    assert summary == records.read(out / "pretrain.json", PretrainSummary)
    # every copy is in the curve with its lr; the kept one is the winner's
    assert list(dict.fromkeys(curve["lr"])) == TINY_RECIPE["lrs"] == summary.lrs
    assert set(curve.loc[curve["kept"], "lr"]) == {summary.lr}
    best = curve.groupby("lr")["val_loss"].min()
    assert summary.final_val_loss == best.min() == best[summary.lr]  # the lowest best of any copy
    kept = curve[curve["kept"]]
    at = kept.loc[kept["val_loss"].idxmin()]
    assert summary.examples == at["examples"] and summary.steps == at["steps"]
    assert summary.epochs == pytest.approx(at["examples"] / 64) and summary.pretrain_examples == at["examples"]
    # each copy stopped by the patience rule, two epochs (128 examples) after its last improvement at the latest
    assert summary.stopped_by == "patience" and summary.stop_examples == kept["examples"].max() < 20 * 64
    assert summary.plateau_examples == summary.stop_examples and summary.plateau_val_loss >= summary.final_val_loss
    assert not summary.off_plateau(summary.final_val_loss, 0.01)
    assert summary.race_examples == curve.groupby("lr")["examples"].max().sum()
    assert summary.lr_at_edge == (summary.lr in (min(summary.lrs), max(summary.lrs)))
    # the saved network evaluates to that checkpoint's loss, which is its baseline
    model = models.load(out / "trained")
    job = setup.prepare(model, cfg, EVAL, str(tmp_path / "tokens.safetensors"))
    assert evaluation.evaluate(job.model, job.family, job.val_batches) == summary.final_val_loss
    assert records.read(out / "baseline.json", Baseline).val_loss == summary.final_val_loss
    assert not (out / pretrain.COPIES).exists()  # the copies' records are gone once the network is written
    assert any("copy at lr" in r.getMessage() for r in caplog.records)


def test_a_copy_cut_by_max_epochs_is_not_checked(tmp_path, caplog):
    with caplog.at_level("INFO", logger="selfheal"):
        _, summary, curve, _ = _pretrain(tmp_path, {"max_epochs": 0.5, "patience": 2})
    assert summary.stopped_by == "max_epochs" and summary.stop_examples == 32
    assert summary.plateau_examples is None and summary.plateau_val_loss is None
    assert summary.still_falls(summary.final_val_loss) == summary.last_quarter_val_drop
    assert any("raise pretrain.max_epochs" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert (curve.groupby("lr")["examples"].max() == 32).all()


def test_a_winner_at_the_edge_races_the_lr_beyond_it(tmp_path):
    """Low lrs and half an epoch: the largest lr learns most, so the race extends above the grid, once."""
    low = {**TINY_RECIPE, "lrs": [1e-4, 3e-4, 1e-3, 3e-3], "max_lr_extensions": 1}
    _, summary, curve, _ = _pretrain(tmp_path, {"max_epochs": 0.5, "patience": 2}, low)
    best = curve.groupby("lr", sort=False)["val_loss"].min()
    assert best.iloc[:4].idxmin() == 3e-3  # the grid's winner is at its top edge ...
    assert summary.lrs == [*low["lrs"], pytest.approx(9e-3)]  # ... so 3 x beyond it is raced, once
    assert summary.lr == best.idxmin()
    assert summary.lr_at_edge == (summary.lr == summary.lrs[-1])


def test_a_finished_copy_is_read_back_not_trained_again(tmp_path, caplog):
    """The record a finished copy leaves (``copy.pt``) is what a re-run of a killed job reads: the same copy."""
    cfg = {
        **GPT2,
        "pretrain": {"train_sequences": 64, "eval_every_examples": 32, "checkpoint_every_steps": 0, "seed": 0,
                     "max_epochs": 1, "patience": 1},
        "recipe": TINY_RECIPE,
    }  # fmt: skip
    tokens = _tokens(tmp_path)

    def race():
        setup.seed_everything(0)
        model = models.build(cfg, SPECIAL, seed=0)
        job = setup.prepare(model, cfg, EVAL, tokens)
        start = {n: p.detach().clone() for n, p in model.named_parameters()}
        return pretrain.Race(cfg, job, setup.train_sequences(cfg, tokens), set(start), start, tmp_path / "net")

    first = race().race_copy(1e-2)
    assert (tmp_path / "net" / pretrain.COPIES / "lr0.01" / "copy.pt").is_file()
    with caplog.at_level("INFO", logger="selfheal"):
        again = race().race_copy(1e-2)
    assert any("finished in an earlier run" in r.getMessage() for r in caplog.records)
    assert again.curve == first.curve and again.best_loss == first.best_loss
    assert all(torch.equal(again.weights[n], first.weights[n]) for n in first.weights)


def test_the_network_is_a_copy_at_its_minimum_not_one_cut_by_max_epochs():
    def copy(lr, stopped_by, best_loss):
        return pretrain.Copy(lr, [], 100, 10, best_loss, stopped_by, {})

    tolerance = 0.02  # eps_min
    # lr 0.09 is lowest but still falling when max_epochs cut it, 1.9 % below 0.03, which settled lowest of the
    # rest; 0.27 stalled high: the network is 0.03's, at its minimum
    copies = [copy(0.01, "patience", 2.17), copy(0.03, "patience", 2.16), copy(0.09, "max_epochs", 2.12)]
    copies.append(copy(0.27, "patience", 3.18))
    assert pretrain.winner(copies, tolerance).lr == 0.03
    assert pretrain.unfinished_lower(copies, tolerance).lr == 0.09
    # the copies the patience rule stopped barely moved (3.19 from 3.194), those cut by max_epochs reached 2.84: the
    # stopped ones are not what the recipe trains to, the network is the lowest (and the plateau gate judges it)
    stuck = [copy(0.01, "max_epochs", 2.86), copy(0.03, "max_epochs", 2.84), copy(0.27, "patience", 3.19)]
    assert pretrain.winner(stuck, tolerance).lr == 0.03 and pretrain.unfinished_lower(stuck, tolerance) is None
    # more than eps_min below the stopped ones, a cut copy is the network
    assert pretrain.winner([copy(0.03, "patience", 2.16), copy(0.09, "max_epochs", 2.11)], tolerance).lr == 0.09
    # a cut copy above the winner is not recorded; where every copy was cut, the lowest of them is the network
    assert pretrain.unfinished_lower([copy(0.03, "patience", 2.16), copy(0.09, "max_epochs", 2.2)], tolerance) is None
    cut = [copy(0.01, "max_epochs", 2.3), copy(0.03, "max_epochs", 2.2), copy(0.09, "diverged", 2.25)]
    assert pretrain.winner(cut, tolerance).lr == 0.03 and pretrain.unfinished_lower(cut, tolerance) is None
