"""Retrain-to-threshold: train a reset model until it is back within eps of its baseline validation loss, racing
the learning rates of ``recipe.lrs``.

Regimes: ``frozen`` (only the reset tensors train; embeddings and the tied LM head stay frozen), ``layer`` (every
tensor of the reset layer(s) trains) and ``full`` (everything trains, as in Tamkin et al. 2020).

The race (``training.race``: its rules, and why they give the independent runs' minimum): one copy per lr, one after
another, each a ``loop.run`` from the same reset weights, random state and data order with its own optimizer, in
``race.order``; each stops when every threshold is met, by the dropping rule against the copies run before it, when
it has stalled (``heal.stall``, from ``budget.stop_examples`` on), at the budget or when it diverges. Where a
threshold's only winner is at an edge of the lrs raced, the next lr beyond it races too (``race.next_lr``, at most
``recipe.max_lr_extensions`` per side). A matched no-reset control is not raced: it trains once, at the lr its cells
give it (``control_lr``).

Each copy works in its own folder inside the cell's (``layout.COPY_IN_CELL``): its checkpoint while it trains (a killed job
resumes it), its extension point (a larger budget continues it) and, once it has stopped, its record (``copy.pt``: curve, why
it stopped, under which budget), which a later run keeps where its run is the one that run gives (``_reusable``, the
rule ``heal.unit`` applies to a whole cell). The weights of the primary copy so far (``layout.PRIMARY_WEIGHTS``) are
kept there too, so a copy kept that way needs no training for the cell's final weights; where they are missing it is
trained again (the same numbers).
"""

from __future__ import annotations

import logging
import math
import shutil
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import pandas as pd
import torch

from selfheal import grid, layout
from selfheal.grid import Cell, Target
from selfheal.heal import budget as budgets
from selfheal.heal import stall, staging, thresholds
from selfheal.heal.budget import Budget
from selfheal.heal.prefix_cache import PrefixCache
from selfheal.heal.reset import target_layers
from selfheal.records import CellResult, PretrainSummary, Recovery
from selfheal.training import checkpoints, locating, lockstep, loop, race, setup
from selfheal.training import recipe as recipes
from selfheal.training.state import CurvePoint

log = logging.getLogger("selfheal")
REGIMES = ("frozen", "layer", "full")
# Largest relative width (hi - lo) / hi of a located crossing (or one step): a wider evaluation interval that
# crosses a threshold is narrowed by evaluating its kept steps (training.loop, ``resolution``)
RESOLUTION = thresholds.RESOLUTION
CHECKPOINT = "retrain.ckpt"  # a copy's checkpoint, in its folder while it trains (removed once it has a record)
EXTENSION = "extend.ckpt"  # a copy's extension point, in its folder
RECORD = "copy.pt"  # a copy's record once it has stopped, in its folder


def trainable_names(model, family, regime: str, target: Target | str, reset_names: list[str]) -> set[str]:
    """frozen: the reset tensors; layer: every tensor of the targeted layer(s) (plus the reset tensors, e.g.
    embeddings); full: everything."""
    target = Target.of(target)
    if regime == "frozen" or (regime == "layer" and target.kind == grid.SWAP_KIND):
        return set(reset_names)
    if regime == "layer":
        layers = target_layers(model, family, target)
        return set(reset_names) | {n for layer in layers for n in family.param_names(model, layer, "full")}
    if regime == "full":
        return {n for n, _ in model.named_parameters()}
    raise ValueError(f"unknown regime {regime!r}; expected one of {REGIMES}")


@dataclass
class Raced:
    """One copy of a cell's race once it has stopped: its lr, its curve, why it stopped (``race.STOPS``), where it
    settled (the regular evaluation a rule that reads no budget stopped it at), the budget and stall stop it ran under,
    the prefix cache depth and its time spent evaluating and replaying. ``trained``: in this run (else kept from its
    record)."""

    lr: float
    curve: list[CurvePoint]
    stop: str
    settled_at: int | None
    diverged_step: int | None
    max_examples: int
    stop_examples: int | None
    depth: int | None
    eval_s: float = 0.0
    replay_s: float = 0.0
    replay_train_s: float = 0.0
    pass_size: int = 1  # the copies trained in its pass (``lockstep``; 1: alone, ``loop.run``)
    trained: bool = field(default=False, compare=False)

    def recoveries(self, baseline: float, levels) -> list[Recovery]:
        return thresholds.recoveries(self.curve, baseline, levels)

    def as_copy(self, baseline: float, levels) -> race.Copy:
        crossed = {
            r.threshold: race.Crossing(r.examples_lo, r.examples)
            for r in self.recoveries(baseline, levels)
            if r.recovered
        }
        return race.Copy(self.lr, crossed, self.diverged_step is not None, self.final_loss)

    @property
    def final_loss(self) -> float:
        return max(self.curve, key=lambda p: p.examples).val_loss

    def digest(self) -> str:
        """What identifies this run's weights at its end: its settings' lr and its curve."""
        return staging.fingerprint(lr=self.lr, curve=[(p.examples, p.steps, p.val_loss) for p in self.curve])

    def frame(self, position: int) -> pd.DataFrame:
        """Its rows of ``race.parquet``: its curve with its lr, its place in the run order and why it stopped."""
        curve = pd.DataFrame([asdict(p) for p in self.curve])
        return curve.assign(lr=self.lr, order=position, stop=self.stop)[["lr", "order", "stop", *curve.columns]]


def _write_record(path: Path, copy: Raced) -> None:
    fields_ = {f.name: getattr(copy, f.name) for f in fields(Raced) if f.name not in ("curve", "trained")}
    checkpoints.write({**fields_, "curve": [asdict(p) for p in copy.curve]}, path)


def _read_record(path: Path) -> Raced | None:
    if not path.is_file():
        return None
    try:
        raw = torch.load(path, weights_only=True)
        return Raced(**{**raw, "curve": [CurvePoint(**p) for p in raw["curve"]]})
    except Exception as err:  # a truncated or foreign file: train the copy again
        log.warning("ignoring unreadable copy record %s: %s", path, err)
        return None


def _reusable(copy: Raced, lr: float, length: int, stop_examples: int | None, depth: int | None) -> bool:
    """Whether a copy's record is the run this budget gives (the rule ``heal.unit._keep`` applies to a cell): the
    same lr and prefix cache depth, and trained for ``length`` examples, or settled within them (a copy the stall
    rule stopped only under the same stop)."""
    if copy.lr != lr or copy.depth != depth:
        return False
    if copy.stop == "stalled" and copy.stop_examples != stop_examples:
        return False
    return copy.max_examples == length or (copy.settled_at is not None and copy.settled_at <= length)


def remove_checkpoints(folder: str | Path) -> None:
    """Drop the checkpoints of a cell's copies once its outputs are written (their extension points and records
    stay, for a larger budget)."""
    for path in (Path(folder) / layout.COPIES).glob(f"*/{CHECKPOINT}"):
        path.unlink(missing_ok=True)


def race_stops(race_table: pd.DataFrame) -> set[str]:
    """Why the copies of a cell's race stopped (its ``race.parquet``)."""
    return set(race_table["stop"])


def retrain(
    model,
    family,
    job: setup.Setup,
    train_seqs,
    model_cfg: dict,
    cell: Cell,
    reset_names: list[str],
    baseline: float,
    damaged: float,
    pre: PretrainSummary,
    cache: PrefixCache | None = None,
    folder: str | None = None,
    control_examples: int | None = None,
    budget: Budget | None = None,
    control_lr: float | None = None,
) -> tuple[CellResult, pd.DataFrame, pd.DataFrame]:
    """Retrain one reset cell (``model`` holds the reset), racing ``recipe.lrs`` (module docstring): each copy until
    every threshold is met, the dropping rule stops it, the budget runs out (``budget``: the network's,
    ``heal.budget``; by default ``retrain.budget_fraction`` x S x E) or, from ``budget.stop_examples`` on, its curve
    has stalled (``heal.stall``). Returns the cell's record, its recovery curve (its primary copy's) and the race
    (every copy's curve, ``layout.RACE``); ``model`` ends at the primary copy's final weights. ``folder``: the cell's
    work folder, where each copy keeps its checkpoint, extension point and record (module docstring); the caller
    removes the checkpoints (``remove_checkpoints``) once it has written the outputs.

    A matched no-reset control (``Cell.is_matched_control``) does not stop at a threshold (it starts at the baseline)
    and is not raced: it trains at ``control_lr`` (the lr of the cells it is matched with; without one, the first of
    ``recipe.lrs``) for ``control_examples`` (the longest run of those cells), at most the budget, on the same data
    order and evaluation schedule."""
    r, recipe = model_cfg["retrain"], model_cfg["recipe"]
    target = Target.parse(cell.target)
    trainable = trainable_names(model, family, cell.regime, target, reset_names)
    trainable_params = int(sum(p.numel() for n, p in model.named_parameters() if n in trainable))
    budget = budget or budgets.of(r, pre, baseline, None, train_seqs.shape[0])
    control = cell.is_matched_control
    length = budgets.run_examples(budget, control, control_examples)
    levels = list(r["thresholds"])
    depth = cache.depth if cache else None
    lrs = [control_lr if control_lr is not None else recipe["lrs"][0]] if control else list(recipe["lrs"])
    log.info(
        "retrain %s: %d trainable tensors (%d params), baseline %.4f, damaged %.4f, %s %d examples (%g x %s)%s, %s",
        cell.as_dict(),
        len(trainable),
        trainable_params,
        baseline,
        damaged,
        "trains for" if control else "budget",
        length,
        budget.multiple,
        budget.unit,
        f", from the prefix cache at depth {depth}" if cache else "",
        f"at lr {lrs[0]:g}" if control else f"racing lrs {', '.join(f'{lr:g}' for lr in race.order(lrs))}",
    )
    race_run = _Race(
        model, family, job, train_seqs, cell, trainable, baseline, damaged, cache, folder, r, budget, length, recipe
    )
    ordered = race.order(lrs)
    k = race_run.copies_per_pass(len(ordered))
    for at in range(0, len(ordered), k):
        race_run.add_pass(ordered[at : at + k])
    if not control:
        cap = recipe["max_lr_extensions"]
        while (lr := race.next_lr(race_run.copies(), levels, lrs, cap)) is not None:
            log.info("the winner of a threshold is at an edge of the lrs raced: racing lr %g too", lr)
            race_run.add(lr)
    primary = race_run.finish()
    copies = race_run.copies()
    edges = {level: None for level in levels} if control else race.at_edge(copies, levels)
    winners = race.winners(copies, levels)
    by_lr = {c.lr: c for c in race_run.raced}
    recoveries = []
    for level in levels:
        source = by_lr[winners[level].lr] if winners[level] is not None and not control else primary
        rec = next(x for x in source.recoveries(baseline, levels) if x.threshold == level)
        rec.lr, rec.lr_at_edge = source.lr, edges[level]
        recoveries.append(rec)
        log.info(
            "threshold %.3f: %s at %d examples (lr %g%s)",
            rec.threshold,
            "recovered" if rec.recovered else "censored",
            rec.examples,
            rec.lr,
            ", at an edge of the lrs raced" if rec.lr_at_edge else "",
        )
        if rec.lr_at_edge:
            log.warning(
                "threshold %.3f: its winner, lr %g, is at an edge of the lrs raced (%s): a faster lr may lie beyond",
                level,
                rec.lr,
                ", ".join(f"{c.lr:g}" for c in sorted(race_run.raced, key=lambda c: c.lr)),
            )
    if primary.diverged_step is not None:
        log.warning(
            "the cell's primary copy diverged at step %d: kept in the tables as diverged", primary.diverged_step
        )
    settled = [c.settled_at for c in race_run.raced]
    wall = sum(_wall(c) for c in race_run.raced)
    train_s = sum(_wall(c) - c.eval_s - c.replay_train_s for c in race_run.raced)
    tokens = sum(max(p.tokens for p in c.curve) for c in race_run.raced)
    log.info(
        "race: %d copies, %d examples trained in all (the primary, lr %g: %d); training throughput %.0f tokens/s",
        len(race_run.raced),
        sum(max(p.examples for p in c.curve) for c in race_run.raced),
        primary.lr,
        max(p.examples for p in primary.curve),
        tokens / train_s if train_s > 0 else 0.0,
    )

    layer = family.layer(model, target.text) if target.is_layer else None
    out = CellResult(
        **cell.as_dict(),
        stack=layer.stack if layer else None,
        layer=layer.index if layer else None,
        depth=layer.depth if layer else None,
        arch=pre.arch,
        n_layer=pre.n_layer,
        d_model=pre.d_model,
        pretrain_examples=pre.pretrain_examples,  # S x E (None for a downloaded model)
        budget_examples=length,
        budget_unit=budget.unit,
        budget_multiple=budget.multiple,
        scratch_cost=budget.scratch_examples,
        settled_examples=None if control or None in settled else max(settled),
        stop_examples=budget.stop_examples,
        stalled_examples=primary.settled_at if primary.stop == "stalled" else None,
        baseline_loss=baseline,
        damaged_loss=damaged,
        final_loss=primary.final_loss,
        trainable_tensors=len(trainable),
        trainable_params=trainable_params,
        reset_tensors=len(reset_names),
        recoveries=recoveries,
        diverged_step=primary.diverged_step,
        prefix_cache_depth=depth,
        train_tokens_per_s=tokens / train_s if train_s > 0 and tokens else 0.0,
        eval_share=sum(c.eval_s for c in race_run.raced) / wall if wall > 0 else 0.0,
        replay_share=sum(c.replay_s for c in race_run.raced) / wall if wall > 0 else 0.0,
        n_params=int(sum(p.numel() for p in model.parameters())),
        lrs=sorted(c.lr for c in race_run.raced),
        lr=primary.lr,
    )
    table = pd.concat([c.frame(i) for i, c in enumerate(race_run.raced)], ignore_index=True)
    return out, pd.DataFrame([asdict(pt) for pt in primary.curve]), table


def _close(a: list[CurvePoint], b: list[CurvePoint], rtol: float = 1e-4) -> bool:
    """Two curves of one run trained in passes of different sizes: the same evaluations, losses to rounding."""
    return [(p.examples, p.steps) for p in a] == [(p.examples, p.steps) for p in b] and all(
        math.isclose(p.val_loss, q.val_loss, rel_tol=rtol) for p, q in zip(a, b)
    )


def _wall(copy: Raced) -> float:
    return max(p.wall_s for p in copy.curve)


class _Race:
    """The copies of one cell's race, run one after another on ``model`` (its trainable tensors put back to the
    reset weights before each, the frozen ones never touched), and the weights of the primary copy so far."""

    def __init__(
        self,
        model,
        family,
        job,
        train_seqs,
        cell,
        trainable,
        baseline,
        damaged,
        cache,
        folder,
        r,
        budget,
        length,
        recipe,
    ):
        self.recipe = recipe
        self.model, self.family, self.job, self.train_seqs, self.cell = model, family, job, train_seqs, cell
        self.trainable, self.baseline, self.damaged, self.cache = trainable, baseline, damaged, cache
        self.r, self.levels, self.budget, self.length = r, list(r["thresholds"]), budget, length
        self.work = Path(folder) if folder else None
        self.params = {n: p for n, p in model.named_parameters() if n in trainable}
        self.start = {n: p.detach().clone() for n, p in self.params.items()}  # the reset weights
        self.rng = (torch.get_rng_state(), torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
        self.raced: list[Raced] = []
        self.best: Raced | None = None  # the primary copy so far, and its final weights where known
        self.best_weights: dict[str, torch.Tensor] | None = None

    def copies(self, upto: int | None = None) -> list[race.Copy]:
        return [c.as_copy(self.baseline, self.levels) for c in self.raced[:upto]]

    def folder(self, lr: float) -> Path | None:
        return self.work / layout.COPY_IN_CELL.format(lr=lr) if self.work else None

    def copies_per_pass(self, wanted: int) -> int:
        """How many copies of this race train in one pass (``lockstep.copies_per_pass``): one where they cannot
        share one (``lockstep.plan``), for a matched control, or where their kept weights would not fit
        ``locating.SNAPSHOT_BUDGET_MB``."""
        setting = self.job.hardware.copies_per_pass
        how = lockstep.plan(self.family, self.model, self.trainable)
        if self.cell.is_matched_control or how is None or wanted < 2 or setting == 1:
            return 1
        device = self.job.hardware.torch_device()
        layers = self.family.n_layers(self.model) - (how[1] if how[0] == "layer" else 0)
        k = lockstep.copies_per_pass(
            setting, device, wanted, self.model, layers, self.recipe["batch_size"], self.train_seqs.shape[1]
        )
        step_bytes = sum(p.numel() * p.element_size() for p in self.params.values())
        interval = math.ceil(self.r["eval_every_examples"] / self.recipe["batch_size"])
        fits = max(1, int(locating.SNAPSHOT_BUDGET_MB * 2**20 // (step_bytes * interval)))
        return min(k, fits)

    def kept(self, lr: float) -> Raced | None:
        """The copy at ``lr`` from its record, where that is the run this budget gives."""
        where = self.folder(lr)
        kept = _read_record(where / RECORD) if where else None
        depth = self.cache.depth if self.cache else None
        if kept is not None and _reusable(kept, lr, self.length, self.budget.stop_examples, depth):
            log.info("copy at lr %g stopped (%s) in an earlier run of this cell: kept", lr, kept.stop)
            return kept
        return None

    def add(self, lr: float) -> None:
        """Race one more copy (kept from its record where that is the run this budget gives)."""
        copy = self.kept(lr) or self.train(lr, len(self.raced))
        self.raced.append(copy)
        self._consider(copy)

    def add_pass(self, lrs: list[float]) -> None:
        """Race the copies at ``lrs`` in one pass (``lockstep.run``), against the copies raced before them and each
        other: those kept from their records first, the rest trained together (one of them alone, as ``add``)."""
        fresh = []
        for lr in lrs:
            copy = self.kept(lr)
            if copy is None:
                fresh.append(lr)
            else:
                self.raced.append(copy)
                self._consider(copy)
        if len(fresh) == 1:
            self.add(fresh[0])
        elif fresh:
            for copy, weights in self.train_together(fresh):
                self.raced.append(copy)
                self._consider(copy, weights)

    def _reset(self) -> None:
        """The trainable tensors back to the reset weights, the random state to the cell's start."""
        with torch.no_grad():
            for n, p in self.params.items():
                p.copy_(self.start[n])
        torch.set_rng_state(self.rng[0])
        if self.rng[1] is not None:
            torch.cuda.set_rng_state_all(self.rng[1])

    def _settings(self, lr: float, where: Path | None, resumable: bool = True):
        r = self.r
        return recipes.settings(
            self.recipe,
            lr,
            eval_every_examples=r["eval_every_examples"],
            max_examples=self.length,
            data_seed=self.cell.seed,
            hardware=self.job.hardware,
            checkpoint_path=str(where / CHECKPOINT) if where and resumable else None,
            checkpoint_every_steps=r["checkpoint_every_steps"],
            extension_path=str(where / EXTENSION) if where and resumable else None,
        )

    def _stop_rule(self, known: dict, why: list[str]):
        """The race's rule on a copy's curve (every threshold met, dropped against ``known``, or stalled from
        ``stop_examples`` on); the reason it stopped appended to ``why``."""
        levels, baseline, stop_examples = self.levels, self.baseline, self.budget.stop_examples

        def should_stop(curve) -> bool:
            if self.cell.is_matched_control:
                return False
            point = curve[-1]
            met = [rec.threshold for rec in thresholds.recoveries(curve, baseline, levels) if rec.recovered]
            if race.can_stop(point.examples, met, known, levels):
                why.append("met" if len(met) == len(levels) else "dropped")
                return True
            if stop_examples is not None and point.examples >= stop_examples and stall.of_curve(curve).stalled:
                why.append("stalled")
                return True
            return False

        return should_stop

    def _raced(self, lr: float, result, why: list[str], pass_size: int) -> Raced:
        if result.settled_at is not None:
            stop = why[-1]
        else:
            stop = "diverged" if result.diverged_step is not None else "budget"
        copy = Raced(
            lr=lr,
            curve=list(result.curve),
            stop=stop,
            settled_at=result.settled_at,
            diverged_step=result.diverged_step,
            max_examples=self.length,
            stop_examples=self.budget.stop_examples,
            depth=self.cache.depth if self.cache else None,
            eval_s=result.eval_s,
            replay_s=result.replay_s,
            replay_train_s=result.replay_train_s,
            pass_size=pass_size,
            trained=True,
        )
        log.info(
            "%s lr %g stopped (%s) at %d examples",
            "control" if self.cell.is_matched_control else "copy",
            lr,
            stop,
            max(p.examples for p in copy.curve),
        )
        where = self.folder(lr)
        if where is not None:
            _write_record(where / RECORD, copy)
            (where / CHECKPOINT).unlink(missing_ok=True)  # the record supersedes it: a killed job keeps the copy
        return copy

    def train_together(self, lrs: list[float], stop_at: int | None = None) -> list[tuple[Raced, dict]]:
        """The copies at ``lrs`` in one pass from the reset weights and random state: each stopped by the dropping
        rule against the copies raced before and the crossings of the others so far (a copy that has not crossed a
        level another one crossed by this evaluation cannot be first to it: ``training.race``'s exactness holds).
        ``stop_at``: the pass of one copy trained again, stopped at that regular evaluation."""
        before = race.bounds(self.copies())
        whys: list[list[str]] = [[] for _ in lrs]

        def should_stop(i: int, curves) -> bool:
            if stop_at is not None:
                return curves[i][-1].examples >= stop_at
            others = [
                Raced(lrs[j], curve, "", None, None, self.length, None, None).as_copy(self.baseline, self.levels)
                for j, curve in enumerate(curves)
                if j != i
            ]
            known = dict(before)
            for level, hi in race.bounds(others).items():
                known[level] = min(known.get(level, hi), hi)
            return self._stop_rule(known, whys[i])(curves[i])

        self._reset()
        settings = [self._settings(lr, None) for lr in lrs]
        label = f"retrain lrs {', '.join(f'{lr:g}' for lr in lrs)}"
        together = lockstep.run(
            self.model,
            self.family,
            self.job.objective,
            self.train_seqs,
            self.job.val_batches,
            self.trainable,
            settings,
            should_stop,
            cache=self.cache,
            levels=[thresholds.threshold_loss(self.baseline, eps) for eps in self.levels],
            resolution=RESOLUTION,
            start_loss=self.damaged,
            label=label,
        )
        if stop_at is not None:  # trained again for its weights: its record stays as it is
            return [
                (Raced(lrs[0], together[0].result.curve, "", None, None, self.length, None, None), together[0].weights)
            ]
        return [
            (self._raced(lr, c.result, whys[i], len(lrs)), c.weights) for i, (lr, c) in enumerate(zip(lrs, together))
        ]

    def train(self, lr: float, position: int) -> Raced:
        """One copy: ``loop.run`` at ``lr`` from the reset weights and random state, stopped by the dropping rule
        against the copies before ``position``."""
        control = self.cell.is_matched_control
        why: list[str] = []
        self._reset()
        result = loop.run(
            self.model,
            self.family,
            self.job.objective,
            self.train_seqs,
            self.job.val_batches,
            self.trainable,
            self._settings(lr, self.folder(lr)),
            should_stop=self._stop_rule(race.bounds(self.copies(position)), why),
            label="control" if control else f"retrain lr {lr:g}",
            cache=self.cache,
            levels=[] if control else [thresholds.threshold_loss(self.baseline, eps) for eps in self.levels],
            resolution=RESOLUTION,
            start_loss=self.damaged,
        )
        return self._raced(lr, result, why, 1)

    def _consider(self, copy: Raced, weights: dict[str, torch.Tensor] | None = None) -> None:
        """Keep the weights of the primary copy so far (``race.primary``: adding a copy keeps it or makes it that
        one); ``weights``: its final weights, where ``model`` does not hold them (a copy of a pass)."""
        if self.best is not None:
            key = race.primary_key(copy.as_copy(self.baseline, self.levels), self.levels)
            if key >= race.primary_key(self.best.as_copy(self.baseline, self.levels), self.levels):
                return
        self.best, self.best_weights = copy, None
        if copy.trained:
            self.best_weights = self._keep_weights(copy, weights)

    def _keep_weights(self, copy: Raced, weights: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """The trainable tensors as ``copy`` ended (``weights``, else those ``model`` holds now), written where a
        later run finds them."""
        if weights is None:
            weights = {n: p.detach().clone() for n, p in self.params.items()}
        if self.work is not None:
            state = {"lr": copy.lr, "digest": copy.digest(), "params": _on_cpu(weights)}
            checkpoints.write(state, self.work / layout.PRIMARY_WEIGHTS)
        return weights

    def finish(self) -> Raced:
        """The primary copy, its final weights in ``model`` (kept, read back, or trained again); the folders of
        copies no longer raced removed."""
        best = self.best
        weights = self.best_weights
        if weights is None and self.work is not None and (self.work / layout.PRIMARY_WEIGHTS).is_file():
            state = torch.load(self.work / layout.PRIMARY_WEIGHTS, weights_only=True)
            if state.get("lr") == best.lr and state.get("digest") == best.digest():
                weights = state["params"]
        if weights is None and not self.params:
            weights = {}  # nothing trains: no weights to give back
        if weights is None:
            log.info("the primary copy, lr %g, was kept without its weights: trained again", best.lr)
            if best.pass_size == 1:
                again = self.train(best.lr, self.raced.index(best))
                same = again.digest() == best.digest()
                weights = self._keep_weights(again)
            else:  # a copy of a pass: alone in a pass of its own, to where it stopped (the same run, to rounding)
                end = best.settled_at if best.settled_at is not None else math.inf
                ((again, weights),) = self.train_together([best.lr], stop_at=end)
                same = _close(again.curve, best.curve)
                self._keep_weights(again, weights)
            if not same:
                raise RuntimeError(f"the copy at lr {best.lr:g} trained again gave another curve")
        with torch.no_grad():
            for n, p in self.params.items():
                p.copy_(weights[n])
        for name, p in self.model.named_parameters():
            p.requires_grad_(name in self.trainable)
        if self.work is not None:
            raced = {layout.COPY_IN_CELL.format(lr=c.lr) for c in self.raced}
            for stale in (self.work / layout.COPIES).glob("lr*"):
                if f"{layout.COPIES}/{stale.name}" not in raced:
                    shutil.rmtree(stale, ignore_errors=True)
        return best


def _on_cpu(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {n: t.detach().to("cpu", copy=True) for n, t in weights.items()}
