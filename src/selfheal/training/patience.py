"""Pretraining to the validation minimum: the patience rule and the best checkpoint (docs/method.md, "Pretraining
to the validation minimum").

At every evaluation (``pretrain.eval_every_examples``) the rule sees the validation loss. An evaluation
**improves** when its loss is below the loss of the last evaluation that improved (the *anchor*; the first
evaluation is the first anchor) by more than ``noise``: the standard error of the mean of the paired per-sequence
differences between the two on the fixed validation set (``paired_se``), so a fall the validation set cannot
resolve does not count. The **best checkpoint** is the evaluation with the lowest loss so far, whether or not it
improved beyond the noise; it is the network. A run **stops** at the first evaluation at least ``patience``
examples after the anchor (no improvement for that long) and, with ``at_least``, at least that multiple of the
best checkpoint's examples (``pretrain.plateau_check``); else at the run's maximum (``pretrain.max_epochs``).

``step`` is the rule for one evaluation, ``stopping`` the same rule over a whole curve (pure functions on numbers,
tested on hand-written curves); ``Keeper`` applies it during a run (``loop.run``'s ``keeper``), measuring the noise
and keeping the best checkpoint's weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from selfheal.training import evaluation


@dataclass(frozen=True)
class State:
    """Where the rule stands after an evaluation: the anchor (the last evaluation that improved) and the best
    checkpoint (the lowest loss so far), by index, examples and loss."""

    anchor: int
    anchor_examples: int
    anchor_loss: float
    best: int
    best_examples: int
    best_loss: float
    stop: bool = False
    improved: bool = True  # this evaluation improved beyond the noise (the first one does by definition)


def step(
    state: State | None, index: int, examples: int, loss: float, noise: float, patience: float, at_least: float = 0.0
) -> State:
    """The rule (module docstring) at evaluation ``index`` (``examples``, ``loss``), ``noise`` the standard error of
    its paired difference from the anchor (needed only where ``loss`` is below the anchor's). A non-finite loss
    never improves nor becomes the best."""
    if state is None:
        return State(index, examples, loss, index, examples, loss, stop=False, improved=True)
    improved = math.isfinite(loss) and loss < state.anchor_loss - noise
    anchor = (index, examples, loss) if improved else (state.anchor, state.anchor_examples, state.anchor_loss)
    lower = math.isfinite(loss) and loss < state.best_loss
    best = (index, examples, loss) if lower else (state.best, state.best_examples, state.best_loss)
    stop = examples - anchor[1] >= patience and examples >= at_least * best[1]
    return State(*anchor, *best, stop=stop, improved=improved)


def stopping(
    examples: Sequence[int], losses: Sequence[float], noise: Sequence[float], patience: float, at_least: float = 0.0
) -> State:
    """The rule over a whole curve: the state at the evaluation where it stops (``stop`` True), or at the last one.
    ``noise[i]``: the standard error of evaluation i's paired difference from the anchor before it."""
    state = None
    for i, (x, loss, se) in enumerate(zip(examples, losses, noise, strict=True)):
        state = step(state, i, x, loss, se, patience, at_least)
        if state.stop:
            break
    return state


def paired_se(a: torch.Tensor, b: torch.Tensor) -> float:
    """The standard error of the mean of the paired differences a - b (per-sequence losses on the same sequences):
    the noise of a difference of two validation losses, with correlated tokens of a sequence counted once."""
    diff = (a.double() - b.double()).flatten()
    return float(diff.std(unbiased=True) / math.sqrt(diff.numel())) if diff.numel() > 1 else 0.0


class Keeper:
    """The rule during one run (``loop.run(keeper=...)``): at every regular evaluation it updates the ``State``,
    measuring the per-sequence losses (at the evaluated weights) where the loss is below the anchor's, and keeps a
    CPU copy of the trainable tensors of the best checkpoint. ``patience`` and ``at_least`` as ``step``'s. Its
    state goes into the run's checkpoints, so a resumed run goes on with the same anchor and best weights."""

    def __init__(self, patience: float, at_least: float = 0.0):
        self.patience, self.at_least = float(patience), float(at_least)
        self.state: State | None = None
        self.anchor_losses: torch.Tensor | None = None  # per sequence, at the anchor
        self.best_weights: dict[str, torch.Tensor] = {}

    def at_evaluation(self, run) -> bool:
        """After a regular evaluation of ``run`` (a ``loop._Run``, the evaluation last on its curve): True to stop."""
        point = run.result.curve[-1]
        candidate = self.state is None or point.val_loss < self.state.anchor_loss
        losses = noise = None
        if candidate:
            with run.at_evaluated_weights():
                losses = evaluation.per_sequence(run.model, run.family, run.val_batches)
            noise = 0.0 if self.anchor_losses is None else paired_se(losses, self.anchor_losses)
        index = len(run.result.curve) - 1
        before = self.state
        self.state = step(before, index, point.examples, point.val_loss, noise or 0.0, self.patience, self.at_least)
        if self.state.improved:
            self.anchor_losses = losses
        if before is None or self.state.best != before.best:
            self.best_weights = {n: w.detach().to("cpu", copy=True) for n, w in run.evaluated_weights().items()}
        return self.state.stop

    def checkpoint(self) -> dict:
        """What a checkpoint keeps of it (tensors and plain values only)."""
        return {
            "rule": [self.patience, self.at_least],
            "state": asdict(self.state) if self.state else None,
            "anchor_losses": self.anchor_losses,
            "best_weights": self.best_weights,
        }

    def matches(self, saved: dict | None) -> bool:
        return saved is not None and list(saved["rule"]) == [self.patience, self.at_least]

    def restore(self, saved: dict) -> None:
        self.state = State(**saved["state"]) if saved["state"] else None
        self.anchor_losses, self.best_weights = saved["anchor_losses"], dict(saved["best_weights"])
