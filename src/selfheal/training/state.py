"""What a training run is and where it stands: its settings, its position, its curve and its result.

Shared by the loop (``loop``) and the checkpoints that let a killed run resume (``checkpoints``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from selfheal.training.hardware import Hardware


@dataclass
class Settings:
    lr: float
    batch_size: int
    weight_decay: float
    grad_clip: float
    eval_every_examples: int
    max_examples: int
    warmup_steps: int
    cosine: bool = False  # cosine decay to min_lr_fraction*lr over max_examples, else constant after warmup
    min_lr_fraction: float = 0.0
    # adamw, or schedulefree: schedule-free AdamW (its own warm-up of warmup_steps), evaluated at its averaged
    # weights; the weights a run ends with are those averaged weights
    optimizer: str = "adamw"
    data_seed: int = 0
    hardware: Hardware = Hardware()
    checkpoint_path: str | None = None  # resumable state, written atomically every checkpoint_every_steps
    checkpoint_every_steps: int = 0
    # where the run keeps the state of its last regular evaluation for a run with a larger budget to continue from,
    # and continues from one it finds there (loop.run; constant lr after warm-up only)
    extension_path: str | None = None


@dataclass
class Position:
    """Where training is: everything besides weights, optimizer and RNG that a resumed run needs."""

    epoch: int = 0
    index: int = 0  # next position in this epoch's order
    examples: int = 0
    steps: int = 0
    next_eval: int = 0
    running: float = 0.0  # train loss summed since the last evaluation
    running_n: int = 0


@dataclass
class CurvePoint:
    examples: int
    tokens: int
    steps: int
    wall_s: float
    val_loss: float
    train_loss: float | None
    # An evaluation made after the fact inside an interval already trained, to locate a threshold crossing
    # (loop.run): of weights kept at that step, or of a replay of the interval. No train_loss; its wall_s is the
    # time it was made, after the evaluation that closed the interval.
    replay: bool = False


@dataclass
class Result:
    curve: list[CurvePoint] = field(default_factory=list)
    stopped_early: bool = False
    diverged_step: int | None = None  # the step whose loss was NaN/inf, if any
    eval_s: float = 0.0  # wall seconds spent evaluating, those after the fact included (the rest of wall_s trains)
    replay_s: float = 0.0  # wall seconds spent replaying intervals (their training and evaluations)
    replay_train_s: float = 0.0  # of which training (their evaluations count in eval_s too)
    resumed_elapsed: float = 0.0  # wall seconds already spent before a resume
    # the examples of the regular evaluation at which ``should_stop`` ended the run: any budget at least this gives
    # the same run (None: it ran to its budget or diverged)
    settled_at: int | None = None

    @property
    def wall_s(self) -> float:
        """Wall seconds of the whole run (an evaluation made after the fact is later than the one after it in steps)."""
        return max(p.wall_s for p in self.curve)

    @property
    def train_tokens_per_s(self) -> float:
        tokens = max(p.tokens for p in self.curve)
        train_s = self.wall_s - self.eval_s - self.replay_train_s
        return tokens / train_s if train_s > 0 and tokens else 0.0
