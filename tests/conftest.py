import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from selfheal import models
from selfheal.models import families
from selfheal.training import objectives  # noqa: E402

TINY_MODEL = {"name": "t", "arch": "gpt2", "n_layer": 3, "d_model": 16, "n_head": 2, "context": 16, "dropout": 0.0}
SPECIAL = {"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}


def trained_like(model: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """Perturb every tensor (LN included) so it differs from any init, as a trained model would."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return models.build(TINY_MODEL, SPECIAL, seed=0)


@pytest.fixture
def tiny_model_theta0(tiny_model):
    """The step-0 weights of tiny_model (taken before any fixture perturbs it)."""
    return {n: p.detach().clone() for n, p in tiny_model.named_parameters()}


@pytest.fixture
def trained_model(tiny_model, tiny_model_theta0):
    return trained_like(tiny_model)


@pytest.fixture
def adapter():
    return families.GPT2()


@pytest.fixture
def sequences():
    """(train sequences, validation batches) for the causal-LM tiny model."""
    g = torch.Generator().manual_seed(0)
    train = torch.randint(0, 64, (96, 16), generator=g)
    val = torch.randint(0, 64, (16, 16), generator=g)
    return train, objectives.CausalLM(SPECIAL).val_batches(val, 16)
