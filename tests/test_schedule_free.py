"""Retraining with schedule-free AdamW (retrain.optimizer: schedulefree): evaluated at its averaged weights, without
moving the training state, so evaluations, located crossings and frozen tensors behave as with AdamW."""

import copy

import pytest
import torch

from selfheal.heal import reset
from selfheal.training import evaluation, loop, objectives, state

CAUSAL = objectives.CausalLM({"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2})


def _settings(**kw):
    base = dict(lr=1e-2, batch_size=16, weight_decay=0.0, grad_clip=1.0, eval_every_examples=32,
                max_examples=160, warmup_steps=2, data_seed=0, optimizer="schedulefree")
    return state.Settings(**{**base, **kw})


def _reset_copy(model, adapter, target="L1"):
    model = copy.deepcopy(model)
    names = reset.target_names(model, adapter, target, "full")
    reset.apply(model, adapter, names, "fresh", reset.generator_for(0, target, "full"))
    return model, set(names)


def test_it_is_evaluated_at_its_averaged_weights_and_ends_there(trained_model, adapter, sequences):
    train, val = sequences
    model, names = _reset_copy(trained_model, adapter)
    before = {n: t.clone() for n, t in model.state_dict().items()}
    result = loop.run(model, adapter, CAUSAL, train, val, names, _settings())
    # the model ends at the weights its last evaluation saw
    assert result.curve[-1].val_loss == evaluation.evaluate(model, adapter, val)
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


@pytest.mark.parametrize("snapshot_mb", [loop.SNAPSHOT_BUDGET_MB, 0], ids=["kept", "replayed"])
def test_crossings_are_located_at_averaged_weights(trained_model, adapter, sequences, monkeypatch, snapshot_mb):
    """A located evaluation at step k is the averaged weights after step k: the same number a run that evaluates
    after every step records at k; the regular evaluations equal those of a run without levels."""
    monkeypatch.setattr(loop, "SNAPSHOT_BUDGET_MB", snapshot_mb)
    train, val = sequences
    model, names = _reset_copy(trained_model, adapter)
    dense = loop.run(model, adapter, CAUSAL, train, val, names, _settings(eval_every_examples=16))
    truth = {p.steps: p.val_loss for p in dense.curve}
    start = truth[0]
    levels = [start - 0.25 * (start - min(truth.values())), start - 0.75 * (start - min(truth.values()))]
    model, names = _reset_copy(trained_model, adapter)
    located = loop.run(model, adapter, CAUSAL, train, val, names, _settings(eval_every_examples=80),
                       levels=levels, resolution=0.01)
    after = [p for p in located.curve if p.replay]
    assert after, "no crossing was located"
    for p in after:
        assert p.val_loss == pytest.approx(truth[p.steps], abs=1e-6)
    regular = [p for p in located.curve if not p.replay]
    assert all(p.val_loss == pytest.approx(truth[p.steps], abs=1e-6) for p in regular)
