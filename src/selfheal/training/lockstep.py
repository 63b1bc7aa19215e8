"""K runs of one reset layer trained in lockstep, one pass for all (``training.stacked``): the copies of an lr race
that ``heal.retrain`` packs together (``hardware.copies_per_pass``).

Each copy is the run ``loop.run`` makes at its own lr from the same start (the same reset weights, data order and
batches, the recipe's schedule-free AdamW with its own lr and its own gradient clipping), to float tolerance (the
stacked matrix products round differently; ``tests/test_lockstep.py``): the same regular evaluations (at 0, every
``eval_every_examples`` and at the budget's end, at the copy's averaged weights, in fp32), the same divergence rule
(a non-finite training loss or one above ``loop.DIVERGENCE_FACTOR`` x its first evaluation stops it before the
update), its crossings of ``levels`` located the same way on weights kept at every step (``locating.bracket``), and
it stops where ``should_stop`` says so after an evaluation (it sees every copy's curve: a race's dropping rule reads
the others'). A copy that stops leaves the batch: its slice of the stacked weights and of the optimiser's state is
removed, and the others go on.

Two ways to stack (``plan``): one layer of a single-stack model (GPT-2, BERT, Llama) shares the frozen prefix
(``StackedLayer``); any other trainable set, an encoder-decoder's layer, cross-attention or swapped encoder
included, runs the family's whole loss vmapped over the copies (``StackedModel``). What it does not do
(``heal.retrain`` trains such a race one copy after another instead): dropout, crossings whose kept weights would
exceed ``locating.SNAPSHOT_BUDGET_MB``, resuming a killed job mid-pass (a pass starts again; the copies it had
stopped keep their records) and continuing a copy under a larger budget.

Each copy's ``wall_s`` is its share of the pass: every step's time divided among the copies it trained, plus its own
evaluations, so the copies' times add up to the pass's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from selfheal.models.families import SingleStack
from selfheal.training import locating
from selfheal.training.evaluation import evaluate
from selfheal.training.loop import DIVERGENCE_FACTOR, epoch_batches
from selfheal.training.stacked import ScheduleFreeK, StackedLayer, StackedModel
from selfheal.training.state import CurvePoint, Position, Result, Settings

log = logging.getLogger("selfheal")
# the bytes one copy's step holds per row (sequence x position) and per unit of width in each layer from the reset
# one up (activations kept for the backward, fp32: about 34 values per unit of width in a transformer layer,
# Korthikanti et al. 2022, x 4 bytes), and per vocabulary entry (logits, their softmax and its gradient, fp32)
ACTIVATION_BYTES_PER_WIDTH, LOGIT_BYTES_PER_TOKEN = 34 * 4, 3 * 4
MEMORY_SHARE = 0.5  # the share of a GPU's free memory the copies of one pass may take (``copies_per_pass``)


def plan(family, model: nn.Module, trainable: set[str]) -> tuple[str, int] | None:
    """How the copies of a run of ``trainable`` train in one pass: ``("layer", L)`` where they are exactly the
    tensors of layer L of a single-stack model (``StackedLayer``: the frozen prefix once, the rest on K x B rows);
    ``("model", d)`` for any other set (``StackedModel``: the family's whole loss vmapped over the copies; d, the
    depth of the first trainable tensor); None where nothing trains or the model drops out (a dropout mask per copy
    would not be the mask of its run alone)."""
    if not trainable or _has_dropout(model):
        return None
    if isinstance(family, SingleStack):
        for layer in family.layers(model):
            names = {n for n, _ in model.named_parameters() if n.startswith(layer.prefix)}
            if names and names == set(trainable):
                return "layer", layer.depth
    return "model", min(family.depth_of(model, n) for n in trainable)


def _has_dropout(model: nn.Module) -> bool:
    """A dropout module with a rate above 0, or a module that drops by a rate of its own (BART's ``dropout``,
    Llama's ``attention_dropout``)."""
    rates = ("dropout", "attention_dropout", "activation_dropout")
    return any(
        (isinstance(m, nn.Dropout) and m.p > 0)
        or any(isinstance(getattr(m, r, None), float) and getattr(m, r) > 0 for r in rates)
        for m in model.modules()
    )


def copies_per_pass(
    setting: int | str, device: torch.device, wanted: int, model: nn.Module, layers: int, batch: int, context: int
) -> int:
    """How many copies of a race train in one pass (``hardware.copies_per_pass``): a number, at most ``wanted``;
    ``auto`` on a CPU one (measured: on a CPU the stacked pass gains little, docs/performance.md), on a GPU as many
    as fit ``MEMORY_SHARE`` of its free memory at the estimated activations of one copy's step (``step_bytes``)."""
    if setting != "auto":
        return max(1, min(int(setting), wanted))
    if device.type != "cuda":
        return 1
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(wanted, int(MEMORY_SHARE * free // step_bytes(model, layers, batch, context))))


def step_bytes(model: nn.Module, layers: int, batch: int, context: int) -> int:
    """The estimated memory one copy's training step holds (its activations in ``layers`` layers and its logits):
    rows x (layers x width x ``ACTIVATION_BYTES_PER_WIDTH`` + vocabulary x ``LOGIT_BYTES_PER_TOKEN``)."""
    config = model.config
    per_row = layers * config.hidden_size * ACTIVATION_BYTES_PER_WIDTH + config.vocab_size * LOGIT_BYTES_PER_TOKEN
    return batch * context * per_row


@dataclass
class Copy:
    """One copy of the pass: its run's result, and its final weights (as evaluated) once it has stopped."""

    lr: float
    result: Result = field(default_factory=Result)
    weights: dict[str, torch.Tensor] | None = None
    running: float = 0.0
    running_n: int = 0
    clock: float = 0.0  # its share of the pass's wall seconds so far


def run(
    model: nn.Module,
    family,
    objective,
    train_seqs: torch.Tensor,
    val_batches: list[dict],
    trainable: set[str],
    settings: Sequence[Settings],
    should_stop: Callable[[int, list[list[CurvePoint]]], bool],
    cache=None,
    levels: Sequence[float] = (),
    resolution: float = 0.0,
    start_loss: float | None = None,
    label: str = "retrain",
) -> list[Copy]:
    """Train one copy per ``settings`` (the same but for ``lr``) of the layer ``trainable`` names in one pass
    (module docstring). ``should_stop(i, curves)``: after an evaluation of copy i, every copy's curve so far (the
    stopped ones' whole), whether copy i stops. Returns the copies; ``model`` holds the first one's final weights."""
    s = settings[0]
    how = plan(family, model, trainable)
    if how is None:
        raise ValueError(f"{label}: nothing trains, or the model drops out: its copies cannot share a pass")
    kind, depth = how
    hw = s.hardware
    device = hw.prepare(model)
    for p in model.parameters():
        p.requires_grad_(False)
    if cache is not None and cache.depth > depth:
        raise ValueError(f"prefix cache at depth {cache.depth} but a tensor at depth {depth} trains")
    params = {n: p for n, p in model.named_parameters() if n in trainable}
    if kind == "layer":
        stack = StackedLayer(family, model, depth, len(settings))
    else:
        stack = StackedModel(family, model, set(trainable), len(settings), cache.depth if cache is not None else 0)
    names = stack.full_names()
    optimizer = ScheduleFreeK(
        stack.weights, [x.lr for x in settings], s.weight_decay, s.warmup_steps, grad_clip=s.grad_clip
    )
    copies = [Copy(x.lr) for x in settings]
    alive = list(range(len(copies)))  # the copy of each slice of the stacked weights
    context = train_seqs.shape[1]
    t0 = time.perf_counter()
    locate = bool(levels) and resolution > 0

    def load(slice_: int, weights: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for key, w in weights.items():
                params[names[key]].copy_(w[slice_])

    def point(c: Copy, examples: int, steps: int, val_loss: float, replay: bool) -> CurvePoint:
        train_loss = None if replay or not c.running_n else c.running / c.running_n
        return CurvePoint(examples, examples * context, steps, c.clock, val_loss, train_loss, replay)

    def measure(i: int, slice_: int, weights, examples: int, steps: int, replay: bool = False) -> CurvePoint:
        c = copies[i]
        started = time.perf_counter()
        load(slice_, weights)
        val_loss = evaluate(model, family, val_batches, cache)
        spent = time.perf_counter() - started
        c.result.eval_s += spent
        c.clock += spent
        return point(c, examples, steps, val_loss, replay)

    def finish(i: int, slice_: int, weights) -> None:
        copies[i].weights = {names[key]: w[slice_].detach().clone() for key, w in weights.items()}

    # the first evaluation: every copy starts from the same weights
    first = start_loss if start_loss is not None else evaluate(model, family, val_batches, cache)
    for c in copies:
        c.result.curve.append(point(c, 0, 0, first, False))
    curves = [c.result.curve for c in copies]
    start = optimizer.averaged()
    stopping = [i for i in alive if should_stop(i, curves)]
    for i in stopping:
        copies[i].result.settled_at = 0
        copies[i].result.stopped_early = True
        finish(i, alive.index(i), start)
    alive = [i for i in alive if i not in stopping]
    if not trainable or s.max_examples <= 0:
        for i in alive:
            finish(i, alive.index(i), start)
        alive = []
    if stopping and alive:
        _keep(stack, optimizer, alive)  # before any step, copy i is slice i
    if alive:
        log.info("%s: %d copies in one pass (lrs %s)", label, len(alive), ", ".join(f"{copies[i].lr:g}" for i in alive))
    else:
        log.info("%s: every copy stopped at its first evaluation", label)

    pos = Position(next_eval=s.eval_every_examples)
    generator = torch.Generator().manual_seed(s.data_seed)
    kept: dict[int, tuple[int, list[int], dict[str, torch.Tensor]]] = {}  # step -> (examples, alive, weights)
    batches = epoch_batches(train_seqs, objective, s, pos, generator, device, s.max_examples)
    started = time.perf_counter()
    while alive:
        item = next(batches, None)
        if item is None:
            break
        index, batch, cut = item
        hidden = cache.train_rows(index).to(device, non_blocking=True) if cache is not None else None
        with hw.autocast(device):
            losses = stack.losses(batch, hidden)
        values = losses.detach().tolist()  # the step's one host sync
        diverged = [j for j, v in enumerate(values) if not v <= DIVERGENCE_FACTOR * curves[alive[j]][0].val_loss]
        if diverged:
            before = optimizer.averaged()
            for j in diverged:
                i = alive[j]
                copies[i].result.diverged_step = pos.steps
                log.warning("%s lr %g diverged: loss %s at step %d", label, copies[i].lr, values[j], pos.steps)
                finish(i, j, before)
        live = [j for j in range(len(alive)) if j not in diverged]
        if live:
            total = losses.sum() if not diverged else losses[torch.tensor(live, device=losses.device)].sum()
            optimizer.zero_grad()
            total.backward()
            optimizer.clip()
            optimizer.step()
        share = (time.perf_counter() - started) / len(alive)  # the step's time, divided among its copies
        for i in alive:
            copies[i].clock += share
        if diverged:
            _keep(stack, optimizer, live)
        n = len(index)
        for j in live:
            copies[alive[j]].running += values[j] * n
            copies[alive[j]].running_n += n
        alive = [alive[j] for j in live]
        if not alive:
            break
        pos.steps += 1
        pos.index += s.batch_size
        pos.examples += n
        regular = pos.examples >= pos.next_eval and not cut
        at_evaluation = regular or pos.examples >= s.max_examples
        weights = optimizer.averaged() if (locate or at_evaluation) else None
        if not at_evaluation:
            if locate:
                kept[pos.steps] = (pos.examples, list(alive), weights)
            started = time.perf_counter()
            continue
        for j, i in enumerate(alive):
            curves[i].append(measure(i, j, weights, pos.examples, pos.steps))
            copies[i].running, copies[i].running_n = 0.0, 0
        stopping = [i for i in alive if should_stop(i, curves)]
        if locate:
            for j, i in enumerate(alive):
                _locate(copies[i], curves[i], levels, resolution, kept, i, measure, label)
        every = s.eval_every_examples
        pos.next_eval = (pos.examples // every + 1) * every
        for i in stopping:
            copies[i].result.stopped_early = True
            if regular:
                copies[i].result.settled_at = pos.examples
        ending = stopping if pos.examples < s.max_examples else list(alive)
        for i in ending:
            finish(i, alive.index(i), weights)
        kept.clear()
        if ending:
            stay = [j for j, i in enumerate(alive) if i not in ending]
            if stay:
                _keep(stack, optimizer, stay)
            alive = [alive[j] for j in stay]
        started = time.perf_counter()
    for j, i in enumerate(alive):  # the batches ran out (not reached: the budget's end is an evaluation)
        finish(i, j, optimizer.averaged())
    with torch.no_grad():
        for name, w in copies[0].weights.items():
            params[name].copy_(w)
    log.info("%s: the pass ended after %d steps, %.1fs", label, pos.steps, time.perf_counter() - t0)
    return copies


def _keep(stack: StackedLayer | StackedModel, optimizer: ScheduleFreeK, slices: list[int]) -> None:
    stack.keep(slices)
    optimizer.keep(slices)


def _locate(c: Copy, curve, levels, resolution, kept, i, measure, label) -> None:
    """The copy's new crossings located on its kept weights, as ``locating.Kept`` does for one run."""

    def evaluate_at(step: int) -> CurvePoint:
        examples, alive, weights = kept[step]
        return measure(i, alive.index(i), weights, examples, step, replay=True)

    def locate(new, known) -> None:
        locating.bracket_kept(new, known, {k: v[0] for k, v in kept.items()}, evaluate_at, resolution)

    locating.close_interval(curve, levels, locate, f"{label} lr {c.lr:g}", "of kept weights")
