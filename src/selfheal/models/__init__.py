"""Models: family adapters (``families``), building a fresh model from config (``build`` here, theta0), saving and
loading (``storage``, safetensors only) and importing a model a user brings (``imported``)."""

from __future__ import annotations

from selfheal.models import families
from selfheal.models.families.base import nn, torch
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


def width(model: nn.Module) -> int:
    """D, the model's hidden width, whatever its config calls it."""
    return int(getattr(model.config, "hidden_size", None) or getattr(model.config, "d_model"))


def heads(model: nn.Module) -> int:
    return int(getattr(model.config, "num_attention_heads", None) or getattr(model.config, "encoder_attention_heads"))


__all__ = [
    "AUTO_CLASSES",
    "build",
    "check_safetensors",
    "families",
    "has_safetensors",
    "heads",
    "load",
    "parameter_count",
    "save",
    "width",
]
