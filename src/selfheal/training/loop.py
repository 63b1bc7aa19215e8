"""Language-model training on the one trainer (``training.trainer``): pretraining, retraining a reset layer and
the no-reset control. Adds what these share on top of the trainer: epochs reshuffled by seed, evaluation on the fixed
validation batches with a stopping rule, divergence detection and the prefix cache; threshold crossings are located
between evaluations by ``locating`` and a run resumes from its saved states by ``resuming``.

Only the parameters named trainable get gradients. Layers below the first trainable one run under ``no_grad``
(they are a fixed function of the input); layers above it need activation gradients only, which autograd gives
for free since their weights have ``requires_grad=False``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Sequence

import schedulefree
import torch
from torch import nn

from selfheal.data import streams
from selfheal.models.families import SingleStack
from selfheal.training import locating, resuming, trainer
from selfheal.training.evaluation import evaluate
from selfheal.training.hardware import to_device
from selfheal.training.state import CurvePoint, Position, Result, Settings

log = logging.getLogger("selfheal")
# A training loss this many times the validation loss before training counts as divergence (as does NaN/inf).
DIVERGENCE_FACTOR = 3.0
OPTIMIZERS = ("adamw", "schedulefree")


def first_trainable_depth(family, model: nn.Module, trainable: set[str]) -> int:
    """Depth of the first layer that has to run with autograd on (embeddings are depth 0)."""
    return min((family.depth_of(model, n) for n in trainable), default=family.n_layers(model))


def _optimizer(model: nn.Module, trainable: set[str], s: Settings) -> torch.optim.Optimizer:
    """AdamW (betas 0.9, 0.95; the schedule sets its lr), or schedule-free AdamW (its default betas, its own
    warm-up of ``s.warmup_steps``) put in its training mode."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if name in trainable:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": s.weight_decay, "initial_lr": s.lr},
        {"params": no_decay, "weight_decay": 0.0, "initial_lr": s.lr},
    ]
    if s.optimizer == "adamw":
        return s.hardware.adamw(groups, s.lr)
    if s.optimizer == "schedulefree":
        optimizer = schedulefree.AdamWScheduleFree(groups, lr=s.lr, warmup_steps=s.warmup_steps)
        optimizer.train()
        return optimizer
    raise ValueError(f"unknown optimizer {s.optimizer!r}; expected one of {OPTIMIZERS}")


def averaged_weights(optimizer, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Schedule-free AdamW's averaged weights x, where it is evaluated, as copies: the parameters hold its
    interpolation y = (1 - beta1) z + beta1 x, so x = y + (1 - 1 / beta1) (z - y) (the package's ``eval()``, without
    moving the parameters). A parameter not stepped yet has x = y."""
    beta1 = optimizer.param_groups[0]["betas"][0]
    out = {}
    for name, p in params.items():
        z = optimizer.state.get(p, {}).get("z")
        out[name] = p.detach().clone() if z is None else torch.lerp(p.detach(), z, 1 - 1 / beta1)
    return out


def run(
    model: nn.Module,
    family,
    objective,
    train_seqs: torch.Tensor,
    val_batches: list[dict],
    trainable: set[str],
    s: Settings,
    should_stop=lambda curve: False,
    label: str = "train",
    cache=None,
    levels: Sequence[float] = (),
    resolution: float = 0.0,
    start_loss: float | None = None,
    keeper=None,
) -> Result:
    """Train ``trainable`` on ``train_seqs`` (epochs reshuffled by seed) for up to ``s.max_examples`` examples.

    Evaluates at 0 examples, every ``s.eval_every_examples`` and at the end; ``should_stop(curve)`` after any
    evaluation (the curve so far, that evaluation last) ends training early (e.g. when the tightest recovery
    threshold is met, or the curve has stalled). ``cache``: a PrefixCache of the frozen layers below the first
    trainable one (train and validation hidden states), or None.

    With ``s.checkpoint_path`` (a killed job) or ``s.extension_path`` (a larger budget), the run resumes from a
    matching saved state and ends with the numbers of an uninterrupted run (``resuming``). A non-finite loss, or one
    above DIVERGENCE_FACTOR x the starting validation loss, stops training and sets ``result.diverged_step``.

    ``start_loss``: the validation loss of ``model`` as given, when the caller has just evaluated it (e.g. the
    damage of a reset), so the first point of the curve is not evaluated twice.

    ``keeper`` (a ``patience.Keeper``): sees every evaluation after ``should_stop``, may stop the run too (the
    patience rule) and keeps the best checkpoint's weights; its state goes into the run's checkpoints.

    ``levels`` (validation losses, e.g. the recovery thresholds) with ``resolution`` > 0: every crossing of a level
    is located to an interval (a, b] between two evaluations, b - a <= resolution x b or one optimizer step, inside
    the interval whose closing evaluation first reached it (``locating``); the regular evaluations and the final
    weights are those of a run without ``levels``.
    """
    r = _Run(
        model, family, objective, train_seqs, val_batches, trainable, s, should_stop, label, cache, start_loss, keeper
    )
    locator = locating.locator(r, levels, resolution)
    saved = resuming.Saved(r, at_evaluations_only=locator is not None)
    result, pos = r.result, r.pos
    if not saved.resume():
        stop = r.evaluate()
        r.regular_evaluation(stop, saved)
        if stop or not trainable or s.max_examples <= 0:
            result.stopped_early = stop
            saved.at_end()
            return result  # stopped at the first evaluation, or nothing to train
    if locator is not None:
        locator.next_interval(False)  # e.g. the state a replay of the first interval starts from
    r.compile()

    def after_step(info: trainer.StepInfo) -> bool:  # after every optimizer step; True: stop training
        r.advance(info)
        # an evaluation a run with a larger budget makes too (not after a batch the budget cut short)
        regular = pos.examples >= pos.next_eval and not r.cut
        at_evaluation = regular or pos.examples >= s.max_examples
        if not at_evaluation:
            if locator is not None:
                locator.after_step()  # e.g. the weights kept, should the interval's closing evaluation cross a level
        else:
            stop = r.evaluate()  # evaluation; ``should_stop`` decides
            if locator is not None:
                locator.at_evaluation(stop)  # locating the crossings it found first
            r.plan_next_evaluation()
            if regular:
                r.regular_evaluation(stop, saved)
            if stop:
                result.stopped_early = True
                return True
        saved.after_step(at_evaluation)  # checkpointing, when due
        return False

    model.train()
    r.train(s.max_examples, on_loss=r.diverged, on_step=after_step)
    model.eval()
    saved.at_end()
    r.end_at_evaluated_weights()
    return result


def epoch_batches(train_seqs, objective, s: Settings, pos: Position, generator, device, limit: int):
    """The training batches (index, batch, cut) up to ``limit`` examples, epochs reshuffled by ``s.data_seed``;
    ``cut``: the batch was cut short by the budget (a longer run's is not). Reads the position the callbacks
    advance, so a resumed run continues mid-epoch."""
    while pos.examples < limit:
        order = streams.epoch_order(train_seqs.shape[0], s.data_seed, pos.epoch)
        while pos.index < len(order) and pos.examples < limit:
            size = min(s.batch_size, s.max_examples - pos.examples)
            index = order[pos.index : pos.index + size]
            cut = size < min(s.batch_size, len(order) - pos.index)
            yield index, to_device(objective.batch(train_seqs[index], generator), device), cut
        if pos.index >= len(order):  # not when stopped at ``limit`` mid-epoch (a replay goes on from there)
            pos.epoch += 1
            pos.index = 0


class _Run:
    """One call of ``run``: the model and its settings, where training stands (``pos``) and the result so far. Its
    methods are the steps ``run``, ``locating`` and ``resuming`` take: train, evaluate, load weights."""

    def __init__(
        self,
        model,
        family,
        objective,
        train_seqs,
        val_batches,
        trainable,
        s,
        should_stop,
        label,
        cache,
        start_loss,
        keeper=None,
    ):
        for name, p in model.named_parameters():
            p.requires_grad_(name in trainable)
        self.model, self.family, self.objective, self.train_seqs = model, family, objective, train_seqs
        self.val_batches, self.s, self.should_stop = val_batches, s, should_stop
        self.label, self.cache, self.start_loss, self.keeper = label, cache, start_loss, keeper
        self.hw = s.hardware
        self.device = self.hw.prepare(model)
        self.grad_from = first_trainable_depth(family, model, trainable)
        if cache is not None and cache.depth > self.grad_from:
            raise ValueError(f"prefix cache at depth {cache.depth} but a tensor at depth {self.grad_from} trains")
        self.batch_generator = torch.Generator().manual_seed(s.data_seed)  # masks / noise of the training batches
        self.context = train_seqs.shape[1]
        self.optimizer = _optimizer(model, trainable, s) if trainable else None
        # evaluated at schedule-free AdamW's averaged weights, warmed up by the optimizer
        self.averaged = s.optimizer == "schedulefree" and self.optimizer is not None
        self.schedule = trainer.warmup_cosine(
            0 if s.optimizer == "schedulefree" else s.warmup_steps,
            math.ceil(s.max_examples / s.batch_size),
            s.cosine,
            s.min_lr_fraction,
        )
        self.params = {n: p for n, p in model.named_parameters() if n in trainable}
        self.result = Result()
        self.pos = Position(next_eval=s.eval_every_examples)
        self.t0 = time.perf_counter()
        self.cut = False  # the last batch was cut short by the budget

    # -- training ----------------------------------------------------------------------------------------------

    def compile(self) -> None:
        hw, family = self.hw, self.family
        hw.compile_modules(
            [l for l in family.stack_modules(self.model, "")][self.grad_from :]
            if hw.compile and isinstance(family, SingleStack)
            else []
        )

    def train(
        self, limit: int, on_loss: trainer.Callback = trainer.never, on_step: trainer.Callback = trainer.never
    ) -> bool:
        """The one optimisation loop (``trainer.train``) from the current position up to ``limit`` examples."""
        return trainer.train(
            self.optimizer,
            self.batches(limit),
            self.loss_of,
            self.schedule,
            self.s.grad_clip,
            list(self.params.values()),
            self.pos.steps,
            on_loss,
            on_step,
        )

    def batches(self, limit: int):
        """The training batches up to ``limit`` examples (``epoch_batches``); ``cut`` says whether the last one was
        cut short by the budget."""
        for index, batch, cut in epoch_batches(
            self.train_seqs, self.objective, self.s, self.pos, self.batch_generator, self.device, limit
        ):
            self.cut = cut
            yield index, batch

    def loss_of(self, item) -> torch.Tensor:
        index, batch = item
        with self.hw.autocast(self.device):
            if self.cache is None:
                return self.family.loss(self.model, batch, self.grad_from)
            hidden = self.cache.train_rows(index).to(self.device, non_blocking=True)
            return self.family.loss(self.model, batch, self.grad_from, hidden=hidden, from_depth=self.cache.depth)

    def diverged(self, info: trainer.StepInfo) -> bool:
        """Before the update: a non-finite loss, or one above DIVERGENCE_FACTOR x the first evaluation, stops."""
        loss_value = info.loss.item()  # the step's one host sync (NaN compares False, hence "not <=")
        if loss_value <= DIVERGENCE_FACTOR * self.result.curve[0].val_loss:
            self.pos.running += loss_value * len(info.batch[0])
            return False
        self.result.diverged_step = self.pos.steps
        log.warning("%s diverged: loss %s at step %d", self.label, loss_value, self.pos.steps)
        return True

    def advance(self, info: trainer.StepInfo) -> None:
        n = len(info.batch[0])
        self.pos.steps = info.step
        self.pos.index += self.s.batch_size
        self.pos.examples += n
        self.pos.running_n += n

    # -- evaluation --------------------------------------------------------------------------------------------

    def evaluated_weights(self) -> dict[str, torch.Tensor]:
        """Copies of the trainable tensors as evaluated: the raw ones, or schedule-free AdamW's averaged ones."""
        if self.averaged:
            return averaged_weights(self.optimizer, self.params)
        return {n: p.detach().clone() for n, p in self.params.items()}

    @contextlib.contextmanager
    def at_evaluated_weights(self):
        """The trainable tensors hold the evaluated weights inside, the training ones again after (bit for bit)."""
        if not self.averaged:
            yield
            return
        training = {n: p.detach().clone() for n, p in self.params.items()}
        self.load(self.evaluated_weights())
        try:
            yield
        finally:
            self.load(training)

    def load(self, weights: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for n, p in self.params.items():
                p.copy_(weights[n])

    def end_at_evaluated_weights(self) -> None:
        """At the end of a run the model holds the weights its last evaluation saw."""
        if self.averaged:
            self.load(self.evaluated_weights())

    def evaluate_model(self) -> float:
        """The validation loss of the model as it is (the trainable tensors as they are)."""
        return evaluate(self.model, self.family, self.val_batches, self.cache)

    def point(self, examples: int, steps: int, val_loss: float, train_loss: float | None = None, replay: bool = True):
        return CurvePoint(
            examples=examples,
            tokens=examples * self.context,
            steps=steps,
            wall_s=time.perf_counter() - self.t0,
            val_loss=val_loss,
            train_loss=train_loss,
            replay=replay,
        )

    def measure(self, replay: bool = False) -> CurvePoint:
        """An evaluation of the model at its evaluated weights, at the current position."""
        pos, result = self.pos, self.result
        started = time.perf_counter()
        if self.start_loss is not None and not result.curve and pos.steps == 0:
            val_loss = self.start_loss  # the same evaluation of the same weights, already made by the caller
        else:
            with self.at_evaluated_weights():
                val_loss = self.evaluate_model()
        result.eval_s += time.perf_counter() - started
        train_loss = None if replay or not pos.running_n else pos.running / pos.running_n
        return self.point(pos.examples, pos.steps, val_loss, train_loss, replay)

    def evaluate(self) -> bool:
        """A regular evaluation: appended to the curve and logged; True when ``should_stop`` says so."""
        s, pos = self.s, self.pos
        point = self.measure()
        pos.running, pos.running_n = 0.0, 0
        self.result.curve.append(point)
        rate = pos.examples / point.wall_s if point.wall_s > 0 else 0.0
        eta = (s.max_examples - pos.examples) / rate if rate > 0 else float("nan")
        train_txt = f"{point.train_loss:.4f}" if point.train_loss is not None else "-"
        log.info(
            "%s step %d | examples %d/%d | train %s | val %.4f | %.0fs elapsed, <= %.0fs left",
            self.label,
            pos.steps,
            pos.examples,
            s.max_examples,
            train_txt,
            point.val_loss,
            point.wall_s,
            eta,
        )
        stop = self.should_stop(self.result.curve)
        if self.keeper is not None:
            stop = self.keeper.at_evaluation(self) or stop
        return stop

    def plan_next_evaluation(self) -> None:
        """The next multiple of ``eval_every_examples`` (the budget's end is evaluated too)."""
        every = self.s.eval_every_examples
        self.pos.next_eval = (self.pos.examples // every + 1) * every

    def regular_evaluation(self, stop: bool, saved: resuming.Saved) -> None:
        """After an evaluation that a run with a larger budget makes too (at 0 and every ``eval_every_examples``, not
        at the budget's end), with the next one planned: where ``should_stop`` ended the run (``settled_at``), or
        else the state a longer run continues from (``saved``)."""
        if stop:
            self.result.settled_at = self.pos.examples
        saved.at_regular_evaluation(stop)
