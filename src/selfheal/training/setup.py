"""The setup every job that runs a model repeats: seed and threads, the model's family and objective, the fixed
validation batches, the hardware. One place, so baseline, pretraining, reset, retrain and the prefix cache agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from selfheal.data import streams
from selfheal.models import families
from selfheal.training import objectives
from selfheal.training.hardware import Hardware, keep_freed_memory


def seed_everything(seed: int, threads: int | None = None) -> None:
    """The start of every job that runs a model: threads, the global seed, deterministic algorithms, and a heap
    that keeps freed memory (``hardware.keep_freed_memory``)."""
    keep_freed_memory()
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)


@dataclass
class Setup:
    """A model with what it needs to train and be evaluated on the fixed validation set."""

    model: nn.Module
    family: families.Family
    objective: object  # a training objective (objectives.CausalLM, MaskedLM, Denoising)
    val_batches: list[dict]
    hardware: Hardware
    device: torch.device


def prepare(model: nn.Module, model_cfg: dict, eval_cfg: dict, tokens_path: str) -> Setup:
    """Family, objective, validation batches and hardware for ``model`` (moved to its device)."""
    family = families.for_model(model)
    objective = objectives.for_family(family, streams.vocabulary(tokens_path), model_cfg)
    val_seqs = streams.val_sequences(tokens_path, model_cfg["context"], eval_cfg["val_sequences"])
    hardware = Hardware.from_config(model_cfg.get("hardware"))
    device = hardware.prepare(model)
    return Setup(model, family, objective, objective.val_batches(val_seqs, eval_cfg["batch_size"]), hardware, device)


def train_sequences(model_cfg: dict, tokens_path: str) -> torch.Tensor:
    """The model's S training sequences (its pretraining subset, in a fixed order)."""
    p = model_cfg["pretrain"]
    return streams.train_sequences(tokens_path, model_cfg["context"], p["train_sequences"], p["seed"])
