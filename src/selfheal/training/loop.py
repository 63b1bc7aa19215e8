"""The one training loop, shared by pretraining and retraining.

Only the parameters named trainable get gradients. Layers below the first trainable one run under ``no_grad``
(they are a fixed function of the input); layers above it need activation gradients only, which autograd gives
for free since their weights have ``requires_grad=False``.
"""

from __future__ import annotations

import logging
import math
import time

import torch
from torch import nn

from selfheal.data import streams
from selfheal.models.families import SingleStack
from selfheal.training import checkpoints
from selfheal.training.evaluation import evaluate
from selfheal.training.hardware import to_device
from selfheal.training.state import CurvePoint, Position, Result, Settings

log = logging.getLogger("selfheal")
# A training loss this many times the validation loss before training counts as divergence (as does NaN/inf).
DIVERGENCE_FACTOR = 3.0


def first_trainable_depth(family, model: nn.Module, trainable: set[str]) -> int:
    """Depth of the first layer that has to run with autograd on (embeddings are depth 0)."""
    return min((family.depth_of(model, n) for n in trainable), default=family.n_layers(model))


def _lr_factor(step: int, total_steps: int, s: Settings) -> float:
    if step < s.warmup_steps:
        return (step + 1) / s.warmup_steps
    if not s.cosine:
        return 1.0
    progress = min(1.0, (step - s.warmup_steps) / max(1, total_steps - s.warmup_steps))
    return s.min_lr_fraction + (1 - s.min_lr_fraction) * 0.5 * (1 + math.cos(math.pi * progress))


def _optimizer(model: nn.Module, trainable: set[str], s: Settings) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if name in trainable:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": s.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return s.hardware.adamw(groups, s.lr)


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
) -> Result:
    """Train ``trainable`` on ``train_seqs`` (epochs reshuffled by seed) for up to ``s.max_examples`` examples.

    Evaluates at 0 examples, every ``s.eval_every_examples`` and at the end; ``should_stop(point)`` after any
    evaluation ends training early (e.g. when the tightest recovery threshold is met). ``cache``: a PrefixCache
    of the frozen layers below the first trainable one (train and validation hidden states), or None.

    With ``s.checkpoint_path``, the full training state is written there atomically every
    ``s.checkpoint_every_steps`` steps, and a run that finds one resumes from it and ends with the same numbers as
    an uninterrupted run. A non-finite loss, or one above DIVERGENCE_FACTOR x the starting validation loss,
    stops training and sets ``result.diverged_step``.
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

    def record() -> bool:
        started = time.perf_counter()
        val_loss = evaluate(model, family, val_batches, cache, hw)
        result.eval_s += time.perf_counter() - started
        point = CurvePoint(
            examples=pos.examples,
            tokens=pos.examples * context,
            steps=pos.steps,
            wall_s=time.perf_counter() - t0,
            val_loss=val_loss,
            train_loss=pos.running / pos.running_n if pos.running_n else None,
        )
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

    params = [p for n, p in model.named_parameters() if n in trainable]
    optimizer = _optimizer(model, trainable, s) if trainable else None
    resumed = optimizer is not None and checkpoints.restore(s, model, optimizer, batch_generator, pos, result)
    if resumed:
        t0 -= result.resumed_elapsed  # the wall clock continues where the killed run left it
        log.info("%s resumed from %s at step %d (%d examples)", label, s.checkpoint_path, pos.steps, pos.examples)
    elif record() or not trainable or s.max_examples <= 0:
        result.stopped_early = bool(result.curve) and should_stop(result.curve[-1])
        return result

    hw.compile_modules([l for l in family.stack_modules(model, "")][grad_from:] if hw.compile and
                       isinstance(family, SingleStack) else [])
    model.train()
    while pos.examples < s.max_examples:
        order = streams.epoch_order(train_seqs.shape[0], s.data_seed, pos.epoch)
        while pos.index < len(order) and pos.examples < s.max_examples:
            index = order[pos.index : pos.index + min(s.batch_size, s.max_examples - pos.examples)]
            seqs = train_seqs[index]
            batch = to_device(objective.batch(seqs, batch_generator), device)
            for group in optimizer.param_groups:
                group["lr"] = s.lr * _lr_factor(pos.steps, total_steps, s)
            with hw.autocast(device):
                if cache is None:
                    loss = family.loss(model, batch, grad_from)
                else:
                    hidden = cache.train_rows(index).to(device, non_blocking=True)
                    loss = family.loss(model, batch, grad_from, hidden=hidden, from_depth=cache.depth)
            loss_value = loss.item()  # the step's one host sync (NaN compares False, hence "not <=")
            if not loss_value <= DIVERGENCE_FACTOR * result.curve[0].val_loss:
                result.diverged_step = pos.steps
                log.warning("%s diverged: loss %s at step %d", label, loss_value, pos.steps)
                model.eval()
                return result
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if s.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, s.grad_clip)
            optimizer.step()
            pos.steps += 1
            pos.index += s.batch_size
            pos.examples += seqs.shape[0]
            pos.running += loss_value * seqs.shape[0]
            pos.running_n += seqs.shape[0]
            if pos.examples >= pos.next_eval or pos.examples >= s.max_examples:
                while pos.next_eval <= pos.examples:
                    pos.next_eval += s.eval_every_examples
                if record():
                    result.stopped_early = True
                    model.eval()
                    return result
            if s.checkpoint_path and s.checkpoint_every_steps and pos.steps % s.checkpoint_every_steps == 0:
                checkpoints.save(s, model, optimizer, batch_generator, pos, result, time.perf_counter() - t0)
        pos.epoch += 1
        pos.index = 0
    model.eval()
    return result
