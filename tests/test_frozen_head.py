"""The fused cross-entropy through a frozen LM head (``models.families.frozen_head``) is the plain loss: the same
loss and the same gradients of the features and of a trainable layer to float rounding, per batch and per row; it
is taken only where the head is frozen, in fp32 and outside torch.func."""

import pytest
import torch

from selfheal import models
from selfheal.models import families
from selfheal.models.families import frozen_head
from selfheal.models.families.base import token_loss

SPECIAL = {"vocab_size": 300, "eos": 0, "pad": 1, "mask": 2}
GPT2 = {"name": "g", "arch": "gpt2", "n_layer": 2, "d_model": 16, "n_head": 2, "context": 16, "dropout": 0.0}
LLAMA = {**GPT2, "name": "l", "arch": "llama"}


@pytest.mark.parametrize("cfg", [GPT2, LLAMA])
@pytest.mark.parametrize("per_row", [False, True])
def test_the_fused_loss_is_the_plain_one(cfg, per_row, monkeypatch):
    model = models.build(cfg, SPECIAL, seed=0)
    family = families.for_model(model)
    model.requires_grad_(False)
    layer = family.stack_modules(model, "")[0]
    layer.requires_grad_(True)
    ids = torch.randint(3, 300, (6, 16), generator=torch.Generator().manual_seed(0))
    monkeypatch.setattr(frozen_head, "CHUNK", 7)  # several chunks, the last one short

    def run(fused: bool):
        if not fused:
            monkeypatch.setattr(frozen_head, "usable", lambda features, head: False)
        calls = []
        function = frozen_head._function()
        original = function.apply
        monkeypatch.setattr(function, "apply", lambda *a: calls.append(1) or original(*a))
        loss = family.loss(model, {"input_ids": ids}, grad_from=0, per_row=per_row)
        grads = torch.autograd.grad(loss.sum(), list(layer.parameters()))
        monkeypatch.undo()
        monkeypatch.setattr(frozen_head, "CHUNK", 7)
        return loss.detach(), grads, bool(calls)

    fused, fused_grads, used = run(True)
    plain, plain_grads, unused = run(False)
    assert used and not unused
    assert torch.allclose(fused, plain, rtol=1e-6, atol=0)  # both in fp32: the same to its rounding
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in zip(fused_grads, plain_grads))


def test_it_is_taken_only_where_it_is_exact():
    head = torch.nn.Linear(4, 9, bias=False).requires_grad_(False)
    features = torch.randn(3, 4, requires_grad=True)
    labels = torch.tensor([1, -100, 8])
    assert frozen_head.usable(features, head)
    fused = frozen_head.head_loss(features, head, labels)
    assert torch.allclose(fused, token_loss(head(features), labels), rtol=1e-6)  # the -100 target left out
    assert not frozen_head.usable(features, head.requires_grad_(True))  # a head that trains
    head.requires_grad_(False)
    assert not frozen_head.usable(features.detach(), head)  # nothing needs a gradient
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not frozen_head.usable(features, head)
    assert not frozen_head.usable(features, torch.nn.Linear(4, 9).requires_grad_(False))  # a bias
    assert torch.func.vmap(lambda x: torch.tensor(frozen_head.usable(x, head)))(features[None]).item() is False
