"""Training: frozen tensors stay bit-identical, the split forward equals the model's own, seeds are deterministic."""

import pytest
import torch

from selfheal.training import objectives
from selfheal.heal import reset
from selfheal.heal import retrain
from selfheal.training import loop
from selfheal.training import state
from selfheal.training import evaluation
from selfheal.training import setup
from selfheal.training.hardware import Hardware
from conftest import CPU

CAUSAL = objectives.CausalLM({"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2})


def _settings(**kw):
    base = dict(
        lr=1e-2,
        batch_size=16,
        weight_decay=0.1,
        grad_clip=1.0,
        eval_every_examples=32,
        max_examples=96,
        warmup_steps=2,
        data_seed=0,
        hardware=Hardware(**CPU),
    )
    return state.Settings(**{**base, **kw})


def test_split_forward_matches_model_forward(trained_model, adapter, sequences):
    _, val_batches = sequences
    val = val_batches[0]["input_ids"]
    expected = trained_model(input_ids=val, labels=val).loss.item()
    assert evaluation.evaluate(trained_model, adapter, val_batches) == pytest.approx(expected, rel=1e-5)
    # and with the first two layers run under no_grad: same number
    assert adapter.loss(trained_model, {"input_ids": val}, 2).item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("regime", ["frozen", "layer", "full"])
@pytest.mark.parametrize("policy", ["full", "attn", "ln"])
def test_only_trainable_tensors_move(trained_model, adapter, sequences, regime, policy):
    train_seqs, val = sequences
    names = reset.target_names(trained_model, adapter, "L1", policy)
    reset.apply(trained_model, adapter, names, "fresh", reset.generator_for(0, "L1", policy))
    trainable = retrain.trainable_names(trained_model, adapter, regime, "L1", names)
    before = {n: t.clone() for n, t in trained_model.state_dict().items()}
    loop.run(trained_model, adapter, CAUSAL, train_seqs, val, trainable, _settings())
    after = trained_model.state_dict()
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    frozen = set(before) - trainable - {"lm_head.weight"}  # lm_head is tied to wte
    assert changed.isdisjoint(frozen), f"frozen tensors moved: {sorted(changed & frozen)[:5]}"
    assert set(names) <= changed  # the reset tensors did train
    if regime == "frozen":
        assert trainable == set(names)
        assert torch.equal(before["transformer.wte.weight"], after["transformer.wte.weight"])


def test_frozen_prefix_runs_without_autograd(trained_model, adapter, sequences):
    train_seqs, val = sequences
    names = reset.target_names(trained_model, adapter, "L2", "full")
    assert loop.first_trainable_depth(adapter, trained_model, set(names)) == 2
    assert loop.first_trainable_depth(adapter, trained_model, {"transformer.wte.weight"}) == 0
    assert loop.first_trainable_depth(adapter, trained_model, {"transformer.ln_f.weight"}) == 3
    seen = []
    hook = trained_model.transformer.h[0].register_forward_hook(lambda m, i, o: seen.append(torch.is_grad_enabled()))
    loop.run(trained_model, adapter, CAUSAL, train_seqs, val, set(names), _settings(max_examples=32))
    hook.remove()
    assert seen and not any(seen)  # layer 0 never ran with grad enabled


def test_same_seed_same_numbers(adapter, sequences):
    from conftest import SPECIAL, TINY_MODEL, trained_like

    from selfheal import models

    def once(seed):
        torch.manual_seed(0)
        model = trained_like(models.build(TINY_MODEL, SPECIAL, seed=0))
        names = reset.target_names(model, adapter, "L0", "full")
        reset.apply(model, adapter, names, "fresh", reset.generator_for(seed, "L0", "full"))
        setup.seed_everything(seed)
        result = loop.run(model, adapter, CAUSAL, *sequences, set(names), _settings(data_seed=seed))
        return [p.val_loss for p in result.curve], model.state_dict()

    a_curve, a_state = once(0)
    b_curve, b_state = once(0)
    c_curve, _ = once(1)
    assert a_curve == b_curve
    assert all(torch.equal(a_state[n], b_state[n]) for n in a_state)
    assert a_curve != c_curve


def test_should_stop_ends_training_at_that_evaluation(trained_model, adapter, sequences):
    names = reset.target_names(trained_model, adapter, "L0", "full")
    result = loop.run(
        trained_model,
        adapter,
        CAUSAL,
        *sequences,
        set(names),
        _settings(max_examples=960),
        should_stop=lambda curve: curve[-1].examples >= 64,
    )
    assert result.stopped_early
    assert [p.examples for p in result.curve] == [0, 32, 64]


def test_nothing_trainable_evaluates_once(trained_model, adapter, sequences):
    result = loop.run(trained_model, adapter, CAUSAL, *sequences, set(), _settings())
    assert [p.examples for p in result.curve] == [0]


def test_non_finite_loss_marks_divergence_and_stops(trained_model, adapter, sequences):
    names = reset.target_names(trained_model, adapter, "L1", "full")
    with torch.no_grad():
        dict(trained_model.named_parameters())["transformer.h.1.mlp.c_fc.weight"].fill_(float("inf"))
    result = loop.run(trained_model, adapter, CAUSAL, *sequences, set(names), _settings(max_examples=960))
    assert result.diverged_step == 0
    assert [p.examples for p in result.curve] == [0]  # stopped at once, the evaluation at 0 kept


def test_exploding_loss_counts_as_divergence(trained_model, adapter, sequences):
    names = reset.target_names(trained_model, adapter, "L1", "full")
    result = loop.run(
        trained_model,
        adapter,
        CAUSAL,
        *sequences,
        set(names),
        _settings(lr=50.0, grad_clip=0.0, warmup_steps=0, max_examples=960, eval_every_examples=960),
    )
    assert result.diverged_step is not None and result.diverged_step > 0
    assert result.diverged_step < 960 // 16  # stopped before the budget ran out


def test_jobs_keep_freed_memory_on_glibc():
    """Every job's set-up asks glibc to keep freed blocks (measured: page faults were a fifth of a CPU step)."""
    import platform

    from selfheal.training import hardware

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    assert hardware.keep_freed_memory() is True
