"""Language-model training on the one trainer (``training.trainer``): pretraining, retraining a reset layer and
the no-reset control. Adds what these share on top of the trainer: epochs reshuffled by seed, evaluation on the fixed
validation batches with a stopping rule, threshold crossings located between evaluations (``run``), divergence
detection, resumable checkpoints and the prefix cache.

Only the parameters named trainable get gradients. Layers below the first trainable one run under ``no_grad``
(they are a fixed function of the input); layers above it need activation gradients only, which autograd gives
for free since their weights have ``requires_grad=False``.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import time
from collections.abc import Sequence

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


def _optimizer(model: nn.Module, trainable: set[str], s: Settings) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if name in trainable:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": s.weight_decay, "initial_lr": s.lr},
        {"params": no_decay, "weight_decay": 0.0, "initial_lr": s.lr},
    ]
    return s.hardware.adamw(groups, s.lr)


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
    edge = next(k for k in range(lo.steps + 1, hi.steps)
                if k == hi.steps - 1 or hi.examples - examples_at(k) <= resolution * hi.examples)
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
    should_stop=lambda point: False,
    label: str = "train",
    cache=None,
    levels: Sequence[float] = (),
    resolution: float = 0.0,
    start_loss: float | None = None,
) -> Result:
    """Train ``trainable`` on ``train_seqs`` (epochs reshuffled by seed) for up to ``s.max_examples`` examples.

    Evaluates at 0 examples, every ``s.eval_every_examples`` and at the end; ``should_stop(point)`` after any
    evaluation ends training early (e.g. when the tightest recovery threshold is met). ``cache``: a PrefixCache
    of the frozen layers below the first trainable one (train and validation hidden states), or None.

    With ``s.checkpoint_path``, the full training state is written there atomically every
    ``s.checkpoint_every_steps`` steps, and a run that finds one resumes from it and ends with the same numbers as
    an uninterrupted run. A non-finite loss, or one above DIVERGENCE_FACTOR x the starting validation loss,
    stops training and sets ``result.diverged_step``.

    ``start_loss``: the validation loss of ``model`` as given, when the caller has just evaluated it (e.g. the
    damage of a reset), so the first point of the curve is not evaluated twice.

    ``levels`` (validation losses, e.g. the recovery thresholds) with ``resolution`` > 0: every crossing of a level
    is located to an interval (a, b] between two evaluations, the one at b the first at or below the level, with
    b - a <= resolution x b or one optimizer step. While training, a copy of the trainable tensors is kept after
    every step of the current evaluation interval (cleared at each evaluation). When an evaluation is the first at
    or below one or more levels, each new crossing (loosest level first) is located on those copies: a kept step is
    copied into the trainable parameters, evaluated (the same function and prefix cache), and the current weights
    are put back, so the training state (weights, optimizer, RNGs, position) is untouched and the run goes on
    exactly as without these evaluations. Each probe step is predicted from the losses of the two evaluations that
    bracket the crossing, as an exponential approach to a floor below the level (``probe_step``, strictly inside
    the bracket), using every evaluation already known in the interval, until the bracket meets the resolution.
    No training is redone.

    When the copies would take more than ``SNAPSHOT_BUDGET_MB`` (trainable bytes x steps per interval), the run
    replays instead: the state at the last evaluation above the level (weights, optimizer, RNGs, position; kept in
    memory at every evaluation) is restored, training runs to the middle step and is evaluated, and so on in the
    half that holds the crossing until it is narrow enough; then the state at the interval's end is restored and
    training goes on exactly as without the replay. Either way the evaluations made after the fact inside an
    interval already trained join the curve in step order (``CurvePoint.replay``, no train loss), their time counts
    in ``result.eval_s`` (a replay's training in ``result.replay_s`` / ``replay_train_s``), and the regular
    evaluations and final weights are those of a run without ``levels``. With ``levels``, checkpoints are written
    at evaluations only, where no copies are held, so a resumed run ends with the same numbers.
    """
    for name, p in model.named_parameters():
        p.requires_grad_(name in trainable)
    hw = s.hardware
    device = hw.prepare(model)
    grad_from = first_trainable_depth(family, model, trainable)
    if cache is not None and cache.depth > grad_from:
        raise ValueError(f"prefix cache at depth {cache.depth} but a tensor at depth {grad_from} trains")
    batch_generator = torch.Generator().manual_seed(s.data_seed)  # masks / noise of the training batches
    context = train_seqs.shape[1]
    total_steps = math.ceil(s.max_examples / s.batch_size)
    result = Result()
    pos = Position(next_eval=s.eval_every_examples)
    t0 = time.perf_counter()

    def measure(replay: bool = False) -> CurvePoint:
        started = time.perf_counter()
        if start_loss is not None and not result.curve and pos.steps == 0:
            val_loss = start_loss  # the same evaluation of the same weights, already made by the caller
        else:
            val_loss = evaluate(model, family, val_batches, cache, hw)
        result.eval_s += time.perf_counter() - started
        return CurvePoint(
            examples=pos.examples,
            tokens=pos.examples * context,
            steps=pos.steps,
            wall_s=time.perf_counter() - t0,
            val_loss=val_loss,
            train_loss=None if replay or not pos.running_n else pos.running / pos.running_n,
            replay=replay,
        )

    def record() -> bool:
        point = measure()
        pos.running, pos.running_n = 0.0, 0
        result.curve.append(point)
        rate = pos.examples / point.wall_s if point.wall_s > 0 else 0.0
        eta = (s.max_examples - pos.examples) / rate if rate > 0 else float("nan")
        train_txt = f"{point.train_loss:.4f}" if point.train_loss is not None else "-"
        log.info(
            "%s step %d | examples %d/%d | train %s | val %.4f | %.0fs elapsed, <= %.0fs left",
            label, pos.steps, pos.examples, s.max_examples, train_txt, point.val_loss, point.wall_s, eta,
        )
        return should_stop(point)

    optimizer = _optimizer(model, trainable, s) if trainable else None
    refining = bool(levels) and resolution > 0 and bool(trainable)
    params = {n: p for n, p in model.named_parameters() if n in trainable}
    step_bytes = sum(p.numel() * p.element_size() for p in params.values())
    interval_steps = math.ceil(s.eval_every_examples / s.batch_size)
    keeping = refining and step_bytes * interval_steps <= SNAPSHOT_BUDGET_MB * 2**20  # else replays
    kept: dict[int, tuple[int, dict[str, torch.Tensor]]] = {}  # step -> (examples, trainable tensors after it)
    if refining:
        log.info("%s locates crossings %s (trainable tensors %.1f MB x %d steps per evaluation interval, budget %d MB)",
                 label, "on weights kept at every step" if keeping else "by replaying intervals",
                 step_bytes / 2**20, interval_steps, SNAPSHOT_BUDGET_MB)

    def snapshot():
        """Everything the next steps depend on (the frozen tensors never change)."""
        return ({n: p.detach().clone() for n, p in model.named_parameters() if n in trainable},
                copy.deepcopy(optimizer.state_dict()), batch_generator.get_state(), torch.get_rng_state(),
                torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None, dataclasses.replace(pos))

    def restore(state) -> None:
        weights, optim, batch_rng, cpu_rng, cuda_rng, position = state
        with torch.no_grad():
            for n, p in model.named_parameters():
                if n in weights:
                    p.copy_(weights[n])
        optimizer.load_state_dict(copy.deepcopy(optim))  # it adopts the tensors it is given: keep the state reusable
        batch_generator.set_state(batch_rng)
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        for f in dataclasses.fields(Position):
            setattr(pos, f.name, getattr(position, f.name))

    def plan_next_evaluation() -> None:
        """The next multiple of ``eval_every_examples`` (the budget's end is evaluated too)."""
        pos.next_eval = (pos.examples // s.eval_every_examples + 1) * s.eval_every_examples

    start = None  # the state at the last evaluation, for a replay of the interval after it
    resumed = optimizer is not None and checkpoints.restore(s, model, optimizer, batch_generator, pos, result)
    if resumed:
        t0 -= result.resumed_elapsed  # the wall clock continues where the killed run left it
        log.info("%s resumed from %s at step %d (%d examples)", label, s.checkpoint_path, pos.steps, pos.examples)
    elif record() or not trainable or s.max_examples <= 0:
        result.stopped_early = bool(result.curve) and should_stop(result.curve[-1])
        return result
    if refining and not keeping:
        start = snapshot()  # at the first evaluation, or at the evaluation a resumed run's checkpoint was taken

    hw.compile_modules([l for l in family.stack_modules(model, "")][grad_from:] if hw.compile and
                       isinstance(family, SingleStack) else [])

    def batches(limit: int):  # reads the position the callbacks advance, so a resumed run continues mid-epoch
        while pos.examples < limit:
            order = streams.epoch_order(train_seqs.shape[0], s.data_seed, pos.epoch)
            while pos.index < len(order) and pos.examples < limit:
                index = order[pos.index : pos.index + min(s.batch_size, s.max_examples - pos.examples)]
                yield index, to_device(objective.batch(train_seqs[index], batch_generator), device)
            if pos.index >= len(order):  # not when stopped at ``limit`` mid-epoch (a replay goes on from there)
                pos.epoch += 1
                pos.index = 0

    def loss_of(item) -> torch.Tensor:
        index, batch = item
        with hw.autocast(device):
            if cache is None:
                return family.loss(model, batch, grad_from)
            hidden = cache.train_rows(index).to(device, non_blocking=True)
            return family.loss(model, batch, grad_from, hidden=hidden, from_depth=cache.depth)

    def diverged(info: trainer.StepInfo) -> bool:
        loss_value = info.loss.item()  # the step's one host sync (NaN compares False, hence "not <=")
        if loss_value <= DIVERGENCE_FACTOR * result.curve[0].val_loss:
            pos.running += loss_value * len(info.batch[0])
            return False
        result.diverged_step = pos.steps
        log.warning("%s diverged: loss %s at step %d", label, loss_value, pos.steps)
        return True

    def advance(info: trainer.StepInfo) -> None:
        n = len(info.batch[0])
        pos.steps = info.step
        pos.index += s.batch_size
        pos.examples += n
        pos.running_n += n

    def located(level: float) -> bool:
        return any(p.val_loss <= level for p in result.curve[:-1])

    def refine() -> None:
        """The fallback of ``locate`` for a run whose kept weights would exceed ``SNAPSHOT_BUDGET_MB``.
        Locate each level the last evaluation crossed first, by bisecting the interval it closed: restore the
        state at the last evaluation above the level, train to the middle step, evaluate, and repeat on the half
        that holds the crossing until it is narrow enough. Then restore the state at the interval's end."""
        end = result.curve[-1]
        new = sorted((l for l in levels if end.val_loss <= l and not located(l)), reverse=True)
        if start is None or not new:
            return
        began, evaluating = time.perf_counter(), result.eval_s
        first = max(result.curve[:-1], key=lambda p: p.steps)  # the evaluation ``start`` was taken at
        finish = snapshot()
        known = [(first, start), (end, finish)]  # this interval's evaluations and the states they were taken in
        for level in new:  # loosest first: its crossing comes first
            while True:
                known.sort(key=lambda k: k[0].steps)
                i = next(i for i, (p, _) in enumerate(known) if p.val_loss <= level)
                (lo, lo_state), (hi, _) = known[i - 1], known[i]
                if narrow_enough(lo, hi, resolution):
                    break
                restore(lo_state)
                middle = lo.examples + (hi.steps - lo.steps) // 2 * s.batch_size
                trainer.train(optimizer, batches(middle), loss_of, schedule, s.grad_clip, list(params.values()),
                              pos.steps, on_step=lambda info: advance(info) or False)
                known.append((measure(replay=True), snapshot()))
        restore(finish)
        points = [p for p, _ in known if p.replay]
        result.curve[-1:-1] = sorted(points, key=lambda p: p.steps)
        result.replay_s += time.perf_counter() - began
        result.replay_train_s += time.perf_counter() - began - (result.eval_s - evaluating)
        if points:
            log.info("%s located %d crossing(s) in examples %d-%d with %d more evaluations", label, len(new),
                     first.examples, end.examples, len(points))

    def evaluate_kept(step: int) -> CurvePoint:
        """An evaluation of the weights kept after ``step``, copied into the model (``locate`` puts them back)."""
        examples, weights = kept[step]
        started = time.perf_counter()
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(weights[n])
        val_loss = evaluate(model, family, val_batches, cache, hw)
        result.eval_s += time.perf_counter() - started
        return CurvePoint(examples=examples, tokens=examples * context, steps=step, wall_s=time.perf_counter() - t0,
                          val_loss=val_loss, train_loss=None, replay=True)

    def locate() -> None:
        """Locate each level the last evaluation crossed first on the weights kept in the interval it closed:
        probe kept steps (``probe_step``) until the bracket is narrow enough, then put the current weights back.
        Nothing is trained."""
        end = result.curve[-1]
        new = sorted((l for l in levels if end.val_loss <= l and not located(l)), reverse=True)
        if not new:
            return
        first = max(result.curve[:-1], key=lambda p: p.steps)  # the evaluation the interval started at
        missing = [k for k in range(first.steps + 1, end.steps) if k not in kept]
        if missing:
            raise RuntimeError(f"no weights kept for steps {missing[0]}-{missing[-1]} of the interval to locate in")
        current = {n: p.detach().clone() for n, p in params.items()}
        known = [first, end]  # this interval's evaluations
        try:
            for level in new:  # loosest first: its crossing comes first
                bracket(known, level, evaluate_kept, lambda step: kept[step][0], resolution)
        finally:
            started = time.perf_counter()
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(current[n])
            result.eval_s += time.perf_counter() - started
        points = sorted((p for p in known if p.replay), key=lambda p: p.steps)
        result.curve[-1:-1] = points
        if points:
            log.info("%s located %d crossing(s) in examples %d-%d with %d evaluations of kept weights", label,
                     len(new), first.examples, end.examples, len(points))

    saved_at = pos.steps

    def after_step(info: trainer.StepInfo) -> bool:
        nonlocal start, saved_at
        advance(info)
        evaluated = pos.examples >= pos.next_eval or pos.examples >= s.max_examples
        if keeping and not evaluated:
            kept[pos.steps] = (pos.examples, {n: p.detach().clone() for n, p in params.items()})
        if evaluated:
            stop = record()
            if keeping:
                locate()
                kept.clear()
            elif refining:
                refine()
                start = snapshot() if not stop else None
            plan_next_evaluation()
            if stop:
                result.stopped_early = True
                return True
        # With refinement, checkpoints are taken at evaluations only (the first one at least checkpoint_every_steps
        # after the last), so a resumed run starts at an evaluation and can replay its first interval too.
        due = s.checkpoint_every_steps and pos.steps - saved_at >= s.checkpoint_every_steps and (evaluated or
                                                                                                 not refining)
        if s.checkpoint_path and due:
            checkpoints.save(s, model, optimizer, batch_generator, pos, result, time.perf_counter() - t0)
            saved_at = pos.steps
        return False

    model.train()
    schedule = trainer.warmup_cosine(s.warmup_steps, total_steps, s.cosine, s.min_lr_fraction)
    trainer.train(optimizer, batches(s.max_examples), loss_of, schedule, s.grad_clip, list(params.values()),
                  pos.steps, diverged, after_step)
    model.eval()
    return result

