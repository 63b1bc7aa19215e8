"""Pretraining from scratch to the validation minimum, racing the recipe's learning rates; and the same adapting a
downloaded model to the corpus (every tensor trains, from the downloaded weights) so its baseline is in-domain.

The race (docs/method.md, "Pretraining to the validation minimum"): the network is pretrained once per lr of
``recipe.lrs`` (the one recipe, ``training.recipe``: schedule-free AdamW evaluated at its averaged weights), every
copy from the same start (θ0, or the downloaded weights), the same data order and the same RNG state. Each copy
trains to its own patience stop (``training.patience``: no improvement beyond the validation set's noise for
``pretrain.patience`` epochs, and with ``pretrain.plateau_check`` not before that multiple of its best checkpoint's
examples) or to ``pretrain.max_epochs``; no other rule drops a copy. Each keeps its best checkpoint (the lowest
validation loss). The network is the best checkpoint of the copy whose best is lowest among the copies the patience
rule stopped (``winner``; of all copies where none was); its E is that checkpoint's examples / S. A copy cut by
``pretrain.max_epochs`` while below it is recorded (``unfinished_lr``): more epochs might give a lower minimum. Where the winner is at an edge of the lrs raced, the lr x 3 beyond it is raced too (``race_copy``, one
call), up to ``recipe.max_lr_extensions`` per side; ``lr_at_edge`` records a winner still at an edge.

The pretraining curve holds every copy's evaluations with its ``lr`` (``kept``: the network's copy); the
from-scratch cost is the fewest examples any copy needed to reach a level (``heal.budget.scratch_cost``). The
plateau check is the kept copy's own run on past its best checkpoint: where the patience rule stopped it, its loss
there is ``plateau_val_loss`` (``analysis.tables``: ``off_plateau`` when lower than the baseline by more than
eps_min x baseline / 4, never the case at a validation minimum); where ``pretrain.max_epochs`` stopped it, the
check is not made and the drop over the last quarter of the examples to its best checkpoint decides.

A killed job resumes: each copy checkpoints (``copies/lr<lr>/pretrain.ckpt``, with its best checkpoint's weights)
and a finished copy leaves its record (``copy.pt``: curve, best checkpoint), so a re-run trains only what is left.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch

from selfheal import models, records, results_io
from selfheal.data import streams
from selfheal.experiments import frozen_random
from selfheal.records import PretrainSummary
from selfheal.training import checkpoints, evaluation, loop, patience, recipe, setup
from selfheal.training import race as lr_race
from selfheal.training.state import CurvePoint, Settings

log = logging.getLogger("selfheal")
COPIES = "copies"  # beside the pretraining record: one folder per copy of the race while the job runs
PATIENCE, MAX_EPOCHS, DIVERGED = "patience", "max_epochs", "diverged"  # how a copy stopped


@dataclass
class Copy:
    """One copy of the race: its lr, curve, how it stopped, and its best checkpoint (trainable tensors on the CPU)."""

    lr: float
    curve: list[CurvePoint]
    best_examples: int
    best_steps: int
    best_loss: float
    stopped_by: str
    weights: dict[str, torch.Tensor]
    diverged_step: int | None = None

    @property
    def stop(self) -> CurvePoint:
        return max(self.curve, key=lambda p: p.examples)


class Race:
    """What every copy of one network's race shares: the start weights, the data, the evaluation and the recipe.
    ``race_copy(lr)`` trains (or reads back) one copy."""

    def __init__(self, model_cfg: dict, job: setup.Setup, train_seqs, trainable: set[str], start: dict, folder: Path):
        self.cfg, self.job, self.train_seqs, self.trainable, self.start = model_cfg, job, train_seqs, trainable, start
        self.folder = folder
        p = model_cfg["pretrain"]
        self.S = train_seqs.shape[0]
        self.patience = p["patience"] * self.S
        self.at_least = p.get("plateau_check") or 0.0
        # how far below the copies the patience rule stopped a cut copy may be (``winner``): eps_min of the loss
        self.tolerance = min(model_cfg.get("retrain", {}).get("thresholds", [0.0]))
        self.copies: list[Copy] = []

    def settings(self, lr: float) -> Settings:
        p = self.cfg["pretrain"]
        return recipe.settings(
            self.cfg["recipe"],
            lr,
            eval_every_examples=p["eval_every_examples"],
            max_examples=round(p["max_epochs"] * self.S),
            data_seed=p["seed"],
            hardware=self.job.hardware,
            checkpoint_path=str(self._dir(lr) / "pretrain.ckpt"),
            checkpoint_every_steps=p["checkpoint_every_steps"],
        )

    def _dir(self, lr: float) -> Path:
        return self.folder / COPIES / f"lr{lr:g}"

    def _fingerprint(self, s: Settings) -> str:
        return checkpoints.fingerprint(s, sorted(self.trainable), extra=[self.patience, self.at_least])

    def race_copy(self, lr: float) -> Copy:
        """Train the copy at ``lr`` from the start (or read back the record a finished one left) and add it."""
        s = self.settings(lr)
        done = self._dir(lr) / "copy.pt"
        copy = self._read(done, s)
        if copy is None:
            copy = self._train(s)
            checkpoints.write({"fingerprint": self._fingerprint(s), **_as_record(copy)}, done)
        else:
            log.info("pretraining copy at lr %g finished in an earlier run of this job: kept", lr)
        checkpoints.remove(s)  # (also one a job killed between the record and its removal left)
        self.copies.append(copy)
        log.info(
            "copy at lr %g: best val loss %.4f at %d examples (%.2f epochs), stopped by %s at %d examples",
            lr,
            copy.best_loss,
            copy.best_examples,
            copy.best_examples / self.S,
            copy.stopped_by,
            copy.stop.examples,
        )
        return copy

    def _read(self, path: Path, s: Settings) -> Copy | None:
        if not path.is_file():
            return None
        saved = torch.load(path, weights_only=True)
        if saved.get("fingerprint") != self._fingerprint(s):
            return None
        saved.pop("fingerprint")
        saved["curve"] = [CurvePoint(**p) for p in saved["curve"]]
        return Copy(**saved)

    def _train(self, s: Settings) -> Copy:
        setup.seed_everything(self.cfg["pretrain"]["seed"])  # every copy from the same RNG state
        model = self.job.model
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(self.start[name])
        keeper = patience.Keeper(self.patience, self.at_least)
        result = loop.run(
            model,
            self.job.family,
            self.job.objective,
            self.train_seqs,
            self.job.val_batches,
            self.trainable,
            s,
            label=f"pretrain lr {s.lr:g}",
            keeper=keeper,
        )
        state = keeper.state
        if result.diverged_step is not None:
            stopped = DIVERGED
            log.warning(
                "pretraining copy at lr %g diverged at step %d: its best checkpoint (%d examples) stands",
                s.lr,
                result.diverged_step,
                result.curve[state.best].examples,
            )
        else:
            stopped = PATIENCE if state.stop else MAX_EPOCHS
        best = result.curve[state.best]
        return Copy(
            lr=s.lr,
            curve=result.curve,
            best_examples=best.examples,
            best_steps=best.steps,
            best_loss=best.val_loss,
            stopped_by=stopped,
            weights=keeper.best_weights,
            diverged_step=result.diverged_step,
        )

    def winner(self) -> Copy:
        return winner(self.copies, self.tolerance)

    @property
    def lrs(self) -> list[float]:
        return [c.lr for c in self.copies]


def winner(copies: list[Copy], tolerance: float = 0.0) -> Copy:
    """The copy whose best checkpoint has the lowest validation loss among those the patience rule stopped (at their
    validation minimum; the first raced of equal ones), where it is within ``tolerance`` (relative: eps_min) of the
    lowest of all; else the lowest of all: a copy cut by ``pretrain.max_epochs`` already lower by more than the
    smallest threshold makes the stopped copy's loss a level the recipe beats by more than any eps asked (a copy
    that barely moved from its start stops by patience too), and the lowest copy's network is judged by the plateau
    gate."""
    lowest = min(copies, key=lambda c: c.best_loss)
    finished = [c for c in copies if c.stopped_by == PATIENCE]
    best = min(finished, key=lambda c: c.best_loss) if finished else lowest
    return best if best.best_loss <= lowest.best_loss * (1 + tolerance) else lowest


def unfinished_lower(copies: list[Copy], tolerance: float = 0.0) -> Copy | None:
    """The copy with the lowest best among those cut by ``pretrain.max_epochs`` while still below the winner's best
    (a larger lr that, trained longer, might reach a lower minimum), or None."""
    best = winner(copies, tolerance)
    cut = [c for c in copies if c.stopped_by == MAX_EPOCHS and c.best_loss < best.best_loss]
    return min(cut, key=lambda c: c.best_loss) if cut else None


def race(r: Race, lrs: list[float], max_extensions: int) -> Copy:
    """Race every lr of ``lrs``, then extend at an edge (``race.beyond``) while the winner is at one; the winner."""
    for lr in lrs:
        r.race_copy(lr)
    while (lr := lr_race.beyond(r.lrs, [r.winner().lr], lrs, max_extensions)) is not None:
        log.info("the winner (lr %g) is at an edge of the lrs raced: racing lr %g too", r.winner().lr, lr)
        r.race_copy(lr)
    return r.winner()


def pretrain(
    model_cfg: dict,
    eval_cfg: dict,
    tokens_path: str,
    theta0_dir: str | None,
    trained_dir: str,
    curve_path: str,
    summary_path: str,
    threads: int = 1,
    start_dir: str | None = None,
    baseline_path: str | None = None,
) -> PretrainSummary:
    """Pretrain one network (``model_cfg`` with its ``pretrain.seed``) from its step-0 weights, saved to
    ``theta0_dir``; or, with ``start_dir`` (a downloaded model's folder), adapt that model the same way. The
    network is the winning copy's best checkpoint (module docstring). With ``baseline_path``, its baseline is
    written there too: the best checkpoint's evaluation is the baseline (those weights on the fixed validation
    batches), so no separate job evaluates it again."""
    p, rec = model_cfg["pretrain"], model_cfg["recipe"]
    setup.seed_everything(p["seed"], threads)
    if start_dir is None:
        model = models.build(model_cfg, streams.vocabulary(tokens_path), seed=p["seed"])
        models.save(model, theta0_dir)
    else:
        model = models.load(start_dir)
    job = setup.prepare(model, model_cfg, eval_cfg, tokens_path)
    family = job.family
    context = model_cfg["context"]
    train_seqs = setup.train_sequences(model_cfg, tokens_path)
    S = train_seqs.shape[0]
    # Frozen-random variants (frozen_random.py): the frozen tensors stay at θ0 bit for bit, since loop.run leaves
    # them out of the optimizer (no update, no weight decay) and turns their gradients off.
    components = model_cfg.get("frozen_components") or []
    frozen = set(frozen_random.frozen_names(family, model, components)) if components else set()
    params = dict(model.named_parameters())
    trainable = set(params) - frozen
    frozen_params = sum(params[n].numel() for n in frozen)
    log.info(
        "%s %s: %d params (%d frozen at init: %s), S=%d sequences of %d tokens, up to %g epochs, patience %g "
        "epochs, racing lrs %s",
        "adapting" if start_dir else "pretraining",
        model_cfg["name"],
        models.parameter_count(model),
        frozen_params,
        frozen_random.label(components),
        S,
        context,
        p["max_epochs"],
        p["patience"],
        rec["lrs"],
    )
    start = {n: t.detach().to("cpu", copy=True) for n, t in params.items()}
    r = Race(model_cfg, job, train_seqs, trainable, start, Path(summary_path).parent)
    best = race(r, list(rec["lrs"]), rec["max_lr_extensions"])
    if best.best_examples == 0:
        raise RuntimeError(
            f"pretraining {model_cfg['name']}: no copy (lrs {r.lrs}) ever got below its loss at step 0; "
            "check the data and recipe.lrs"
        )
    with torch.no_grad():
        for name, t in model.named_parameters():
            t.copy_(best.weights[name] if name in best.weights else start[name])
    models.save(model, trained_dir)
    curve = pd.concat(
        [pd.DataFrame([asdict(pt) for pt in c.curve]).assign(lr=c.lr, kept=c is best) for c in r.copies],
        ignore_index=True,
    )
    results_io.write_parquet(curve_path, curve)
    wall = sum(c.stop.wall_s for c in r.copies)
    checked = best.stopped_by == PATIENCE
    lower = unfinished_lower(r.copies, r.tolerance)
    if lower is not None:
        log.warning(
            "the copy at lr %g was still below the network (lr %g) when pretrain.max_epochs cut it (%.4f < %.4f): "
            "it might reach a lower minimum with more epochs",
            lower.lr,
            best.lr,
            lower.best_loss,
            best.best_loss,
        )
    summary = PretrainSummary(
        model=model_cfg["name"],
        arch=model_cfg["arch"],
        n_layer=family.n_layers(model),
        d_model=models.width(model),
        n_head=models.heads(model),
        source="pretrained" if start_dir else "scratch",
        name_or_path=model_cfg.get("name_or_path"),
        pretrain_seed=p["seed"],
        context=context,
        params=models.parameter_count(model),
        trainable_params=models.parameter_count(model) - frozen_params,
        frozen_params=frozen_params,
        frozen_components=components,
        base_model=model_cfg.get("base_model", model_cfg["name"]),
        train_sequences=S,
        epochs=best.best_examples / S,
        examples=best.best_examples,
        tokens=best.best_examples * context,
        steps=best.best_steps,
        wall_s=wall,
        initial_val_loss=best.curve[0].val_loss,
        final_val_loss=best.best_loss,
        last_quarter_val_drop=_val_at(best.curve, 0.75 * best.best_examples) - best.best_loss,
        plateau_examples=best.stop.examples if checked else None,
        plateau_val_loss=best.stop.val_loss if checked else None,
        lr=best.lr,
        lrs=r.lrs,
        lr_at_edge=lr_race.is_edge(r.lrs, best.lr),
        stopped_by=best.stopped_by,
        unfinished_lr=lower.lr if lower is not None else None,
        unfinished_val_loss=lower.best_loss if lower is not None else None,
        stop_examples=best.stop.examples,
        race_examples=sum(c.stop.examples for c in r.copies),
    )
    thresholds = model_cfg.get("retrain", {}).get("thresholds")
    if summary.lr_at_edge:
        log.warning("the winning lr %g is at an edge of the lrs raced %s (extensions spent)", best.lr, r.lrs)
    if not checked:
        log.warning(
            "the kept copy (lr %g) stopped by %s before the patience rule did: raise pretrain.max_epochs",
            best.lr,
            best.stopped_by,
        )
    if thresholds and summary.off_plateau(best.best_loss, min(thresholds)):
        log.warning(
            "not fully trained: more pretraining would lower the loss by more than eps_min x loss / 4 = %.4f; this "
            "network's cells will leave every estimate (raise pretrain.max_epochs, or pretrain on fewer sequences)",
            min(thresholds) * best.best_loss / 4,
        )
    records.write(summary_path, summary)
    if baseline_path:
        evaluation.write_baseline(model_cfg, job, best.best_loss, tokens_path, baseline_path)
    shutil.rmtree(r.folder / COPIES, ignore_errors=True)
    log.info(
        "pretraining done: lr %g, val loss %.4f -> %.4f at %d examples (E = %.2f), %d copies in %.0fs",
        best.lr,
        summary.initial_val_loss,
        best.best_loss,
        best.best_examples,
        summary.epochs,
        len(r.copies),
        wall,
    )
    return summary


def _as_record(c: Copy) -> dict:
    """A finished copy as ``copy.pt`` keeps it (tensors and plain values only)."""
    fields = ("lr", "best_examples", "best_steps", "best_loss", "stopped_by", "diverged_step")
    return {**{k: getattr(c, k) for k in fields}, "curve": [asdict(p) for p in c.curve], "weights": c.weights}


def _val_at(curve, examples: float) -> float:
    """Validation loss at the evaluation closest to ``examples``."""
    return min(curve, key=lambda p: abs(p.examples - examples)).val_loss
