"""Family adapters (BERT, BART, Llama): split forward == library forward, component tables partition each layer,
layers below ``grad_from`` run without autograd, the explicit init, and resets that change exactly their names."""

from __future__ import annotations

import copy

import pytest
import torch

from selfheal import models
from selfheal.models import families
from selfheal.heal import reset
from selfheal.models.families import LAYER_POLICIES
from selfheal.training.objectives import OBJECTIVES

SPECIAL = {"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}
ARCHS = ("bert", "bart", "llama")
CONTEXT = 16


def model_cfg(arch: str, **overrides) -> dict:
    cfg = {"name": "t", "arch": arch, "n_layer": 2, "d_model": 16, "n_head": 2, "context": CONTEXT, "dropout": 0.0}
    cfg.update(overrides)
    return cfg


def build(arch: str, seed: int = 0, **overrides):
    return models.build(model_cfg(arch, **overrides), SPECIAL, seed).eval(), families.for_arch(arch)


def make_batch(family, n: int = 4, seed: int = 1) -> dict:
    seqs = torch.randint(3, SPECIAL["vocab_size"], (n, CONTEXT), generator=torch.Generator().manual_seed(seed))
    return OBJECTIVES[family.objective](SPECIAL).batch(seqs, torch.Generator().manual_seed(0))


def library_loss(model, arch: str, batch: dict) -> torch.Tensor:
    if arch == "bart":
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss
    if arch == "bert":
        return model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
    return model(input_ids=batch["input_ids"], labels=batch["input_ids"]).loss


def perturb_(model, seed: int = 7) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator))


def is_norm_name(model, name: str) -> bool:
    module = dict(model.named_modules())[name.rsplit(".", 1)[0]]
    return isinstance(module, torch.nn.LayerNorm) or "Norm" in type(module).__name__


# -- registry -------------------------------------------------------------------------------------------------------


def test_registry():
    for arch, cls, model_type, objective in [
        ("bert", families.BERT, "bert", "masked_lm"),
        ("bart", families.BART, "bart", "denoising"),
        ("llama", families.Llama, "llama", "causal_lm"),
    ]:
        assert families.FAMILIES[arch] is cls
        assert isinstance(families.for_model_type(model_type), cls)
        assert cls.objective == objective
        model, _ = build(arch)
        assert isinstance(families.for_model(model), cls)


# -- forward --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_split_forward_matches_library_forward(arch):
    model, family = build(arch)
    batch = make_batch(family)
    if arch == "bart":  # the padded encoder path must be exercised
        assert (batch["attention_mask"] == 0).any()
    with torch.no_grad():
        reference = library_loss(model, arch, batch).item()
    n = family.n_layers(model)
    for grad_from in sorted({0, n // 2, n}):
        ours = family.loss(model, batch, grad_from).item()
        assert ours == pytest.approx(reference, rel=1e-5), (grad_from, ours, reference)


@pytest.mark.parametrize("arch", (*ARCHS, "gpt2"))
def test_per_sequence_losses_of_a_batch_are_each_rows_own_loss(arch):
    """``evaluation.per_sequence`` runs whole batches (the family's loss ``per_row``): each value is the loss of that
    row alone (padded BART rows, masked-LM rows with their own number of targets) and their target-weighted mean is
    the batch's loss."""
    from selfheal.training import evaluation

    model, family = build(arch)
    batches = [make_batch(family, n=5, seed=1), make_batch(family, n=3, seed=2)]
    rows = evaluation.per_sequence(model, family, batches)
    assert rows.dtype == torch.float64 and rows.shape == (8,)
    alone = [
        family.loss(model, {k: v[i : i + 1] for k, v in b.items()}, family.n_layers(model) + 1).item()
        for b in batches
        for i in range(b["input_ids"].shape[0])
    ]
    assert rows.tolist() == pytest.approx(alone, rel=1e-5)
    assert len(set(alone)) == len(alone)  # rows differ, so a shuffled or repeated row would fail
    first = batches[0]
    targets = (first["labels"] != -100).sum(1) if "labels" in first else torch.full((5,), CONTEXT - 1)
    weighted = float((rows[:5] * targets).sum() / targets.sum())
    assert weighted == pytest.approx(family.loss(model, first, 0).item(), rel=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_gradients_reach_exactly_the_depths_at_or_above_grad_from(arch):
    """Every parameter gets a gradient iff ``depth_of`` is >= grad_from (the input embedding excepted: it is tied to
    the output head, which always runs with autograd)."""
    model, family = build(arch)
    batch = make_batch(family)
    tied = model.get_input_embeddings().weight
    for grad_from in range(family.n_layers(model) + 1):
        model.zero_grad(set_to_none=True)
        family.loss(model, batch, grad_from).backward()
        for name, p in model.named_parameters():
            if p is tied:
                continue
            has_grad = p.grad is not None
            assert has_grad == (family.depth_of(model, name) >= grad_from), (grad_from, name)
    if arch == "bart":  # the shared embedding learns through the encoder/decoder lookups too when grad_from == 0
        model.zero_grad(set_to_none=True)
        family.loss(model, batch, 0).backward()
        with_lookup = tied.grad.clone()
        model.zero_grad(set_to_none=True)
        family.loss(model, batch, 1).backward()
        assert not torch.allclose(with_lookup, tied.grad)


@pytest.mark.parametrize("arch", ARCHS)
def test_layers_below_grad_from_run_without_autograd(arch):
    model, family = build(arch)
    batch = make_batch(family)
    layers = family.layers(model)
    seen: dict[int, bool] = {}
    hooks = []
    for layer in layers:
        module = family.stack_modules(model, layer.stack)[layer.index]
        hooks.append(
            module.register_forward_hook(
                lambda mod, args, out, depth=layer.depth: seen.__setitem__(depth, torch.is_grad_enabled())
            )
        )
    extra: dict[str, bool] = {}
    if arch == "bart":  # the decoder's own embedding part belongs to the decoder's first depth
        for stack, module in (("enc", model.model.encoder), ("dec", model.model.decoder)):
            hooks.append(
                module.layernorm_embedding.register_forward_hook(
                    lambda mod, args, out, stack=stack: extra.__setitem__(stack, torch.is_grad_enabled())
                )
            )
    try:
        for grad_from in range(len(layers) + 1):
            seen.clear()
            family.loss(model, batch, grad_from)
            assert seen == {l.depth: l.depth >= grad_from for l in layers}, grad_from
            if arch == "bart":
                n_enc = len(model.model.encoder.layers)
                assert extra == {"enc": grad_from == 0, "dec": grad_from <= n_enc}, grad_from
    finally:
        for h in hooks:
            h.remove()


# -- anatomy --------------------------------------------------------------------------------------------------------


def check_partition(model, family) -> None:
    all_names = [n for n, _ in model.named_parameters()]
    embeddings = family.embedding_names(model)
    assert set(embeddings) <= set(all_names)
    for layer in family.layers(model):
        full = set(family.param_names(model, layer.id, "full"))
        assert full and full == {n for n in all_names if n.startswith(layer.prefix)}
        parts = {p: set(family.param_names(model, layer.id, p)) for p in LAYER_POLICIES if p not in ("full", "attn")}
        assert set(parts) == {"self_attn", "cross_attn", "mlp", "ln"}
        for p, names in parts.items():
            assert names <= full, (layer.id, p)
            if p != "cross_attn":
                assert names, (layer.id, p)
        union = set().union(*parts.values())
        assert union == full, (layer.id, full - union)
        assert sum(len(s) for s in parts.values()) == len(full), f"{layer.id}: components overlap"
        assert set(family.param_names(model, layer.id, "attn")) == parts["self_attn"] | parts["cross_attn"]
        assert bool(parts["cross_attn"]) == (layer.stack == "dec"), layer.id
        assert not full & set(embeddings)
        assert {family.depth_of(model, n) for n in full} == {layer.depth}
    with pytest.raises(ValueError):
        family.param_names(model, family.layers(model)[0].id, "embeddings")


@pytest.mark.parametrize("arch", ARCHS)
def test_components_partition_every_layer(arch):
    model, family = build(arch)
    check_partition(model, family)
    layers = family.layers(model)
    if arch == "bart":
        assert [l.id for l in layers] == ["enc.0", "enc.1", "dec.0", "dec.1"]
        assert [l.depth for l in layers] == [0, 1, 2, 3]
        assert layers[2].prefix == "model.decoder.layers.0."
    else:
        assert [l.id for l in layers] == ["L0", "L1"]


def test_bart_depths_and_separate_decoder_depth():
    model, family = build("bart", n_dec_layer=3)
    assert [l.id for l in family.layers(model)] == ["enc.0", "enc.1", "dec.0", "dec.1", "dec.2"]
    check_partition(model, family)
    depth = {n: family.depth_of(model, n) for n in family.embedding_names(model)}
    assert depth["model.shared.weight"] == 0
    assert depth["model.encoder.embed_positions.weight"] == 0
    assert depth["model.encoder.layernorm_embedding.weight"] == 0
    assert depth["model.decoder.embed_positions.weight"] == 2
    assert depth["model.decoder.layernorm_embedding.bias"] == 2
    assert family.depth_of(model, "model.decoder.layers.0.fc1.weight") == 2
    assert len(family.embedding_names(model)) == 7


def test_bert_bare_model_has_no_prefix():
    from transformers import BertModel

    masked, family = build("bert")
    bare = BertModel(masked.config)
    assert family.layers(bare)[0].prefix == "encoder.layer.0."
    assert family.embedding_names(bare)[0] == "embeddings.word_embeddings.weight"
    check_partition(bare, family)
    assert family.layers(masked)[0].prefix == "bert.encoder.layer.0."
    assert family.depth_of(masked, "cls.predictions.transform.dense.weight") == family.n_layers(masked)


@pytest.mark.parametrize("arch", ARCHS)
def test_embedding_names(arch):
    model, family = build(arch)
    names = family.embedding_names(model)
    expected = {
        "bert": [
            "bert.embeddings.word_embeddings.weight",
            "bert.embeddings.position_embeddings.weight",
            "bert.embeddings.token_type_embeddings.weight",
            "bert.embeddings.LayerNorm.weight",
            "bert.embeddings.LayerNorm.bias",
        ],
        "llama": ["model.embed_tokens.weight"],
    }
    if arch in expected:
        assert names == expected[arch]
    assert all(family.depth_of(model, n) == 0 for n in names if "decoder" not in n)


# -- init and reset -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_fresh_init_distributions(arch):
    model, family = build(arch, d_model=32)
    std_attr = "init_std" if arch == "bart" else "initializer_range"
    setattr(model.config, std_attr, 0.05)  # the family must read its own config's std
    assert family.init_std(model) == 0.05
    perturb_(model)
    names = [n for n, _ in model.named_parameters()]
    family.fresh_init_(model, names, torch.Generator().manual_seed(0))
    params = dict(model.named_parameters())
    biggest = max((n for n in names if params[n].ndim == 2), key=lambda n: params[n].numel())
    assert params[biggest].numel() >= 2048
    assert params[biggest].std().item() == pytest.approx(0.05, rel=0.1)
    assert abs(params[biggest].mean().item()) < 0.005
    for name, p in params.items():
        if is_norm_name(model, name):
            assert torch.all(p == (1.0 if name.endswith("weight") else 0.0)), name
        elif name.endswith("bias") or p.ndim < 2:
            assert torch.all(p == 0), name
        else:
            assert 0.03 < p.std().item() < 0.07, name
    embedding = model.get_input_embeddings()
    assert torch.all(embedding.weight[SPECIAL["pad"]] == 0)
    if arch == "bert":
        assert torch.all(model.cls.predictions.bias == 0)
        assert model.cls.predictions.decoder.bias is model.cls.predictions.bias
    if arch == "llama":
        assert model.lm_head.weight is model.model.embed_tokens.weight


def _canonical_changes(model, before: dict[str, torch.Tensor]) -> set[str]:
    """State-dict keys whose values changed, each mapped to the parameter name it aliases (tied copies such as
    ``lm_head.weight`` or ``cls.predictions.decoder.bias`` count as their one parameter)."""
    by_ptr = {p.data_ptr(): n for n, p in model.named_parameters()}
    changed = set()
    for key, value in model.state_dict().items():
        if not torch.equal(value, before[key]):
            changed.add(by_ptr.get(value.data_ptr(), key))
    return changed


@pytest.mark.parametrize("arch", ARCHS)
def test_fresh_reset_changes_exactly_its_names(arch):
    model, family = build(arch)
    perturb_(model)
    snapshot = {k: v.clone() for k, v in model.state_dict().items()}
    cases = [
        (f"{layer.id}/{policy}", family.param_names(model, layer.id, policy))
        for layer in family.layers(model)
        for policy in LAYER_POLICIES
    ]
    cases.append(("all/embeddings", family.embedding_names(model)))
    tested = 0
    for label, names in cases:
        if not names:
            continue
        model.load_state_dict(snapshot)
        assert not _canonical_changes(model, snapshot)
        new = reset.apply(model, family, names, "fresh", torch.Generator().manual_seed(3))
        assert set(new) == set(names)
        assert _canonical_changes(model, snapshot) == set(names), label
        tested += 1
    assert tested == len(cases) - (2 if arch == "bart" else family.n_layers(model))  # empty cross_attn cases


def _trained_bart(d_model: int, seed: int):
    special = {"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}
    cfg = {"name": "t", "arch": "bart", "n_layer": 2, "d_model": d_model, "n_head": 2, "context": 16, "dropout": 0.0}
    model = models.build(cfg, special, seed=seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed + 3)))
    return model, special


def test_bart_encoder_swap_replaces_encoder_and_wipes_cross_attention():
    """A fresh encoder of width 8 in a width-16 BART: the decoder's cross-attention keys and values read width 8,
    every cross-attention tensor is drawn anew, the rest of the decoder is untouched, and gradients reach the new
    encoder through the cross-attention."""
    from selfheal.heal import reset

    model, special = _trained_bart(16, 0)
    family = families.for_model(model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    encoder, cross = family.swap_encoder(model, 8, reset.generator_for(0, "swap8", "full"))
    params = dict(model.named_parameters())
    assert model.model.encoder.layers[0].self_attn.q_proj.weight.shape == (8, 8)
    for layer in model.model.decoder.layers:
        assert layer.encoder_attn.k_proj.weight.shape == layer.encoder_attn.v_proj.weight.shape == (16, 8)
        assert layer.encoder_attn.q_proj.weight.shape == (16, 16)
    assert set(cross) == {n for n in params if ".encoder_attn" in n}
    assert all(not torch.equal(before[n], params[n]) for n in cross if params[n].shape == before[n].shape)
    kept = {n for n in params if n.startswith("model.decoder.") and n not in cross} | {"model.shared.weight"}
    assert all(torch.equal(before[n], params[n]) for n in kept)  # the rest of the decoder is untouched
    assert set(encoder) == {n for n in params if n.startswith("model.encoder.")}
    batch = OBJECTIVES["denoising"](special).batch(torch.randint(3, 64, (4, 16)), torch.Generator().manual_seed(0))
    family.loss(model, batch, grad_from=0).backward()
    assert params["model.encoder.layers.0.fc1.weight"].grad is not None


@pytest.mark.parametrize("policy", ["full", "cross_attn"])
def test_bart_encoder_swap_from_a_donor_takes_its_trained_encoder(policy):
    """``swap-<model>``: the donor's trained encoder (width 24) goes in as it is, only the cross-attention is drawn
    (re-sized to width 24); policy ``full`` trains the encoder with it, ``cross_attn`` leaves it frozen. The
    donor itself is never changed, and a frozen donor encoder that changed would be caught by check_frozen."""
    from selfheal.heal import reset, unit

    model, special = _trained_bart(16, 0)
    base = copy.deepcopy(model)
    donor, _ = _trained_bart(24, 5)
    donor_before = {n: p.detach().clone() for n, p in donor.named_parameters()}
    family = families.for_model(model)
    names = reset.draw(model, family, "swap-d24", policy, "fresh", 0, donor=donor)
    params = dict(model.named_parameters())
    cross = {n for n in params if ".encoder_attn" in n}
    encoder = {n for n in params if n.startswith("model.encoder.")}
    assert set(names) == (cross if policy == "cross_attn" else cross | encoder)
    for name, p in donor.model.encoder.named_parameters():
        assert torch.equal(params[f"model.encoder.{name}"], p), name  # the donor's trained values
    assert model.model.decoder.layers[0].encoder_attn.k_proj.weight.shape == (16, 24)
    assert all(torch.equal(donor_before[n], p) for n, p in donor.named_parameters())
    trainable = set(names)
    unit.check_frozen(model, base, trainable, donor)
    with torch.no_grad():
        params["model.encoder.layers.1.fc2.weight"].add_(1e-3)  # the donor's encoder moved
    if policy == "cross_attn":
        with pytest.raises(unit.FrozenTensorChanged):
            unit.check_frozen(model, base, trainable, donor)
    else:
        unit.check_frozen(model, base, trainable, donor)  # it trains: allowed


def test_a_stitched_donor_encoder_trains_only_its_linear_map_and_keeps_the_cross_attention():
    """Policy ``stitch``: the donor's trained encoder (width 24) goes in frozen behind a 24 -> 16 linear map, the
    only tensors that train; the cross-attention keeps its trained values and width 16; gradients reach the map
    and not the encoder; the decoder's loss now depends on the map (a different map, a different loss)."""
    from selfheal.heal import reset, unit

    model, special = _trained_bart(16, 0)
    base = copy.deepcopy(model)
    donor, _ = _trained_bart(24, 5)
    family = families.for_model(model)
    names = reset.draw(model, family, "swap-d24", "stitch", "fresh", 0, donor=donor)
    assert names == ["model.encoder_stitch.bias", "model.encoder_stitch.weight"]
    params = dict(model.named_parameters())
    assert params["model.encoder_stitch.weight"].shape == (16, 24)
    assert float(params["model.encoder_stitch.weight"].std()) == pytest.approx(0.02, rel=0.2)  # BART's init_std
    for name, p in donor.model.encoder.named_parameters():
        assert torch.equal(params[f"model.encoder.{name}"], p), name
    cross = [n for n in params if ".encoder_attn" in n]
    assert len(cross) == 2 * 10  # q, k, v, out (weight, bias) and the layer norm, in both decoder layers
    assert all(torch.equal(params[n], dict(base.named_parameters())[n]) for n in cross)
    assert family.depth_of(model, "model.encoder_stitch.weight") == 2  # after the encoder's two layers
    unit.check_frozen(model, base, set(names), donor)
    for name, p in model.named_parameters():
        p.requires_grad_(name in names)
    seqs = torch.randint(3, 64, (4, 16), generator=torch.Generator().manual_seed(1))
    batch = OBJECTIVES["denoising"](special).batch(seqs, torch.Generator().manual_seed(0))
    loss = family.loss(model, batch, grad_from=2)
    loss.backward()
    assert params["model.encoder_stitch.weight"].grad.abs().sum() > 0
    with torch.no_grad():
        params["model.encoder_stitch.weight"].mul_(2)
        assert family.loss(model, batch, grad_from=99).item() != pytest.approx(loss.item(), abs=1e-6)
    with pytest.raises(ValueError, match="drawn fresh"):
        reset.draw(copy.deepcopy(base), family, "swap-d24", "stitch", "zero_out", 0, donor=donor)


def test_bart_encoder_swap_with_a_closed_gate_starts_as_the_decoder_without_an_encoder():
    """Init ``zero_out`` on a swap: every cross-attention output projection starts at zero, so the decoder's output
    does not depend on the new encoder at step 0 (any two encoders give the same loss); the fresh draw does."""
    from selfheal.heal import reset

    def loss_with(encoder_seed: int, init: str) -> float:
        model, special = _trained_bart(16, 0)
        donor, _ = _trained_bart(24, encoder_seed)
        family = families.for_model(model)
        reset.draw(model, family, "swap-d24", "full", init, 0, donor=donor)
        for layer in model.model.decoder.layers:
            if init == "zero_out":
                assert not layer.encoder_attn.out_proj.weight.any() and not layer.encoder_attn.out_proj.bias.any()
        seqs = torch.randint(3, 64, (4, 16), generator=torch.Generator().manual_seed(1))
        batch = OBJECTIVES["denoising"](special).batch(seqs, torch.Generator().manual_seed(0))
        with torch.no_grad():
            return family.loss(model.eval(), batch, grad_from=99).item()

    assert loss_with(5, "zero_out") == loss_with(6, "zero_out")
    assert loss_with(5, "fresh") != loss_with(6, "fresh")
