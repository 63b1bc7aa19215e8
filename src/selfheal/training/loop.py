"""Language-model training on the one trainer (``training.trainer``): pretraining, retraining a reset layer and
the no-reset control. Adds what these share on top of the trainer: epochs reshuffled by seed, evaluation on the fixed
validation batches with a stopping rule, threshold crossings located between evaluations (``run``), divergence
detection, resumable checkpoints and the prefix cache.

Only the parameters named trainable get gradients. Layers below the first trainable one run under ``no_grad``
(they are a fixed function of the input); layers above it need activation gradients only, which autograd gives
for free since their weights have ``requires_grad=False``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path

import schedulefree
import torch
from torch import nn

from selfheal.data import streams
from selfheal.models.families import SingleStack
from selfheal.training import checkpoints, trainer
from selfheal.training.evaluation import evaluate
from selfheal.training.hardware import to_device
from selfheal.training.state import CurvePoint, Position, Result, Settings

log = logging.getLogger("selfheal")
# A training loss this many times the validation loss before training counts as divergence (as does NaN/inf).
DIVERGENCE_FACTOR = 3.0
# Locating a crossing on kept weights holds a copy of the trainable tensors after every step of an evaluation
# interval, on their device (memory of the accelerator on one). A run whose copies would take more than this many
# MB (trainable bytes x steps per interval) locates its crossings by replaying the interval instead.
SNAPSHOT_BUDGET_MB = 1024
# Locating a crossing of a level predicts it on log(loss - LOCATE_FLOOR x level), an exponential approach to a floor
# 10 % below the level (``probe_step``). Replayed on per-step validation curves of single-layer cells of the default
# grid, it takes about a quarter fewer evaluations than regula falsi on the loss itself with a bisection fallback
# (benchmarks/probe_rules.py; figures in docs/performance.md); floors from 0.5 to 0.93 x level did about as well.
LOCATE_FLOOR = 0.9


def first_trainable_depth(family, model: nn.Module, trainable: set[str]) -> int:
    """Depth of the first layer that has to run with autograd on (embeddings are depth 0)."""
    return min((family.depth_of(model, n) for n in trainable), default=family.n_layers(model))


OPTIMIZERS = ("adamw", "schedulefree")


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


def narrow_enough(lo: CurvePoint, hi: CurvePoint, resolution: float) -> bool:
    """The resolution rule of a located crossing (lo, hi]: at most ``resolution`` x hi wide, or one step."""
    return hi.examples - lo.examples <= resolution * hi.examples or hi.steps - lo.steps <= 1


def probe_step(lo: CurvePoint, hi: CurvePoint, level: float, examples_at, resolution: float) -> int:
    """The step to evaluate next inside the bracket (lo, hi] of a crossing of ``level`` (lo above it, hi at or
    below it, wider than ``narrow_enough``); ``examples_at(step)``: the examples seen after a step inside it.

    A loss recovering after a reset approaches its floor roughly exponentially, so the crossing is predicted where
    log(loss - floor) on the line through the bracket's two evaluations meets log(level - floor), with the floor
    ``LOCATE_FLOOR`` x level (regula falsi on that scale; on the loss itself it aims late, the curve being convex).
    When the predicted step lies within the resolution of hi, the probe goes to the earliest step whose evaluation
    above the level would close the bracket (one probe instead of two). A bracket whose losses reach the floor, or
    that starts from an infinite loss, is bisected. Every probe lies strictly inside the bracket, so a level takes
    at most hi - lo - 1 probes."""
    floor = LOCATE_FLOOR * level
    at = (lo.steps + hi.steps) / 2
    if floor < hi.val_loss and math.isfinite(lo.val_loss):
        drop = math.log(lo.val_loss - floor) - math.log(hi.val_loss - floor)
        at = lo.steps + (math.log(lo.val_loss - floor) - math.log(level - floor)) / drop * (hi.steps - lo.steps)
    edge = next(
        k
        for k in range(lo.steps + 1, hi.steps)
        if k == hi.steps - 1 or hi.examples - examples_at(k) <= resolution * hi.examples
    )
    step = edge if at >= edge else round(at)
    return min(hi.steps - 1, max(lo.steps + 1, step))


def bracket(known: list[CurvePoint], level: float, evaluate_at, examples_at, resolution: float) -> None:
    """Narrow the crossing of ``level`` among the evaluations ``known`` (one interval's, in any order; appended to)
    until it meets ``narrow_enough``: ``evaluate_at(step)`` evaluates the weights kept after a step inside it."""
    while True:
        known.sort(key=lambda p: p.steps)
        i = next(i for i, p in enumerate(known) if p.val_loss <= level)
        lo, hi = known[i - 1], known[i]
        if narrow_enough(lo, hi, resolution):
            return
        known.append(evaluate_at(probe_step(lo, hi, level, examples_at, resolution)))


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
) -> Result:
    """Train ``trainable`` on ``train_seqs`` (epochs reshuffled by seed) for up to ``s.max_examples`` examples.

    Evaluates at 0 examples, every ``s.eval_every_examples`` and at the end; ``should_stop(curve)`` after any
    evaluation (the curve so far, that evaluation last) ends training early (e.g. when the tightest recovery
    threshold is met, or the curve has stalled). ``cache``: a PrefixCache of the frozen layers below the first
    trainable one (train and validation hidden states), or None.

    With ``s.checkpoint_path``, the full training state is written there atomically every
    ``s.checkpoint_every_steps`` steps, and a run that finds one resumes from it and ends with the same numbers as
    an uninterrupted run. A non-finite loss, or one above DIVERGENCE_FACTOR x the starting validation loss,
    stops training and sets ``result.diverged_step``.

    ``start_loss``: the validation loss of ``model`` as given, when the caller has just evaluated it (e.g. the
    damage of a reset), so the first point of the curve is not evaluated twice.

    ``levels`` (validation losses, e.g. the recovery thresholds) with ``resolution`` > 0: every crossing of a level
    is located to an interval (a, b] between two evaluations, the one at b the first at or below the level, with
    b - a <= resolution x b or one optimizer step. When an evaluation is the first at or below one or more levels,
    each new crossing (loosest level first) is located inside the interval that evaluation closed: on copies of the
    trainable tensors kept after every step of the interval (``_Training.locate_on_kept``), or, where those copies
    would take more than ``SNAPSHOT_BUDGET_MB`` (trainable bytes x steps per interval), by replaying the interval
    from its saved start state (``_Training.locate_by_replay``). Either way the evaluations made after the fact
    join the curve in step order (``CurvePoint.replay``, no train loss), their time counts in ``result.eval_s``
    (a replay's training in ``result.replay_s`` / ``replay_train_s``), and the regular evaluations and final
    weights are those of a run without ``levels``. With ``levels``, checkpoints are written at evaluations only,
    where no copies are held, so a resumed run ends with the same numbers.
    """
    training = _Training(
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
        levels,
        resolution,
        start_loss,
    )
    result, pos = training.result, training.pos
    if not training.resume():
        stop = training.evaluate()
        training.regular_evaluation(stop)
        if stop or not trainable or s.max_examples <= 0:
            result.stopped_early = stop
            training.keep_extension_point()
            return result  # stopped at the first evaluation, or nothing to train
    training.save_interval_start()  # the state a replay of the first interval starts from
    training.compile()

    def after_step(info: trainer.StepInfo) -> bool:  # after every optimizer step; True: stop training
        training.advance(info)
        # an evaluation a run with a larger budget makes too (not after a batch the budget cut short)
        regular = pos.examples >= pos.next_eval and not training.cut
        at_evaluation = regular or pos.examples >= s.max_examples
        if not at_evaluation:
            training.keep_weights()  # to locate a crossing in this interval, should its closing evaluation find one
        else:
            stop = training.evaluate()  # evaluation; ``should_stop`` decides
            if training.keeping:  # locating the crossings it found first, on the weights kept
                training.locate_on_kept()
            elif training.refining:  # or by replaying the interval
                training.locate_by_replay()
                training.save_interval_start(stop)
            training.plan_next_evaluation()
            if regular:
                training.regular_evaluation(stop)
            if stop:  # stopping
                result.stopped_early = True
                return True
        training.checkpoint(at_evaluation)  # checkpointing, when due
        return False

    model.train()
    training.train(s.max_examples, on_loss=training.diverged, on_step=after_step)
    model.eval()
    training.keep_extension_point()
    training.end_at_evaluated_weights()
    return result


class _Training:
    """One call of ``run``: the model and its settings, where training stands (``pos``), the result so far, and
    what crossings are located with (the trainable tensors kept after every step of the current evaluation
    interval, ``kept``, or the state at the interval's start, ``start``). Each method is one named step of ``run``."""

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
        levels,
        resolution,
        start_loss,
    ):
        for name, p in model.named_parameters():
            p.requires_grad_(name in trainable)
        self.model, self.family, self.objective, self.train_seqs = model, family, objective, train_seqs
        self.val_batches, self.trainable, self.s, self.should_stop = val_batches, trainable, s, should_stop
        self.label, self.cache, self.start_loss = label, cache, start_loss
        self.levels, self.resolution = levels, resolution
        self.hw = s.hardware
        self.device = self.hw.prepare(model)
        self.grad_from = first_trainable_depth(family, model, trainable)
        if cache is not None and cache.depth > self.grad_from:
            raise ValueError(f"prefix cache at depth {cache.depth} but a tensor at depth {self.grad_from} trains")
        self.batch_generator = torch.Generator().manual_seed(s.data_seed)  # masks / noise of the training batches
        self.context = train_seqs.shape[1]
        self.averaged = s.optimizer == "schedulefree"  # evaluated at averaged weights, warmed up by the optimizer
        self.schedule = trainer.warmup_cosine(
            0 if self.averaged else s.warmup_steps,
            math.ceil(s.max_examples / s.batch_size),
            s.cosine,
            s.min_lr_fraction,
        )
        self.result = Result()
        self.pos = Position(next_eval=s.eval_every_examples)
        self.t0 = time.perf_counter()
        self.optimizer = _optimizer(model, trainable, s) if trainable else None
        self.refining = bool(levels) and resolution > 0 and bool(trainable)
        self.params = {n: p for n, p in model.named_parameters() if n in trainable}
        step_bytes = sum(p.numel() * p.element_size() for p in self.params.values())
        interval_steps = math.ceil(s.eval_every_examples / s.batch_size)
        self.keeping = self.refining and step_bytes * interval_steps <= SNAPSHOT_BUDGET_MB * 2**20  # else replays
        self.kept: dict[int, tuple[int, dict[str, torch.Tensor]]] = {}  # step -> (examples, trainable tensors)
        self.start = None  # the state at the last evaluation, for a replay of the interval after it
        # continuing a run with a smaller budget, and keeping the state of the last regular evaluation for a larger
        # one: exact only where the lr schedule has no horizon
        self.extending = bool(s.extension_path) and self.optimizer is not None and not s.cosine
        self.extension_point = None  # that state (``checkpoints.state``), on the CPU
        self.cut = False  # the last batch was cut short by the budget
        self.saved_at = 0  # the step of the last checkpoint
        if self.refining:
            log.info(
                "%s locates crossings %s (trainable tensors %.1f MB x %d steps per evaluation interval, budget %d MB)",
                label,
                "on weights kept at every step" if self.keeping else "by replaying intervals",
                step_bytes / 2**20,
                interval_steps,
                SNAPSHOT_BUDGET_MB,
            )

    # -- training ----------------------------------------------------------------------------------------------

    def resume(self) -> bool:
        """Load the checkpoint of a killed run, if there is one that matches; True when resumed."""
        resumed = self.optimizer is not None and checkpoints.restore(
            self.s, self.model, self.optimizer, self.batch_generator, self.pos, self.result
        )
        if (
            not resumed
            and self.extending
            and checkpoints.restore(
                self.s,
                self.model,
                self.optimizer,
                self.batch_generator,
                self.pos,
                self.result,
                path=self.s.extension_path,
                any_budget=True,
                extra=self.cache_depth,
            )
        ):
            log.info(
                "%s continues a run with a smaller budget from its last regular evaluation (%d examples)",
                self.label,
                self.pos.examples,
            )
            self.regular_evaluation(False)
            resumed = True
        if resumed:
            self.t0 -= self.result.resumed_elapsed  # the wall clock continues where the killed run left it
            log.info(
                "%s resumed from %s at step %d (%d examples)",
                self.label,
                self.s.checkpoint_path if Path(self.s.checkpoint_path or "").is_file() else self.s.extension_path,
                self.pos.steps,
                self.pos.examples,
            )
        self.saved_at = self.pos.steps
        return resumed

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
        """The training batches up to ``limit`` examples. Reads the position the callbacks advance, so a resumed
        run continues mid-epoch."""
        s, pos = self.s, self.pos
        while pos.examples < limit:
            order = streams.epoch_order(self.train_seqs.shape[0], s.data_seed, pos.epoch)
            while pos.index < len(order) and pos.examples < limit:
                size = min(s.batch_size, s.max_examples - pos.examples)
                index = order[pos.index : pos.index + size]
                self.cut = size < min(s.batch_size, len(order) - pos.index)  # by the budget: a longer run's is not
                yield index, to_device(self.objective.batch(self.train_seqs[index], self.batch_generator), self.device)
            if pos.index >= len(order):  # not when stopped at ``limit`` mid-epoch (a replay goes on from there)
                pos.epoch += 1
                pos.index = 0

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
        if self.averaged and self.optimizer is not None:
            return averaged_weights(self.optimizer, self.params)
        return {n: p.detach().clone() for n, p in self.params.items()}

    @contextlib.contextmanager
    def at_evaluated_weights(self):
        """The trainable tensors hold the evaluated weights inside, the training ones again after (bit for bit)."""
        if not (self.averaged and self.optimizer is not None):
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
        if self.averaged and self.optimizer is not None:
            self.load(self.evaluated_weights())

    def measure(self, replay: bool = False) -> CurvePoint:
        """An evaluation of the model as it is, at the current position."""
        pos, result = self.pos, self.result
        started = time.perf_counter()
        if self.start_loss is not None and not result.curve and pos.steps == 0:
            val_loss = self.start_loss  # the same evaluation of the same weights, already made by the caller
        else:
            with self.at_evaluated_weights():
                val_loss = evaluate(self.model, self.family, self.val_batches, self.cache, self.hw)
        result.eval_s += time.perf_counter() - started
        return CurvePoint(
            examples=pos.examples,
            tokens=pos.examples * self.context,
            steps=pos.steps,
            wall_s=time.perf_counter() - self.t0,
            val_loss=val_loss,
            train_loss=None if replay or not pos.running_n else pos.running / pos.running_n,
            replay=replay,
        )

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
        return self.should_stop(self.result.curve)

    def plan_next_evaluation(self) -> None:
        """The next multiple of ``eval_every_examples`` (the budget's end is evaluated too)."""
        every = self.s.eval_every_examples
        self.pos.next_eval = (self.pos.examples // every + 1) * every

    # -- locating a crossing -----------------------------------------------------------------------------------

    def new_crossings(self) -> list[float]:
        """The levels the last evaluation is the first at or below, loosest (first crossed) first."""
        end = self.result.curve[-1]
        return sorted(
            (l for l in self.levels if end.val_loss <= l and not any(p.val_loss <= l for p in self.result.curve[:-1])),
            reverse=True,
        )

    def keep_weights(self) -> None:
        """After a step inside an evaluation interval: a copy of the trainable tensors, when locating on them."""
        if self.keeping:
            self.kept[self.pos.steps] = (self.pos.examples, self.evaluated_weights())

    def evaluate_kept(self, step: int) -> CurvePoint:
        """An evaluation of the weights kept after ``step``, copied into the model (``locate_on_kept`` puts them
        back)."""
        examples, weights = self.kept[step]
        started = time.perf_counter()
        self.load(weights)
        val_loss = evaluate(self.model, self.family, self.val_batches, self.cache, self.hw)
        self.result.eval_s += time.perf_counter() - started
        return CurvePoint(
            examples=examples,
            tokens=examples * self.context,
            steps=step,
            wall_s=time.perf_counter() - self.t0,
            val_loss=val_loss,
            train_loss=None,
            replay=True,
        )

    def locate_on_kept(self) -> None:
        """Locate each level the last evaluation crossed first on the weights kept in the interval it closed: a kept
        step is copied into the trainable parameters and evaluated (the same function and prefix cache), probing
        steps (``bracket``, ``probe_step``: predicted from the two evaluations that bracket the crossing, using every
        evaluation already known in the interval) until the bracket is narrow enough; then the current weights are
        put back, so the training state (weights, optimizer, RNGs, position) is untouched and the run goes on
        exactly as without these evaluations. Nothing is trained. The kept weights are dropped."""
        result, params, kept = self.result, self.params, self.kept
        new = self.new_crossings()
        if new:
            end = result.curve[-1]
            first = max(result.curve[:-1], key=lambda p: p.steps)  # the evaluation the interval started at
            missing = [k for k in range(first.steps + 1, end.steps) if k not in kept]
            if missing:
                raise RuntimeError(f"no weights kept for steps {missing[0]}-{missing[-1]} of the interval to locate in")
            current = {n: p.detach().clone() for n, p in params.items()}
            known = [first, end]  # this interval's evaluations
            try:
                for level in new:  # loosest first: its crossing comes first
                    bracket(known, level, self.evaluate_kept, lambda step: kept[step][0], self.resolution)
            finally:
                started = time.perf_counter()
                self.load(current)
                result.eval_s += time.perf_counter() - started
            points = sorted((p for p in known if p.replay), key=lambda p: p.steps)
            result.curve[-1:-1] = points
            if points:
                log.info(
                    "%s located %d crossing(s) in examples %d-%d with %d evaluations of kept weights",
                    self.label,
                    len(new),
                    first.examples,
                    end.examples,
                    len(points),
                )
        kept.clear()

    def snapshot(self):
        """Everything the next steps depend on (the frozen tensors never change)."""
        return (
            {n: p.detach().clone() for n, p in self.model.named_parameters() if n in self.trainable},
            copy.deepcopy(self.optimizer.state_dict()),
            self.batch_generator.get_state(),
            torch.get_rng_state(),
            torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            dataclasses.replace(self.pos),
        )

    def restore(self, state) -> None:
        weights, optim, batch_rng, cpu_rng, cuda_rng, position = state
        with torch.no_grad():
            for n, p in self.model.named_parameters():
                if n in weights:
                    p.copy_(weights[n])
        self.optimizer.load_state_dict(copy.deepcopy(optim))  # it adopts the tensors it is given: keep it reusable
        self.batch_generator.set_state(batch_rng)
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        for f in dataclasses.fields(Position):
            setattr(self.pos, f.name, getattr(position, f.name))

    def save_interval_start(self, stopped: bool = False) -> None:
        """At an evaluation, when locating by replay: the state the next interval starts from."""
        if self.refining and not self.keeping:
            self.start = self.snapshot() if not stopped else None

    def locate_by_replay(self) -> None:
        """The fallback of ``locate_on_kept`` for a run whose kept weights would exceed ``SNAPSHOT_BUDGET_MB``.
        Locate each level the last evaluation crossed first by bisecting the interval it closed: restore the state
        at the last evaluation above the level (weights, optimizer, RNGs, position; kept in memory at every
        evaluation), train to the middle step, evaluate, and repeat on the half that holds the crossing until it is
        narrow enough. Then restore the state at the interval's end, and training goes on exactly as without it."""
        result, s = self.result, self.s
        end = result.curve[-1]
        new = self.new_crossings()
        if self.start is None or not new:
            return
        began, evaluating = time.perf_counter(), result.eval_s
        first = max(result.curve[:-1], key=lambda p: p.steps)  # the evaluation ``start`` was taken at
        finish = self.snapshot()
        known = [(first, self.start), (end, finish)]  # this interval's evaluations and the states they were taken in
        for level in new:  # loosest first: its crossing comes first
            while True:
                known.sort(key=lambda k: k[0].steps)
                i = next(i for i, (p, _) in enumerate(known) if p.val_loss <= level)
                (lo, lo_state), (hi, _) = known[i - 1], known[i]
                if narrow_enough(lo, hi, self.resolution):
                    break
                self.restore(lo_state)
                middle = lo.examples + (hi.steps - lo.steps) // 2 * s.batch_size
                self.train(middle, on_step=lambda info: self.advance(info) or False)
                known.append((self.measure(replay=True), self.snapshot()))
        self.restore(finish)
        points = [p for p, _ in known if p.replay]
        result.curve[-1:-1] = sorted(points, key=lambda p: p.steps)
        result.replay_s += time.perf_counter() - began
        result.replay_train_s += time.perf_counter() - began - (result.eval_s - evaluating)
        if points:
            log.info(
                "%s located %d crossing(s) in examples %d-%d with %d more evaluations",
                self.label,
                len(new),
                first.examples,
                end.examples,
                len(points),
            )

    # -- extension: a larger budget continues the run ---------------------------------------------------------

    @property
    def cache_depth(self) -> int | None:
        return self.cache.depth if self.cache is not None else None

    def regular_evaluation(self, stop: bool) -> None:
        """After an evaluation that a run with a larger budget makes too (at 0 and every ``eval_every_examples``, not
        at the budget's end), with the next one planned: where ``should_stop`` ended the run (``settled_at``), or
        else, when extending, the state a longer run continues from (the same as that run's state here)."""
        if stop:
            self.result.settled_at = self.pos.examples
        elif self.extending:
            self.extension_point = checkpoints.state(
                self.s,
                self.model,
                self.optimizer,
                self.batch_generator,
                self.pos,
                self.result,
                time.perf_counter() - self.t0,
                any_budget=True,
                extra=self.cache_depth,
            )

    def keep_extension_point(self) -> None:
        """At the end of the run: the state of its last regular evaluation written to ``s.extension_path`` (none
        needed once the run settled; one left by an earlier run of the same settings stays where this run has
        none, e.g. resumed after its last regular evaluation: it is a valid, earlier point of the same run)."""
        if not self.extending:
            return
        path = Path(self.s.extension_path)
        if self.result.settled_at is not None:
            path.unlink(missing_ok=True)
        elif self.extension_point is not None:
            checkpoints.write(self.extension_point, path)

    # -- checkpointing -----------------------------------------------------------------------------------------

    def checkpoint(self, at_evaluation: bool) -> None:
        """Write the training state every ``checkpoint_every_steps`` steps. When locating crossings, checkpoints are
        taken at evaluations only (the first one at least checkpoint_every_steps after the last), where no kept
        weights are held, so a resumed run starts at an evaluation and can replay its first interval too."""
        s = self.s
        due = (
            s.checkpoint_every_steps
            and self.pos.steps - self.saved_at >= s.checkpoint_every_steps
            and (at_evaluation or not self.refining)
        )
        if s.checkpoint_path and due:
            checkpoints.save(
                s,
                self.model,
                self.optimizer,
                self.batch_generator,
                self.pos,
                self.result,
                time.perf_counter() - self.t0,
            )
            self.saved_at = self.pos.steps
