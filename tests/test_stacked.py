"""K copies of a reset layer in one pass (``training.stacked``) equal K separate runs: each copy trained alone with
the ``schedulefree`` package's AdamWScheduleFree (the recipe's two parameter groups, its warm-up) and torch's
global-norm clipping, on the family's own loss, from the same reset weights and batches. Real GPT-2 and BERT
classes; the first and a deeper layer; a deeper layer from the cached prefix."""

import pytest
import schedulefree
import torch

from selfheal import models
from selfheal.models import families
from selfheal.training import objectives, stacked

SPECIAL = {"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}
GPT2 = {"name": "g", "arch": "gpt2", "n_layer": 3, "d_model": 16, "n_head": 2, "context": 16, "dropout": 0.0}
BERT = {**GPT2, "name": "b", "arch": "bert"}
LRS = [3e-3, 1e-2, 3e-2, 1e-1]  # a race's grid: the largest diverges from the others fast, and clipping binds
STEPS, WARMUP, DECAY, CLIP = 20, 5, 0.1, 1.0


def _batches(family, n=STEPS):
    generator = torch.Generator().manual_seed(7)
    seqs = torch.randint(3, SPECIAL["vocab_size"], (n, 8, 16), generator=generator)
    objective = objectives.for_family(family, SPECIAL)  # BERT's masks: rows with different numbers of targets
    return [objective.batch(s, generator) for s in seqs]


def _alone(cfg, depth, lr, batches, dtype=torch.float32):
    """One copy trained by itself: the package's optimiser, torch's clipping, the family's loss."""
    model = models.build(cfg, SPECIAL, seed=0).to(dtype)
    family = families.for_model(model)
    layer = family.stack_modules(model, "")[depth]
    for p in model.parameters():
        p.requires_grad_(False)
    params = list(layer.parameters())
    for p in params:
        p.requires_grad_(True)
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": DECAY},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    optimizer = schedulefree.AdamWScheduleFree(groups, lr=lr, warmup_steps=WARMUP)
    optimizer.train()
    losses = []
    for batch in batches:
        loss = family.loss(model, batch, grad_from=depth)
        losses.append(float(loss.detach()))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        optimizer.step()
    optimizer.eval()
    return losses, {n: p.detach().clone() for n, p in layer.named_parameters()}


def _together(cfg, depth, batches, cached=False, dtype=torch.float32):
    model = models.build(cfg, SPECIAL, seed=0).to(dtype)
    family = families.for_model(model)
    for p in model.parameters():
        p.requires_grad_(False)
    copies = stacked.StackedLayer(family, model, depth, len(LRS))
    optimizer = stacked.ScheduleFreeK(copies.weights, LRS, DECAY, WARMUP, CLIP)
    losses = []
    for batch in batches:
        hidden = family.prefix(model, batch, depth) if cached else None
        loss = copies.losses(batch, hidden)
        losses.append(loss.detach().tolist())
        optimizer.zero_grad()
        loss.sum().backward()
        optimizer.clip()
        optimizer.step()
    optimizer.eval()
    return losses, copies.weights


@pytest.mark.parametrize("cfg, depth, cached", [(GPT2, 0, False), (GPT2, 2, False), (GPT2, 1, True), (BERT, 1, False)])
def test_k_copies_in_one_pass_are_k_separate_runs(cfg, depth, cached):
    """The losses in fp32, as the engine trains, to float tolerance at every step (1e-4: at lr 0.1 rounding has
    grown to about 1e-5 by step 20, and depends on the threads); the final averaged weights in fp64, where rounding
    does not grow: in fp32 Adam's normalised step turns a rounding difference in a near-zero
    gradient into a full step (up to 3e-3 apart after 20 steps at lr 0.1, while the losses agree to 1e-6)."""
    family = families.for_arch(cfg["arch"])
    batches = _batches(family)
    together, _ = _together(cfg, depth, batches, cached)
    _, weights = _together(cfg, depth, batches, cached, torch.float64)
    for i, lr in enumerate(LRS):
        alone, _ = _alone(cfg, depth, lr, batches)
        assert [step[i] for step in together] == pytest.approx(alone, rel=1e-4)  # fp32 rounding, grown by Adam
        _, final = _alone(cfg, depth, lr, batches, torch.float64)
        for name, w in final.items():  # the averaged weights each copy is evaluated at
            torch.testing.assert_close(weights[f"layer.{name}"][i], w, rtol=1e-6, atol=1e-6)
    # the copies moved apart: the race's lrs gave different runs
    assert max(float((w[0] - w[-1]).abs().max()) for w in weights.values()) > 1e-2


def test_a_copy_is_clipped_on_its_own_norm():
    weights = {"a": torch.zeros(2, 3, 4, requires_grad=True), "b": torch.zeros(2, 4, requires_grad=True)}
    optimizer = stacked.ScheduleFreeK(weights, [1e-3, 1e-3], 0.0, 0, grad_clip=1.0)
    weights["a"].grad = torch.stack([torch.full((3, 4), 0.1), torch.full((3, 4), 1.0)])
    weights["b"].grad = torch.stack([torch.zeros(4), torch.full((4,), 1.0)])
    norms = optimizer.clip()
    # copy 0: sqrt(12 x 0.01) = 0.346, under the bound: untouched; copy 1: sqrt(12 + 4) = 4, scaled by 1 / 4
    assert norms.tolist() == pytest.approx([0.12**0.5, 4.0])
    assert weights["a"].grad[0].flatten().tolist() == pytest.approx([0.1] * 12)
    assert weights["a"].grad[1].flatten().tolist() == pytest.approx([0.25] * 12, rel=1e-5)
    assert weights["b"].grad[1].tolist() == pytest.approx([0.25] * 4, rel=1e-5)
