"""bf16 as a measured choice (``hardware.precision``): training autocasts to bf16 with attention kept in fp32, and
every evaluation runs in fp32 whatever the training's precision."""

import pytest
import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from selfheal import models
from selfheal.models import families
from selfheal.training import evaluation, hardware

SPECIAL = {"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}
GPT2 = {"name": "g", "arch": "gpt2", "n_layer": 2, "d_model": 16, "n_head": 2, "context": 16, "dropout": 0.0}


def test_bf16_keeps_attention_in_fp32():
    model = models.build(GPT2, SPECIAL, seed=0)
    hw = hardware.Hardware(device="cpu", precision="bf16")
    device = hw.prepare(model)
    assert model.config._attn_implementation == hardware.FP32_ATTENTION
    attention = ALL_ATTENTION_FUNCTIONS[hardware.FP32_ATTENTION]
    q, k, v = (torch.randn(2, 2, 8, 8).to(torch.bfloat16) for _ in range(3))
    module = model.transformer.h[0].attn
    with hw.autocast(device):
        out, _ = attention(module, q, k, v, None, dropout=0.0, scaling=None, is_causal=True)
        linear = model.transformer.h[0].attn.c_proj(torch.randn(2, 16))
    assert out.dtype == torch.float32 and linear.dtype == torch.bfloat16  # the rest of the forward is bf16
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    torch.testing.assert_close(out, expected.transpose(1, 2))
    # fp32 leaves the model's attention as it was built
    plain = models.build(GPT2, SPECIAL, seed=0)
    hardware.Hardware(device="cpu").prepare(plain)
    assert plain.config._attn_implementation == "sdpa"


def test_evaluation_is_fp32_inside_an_autocast_region():
    model = models.build(GPT2, SPECIAL, seed=0)
    family = families.for_model(model)
    batches = [{"input_ids": torch.randint(3, 64, (4, 16), generator=torch.Generator().manual_seed(1))}]
    fp32 = evaluation.evaluate(model, family, batches)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        inside = evaluation.evaluate(model, family, batches)
        bf16 = float(family.loss(model, batches[0], family.n_layers(model) + 1))
    assert inside == fp32
    assert bf16 == pytest.approx(fp32, rel=2e-2) and bf16 != fp32  # the autocast region itself is bf16
