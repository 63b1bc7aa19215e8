"""The one optimisation loop (minGPT's single trainer): every training in selfheal — pretraining, retraining a
reset layer, the no-reset control, finetuning an encoder for the transfer experiments — is this loop with its own
batches, loss and callbacks.

Per batch: each parameter group's learning rate is set to its ``initial_lr`` times ``schedule(step)``, the loss is
computed, ``on_loss`` may stop before the update (divergence), the gradients are clipped to ``grad_clip`` (global
norm over ``clip``), the optimizer steps, and ``on_step`` may stop after it (evaluation, checkpoints, thresholds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class StepInfo:
    """What a callback sees: the step about to be (``on_loss``) or just taken (``on_step``), its batch, its loss."""

    step: int
    batch: Any
    loss: torch.Tensor


Callback = Callable[[StepInfo], bool]  # True: stop training


def never(_: StepInfo) -> bool:
    return False


def set_initial_lr(optimizer: torch.optim.Optimizer) -> None:
    """Record each group's configured lr as the base that the schedule multiplies (per-group multipliers survive)."""
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])


def linear_decay(warmup: int, total: int) -> Callable[[int], float]:
    """Linear warmup, then linear decay to 0 at ``total`` (transformers.Trainer's default schedule)."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def warmup_cosine(warmup: int, total: int, cosine: bool, min_fraction: float) -> Callable[[int], float]:
    """Linear warmup, then constant or cosine decay to ``min_fraction`` at ``total``."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if not cosine:
            return 1.0
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_fraction + (1 - min_fraction) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def train(
    optimizer: torch.optim.Optimizer,
    batches: Iterable,
    loss_of: Callable[[Any], torch.Tensor],
    schedule: Callable[[int], float],
    grad_clip: float = 0.0,
    clip: Sequence[torch.nn.Parameter] = (),
    first_step: int = 0,
    on_loss: Callback = never,
    on_step: Callback = never,
) -> bool:
    """Run the loop over ``batches`` (an iterable that may read state the callbacks update). Returns True when a
    callback stopped it, False when the batches ran out."""
    set_initial_lr(optimizer)
    step = first_step
    for batch in batches:
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] * schedule(step)
        loss = loss_of(batch)
        if on_loss(StepInfo(step, batch, loss)):
            return True
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(clip, grad_clip)
        optimizer.step()
        step += 1
        if on_step(StepInfo(step, batch, loss)):
            return True
    return False
