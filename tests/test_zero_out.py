"""The ``zero_out`` init: a layer reset in full starts as the layer deleted.

Its output projections (attention output, BART's cross-attention output, FFN output) are zero, so every sublayer adds
exactly zero to the residual stream. What the network then computes, per family (the claim docs/method.md states):
- pre-LN (GPT-2, Llama): the layer is the identity, so the network is the network with that layer removed, bit for
  bit;
- post-LN (BERT, BART): the layer norm after each residual still applies, and a full reset sets it to weight 1,
  bias 0, so the layer is its input standardised once per sublayer (BERT and BART's encoder twice, BART's decoder
  three times): the network with the layer replaced by those standardisations (equal to float tolerance: the
  library's affine norm with weight 1 and bias 0 against the plain one).
Every tensor outside the reset is untouched, and every reset tensor other than the projections is the fresh draw."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from selfheal import grid, models
from selfheal.heal import reset
from selfheal.models import families

SPECIAL = {"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}
CONTEXT = 16
# sublayers per layer whose residual is followed by a layer norm (post-LN); 0: pre-LN, the layer is the identity
STANDARDISATIONS = {("gpt2", ""): 0, ("llama", ""): 0, ("bert", ""): 2, ("bart", "enc"): 2, ("bart", "dec"): 3}


def _trained_like(arch: str):
    """A small model of the family whose tensors are all moved away from their init (norms included), as training
    would, so a reset and a deleted layer are visible."""
    cfg = {"name": "t", "arch": arch, "n_layer": 3, "d_model": 16, "n_head": 2, "context": CONTEXT, "dropout": 0.0}
    model = models.build(cfg, SPECIAL, seed=0).eval()
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=generator))
    return model, families.for_arch(arch)


def _logits(model, arch: str) -> torch.Tensor:
    ids = torch.randint(3, SPECIAL["vocab_size"], (4, CONTEXT), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        if arch == "bart":
            return model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).logits
        return model(input_ids=ids).logits


def _without_layer(model, family, layer, k: int):
    """A copy of ``model`` whose ``layer`` returns its input (k = 0: deleted) or its input standardised k times
    (layer norm without affine, the layer's own eps), whatever its weights."""
    ref = copy.deepcopy(model)
    module = family.stack_modules(ref, layer.stack)[layer.index]
    eps = next((m.eps for m in module.modules() if isinstance(m, torch.nn.LayerNorm)), 1e-5)

    def replace(_module, args, kwargs, output):
        hidden = args[0] if args else kwargs["hidden_states"]
        for _ in range(k):
            hidden = F.layer_norm(hidden, hidden.shape[-1:], eps=eps)
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    module.register_forward_hook(replace, with_kwargs=True)
    return ref


@pytest.mark.parametrize("arch", ["gpt2", "llama", "bert", "bart"])
def test_zero_out_layer_equals_the_network_without_it(arch):
    model, family = _trained_like(arch)
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    for layer in family.layers(model):
        model.load_state_dict(trained)
        k = STANDARDISATIONS[(arch, layer.stack)]
        expected = _logits(_without_layer(model, family, layer, k), arch)
        assert not torch.allclose(_logits(model, arch), expected, atol=1e-3)  # the layer matters before the reset
        names = family.param_names(model, layer.id, "full")
        generator = reset.generator_for(0, layer.id, "full")
        reset.apply(model, family, names, grid.ZERO_OUT, generator)
        got = _logits(model, arch)
        if k == 0:
            assert torch.equal(got, expected), f"{arch} {layer.id}: not the network without the layer"
        else:
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-5, msg=f"{arch} {layer.id}")
        # frozen tensors bit-identical; the projections zero; the rest of the reset is the fresh cell's draw
        state = model.state_dict()
        params = dict(model.named_parameters())
        untouched = [n for n in trained if n not in names and n in params]
        assert untouched and all(torch.equal(state[n], trained[n]) for n in untouched)
        zeroed = family.output_projection_names(model, names)
        assert zeroed and all(torch.count_nonzero(params[n]) == 0 for n in zeroed)
        fresh = copy.deepcopy(model)
        fresh.load_state_dict(trained)
        reset.apply(fresh, family, names, "fresh", reset.generator_for(0, layer.id, "full"))
        fresh_params = dict(fresh.named_parameters())
        assert all(torch.equal(params[n], fresh_params[n]) for n in names if n not in zeroed)
        assert not any(torch.equal(params[n], fresh_params[n]) for n in zeroed if n.endswith("weight"))


def test_zero_out_needs_an_output_projection():
    model, family = _trained_like("gpt2")
    names = family.param_names(model, "L0", "ln")
    with pytest.raises(ValueError, match="zero_out"):
        reset.apply(model, family, names, grid.ZERO_OUT, reset.generator_for(0, "L0", "ln"))


def test_grid_makes_zero_out_cells_where_there_is_something_to_zero():
    model = {"name": "m", "arch": "gpt2", "n_layer": 2, "pretrain": {"seeds": [0]}}
    config = {
        "models": [model],
        "grid": {
            "layers": "all",
            "policies": ["full", "ln"],
            "inits": ["fresh", "zero_out"],
            "regimes": ["frozen"],
            "seeds": [0],
            "controls": True,
            "matched_controls": "first_seed",
            "targets": [],
            "encoder_swap": [],
        },
    }
    zero = {(c.target, c.policy) for c in grid.cells(config) if c.init == grid.ZERO_OUT}
    assert zero == {("L0", "full"), ("L1", "full"), ("all", "full")}  # the ln cells would be the fresh ones
