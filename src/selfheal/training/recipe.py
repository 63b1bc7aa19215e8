"""The one recipe (config section ``recipe``, docs/configuration.md#recipe): pretraining, adapting a downloaded
model and healing all train with schedule-free AdamW (Defazio et al. 2024, the ``schedulefree`` package, evaluated
at its averaged weights), the same batch size, warm-up and weight decay, at a learning rate of the raced grid
``recipe.lrs``. No schedule is tied to a horizon, so a run is the first part of any longer run.

``settings`` makes a run's ``Settings`` at one lr; how a race extends past an edge of ``recipe.lrs`` is
``training.race``'s (``beyond``).
"""

from __future__ import annotations

from selfheal.training.state import Settings

OPTIMIZER = "schedulefree"  # the recipe's optimiser: a constant of the code, not a key
GRAD_CLIP = 1.0  # the global gradient norm is clipped to this


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
