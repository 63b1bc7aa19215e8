"""Locating a threshold crossing inside the evaluation interval that closed it (``loop.run`` with ``levels``).

When an evaluation is the first at or below one or more levels, each new crossing (loosest first) is narrowed to a
bracket (a, b] of that interval's evaluations, the one at b the first at or below the level, until b - a <=
resolution x b or one optimizer step (``narrow_enough``): one rule picks the step to probe (``probe_step``), one
loop narrows (``bracket``), on the weights of a step from one of two sources, which give the same probes and curve:
``Kept`` (copies of the trainable tensors after every step of the interval: nothing trains) or, for a run whose
copies would exceed ``SNAPSHOT_BUDGET_MB`` (trainable bytes x steps per interval; the regime ``full`` cells of 6
of ``config/full.yaml``'s 8 models: up to 161 MB x 32 steps), ``Replayed`` (the interval trained again from the
state saved at its latest evaluation before the step). The evaluations made after the fact join the curve in step
order (``CurvePoint.replay``), their time counts in ``result.eval_s`` (a replay's training in ``replay_s`` /
``replay_train_s``), and the training state is put back: the regular evaluations and final weights are those of a
run without ``levels``.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import time

import torch

from selfheal.training.state import CurvePoint, Position

log = logging.getLogger("selfheal")
# Copies of the trainable tensors after every step of an evaluation interval are held on their device (memory of the
# accelerator on one). A run whose copies would take more than this many MB (trainable bytes x steps per interval)
# locates its crossings by replaying the interval instead.
SNAPSHOT_BUDGET_MB = 1024
# The next probe is predicted on log(loss - LOCATE_FLOOR x level), an exponential approach to a floor 10 % below the
# level (``probe_step``). Replayed on per-step validation curves of single-layer cells of the default grid, it takes
# about a quarter fewer evaluations than regula falsi on the loss itself with a bisection fallback (docs/performance.md
# names the commit of that measurement); floors from 0.5 to 0.93 x level did about as well.
LOCATE_FLOOR = 0.9


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
    until it meets ``narrow_enough``: ``evaluate_at(step)`` evaluates the weights after a step inside it."""
    while True:
        known.sort(key=lambda p: p.steps)
        i = next(i for i, p in enumerate(known) if p.val_loss <= level)
        lo, hi = known[i - 1], known[i]
        if narrow_enough(lo, hi, resolution):
            return
        known.append(evaluate_at(probe_step(lo, hi, level, examples_at, resolution)))


def new_crossings(curve: list[CurvePoint], levels) -> list[float]:
    """The levels the curve's last evaluation is the first at or below, loosest (first crossed) first."""
    end = curve[-1]
    return sorted(
        (l for l in levels if end.val_loss <= l and not any(p.val_loss <= l for p in curve[:-1])), reverse=True
    )


def close_interval(curve: list[CurvePoint], levels, locate, label: str, source: str) -> None:
    """After an evaluation: each level it crossed first located inside the interval it closed (loosest first: its
    crossing comes first) by ``locate(new, known)``, which appends its probes to ``known`` (the interval's first and
    last evaluation); the evaluations made after the fact are inserted into ``curve`` before its last one."""
    new = new_crossings(curve, levels)
    if not new:
        return
    first = max(curve[:-1], key=lambda p: p.steps)  # the evaluation the interval started at
    known = [first, curve[-1]]
    locate(new, known)
    points = sorted((p for p in known if p.replay), key=lambda p: p.steps)
    curve[-1:-1] = points
    if points:
        log.info(
            "%s located %d crossing(s) in examples %d-%d with %d evaluations %s",
            label,
            len(new),
            first.examples,
            known[-1].examples,
            len(points),
            source,
        )


def bracket_kept(new: list[float], known: list[CurvePoint], examples: dict[int, int], evaluate_at, resolution: float):
    """Every level of ``new`` bracketed among the steps of the interval ``known`` spans, each of which was kept
    (``examples``: step -> examples seen after it; ``evaluate_at(step)``: that kept step evaluated)."""
    first, end = known
    missing = [k for k in range(first.steps + 1, end.steps) if k not in examples]
    if missing:
        raise RuntimeError(f"no weights kept for steps {missing[0]}-{missing[-1]} of the interval to locate in")
    for level in new:
        bracket(known, level, evaluate_at, examples.__getitem__, resolution)


def locator(run, levels, resolution: float) -> Kept | Replayed | None:
    """How ``run`` (a ``loop._Run``) locates its crossings: None without levels, a resolution or trainable tensors;
    else on kept weights where their copies fit ``SNAPSHOT_BUDGET_MB``, by replay where they do not."""
    if not (levels and resolution > 0 and run.params):
        return None
    step_bytes = sum(p.numel() * p.element_size() for p in run.params.values())
    interval_steps = math.ceil(run.s.eval_every_examples / run.s.batch_size)
    keep = step_bytes * interval_steps <= SNAPSHOT_BUDGET_MB * 2**20
    log.info(
        "%s locates crossings %s (trainable tensors %.1f MB x %d steps per evaluation interval, budget %d MB)",
        run.label,
        "on weights kept at every step" if keep else "by replaying intervals",
        step_bytes / 2**20,
        interval_steps,
        SNAPSHOT_BUDGET_MB,
    )
    return (Kept if keep else Replayed)(run, levels, resolution)


class _Locator:
    """What both sources share: at an evaluation, every new crossing bracketed in the interval it closed."""

    source = ""

    def __init__(self, run, levels, resolution: float):
        self.run, self.levels, self.resolution = run, levels, resolution

    def at_evaluation(self, stopped: bool) -> None:
        """After an evaluation: its new crossings located (``close_interval``)."""
        close_interval(self.run.result.curve, self.levels, self.locate, self.run.label, self.source)
        self.next_interval(stopped)

    def after_step(self) -> None:
        """After a step inside an evaluation interval (not one closed by an evaluation)."""

    def next_interval(self, stopped: bool) -> None:
        """At an evaluation (or the run's start), once its crossings are located: ready for the next interval."""

    def locate(self, new: list[float], known: list[CurvePoint]) -> None:
        raise NotImplementedError


class Kept(_Locator):
    """Copies of the trainable tensors (as evaluated) after every step of the current interval: a kept step is
    copied into the trainable parameters and evaluated (the same function and prefix cache); then the current
    weights are put back, so the training state (weights, optimizer, RNGs, position) is untouched. Nothing trains."""

    source = "of kept weights"

    def __init__(self, run, levels, resolution: float):
        super().__init__(run, levels, resolution)
        self.kept: dict[int, tuple[int, dict[str, torch.Tensor]]] = {}  # step -> (examples, trainable tensors)

    def after_step(self) -> None:
        self.kept[self.run.pos.steps] = (self.run.pos.examples, self.run.evaluated_weights())

    def next_interval(self, stopped: bool) -> None:
        self.kept.clear()

    def locate(self, new: list[float], known: list[CurvePoint]) -> None:
        run, kept = self.run, self.kept
        current = {n: p.detach().clone() for n, p in run.params.items()}

        def evaluate_at(step: int) -> CurvePoint:
            examples, weights = kept[step]
            started = time.perf_counter()
            run.load(weights)
            val_loss = run.evaluate_model()
            run.result.eval_s += time.perf_counter() - started
            return run.point(examples, step, val_loss)

        try:
            bracket_kept(new, known, {k: v[0] for k, v in kept.items()}, evaluate_at, self.resolution)
        finally:
            started = time.perf_counter()
            run.load(current)
            run.result.eval_s += time.perf_counter() - started


class Replayed(_Locator):
    """The interval replayed from the state saved at its latest evaluation before the step to probe (the state at
    the interval's start, kept in memory at every evaluation, and at each probe): trained to that step, evaluated;
    then the state at the interval's end is restored, and training goes on exactly as without the replay."""

    source = "of replayed steps"

    def __init__(self, run, levels, resolution: float):
        super().__init__(run, levels, resolution)
        self.start = None  # the state at the interval's start

    def next_interval(self, stopped: bool) -> None:
        self.start = snapshot(self.run) if not stopped else None

    def locate(self, new: list[float], known: list[CurvePoint]) -> None:
        run, result = self.run, self.run.result
        if self.start is None:
            return
        began, evaluating = time.perf_counter(), result.eval_s
        first, end = known
        finish = snapshot(run)
        states = {first.steps: (first, self.start), end.steps: (end, finish)}
        batch = run.s.batch_size

        def evaluate_at(step: int) -> CurvePoint:
            lo, state = max((v for k, v in states.items() if k < step), key=lambda v: v[0].steps)
            restore(run, state)
            run.train(end.examples, on_step=lambda info: run.advance(info) or info.step >= step)
            point = run.measure(replay=True)
            states[step] = (point, snapshot(run))
            return point

        def examples_at(step: int) -> int:  # full batches inside the interval (steers the probe only)
            return min(end.examples, first.examples + (step - first.steps) * batch)

        for level in new:
            bracket(known, level, evaluate_at, examples_at, self.resolution)
        restore(run, finish)
        result.replay_s += time.perf_counter() - began
        result.replay_train_s += time.perf_counter() - began - (result.eval_s - evaluating)


def snapshot(run):
    """Everything the next steps of ``run`` depend on (the frozen tensors never change), in memory."""
    return (
        {n: p.detach().clone() for n, p in run.params.items()},
        copy.deepcopy(run.optimizer.state_dict()),
        run.batch_generator.get_state(),
        torch.get_rng_state(),
        torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        dataclasses.replace(run.pos),
    )


def restore(run, state) -> None:
    weights, optim, batch_rng, cpu_rng, cuda_rng, position = state
    run.load(weights)
    run.optimizer.load_state_dict(copy.deepcopy(optim))  # it adopts the tensors it is given: keep it reusable
    run.batch_generator.set_state(batch_rng)
    torch.set_rng_state(cpu_rng)
    if cuda_rng is not None:
        torch.cuda.set_rng_state_all(cuda_rng)
    for f in dataclasses.fields(Position):
        setattr(run.pos, f.name, getattr(position, f.name))
