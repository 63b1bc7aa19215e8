"""A reset changes exactly the tensors its policy names, and nothing else."""

import pytest
import torch
from conftest import trained_like

from selfheal.heal import reset

POLICIES = ("full", "attn", "self_attn", "mlp", "ln")


def _changed(before: dict, model) -> set[str]:
    return {n for n, t in model.state_dict().items() if not torch.equal(before[n], t)}


def _snapshot(model) -> dict:
    return {n: t.clone() for n, t in model.state_dict().items()}


EXPECTED_SUFFIXES = {
    "full": {
        "ln_1.weight",
        "ln_1.bias",
        "attn.c_attn.weight",
        "attn.c_attn.bias",
        "attn.c_proj.weight",
        "attn.c_proj.bias",
        "ln_2.weight",
        "ln_2.bias",
        "mlp.c_fc.weight",
        "mlp.c_fc.bias",
        "mlp.c_proj.weight",
        "mlp.c_proj.bias",
    },
    "attn": {"attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias"},
    "self_attn": {"attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias"},
    "mlp": {"mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"},
    "ln": {"ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias"},
}


@pytest.mark.parametrize("init", ["fresh", "original"])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("layer", [0, 2])
def test_policy_changes_exactly_its_tensors(trained_model, tiny_model_theta0, adapter, policy, init, layer):
    before = _snapshot(trained_model)
    names = reset.target_names(trained_model, adapter, f"L{layer}", policy)
    assert {n.removeprefix(f"transformer.h.{layer}.") for n in names} == EXPECTED_SUFFIXES[policy]
    reset.apply(trained_model, adapter, names, init, reset.generator_for(0, f"L{layer}", policy), tiny_model_theta0)
    assert _changed(before, trained_model) == set(names)


def test_original_init_restores_theta0(trained_model, tiny_model_theta0, adapter):
    names = reset.target_names(trained_model, adapter, "L1", "full")
    reset.apply(trained_model, adapter, names, "original", reset.generator_for(0, "L1", "full"), tiny_model_theta0)
    params = dict(trained_model.named_parameters())
    for n in names:
        assert torch.equal(params[n], tiny_model_theta0[n])


def test_fresh_init_follows_gpt2_distribution(adapter):
    from conftest import SPECIAL, TINY_MODEL

    from selfheal import models

    big = trained_like(models.build({**TINY_MODEL, "d_model": 256, "n_head": 4, "n_layer": 8}, SPECIAL, seed=0))
    names = reset.target_names(big, adapter, "L3", "full")
    reset.apply(big, adapter, names, "fresh", reset.generator_for(5, "L3", "full"))
    p = dict(big.named_parameters())
    h = "transformer.h.3."
    assert abs(p[h + "attn.c_attn.weight"].std().item() - 0.02) < 0.001
    assert abs(p[h + "mlp.c_proj.weight"].std().item() - 0.02 / 4) < 0.0005  # 0.02 / sqrt(2 * 8)
    assert torch.all(p[h + "ln_1.weight"] == 1) and torch.all(p[h + "ln_2.bias"] == 0)
    assert torch.all(p[h + "mlp.c_fc.bias"] == 0)


def test_all_and_none_targets(trained_model, adapter):
    every_layer = {n for n, _ in trained_model.named_parameters() if n.startswith("transformer.h.")}
    assert set(reset.target_names(trained_model, adapter, "all", "full")) == every_layer
    assert reset.target_names(trained_model, adapter, "none", "none") == []
    before = _snapshot(trained_model)
    assert reset.apply(trained_model, adapter, [], "none", reset.generator_for(0, "none", "none")) == {}
    assert _changed(before, trained_model) == set()


def test_embeddings_and_head_never_touched_by_layer_reset(trained_model, tiny_model_theta0, adapter):
    before = _snapshot(trained_model)
    names = reset.target_names(trained_model, adapter, "all", "full")
    reset.apply(trained_model, adapter, names, "fresh", reset.generator_for(0, "all", "full"))
    changed = _changed(before, trained_model)
    assert not any(n.startswith(("transformer.wte", "transformer.wpe", "transformer.ln_f", "lm_head")) for n in changed)


def test_noop_reset_is_refused(tiny_model, tiny_model_theta0, adapter):
    # The untrained model *is* theta0: resetting it to theta0 changes nothing, which must raise, not pass silently.
    names = reset.target_names(tiny_model, adapter, "L0", "full")
    with pytest.raises(reset.ResetError, match="unchanged"):
        reset.apply(tiny_model, adapter, names, "original", reset.generator_for(0, "L0", "full"), tiny_model_theta0)


def test_fresh_draws_depend_on_seed(trained_model, adapter):
    names = reset.target_names(trained_model, adapter, "L0", "attn")
    a = reset.apply(trained_model, adapter, names, "fresh", reset.generator_for(0, "L0", "attn"))
    trained_like(trained_model, seed=2)  # move off the fresh values so the next reset is a real change
    b = reset.apply(trained_model, adapter, names, "fresh", reset.generator_for(1, "L0", "attn"))
    trained_like(trained_model, seed=3)
    c = reset.apply(trained_model, adapter, names, "fresh", reset.generator_for(0, "L0", "attn"))
    key = "transformer.h.0.attn.c_attn.weight"
    assert not torch.equal(a[key], b[key])
    assert torch.equal(a[key], c[key])


GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (runs on a machine with a GPU)")


@GPU
def test_a_reset_draws_the_same_numbers_on_a_gpu(tiny_model):
    """A cell's fresh weights come from its CPU generator whatever the model's device: the same seed gives the same
    tensors on a GPU as on the CPU (a CUDA tensor cannot be drawn from a CPU generator)."""
    from selfheal.models import families

    cpu = trained_like(tiny_model)
    gpu = trained_like(type(tiny_model)(tiny_model.config)).cuda()
    gpu.load_state_dict(cpu.state_dict())
    family = families.for_model(cpu)
    drawn = [reset.draw(m, family, "L1", "full", "fresh", 3) for m in (cpu, gpu)]
    assert drawn[0] == drawn[1]
    for name, tensor in cpu.state_dict().items():
        assert torch.equal(tensor, gpu.state_dict()[name].cpu()), name


@GPU
def test_an_encoder_swap_on_a_gpu_stays_on_it():
    """The swapped-in encoder and its projection are built where the model lives, with the CPU's numbers."""
    from conftest import SPECIAL

    from selfheal import models
    from selfheal.models import families

    cfg = {"name": "b", "arch": "bart", "n_layer": 2, "d_model": 16, "n_head": 2, "context": 16, "dropout": 0.0}
    cpu = trained_like(models.build(cfg, SPECIAL, seed=0))
    gpu = trained_like(models.build(cfg, SPECIAL, seed=0)).cuda()
    family = families.for_model(cpu)
    names = [reset.draw(m, family, "swap32", "full", "fresh", 0) for m in (cpu, gpu)]
    assert names[0] == names[1] and {p.device.type for p in gpu.parameters()} == {"cuda"}
    for name, tensor in cpu.state_dict().items():
        assert torch.equal(tensor, gpu.state_dict()[name].cpu()), name
