"""The one recipe (config section ``recipe``, docs/configuration.md#recipe): pretraining, adapting a downloaded
model and healing all train with schedule-free AdamW (Defazio et al. 2024, the ``schedulefree`` package, evaluated
at its averaged weights), the same batch size, warm-up and weight decay, at a learning rate of the raced grid
``recipe.lrs``. No schedule is tied to a horizon, so a run is the first part of any longer run.

``settings`` makes a run's ``Settings`` at one lr; ``next_lr`` is the edge extension of a race (a winner at an edge
of the grid raced so far: the lr x 3 beyond it, up to ``recipe.max_lr_extensions`` per side).
"""

from __future__ import annotations

from collections.abc import Sequence

from selfheal.training.state import Settings

OPTIMIZER = "schedulefree"  # the recipe's optimiser: a constant of the code, not a key
GRAD_CLIP = 1.0  # the global gradient norm is clipped to this
EXTENSION_FACTOR = 3.0  # an edge extension races the lr this many times beyond the edge


def settings(recipe: dict, lr: float, **run) -> Settings:
    """The recipe's ``Settings`` at ``lr``; ``run``: the run's own (eval_every_examples, max_examples, data_seed,
    hardware, checkpoints)."""
    return Settings(
        lr=lr,
        batch_size=recipe["batch_size"],
        weight_decay=recipe["weight_decay"],
        grad_clip=GRAD_CLIP,
        warmup_steps=recipe["warmup_steps"],
        optimizer=OPTIMIZER,
        **run,
    )


def at_edge(raced: Sequence[float], lr: float) -> bool:
    """``lr`` is the smallest or the largest of the lrs raced."""
    return lr in (min(raced), max(raced))


def next_lr(raced: Sequence[float], winner: float, grid: Sequence[float], max_extensions: int) -> float | None:
    """The lr an edge extension races next, or None: where ``winner`` is the largest of ``raced`` (the grid and the
    extensions so far), ``winner`` x 3; where it is the smallest, ``winner`` / 3; while that side has fewer than
    ``max_extensions`` lrs beyond ``grid``."""
    above = sum(lr > max(grid) for lr in raced)
    below = sum(lr < min(grid) for lr in raced)
    if winner == max(raced) and above < max_extensions:
        return winner * EXTENSION_FACTOR
    if winner == min(raced) and below < max_extensions:
        return winner / EXTENSION_FACTOR
    return None
