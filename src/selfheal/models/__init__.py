"""Models: family adapters (``families``), building a fresh model from config (``build`` here, theta0), saving and
loading (``storage``, safetensors only) and importing a model a user brings (``imported``)."""

from __future__ import annotations

import torch
from torch import nn

from selfheal.models import families
from selfheal.models.storage import AUTO_CLASSES, check_safetensors, has_safetensors, load, save


def build(model_cfg: dict, special: dict[str, int], seed: int) -> nn.Module:
    """A fresh model of the configured family, initialised by the family's own explicit init (this is theta0)."""
    family = families.for_arch(model_cfg["arch"])
    model = family.build(model_cfg, special)
    generator = torch.Generator().manual_seed(seed)
    family.fresh_init_(model, [n for n, _ in model.named_parameters()], generator)
    return model


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = ["AUTO_CLASSES", "build", "check_safetensors", "families", "has_safetensors", "load", "parameter_count",
           "save"]
