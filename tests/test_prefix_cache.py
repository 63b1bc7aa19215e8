"""The cached-prefix fast path gives the same losses as the plain forward, and is used only where it is valid."""

import numpy as np
import pytest
import torch
from conftest import CPU, SPECIAL, TINY_MODEL, write_trained_and_tokens

from selfheal import models
from selfheal.data import streams
from selfheal.models import families
from selfheal.training import objectives
from selfheal.heal import prefix_cache
from selfheal.heal import reset
from selfheal.training import loop
from selfheal.training import state
from selfheal.training.hardware import Hardware
from selfheal.training import setup as training_setup


@pytest.fixture
def setup(tmp_path):
    write_trained_and_tokens(tmp_path)
    model_cfg = {**TINY_MODEL, "hardware": CPU, "source": "scratch", "pretrain": {"train_sequences": 128, "seed": 0}}
    eval_cfg = {"val_sequences": 32, "batch_size": 16}
    return tmp_path, model_cfg, eval_cfg


def _run(tmp_path, model_cfg, eval_cfg, cache):
    model = models.load(tmp_path / "trained")
    family = families.for_model(model)
    names = reset.target_names(model, family, "L2", "full")
    reset.apply(model, family, names, "fresh", reset.generator_for(0, "L2", "full"))
    tokens = tmp_path / "tokens.safetensors"
    train_seqs = streams.train_sequences(tokens, 16, 128, 0)
    val_batches = objectives.CausalLM(SPECIAL).val_batches(streams.val_sequences(tokens, 16, 32), 16)
    settings = state.Settings(
        lr=1e-2,
        batch_size=16,
        weight_decay=0.0,
        grad_clip=1.0,
        eval_every_examples=32,
        max_examples=160,
        warmup_steps=2,
        data_seed=0,
        hardware=Hardware(**CPU),  # compared with the cached run to 1e-5
    )
    training_setup.seed_everything(0)
    result = loop.run(
        model, family, objectives.CausalLM(SPECIAL), train_seqs, val_batches, set(names), settings, cache=cache
    )
    return [p.val_loss for p in result.curve], [p.train_loss for p in result.curve], model


def _cache(tmp_path, model_cfg, eval_cfg, depth):
    job = training_setup.prepare(
        models.load(tmp_path / "trained"), model_cfg, eval_cfg, str(tmp_path / "tokens.safetensors")
    )
    train_seqs = training_setup.train_sequences(model_cfg, str(tmp_path / "tokens.safetensors"))
    return prefix_cache.PrefixCache.build(job.model, job.family, train_seqs, job.val_batches, depth, job.device)


def test_cached_prefix_matches_plain_forward(setup):
    tmp_path, model_cfg, eval_cfg = setup
    cache = _cache(tmp_path, model_cfg, eval_cfg, 2)
    assert cache.train.shape == (128, 16, 16) and cache.val.shape == (32, 16, 16)
    plain_val, plain_train, plain_model = _run(tmp_path, model_cfg, eval_cfg, None)
    fast_val, fast_train, fast_model = _run(tmp_path, model_cfg, eval_cfg, cache)
    assert len(plain_val) == len(fast_val) == 6
    np.testing.assert_allclose(fast_val, plain_val, rtol=1e-5)
    np.testing.assert_allclose(fast_train[1:], plain_train[1:], rtol=1e-5)
    for (name, a), b in zip(plain_model.state_dict().items(), fast_model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)


def test_deeper_cache_built_on_a_shallower_one_is_bit_identical(setup):
    """A heal job builds each depth's cache on the previous one (only the layers between them run)."""
    tmp_path, model_cfg, eval_cfg = setup
    job = training_setup.prepare(
        models.load(tmp_path / "trained"), model_cfg, eval_cfg, str(tmp_path / "tokens.safetensors")
    )
    train_seqs = training_setup.train_sequences(model_cfg, str(tmp_path / "tokens.safetensors"))
    build = prefix_cache.PrefixCache.build
    shallow = build(job.model, job.family, train_seqs, job.val_batches, 1, job.device)
    direct = build(job.model, job.family, train_seqs, job.val_batches, 2, job.device)
    on_top = build(job.model, job.family, train_seqs, job.val_batches, 2, job.device, shallower=shallow)
    assert on_top.depth == 2 and torch.equal(on_top.train, direct.train) and torch.equal(on_top.val, direct.val)
    assert not torch.equal(direct.train, shallow.train)  # the layer between them ran


def test_cache_deeper_than_a_trainable_tensor_is_refused(setup):
    tmp_path, model_cfg, eval_cfg = setup
    cache = _cache(tmp_path, model_cfg, eval_cfg, 2)
    model = models.load(tmp_path / "trained")
    family = families.for_model(model)
    names = reset.target_names(model, family, "L1", "full")
    settings = state.Settings(
        lr=1e-2,
        batch_size=16,
        weight_decay=0.0,
        grad_clip=1.0,
        eval_every_examples=32,
        max_examples=32,
        warmup_steps=2,
        hardware=Hardware(**CPU),
    )
    with pytest.raises(ValueError, match="depth 2"):
        loop.run(
            model,
            family,
            objectives.CausalLM(SPECIAL),
            torch.zeros(128, 16, dtype=torch.long),
            [],
            set(names),
            settings,
            cache=cache,
        )


@pytest.mark.parametrize(
    "arch,target,policy,regime,dropout,expected",
    [
        ("gpt2", "L2", "full", "frozen", 0.0, 2),
        ("gpt2", "L2", "attn", "layer", 0.0, 2),
        ("gpt2", "L0", "full", "frozen", 0.0, None),  # nothing below layer 0
        ("gpt2", "L2", "full", "full", 0.0, None),  # everything trains
        ("gpt2", "L2", "full", "frozen", 0.1, None),  # dropout: the prefix is not a fixed function
        ("gpt2", "all", "full", "frozen", 0.0, None),
        ("bert", "L2", "full", "frozen", 0.0, None),  # masked LM: training inputs change every step
        ("bart", "dec.0", "full", "frozen", 0.0, None),
        ("llama", "L1", "mlp", "frozen", 0.0, 1),
    ],
)
def test_cache_depth_only_where_valid(arch, target, policy, regime, dropout, expected):
    model_cfg = {"arch": arch, "source": "scratch", "dropout": dropout}
    assert prefix_cache.cache_depth(model_cfg, target, policy, regime) == expected


def test_cache_built_only_when_it_pays_for_itself():
    scratch = {"source": "scratch", "pretrain": {"max_epochs": 5}, "retrain": {"budget_fraction": 0.5}}
    assert prefix_cache.worth_building(scratch, cells_sharing=1)  # 2.5 epochs of prefix forwards saved
    downloaded = {"source": "pretrained", "pretrain": {"max_epochs": 5}, "retrain": {"budget_fraction": 0.25}}
    assert not prefix_cache.worth_building(downloaded, cells_sharing=1)
    assert prefix_cache.worth_building(downloaded, cells_sharing=4)


def test_plan_respects_the_memory_budget():
    from selfheal.grid import Cell

    model_cfg = {
        "arch": "gpt2",
        "source": "scratch",
        "dropout": 0.0,
        "n_layer": 4,
        "pretrain": {"max_epochs": 5},
        "retrain": {"budget_fraction": 0.5},
    }
    cells = [Cell("m", f"L{i}", "full", "fresh", "frozen", 0) for i in range(4)]
    cells.append(Cell("m", "none", "none", "none", "frozen", 0))
    assert prefix_cache.plan(model_cfg, cells, mb=4095) == {cells[1]: 1, cells[2]: 2, cells[3]: 3}
    assert prefix_cache.plan(model_cfg, cells, mb=4097) == {}  # over PREFIX_CACHE_MB (4,096): the plain forward
    assert prefix_cache.footprint_mb(8000 + 256, 64, 64) == pytest.approx(135.3, abs=0.1)
