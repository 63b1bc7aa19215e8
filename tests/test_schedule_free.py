"""Retraining with schedule-free AdamW (retrain.optimizer: schedulefree): evaluated at its averaged weights, without
moving the training state, so evaluations, located crossings and frozen tensors behave as with AdamW."""

import copy

import pytest
import torch

from selfheal.heal import reset
from selfheal.training import evaluation, locating, loop, objectives, state
from selfheal.training.hardware import Hardware
from conftest import CPU

CAUSAL = objectives.CausalLM({"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2})


def _settings(**kw):
    base = dict(
        lr=1e-2,
        batch_size=16,
        weight_decay=0.0,
        grad_clip=1.0,
        eval_every_examples=32,
        max_examples=160,
        warmup_steps=2,
        data_seed=0,
        optimizer="schedulefree",
        hardware=Hardware(**CPU),  # numbers compared to 1e-6 and tensors bit for bit
    )
    return state.Settings(**{**base, **kw})


def _reset_copy(model, adapter, target="L1"):
    model = copy.deepcopy(model)
    names = reset.target_names(model, adapter, target, "full")
    reset.apply(model, adapter, names, "fresh", reset.generator_for(0, target, "full"))
    return model, set(names)


def test_it_is_evaluated_at_its_averaged_weights_and_ends_there(trained_model, adapter, sequences, monkeypatch):
    """At every evaluation (``should_stop`` sees it while the model holds the training weights y), the recorded loss
    is the loss at the averaged weights x = y + (1 - 1/beta1)(z - y), not at y; the run ends holding x."""
    train, val = sequences
    model, names = _reset_copy(trained_model, adapter)
    before = {n: t.clone() for n, t in model.state_dict().items()}
    made = []
    real = loop._optimizer
    monkeypatch.setattr(loop, "_optimizer", lambda *a: made.append(real(*a)) or made[-1])  # keep a handle on it
    params = {n: p for n, p in model.named_parameters() if n in names}
    seen = []

    def check(curve):
        point = curve[-1]
        if point.steps == 0:
            return False
        (optimizer,) = made
        beta1 = optimizer.param_groups[0]["betas"][0]
        probe = copy.deepcopy(model)
        probe_params = dict(probe.named_parameters())
        with torch.no_grad():
            for n, p in params.items():
                probe_params[n].copy_(torch.lerp(p.detach(), optimizer.state[p]["z"], 1 - 1 / beta1))
        at_x, at_y = evaluation.evaluate(probe, adapter, val), evaluation.evaluate(model, adapter, val)
        seen.append((point.val_loss, at_x, at_y))
        return False

    result = loop.run(model, adapter, CAUSAL, train, val, names, _settings(), should_stop=check)
    assert seen
    for recorded, at_x, at_y in seen:
        assert recorded == pytest.approx(at_x, abs=1e-6) and abs(recorded - at_y) > 1e-6
    # the model ends at the weights its last evaluation saw
    assert result.curve[-1].val_loss == pytest.approx(evaluation.evaluate(model, adapter, val), abs=1e-6)
    after = model.state_dict()
    moved = {n for n in before if not torch.equal(before[n], after[n])}
    assert moved and moved <= names  # frozen tensors bit-identical


def test_averaged_weights_are_not_the_training_weights(trained_model, adapter, sequences):
    train, val = sequences
    model, names = _reset_copy(trained_model, adapter)
    params = {n: p for n, p in model.named_parameters() if n in names}
    optimizer = loop._optimizer(model, names, _settings())
    for p in params.values():
        p.grad = torch.ones_like(p)
    optimizer.step()
    optimizer.step()
    x = loop.averaged_weights(optimizer, params)
    optimizer.eval()  # the package's own switch to x, for comparison
    for n, p in params.items():
        torch.testing.assert_close(x[n], p.detach(), rtol=0, atol=1e-6)
    optimizer.train()
    assert any(not torch.allclose(x[n], p.detach()) for n, p in params.items())  # y differs from x


def test_evaluating_more_often_does_not_change_training(trained_model, adapter, sequences):
    """Swapping the averaged weights in for an evaluation and back is exact: the run's final weights do not depend
    on how often it evaluates (with the package's eval()/train() round trip they would drift in the last bits)."""
    train, val = sequences
    finals = []
    for every in (16, 48, 160):
        model, names = _reset_copy(trained_model, adapter)
        torch.manual_seed(0)
        loop.run(model, adapter, CAUSAL, train, val, names, _settings(eval_every_examples=every))
        finals.append({n: p.detach().clone() for n, p in model.named_parameters() if n in names})
    for other in finals[1:]:
        assert all(torch.equal(finals[0][n], other[n]) for n in finals[0])


@pytest.mark.parametrize("snapshot_mb", [locating.SNAPSHOT_BUDGET_MB, 0], ids=["kept", "replayed"])
def test_crossings_are_located_at_averaged_weights(trained_model, adapter, sequences, monkeypatch, snapshot_mb):
    """A located evaluation at step k is the averaged weights after step k: the same number a run that evaluates
    after every step records at k; the regular evaluations equal those of a run without levels."""
    monkeypatch.setattr(locating, "SNAPSHOT_BUDGET_MB", snapshot_mb)
    train, val = sequences
    model, names = _reset_copy(trained_model, adapter)
    dense = loop.run(model, adapter, CAUSAL, train, val, names, _settings(eval_every_examples=16))
    truth = {p.steps: p.val_loss for p in dense.curve}
    start = truth[0]
    levels = [start - 0.25 * (start - min(truth.values())), start - 0.75 * (start - min(truth.values()))]
    model, names = _reset_copy(trained_model, adapter)
    located = loop.run(
        model, adapter, CAUSAL, train, val, names, _settings(eval_every_examples=80), levels=levels, resolution=0.01
    )
    after = [p for p in located.curve if p.replay]
    assert after, "no crossing was located"
    for p in after:
        assert p.val_loss == pytest.approx(truth[p.steps], abs=1e-6)
    regular = [p for p in located.curve if not p.replay]
    assert all(p.val_loss == pytest.approx(truth[p.steps], abs=1e-6) for p in regular)
