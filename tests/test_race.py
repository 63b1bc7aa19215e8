"""The lr race (selfheal.training.race, run by heal.retrain): the dropping rule on hand-built crossings, the winners
per threshold, the edge extensions and their cap, and a real tiny network's race against its independent runs."""

import copy
import dataclasses
import math

import pandas as pd
import pytest
import torch
from conftest import CPU, SPECIAL, TINY_MODEL
from safetensors.torch import save_file

from selfheal import grid, models
from selfheal.heal import reset, retrain
from selfheal.records import PretrainSummary
from selfheal.training import loop, race, setup
from selfheal.training.state import Settings
from selfheal.training.evaluation import evaluate
from selfheal.training.race import Copy, Crossing

EPS = [0.01, 0.05]
EVERY = [0, 128, 256, 384, 512, 640, 768, 896, 1024, 1152, 1280]  # regular evaluations, every 128 examples


def test_the_rule_keeps_a_smaller_lr_that_can_still_win_a_tighter_threshold():
    """lr 1e-2 is first to 5 % (at 200) but never reaches 1 %; lr 3e-3 reaches 5 % later (400) and 1 % at 900.
    Raced largest first, 3e-3 must not stop once 1e-2's 5 % bound is passed: nobody has crossed 1 % yet."""
    fast = {0.05: Crossing(190, 200)}
    slow = {0.05: Crossing(390, 400), 0.01: Crossing(880, 900)}
    known = race.bounds([Copy(1e-2, fast)])
    assert known == {0.05: 200}
    for x in (256, 512, 768, 896):  # 5 % bounded at 200 <= x, but 1 %: not crossed by anyone
        assert not race.can_stop(x, [0.05] if x >= 400 else [], known, EPS)
    assert race.can_stop(1024, [0.05, 0.01], known, EPS)  # every threshold crossed by itself: it stops (met)
    stops = race.simulate({1e-2: EVERY, 3e-3: EVERY[:9]}, {1e-2: fast, 3e-3: slow}, EPS, [1e-2, 3e-3])
    assert stops == {1e-2: 1280, 3e-3: 1024}  # 1e-2 runs to its own end (its budget); 3e-3 to its 1 % crossing
    copies = [Copy(1e-2, fast), Copy(3e-3, slow)]
    assert {eps: w.lr for eps, w in race.winners(copies, EPS).items()} == {0.01: 3e-3, 0.05: 1e-2}


def test_a_dominated_copy_stops_at_the_first_evaluation_past_the_winners_bounds():
    """The winner (3e-3) crossed 5 % at 400 and 1 % at 900. A copy raced after it that crosses 5 % at 640 and would
    cross 1 % only at 1200 stops at 1024: the first regular evaluation at or past 900 (at 896 it still could win)."""
    known = race.bounds([Copy(3e-3, {0.05: Crossing(390, 400), 0.01: Crossing(880, 900)})])
    assert not race.can_stop(256, [], known, EPS)
    assert not race.can_stop(896, [0.05], known, EPS)
    assert race.can_stop(1024, [0.05], known, EPS)
    assert race.can_stop(900, [], known, EPS)  # at the bound itself: its own crossing would lie after 900
    late = {0.05: Crossing(600, 640), 0.01: Crossing(1150, 1200)}
    winner = {0.05: Crossing(390, 400), 0.01: Crossing(880, 900)}
    runs = {3e-3: EVERY[:9], 1e-3: EVERY}  # each run's own end: the first evaluation past its 1 % crossing
    assert race.simulate(runs, {3e-3: winner, 1e-3: late}, EPS, [3e-3, 1e-3]) == {3e-3: 1024, 1e-3: 1024}
    # raced the other way round, the slower copy runs to its own crossing (1280) before the faster one is known
    assert race.simulate(runs, {3e-3: winner, 1e-3: late}, EPS, [1e-3, 3e-3]) == {1e-3: 1280, 3e-3: 1024}


def test_winners_per_threshold_take_the_smallest_upper_bound_and_the_smaller_lr_on_a_tie():
    copies = [
        Copy(1e-3, {0.05: Crossing(100, 300), 0.01: Crossing(700, 800)}),
        Copy(3e-3, {0.05: Crossing(250, 300), 0.01: Crossing(820, 850)}),
        Copy(1e-2, {0.05: Crossing(200, 260)}),
        Copy(3e-2, {}, diverged=True),
    ]
    w = race.winners(copies, [0.01, 0.02, 0.05])
    assert (w[0.01].lr, w[0.02], w[0.05].lr) == (1e-3, None, 1e-2)
    assert [c.lr for c in race.tied(copies[:2], 0.05)] == [1e-3, 3e-3]  # both at 300
    assert race.winner(copies[:2], 0.05).lr == 1e-3
    # the primary: the winner of the smallest threshold reached (1 %), whatever wins elsewhere
    assert race.primary(copies, [0.01, 0.02, 0.05]).lr == 1e-3
    # none reached: the lowest final loss among the copies that did not diverge
    none = [Copy(1e-3, final_loss=4.2), Copy(3e-3, final_loss=4.1), Copy(1e-2, diverged=True, final_loss=3.0)]
    assert race.primary(none, EPS).lr == 3e-3
    assert (
        race.primary([Copy(1e-2, diverged=True, final_loss=5.0), Copy(3e-2, diverged=True, final_loss=4.0)], EPS).lr
        == 3e-2
    )


def test_a_winner_at_an_edge_extends_the_grid_up_to_the_cap_and_not_past_a_divergence():
    grid_ = [1e-3, 3e-3, 1e-2, 3e-2]
    interior = [Copy(lr, {0.05: Crossing(100, 200 if lr == 3e-3 else 400)}) for lr in grid_]
    assert race.next_lr(interior, EPS, grid_, 2) is None
    assert race.at_edge(interior, EPS) == {0.01: None, 0.05: False}
    top = [Copy(lr, {0.05: Crossing(100, 150 if lr == 3e-2 else 400)}) for lr in grid_]
    assert race.next_lr(top, EPS, grid_, 2) == pytest.approx(9e-2)
    assert race.next_lr(top, EPS, grid_, 0) is None  # the cap: flagged instead
    assert race.at_edge(top, EPS) == {0.01: None, 0.05: True}
    # the next lr (9e-2) wins too: 0.27 next; then it is no longer alone at the edge once 0.27 is slower
    more = [*top, Copy(9e-2, {0.05: Crossing(100, 120)})]
    assert race.next_lr(more, EPS, grid_, 2) == pytest.approx(0.27)
    settled = [*more, Copy(0.27, {0.05: Crossing(100, 140)})]
    assert race.next_lr(settled, EPS, grid_, 2) is None
    assert race.at_edge(settled, EPS)[0.05] is False  # 9e-2 wins, inside the grid now
    # the top copy crossed first and diverged after: its side is bounded, the winner flagged at the edge
    diverged = [*top[:3], Copy(3e-2, {0.05: Crossing(100, 150)}, diverged=True)]
    assert race.next_lr(diverged, EPS, grid_, 2) is None
    assert race.at_edge(diverged, EPS)[0.05] is True
    # the bottom wins 1 %: extended down (÷ 3); a tie with an inner lr is no edge
    bottom = [Copy(lr, {0.01: Crossing(500, 600 if lr == 1e-3 else 900)}) for lr in grid_]
    assert race.next_lr(bottom, EPS, grid_, 2) == pytest.approx(1e-3 / 3)
    spent = [*top, Copy(9e-2, {0.05: Crossing(100, 120)}), Copy(0.27, {0.05: Crossing(100, 110)})]
    assert race.next_lr(spent, EPS, grid_, 2) is None  # two extensions above: the cap, the winner flagged
    assert race.at_edge(spent, EPS)[0.05] is True
    tie = [Copy(lr, {0.01: Crossing(500, 600 if lr in (1e-3, 3e-3) else 900)}) for lr in grid_]
    assert race.next_lr(tie, EPS, grid_, 2) is None and race.at_edge(tie, EPS)[0.01] is False


def test_the_run_orders():
    lrs = [3e-3, 1e-3, 3e-2, 1e-2]
    assert race.order(lrs, "descending") == [3e-2, 1e-2, 3e-3, 1e-3]
    assert race.order(lrs, "ascending") == [1e-3, 3e-3, 1e-2, 3e-2]
    assert race.order(lrs, "middle_out") == [1e-2, 3e-3, 3e-2, 1e-3]
    with pytest.raises(ValueError):
        race.order(lrs, "random")


# -- a real tiny network's race ----------------------------------------------------------------------------------

LRS = [1e-3, 3e-3, 1e-2, 3e-2]
TIMING = ["wall_s"]  # the only column that differs between identical runs


def _markov_stream(n: int, seed: int) -> torch.Tensor:
    """Token ids 3..63 where each follows the one before by a fixed permutation 4 times in 5, else drawn at random:
    a sequence a small model learns, so a reset layer costs it something to relearn."""
    follow = torch.randperm(61, generator=torch.Generator().manual_seed(0)) + 3  # one chain for train and val
    g = torch.Generator().manual_seed(seed)
    out = torch.empty(n, dtype=torch.int32)
    out[0] = 3
    jump = torch.rand(n, generator=g) < 0.2
    noise = torch.randint(3, 64, (n,), generator=g, dtype=torch.int32)
    for i in range(1, n):
        out[i] = noise[i] if jump[i] else follow[out[i - 1] - 3]
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny GPT-2 pretrained briefly on a Markov stream, its job and train sequences, and a cell's settings."""
    tmp_path = tmp_path_factory.mktemp("race")
    save_file(
        {"train": _markov_stream(16 * 300, 0), "val": _markov_stream(16 * 40, 1)},
        str(tmp_path / "tokens.safetensors"),
        metadata={k: str(v) for k, v in SPECIAL.items()},
    )
    model_cfg = {
        **TINY_MODEL,
        "hardware": CPU,
        "source": "scratch",
        "pretrain": {"train_sequences": 256, "seed": 0, "max_epochs": 2},
        "retrain": {
            "eval_every_examples": 32,
            "budget_fraction": 0.5,
            "thresholds": [0.01, 0.05, 0.10],
            "checkpoint_every_steps": 0,
        },
        "recipe": {"lrs": LRS, "max_lr_extensions": 1, "batch_size": 8, "warmup_steps": 2, "weight_decay": 0.0},
    }
    eval_cfg = {"val_sequences": 32, "batch_size": 16}
    tokens = str(tmp_path / "tokens.safetensors")
    setup.seed_everything(0, 1)  # one thread: as a heal job runs (two contend on a loaded 2-core machine)
    base = models.build(TINY_MODEL, SPECIAL, seed=0)
    job = setup.prepare(base, model_cfg, eval_cfg, tokens)
    seqs = setup.train_sequences(model_cfg, tokens)
    every = {n for n, _ in base.named_parameters()}
    s = Settings(
        lr=1e-2,
        batch_size=16,
        weight_decay=0.0,
        grad_clip=1.0,
        eval_every_examples=1024,
        max_examples=2048,
        warmup_steps=5,
        hardware=job.hardware,
    )
    loop.run(base, job.family, job.objective, seqs, job.val_batches, every, s)
    base.requires_grad_(False)
    return base, job, seqs, model_cfg, tmp_path


CELL = grid.Cell("t", "L0", "full", "fresh", "frozen", 0)
PRE = PretrainSummary("t", "gpt2", 3, 16, 1000, train_sequences=256, epochs=2)


def _race(tiny, recipe=None, folder=None, retrain_cfg=None, copies_per_pass=1):
    base, job, seqs, model_cfg, _ = tiny
    job = dataclasses.replace(job, hardware=dataclasses.replace(job.hardware, copies_per_pass=copies_per_pass))
    cfg = {
        **model_cfg,
        "recipe": {**model_cfg["recipe"], **(recipe or {})},
        "retrain": {**model_cfg["retrain"], **(retrain_cfg or {})},
    }
    setup.seed_everything(0)
    model = copy.deepcopy(base)
    names = reset.draw(model, job.family, CELL.target, CELL.policy, CELL.init, CELL.seed)
    damaged = evaluate(model, job.family, job.val_batches)
    baseline = evaluate(base, job.family, job.val_batches)
    result, curve, table = retrain.retrain(
        model, job.family, job, seqs, cfg, CELL, names, baseline, damaged, PRE, folder=folder
    )
    return model, set(names), result, curve, table


def test_a_tiny_race_gives_the_minimum_of_the_independent_runs(tiny):
    base, *_ = tiny
    model, trainable, result, curve, table = _race(tiny)
    frozen = {n: p for n, p in base.named_parameters() if n not in trainable}
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)  # bit for bit
    # the same seed, the same numbers
    again = _race(tiny)
    pd.testing.assert_frame_equal(table.drop(columns=TIMING), again[4].drop(columns=TIMING), check_exact=True)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again[0].parameters()))
    # each lr raced on its own, to its own stops
    alone = {lr: _race(tiny, {"lrs": [lr], "max_lr_extensions": 0}) for lr in result.lrs}
    assert set(result.lrs) >= set(LRS)
    for rec in result.recoveries:
        crossed = [
            (a[2].recoveries[i], lr)
            for lr, a in alone.items()
            for i in range(3)
            if a[2].recoveries[i].threshold == rec.threshold and a[2].recoveries[i].recovered
        ]
        if not crossed:
            assert not rec.recovered
            continue
        best, lr = min(crossed, key=lambda x: (x[0].examples, x[1]))
        assert (rec.recovered, rec.examples, rec.examples_lo, rec.lr) == (True, best.examples, best.examples_lo, lr)
    # each copy ran its independent run up to where it stopped, and no longer than it
    for lr, (_, _, _, own, _) in alone.items():
        raced = table[table["lr"] == lr].drop(columns=["lr", "order", "stop", *TIMING]).reset_index(drop=True)
        pd.testing.assert_frame_equal(raced, own.drop(columns=TIMING).iloc[: len(raced)], check_exact=True)
    # the cell's curve and weights are its primary copy's: the independent run of that lr, to its end
    primary = alone[result.lr]
    pd.testing.assert_frame_equal(curve.drop(columns=TIMING), primary[3].drop(columns=TIMING), check_exact=True)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), primary[0].parameters()))
    assert result.final_loss == primary[2].final_loss
    # the race trained fewer examples than the independent runs together
    ran = table.groupby("lr")["examples"].max().sum()
    assert ran < sum(a[3]["examples"].max() for a in alone.values())
    # this cell's thresholds are won by different lrs (a larger one first to 10 % is not first to 1 %)
    assert len({rec.lr for rec in result.recoveries}) > 1


def _messages(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


SHORT = {"budget_fraction": 0.25}  # 128 examples: some copies run to the budget


def test_a_race_keeps_its_copies_and_continues_them_under_a_larger_budget(tiny, tmp_path, caplog):
    folder = str(tmp_path / "cell")
    model, _, result, curve, table = _race(tiny, folder=folder, retrain_cfg=SHORT)
    assert "budget" in set(table["stop"]) and result.settled_examples is None
    retrain.remove_checkpoints(folder)  # as the heal unit does once the cell's outputs are written
    assert not list((tmp_path / "cell").rglob(retrain.CHECKPOINT))
    # run again: every copy kept from its record, the primary's weights read back, nothing trained
    caplog.clear()
    with caplog.at_level("INFO", logger="selfheal"):
        again = _race(tiny, folder=folder, retrain_cfg=SHORT)
    assert len(_messages(caplog, "in an earlier run of this cell: kept")) == len(result.lrs)
    assert not _messages(caplog, "trained again") and not _messages(caplog, "stopped (budget) at")
    pd.testing.assert_frame_equal(table, again[4], check_exact=True)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again[0].parameters()))
    # the primary copy's weights missing: it alone is trained again, to the same weights
    (tmp_path / "cell" / "race" / "primary.pt").unlink()
    caplog.clear()
    with caplog.at_level("INFO", logger="selfheal"):
        rebuilt = _race(tiny, folder=folder, retrain_cfg=SHORT)
    assert _messages(caplog, f"the primary copy, lr {result.lr:g}, was kept without its weights: trained again")
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), rebuilt[0].parameters()))
    assert (tmp_path / "cell" / "race" / "primary.pt").is_file()  # kept again, for the next run
    # a copy whose record is missing (a job killed while it trained) is trained again, to the same numbers
    (tmp_path / "cell" / "race" / f"lr{result.lrs[1]:.6g}" / retrain.RECORD).unlink()
    caplog.clear()
    with caplog.at_level("INFO", logger="selfheal"):
        killed = _race(tiny, folder=folder, retrain_cfg=SHORT)
    assert len(_messages(caplog, "in an earlier run of this cell: kept")) == len(result.lrs) - 1
    pd.testing.assert_frame_equal(table.drop(columns=TIMING), killed[4].drop(columns=TIMING), check_exact=True)
    # a larger budget: the copies that settled are kept, the others continue from their last regular evaluation,
    # to the numbers of a race given that budget from the start
    larger = {"budget_fraction": 0.8}
    caplog.clear()
    with caplog.at_level("INFO", logger="selfheal"):
        extended = _race(tiny, folder=folder, retrain_cfg=larger)
    assert _messages(caplog, "continues a run with a smaller budget")
    fresh = _race(tiny, retrain_cfg=larger)
    pd.testing.assert_frame_equal(extended[4].drop(columns=TIMING), fresh[4].drop(columns=TIMING), check_exact=True)
    assert [(r.examples, r.examples_lo, r.lr) for r in extended[2].recoveries] == [
        (r.examples, r.examples_lo, r.lr) for r in fresh[2].recoveries
    ]
    assert all(torch.equal(a, b) for a, b in zip(extended[0].parameters(), fresh[0].parameters()))
    assert extended[2].budget_examples == fresh[2].budget_examples == 410


def _losses(table, lr):
    rows = table[table["lr"] == lr].sort_values("steps")
    return list(zip(rows["examples"], rows["steps"], rows["replay"])), list(rows["val_loss"])


@pytest.mark.parametrize(
    "lrs, k, stops",
    [
        (LRS, 4, {"met", "dropped"}),  # the grid in one pass, its edge extension (9e-2) alone after it
        (LRS + [30.0], 3, {"met", "dropped", "diverged"}),  # two passes, the second against the first's crossings
    ],
)
def test_a_race_in_one_pass_gives_the_race_copy_by_copy(tiny, tmp_path, caplog, lrs, k, stops):
    """The grid's copies trained k at a time in one pass (``hardware.copies_per_pass``): the same winners and
    crossing intervals at every threshold as the race one copy after another, each copy's curve the same evaluations
    with the same losses to 1e-4 (the stacked products round differently) up to where the earlier stop of the two cut
    it, never longer than the sequential copy's own run, the same reasons to stop, and frozen tensors bit-identical.
    A copy that diverges (lr 30) leaves the pass at the same step as alone."""
    base, *_ = tiny
    recipe = {"lrs": lrs}
    alone = _race(tiny, recipe)
    with caplog.at_level("INFO", logger="selfheal"):
        model, trainable, result, curve, table = _race(tiny, recipe, copies_per_pass=k, folder=str(tmp_path / "cell"))
    assert _messages(caplog, f"{k} copies in one pass")
    assert set(table["stop"]) == set(alone[4]["stop"]) == stops
    assert [(r.threshold, r.recovered, r.examples_lo, r.examples, r.lr) for r in result.recoveries] == [
        (r.threshold, r.recovered, r.examples_lo, r.examples, r.lr) for r in alone[2].recoveries
    ]
    assert result.lr == alone[2].lr and result.lrs == alone[2].lrs
    assert len({r.lr for r in result.recoveries}) > 1  # a real race: different lrs win different thresholds
    for lr in result.lrs:
        together_points, together_losses = _losses(table, lr)
        alone_points, alone_losses = _losses(alone[4], lr)
        n = min(len(together_points), len(alone_points))
        assert together_points[:n] == alone_points[:n]
        if set(table[table["lr"] == lr]["stop"]) == {"diverged"}:  # chaotic: its rounding grows 15 % in 32 examples
            assert set(alone[4][alone[4]["lr"] == lr]["stop"]) == {"diverged"}
            continue
        assert all(math.isclose(a, b, rel_tol=1e-4) for a, b in zip(together_losses[:n], alone_losses[:n]))
        # the pass's dropping rule reads every copy at once: it stops a copy no later than one after another
        assert table[table["lr"] == lr]["examples"].max() <= alone[4][alone[4]["lr"] == lr]["examples"].max()
    frozen = {n: p for n, p in base.named_parameters() if n not in trainable}
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    # the cell ends at its primary copy's weights: those of the sequential race to rounding, but for the attention's
    # key bias, whose gradient is zero but for rounding (softmax ignores a shift shared by every key), which Adam
    # scales up to steps of the lr in both runs: it changes no loss
    d = TINY_MODEL["d_model"]
    for (name, a), b in zip(model.named_parameters(), alone[0].parameters()):
        if name.endswith("attn.c_attn.bias"):
            a, b = torch.cat([a[:d], a[2 * d :]]), torch.cat([b[:d], b[2 * d :]])
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6), name
    assert math.isclose(result.final_loss, alone[2].final_loss, rel_tol=1e-5)
    # the copies keep their records: run again, nothing trains; the primary's weights missing, it alone trains
    caplog.clear()
    with caplog.at_level("INFO", logger="selfheal"):
        again = _race(tiny, recipe, copies_per_pass=k, folder=str(tmp_path / "cell"))
    assert len(_messages(caplog, "in an earlier run of this cell: kept")) == len(result.lrs)
    pd.testing.assert_frame_equal(table, again[4], check_exact=True)
    (tmp_path / "cell" / "race" / "primary.pt").unlink()
    caplog.clear()
    with caplog.at_level("INFO", logger="selfheal"):
        rebuilt = _race(tiny, recipe, copies_per_pass=k, folder=str(tmp_path / "cell"))
    assert _messages(caplog, f"the primary copy, lr {result.lr:g}, was kept without its weights: trained again")
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(model.parameters(), rebuilt[0].parameters()))
