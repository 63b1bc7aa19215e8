"""The training side's scientifically critical functions, each on the input its shipped configs give it and a test
would otherwise leave out: the evaluation on a validation set whose last batch is short, with dropout on; the
reset's random stream per (seed, target, policy); the stall rule with evaluations replayed inside an interval.
Expected values come from a route other than the code under test (the model's own forward, numpy's fit)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch
from conftest import SPECIAL, TINY_MODEL, trained_like

from selfheal import models
from selfheal.heal import reset, stall
from selfheal.models import families
from selfheal.training import evaluation, objectives
from selfheal.training.state import CurvePoint

CAUSAL = objectives.CausalLM(SPECIAL)


def _model(dropout: float) -> torch.nn.Module:
    torch.manual_seed(0)
    return trained_like(models.build({**TINY_MODEL, "dropout": dropout}, SPECIAL, seed=0), seed=3)


def _val(n: int, seed: int = 5) -> torch.Tensor:
    return torch.randint(3, 64, (n, TINY_MODEL["context"]), generator=torch.Generator().manual_seed(seed))


# -- evaluate: weighted by batch size (config/full.yaml's validation set ends with a short batch) ---------------------


def test_a_short_last_batch_counts_by_its_size():
    model = _model(0.0).eval()
    val = _val(5)
    batches = CAUSAL.val_batches(val, 2)
    assert [b["input_ids"].shape[0] for b in batches] == [2, 2, 1]
    # the model's own loss over all five sequences at once: every sequence has the same length, so the token mean is
    # the mean over sequences, each counting once
    with torch.no_grad():
        expected = model(input_ids=val, labels=val).loss.item()
        per_batch = [model(input_ids=b["input_ids"], labels=b["input_ids"]).loss.item() for b in batches]
    unweighted = sum(per_batch) / len(per_batch)
    assert abs(unweighted - expected) > 1e-3  # the test can tell the two apart
    assert evaluation.evaluate(model, families.GPT2(), batches) == pytest.approx(expected, rel=1e-6)


# -- evaluate: dropout off while it measures, the training mode given back (config/full.yaml: dropout 0.1) --------------


def test_evaluate_turns_dropout_off_and_gives_back_the_training_mode():
    model = _model(0.1)
    batches = CAUSAL.val_batches(_val(4), 2)
    model.eval()
    with torch.no_grad():
        expected = sum(model(input_ids=b["input_ids"], labels=b["input_ids"]).loss.item() for b in batches) / 2
    model.train()
    first = evaluation.evaluate(model, families.GPT2(), batches)
    assert model.training and all(m.training for m in model.modules())
    second = evaluation.evaluate(model, families.GPT2(), batches)
    assert first == second == pytest.approx(expected, rel=1e-6)  # no dropout noise in either
    # training after an evaluation still drops activations: two forwards in train mode differ
    with torch.no_grad():
        a = model(input_ids=batches[0]["input_ids"]).logits
        b = model(input_ids=batches[0]["input_ids"]).logits
    assert not torch.equal(a, b)
    # and a model evaluated in eval mode stays in it
    model.eval()
    evaluation.evaluate(model, families.GPT2(), batches)
    assert not any(m.training for m in model.modules())


def test_per_sequence_gives_back_the_training_mode_too():
    model = _model(0.1).train()
    out = evaluation.per_sequence(model, families.GPT2(), CAUSAL.val_batches(_val(3), 2))
    assert out.shape == (3,) and model.training


# -- the reset's random stream: one per (seed, target, policy) ---------------------------------------------------------


def test_the_generator_key_is_seed_target_and_policy():
    # the documented key, spelled out here: crc32 of "seed:target:policy"
    assert reset.generator_for(3, "L2", "mlp").initial_seed() == zlib.crc32(b"3:L2:mlp")
    draws = {
        (seed, target, policy): torch.rand(4, generator=reset.generator_for(seed, target, policy)).tolist()
        for seed in (0, 1)
        for target in ("L0", "L1")
        for policy in ("full", "attn", "self_attn", "mlp")
    }
    assert len({tuple(v) for v in draws.values()}) == len(draws)  # every cell its own stream


def test_two_policies_naming_the_same_tensors_draw_them_differently():
    """GPT-2's ``attn`` and ``self_attn`` name the same four tensors: two cells of one seed and layer that differ only
    in policy must not start from the same weights."""
    adapter = families.GPT2()
    drawn = {}
    for policy in ("attn", "self_attn"):
        model = _model(0.0)
        names = reset.draw(model, adapter, "L1", policy, "fresh", seed=0)
        params = dict(model.named_parameters())
        drawn[policy] = {n: params[n].detach().clone() for n in names}
    assert drawn["attn"].keys() == drawn["self_attn"].keys()
    weight = "transformer.h.1.attn.c_attn.weight"
    assert not torch.equal(drawn["attn"][weight], drawn["self_attn"][weight])
    # the same cell twice draws the same numbers
    again = _model(0.0)
    reset.draw(again, adapter, "L1", "attn", "fresh", seed=0)
    assert torch.equal(dict(again.named_parameters())[weight], drawn["attn"][weight])


# -- the stall rule reads the regular evaluations only -------------------------------------------------------------------


def _point(examples: int, loss: float, replay: bool = False) -> CurvePoint:
    return CurvePoint(examples, examples * 16, examples // 8, 0.0, loss, None if replay else loss, replay)


def test_replayed_evaluations_do_not_count_in_the_stall_rule():
    """A curve falling 0.2 nats per doubling over its regular evaluations, with evaluations replayed inside its
    intervals (to locate a crossing) that scatter widely: still falling by its regular evaluations, stalled if the
    replays counted."""
    regular = [1000, 1200, 1400, 1600, 1800, 2000]
    wiggle = [0.001, -0.001, 0.001, -0.001, 0.001, -0.001]
    losses = [3.0 - 0.2 * np.log2(x / 1000) + w for x, w in zip(regular, wiggle)]
    replays = [(1100, 4.0), (1300, 2.0), (1500, 4.0), (1700, 2.0), (1900, 4.0)]
    curve = [_point(x, y) for x, y in zip(regular, losses)] + [_point(x, y, replay=True) for x, y in replays]
    curve.sort(key=lambda p: p.examples)
    # numpy's least squares on the regular evaluations in [end / 2, end]: a fall of about 0.2 per doubling
    slope, _ = np.polyfit(np.log2(regular), losses, 1)
    trend = stall.of_curve(curve)
    assert trend.points == 6
    assert trend.fall == pytest.approx(-slope, rel=1e-9)
    assert trend.fall == pytest.approx(0.2, abs=0.01)
    assert not trend.stalled
    # all eleven together would read as stalled (the replays' scatter swamps the fall)
    everything = stall.last_doubling([p.examples for p in curve], [p.val_loss for p in curve])
    assert everything.points == 11 and everything.stalled
