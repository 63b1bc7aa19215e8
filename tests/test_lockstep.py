"""K runs of a reset layer in one pass (``training.lockstep``) equal ``loop.run`` at each lr alone: the same
evaluations (regular ones, the budget's end and those that locate a level's crossing), their losses to 1e-4, the
same stops. Real GPT-2 and BERT classes (BERT's masks give rows different numbers of targets), the first layer and
a deeper one from the prefix cache; the race built on it is tested in tests/test_race.py."""

import math

import pytest
import torch

from selfheal import models
from selfheal.heal import reset
from selfheal.heal.prefix_cache import PrefixCache
from selfheal.models import families
from selfheal.training import lockstep, loop, objectives, recipe
from selfheal.training.evaluation import evaluate
from selfheal.training.hardware import Hardware

SPECIAL = {"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}
GPT2 = {"name": "g", "arch": "gpt2", "n_layer": 3, "d_model": 16, "n_head": 2, "context": 16, "dropout": 0.0}
BERT = {**GPT2, "name": "b", "arch": "bert"}
BART = {**GPT2, "name": "a", "arch": "bart", "n_layer": 2}
LRS = [1e-2, 3e-2, 1e-1]
RECIPE = {"batch_size": 8, "weight_decay": 0.1, "warmup_steps": 3}


def _markov(n, generator):
    """Sequences where each token follows the one before by a fixed permutation: a layer learns it from scratch."""
    follow = torch.randperm(61, generator=torch.Generator().manual_seed(0)) + 3
    out = torch.empty(n, 16, dtype=torch.long)
    out[:, 0] = torch.randint(3, 64, (n,), generator=generator)
    for t in range(1, 16):
        out[:, t] = follow[out[:, t - 1] - 3]
    return out


def _setup(cfg, depth, target=None, policy="full", dtype=torch.float32):
    """A model with one cell reset: layer ``depth`` (all its tensors, redrawn), or ``target`` and ``policy`` as the
    workflow resets them (``heal.reset.draw``: a BART decoder layer's cross-attention, a swapped encoder)."""
    torch.manual_seed(0)
    model = models.build(cfg, SPECIAL, seed=0)
    family = families.for_model(model)
    objective = objectives.for_family(family, SPECIAL)
    generator = torch.Generator().manual_seed(3)
    train = _markov(40, generator)
    val = objective.val_batches(_markov(16, generator), 8)
    if target is not None:
        with torch.no_grad():  # as if trained: no tensor at its init, so a reset changes every one it names
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=generator) * 0.02)
        names = set(reset.draw(model, family, target, policy, "fresh", 0))
        return model.to(dtype), family, objective, train, val, names
    layer = family.layers(model)[depth]
    trainable = {n for n, _ in model.named_parameters() if n.startswith(layer.prefix)}
    with torch.no_grad():  # a reset layer: its loss has something to recover
        for n, p in model.named_parameters():
            if n in trainable and p.ndim >= 2:
                p.normal_(0.0, 0.2, generator=generator)
    return model, family, objective, train, val, trainable


def _load(model, weights):
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(weights[n])


def _settings(lr, budget):
    return recipe.settings(
        RECIPE, lr, eval_every_examples=48, max_examples=budget, data_seed=5, hardware=Hardware("cpu")
    )


@pytest.mark.parametrize(
    "cfg, depth, cached, lrs, below, target",
    [
        (GPT2, 0, False, LRS, (0.985, 0.975), None),
        (GPT2, 1, True, LRS, (0.985, 0.975), None),
        # BART: every tensor batched over the copies (lockstep's StackedModel), the whole loss vmapped
        (BART, None, False, LRS, (0.985, 0.975), ("dec.0", "cross_attn")),
        # a fresh encoder of another width, in fp64: from scratch, fp32 rounding grows to 4e-3 of the loss in 60
        # steps (in fp64 the two ways agree to 1e-6, mostly bit for bit)
        (BART, None, False, LRS, (0.99, 0.985), ("swap24", "full", torch.float64)),
        # not above 3e-2: this BERT is chaotic once clipping binds (a rounding-level difference in the clipped norm
        # grows to 2.5e-4 of the loss at lr 6e-2, 2.5e-3 at 0.1, in 40 steps, in fp64 as in fp32)
        (BERT, 1, False, [3e-3, 1e-2, 3e-2], (0.9995, 0.999), None),  # its masked loss falls slowly here
    ],
)
def test_copies_in_one_pass_are_the_runs_alone(cfg, depth, cached, lrs, below, target):
    dtype = target[2] if target and len(target) > 2 else torch.float32
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        _compare(cfg, depth, cached, lrs, below, target)
    finally:
        torch.set_default_dtype(default)


def _compare(cfg, depth, cached, lrs, below, target):
    model, family, objective, train, val, trainable = _setup(cfg, depth, *(target or ()))
    cache = PrefixCache.build(model, family, train, val, depth, torch.device("cpu")) if cached else None
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    damaged = evaluate(model, family, val, cache)
    levels = [damaged * below[0], damaged * below[1]]  # crossed inside an interval: located by kept weights
    budget = 500  # not a multiple of the batch: the budget's last batch is cut short and evaluated

    def stop_early(curve):  # a rule that reads the copy's own curve: below the lower level for two evaluations
        return sum(p.val_loss <= levels[1] for p in curve if not p.replay) >= 2

    alone = []
    for lr in lrs:
        _load(model, start)
        alone.append(
            loop.run(
                model,
                family,
                objective,
                train,
                val,
                trainable,
                _settings(lr, budget),
                should_stop=stop_early,
                cache=cache,
                levels=levels,
                resolution=0.05,
                start_loss=damaged,
            )
        )
    _load(model, start)
    together = lockstep.run(
        model,
        family,
        objective,
        train,
        val,
        trainable,
        [_settings(lr, budget) for lr in lrs],
        should_stop=lambda i, curves: stop_early(curves[i]),
        cache=cache,
        levels=levels,
        resolution=0.05,
        start_loss=damaged,
    )
    replays = 0
    for lr, a, b in zip(lrs, alone, together):
        got, want = b.result.curve, a.curve
        assert [(p.examples, p.steps, p.replay) for p in got] == [(p.examples, p.steps, p.replay) for p in want], lr
        assert all(math.isclose(p.val_loss, q.val_loss, rel_tol=1e-4) for p, q in zip(got, want)), (
            lr,
            max(abs(p.val_loss - q.val_loss) / q.val_loss for p, q in zip(got, want)),
        )
        assert (b.result.settled_at, b.result.diverged_step) == (a.settled_at, a.diverged_step)
        replays += sum(p.replay for p in got)
    assert replays > 0  # some crossing was located between evaluations
    assert {a.settled_at is None for a in alone} == {True, False}  # some copies stop early, others at the budget
    frozen = {n for n in start if n not in trainable}
    assert all(torch.equal(p, start[n]) for n, p in model.named_parameters() if n in frozen)
    # the first copy's final weights are in the model
    assert all(torch.equal(p, together[0].weights[n]) for n, p in model.named_parameters() if n in trainable)


def test_how_copies_share_a_pass():
    model, family, objective, train, val, trainable = _setup(GPT2, 0)
    assert lockstep.plan(family, model, trainable) == ("layer", 0)
    assert lockstep.plan(family, model, trainable | {"transformer.wte.weight"}) == ("model", 0)  # not one layer
    attention = {n for n in trainable if "attn" in n}
    assert lockstep.plan(family, model, attention) == ("model", 0)  # part of a layer
    bart = models.build(BART, SPECIAL, seed=0)
    assert lockstep.plan(families.for_model(bart), bart, {"model.decoder.layers.0.fc1.weight"}) == ("model", 2)
    assert lockstep.plan(family, model, set()) is None
    dropping = models.build({**GPT2, "dropout": 0.1}, SPECIAL, seed=0)
    assert lockstep.plan(family, dropping, trainable) is None  # a mask per copy is not the mask of its run
    bart_dropping = models.build({**BART, "dropout": 0.1}, SPECIAL, seed=0)
    assert (
        lockstep.plan(families.for_model(bart_dropping), bart_dropping, {"model.encoder.layers.0.fc1.weight"}) is None
    )
    assert lockstep.copies_per_pass("auto", torch.device("cpu"), 4, model, 3, 8, 16) == 1  # a CPU: one at a time
    assert lockstep.copies_per_pass(3, torch.device("cpu"), 5, model, 3, 8, 16) == 3
    assert lockstep.copies_per_pass(8, torch.device("cpu"), 5, model, 3, 8, 16) == 5
    # one copy's step through 3 layers, width 16, vocabulary 64, 8 x 16 rows: by hand
    assert lockstep.step_bytes(model, 3, 8, 16) == 8 * 16 * (3 * 16 * 34 * 4 + 64 * 3 * 4)
