"""Healing one unit: every cell of a network and retrain regime, all retrain seeds (``grid.Unit``), in one process.

The trained model, its token streams, validation batches and step-0 weights are loaded once. Per cell, in an order
that builds each frozen-prefix cache once and runs each matched no-reset control after the cells it is matched
with: the global RNG is seeded with the cell's seed, the trained model is copied, the cell's target is reset
(``reset.draw``, the cell's own generator; nothing changes for a matched control), the damage is measured on the
fixed validation set, and the cell retrains to threshold, racing the lrs of ``recipe.lrs`` (``retrain.retrain``; a
matched control trains once, at its longest cell's lr). After training, every tensor the cell did not train is
checked bit-identical to the trained model's, and for a one-layer target the healed layer's outputs (its primary
copy's) are compared with the original's (``similarity.linear_cka``; the reset layer before training is the floor).

Outputs per cell (in the unit's folder, ``layout.CELL_IN_UNIT``): ``damage.json`` (``Damage``),
``recovery.json`` (``CellResult``), ``curve.parquet`` (its primary copy's curve) and ``race.parquet`` (every copy's).
Work is never lost (``staging``): a running cell's copies checkpoint into the unit's work folder, and each finished
cell is staged there with a fingerprint of what it depends on (its settings and the content of its input files); the
outputs are hard links to the staged files, which stay. The next run (killed, or re-run because a retrain seed or a
cell was added) keeps every finished cell whose fingerprint matches, resumes the cell in progress (its finished
copies kept, the copy in progress from its checkpoint) and trains only the rest.

The budget (``heal.budget``, once per unit) is not part of a cell's fingerprint (``grid.covered``). A staged cell
whose run is the run the new budget gives is kept without training (``_keep``, the one place this is decided): the
same length, or a cell every copy of which settled (met every threshold, was dropped by the race's rule or stalled
at a regular evaluation) within the new budget (its record's budget fields are updated). Any other staged cell
(censored, diverged, or a matched control whose cells now train longer or at another lr) races again: each copy
settled within the budget is kept, and each other continues from its extension point, the state of its last regular
evaluation (``retrain.EXTENSION``, ``loop.run``), so its curve and crossings are those of a run given the new budget
from the start.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from pathlib import Path

import pandas as pd
import torch

from selfheal import grid, layout, models, records, results_io
from selfheal.data import streams
from selfheal.grid import Cell
from selfheal.heal import budget as budgets
from selfheal.heal import plan, prefix_cache, reset, retrain, similarity, staging
from selfheal.heal.budget import Budget
from selfheal.heal.prefix_cache import PrefixCache
from selfheal.records import Baseline, Damage, PretrainSummary
from selfheal.training import setup
from selfheal.training import evaluation
from selfheal.training.evaluation import evaluate

log = logging.getLogger("selfheal")
EXTENSION = retrain.EXTENSION  # each copy's extension point (``loop.run``), in its folder beside the cell's outputs


class FrozenTensorChanged(RuntimeError):
    pass


def _fingerprint(model_cfg: dict, eval_cfg: dict, cell: Cell, inputs_digest: str) -> str:
    """What a finished cell depends on: its settings but the budget, and the content of its inputs
    (``staging.digest``)."""
    return staging.fingerprint(
        model=grid.covered("cell", model_cfg), eval=eval_cfg, cell=cell.as_dict(), inputs=inputs_digest
    )


def _keep(folder: Path, length: int, depth: int | None, budget: Budget, lr: float | None = None) -> bool:
    """Whether a staged cell (fingerprint matching) is the run this budget gives, so it is kept untrained: trained
    for ``length`` examples, or settled (every copy of its race stopped at a regular evaluation by a rule that reads
    no budget) within it, from the same prefix cache depth; a matched control at ``lr``, the lr its cells give it. A
    cell a copy of which the stall rule stopped is that run only under the same ``retrain.stop_stalled``; a cell
    trained to its budget without the stop is kept under one (its curve goes on past where the rule would stop it).
    A kept cell's record gets this budget's fields, as a run given it from the start would."""
    result = records.read(folder / layout.RECOVERY, records.CellResult)
    if lr is not None and result.lr != lr:
        return False
    stalled = "stalled" in retrain.race_stops(pd.read_parquet(folder / layout.RACE, columns=["stop"]))
    if stalled and result.stop_examples != budget.stop_examples:
        return False
    settled = result.settled_examples is not None and result.settled_examples <= length
    if result.prefix_cache_depth != depth or not (settled or result.budget_examples == length):
        return False
    fields = {
        "budget_examples": length,
        "budget_unit": budget.unit,
        "budget_multiple": budget.multiple,
        "scratch_cost": budget.scratch_examples,
    }
    if any(getattr(result, k) != v for k, v in fields.items()):
        records.write(folder / layout.RECOVERY, dataclasses.replace(result, **fields))
    return True


def check_frozen(model, base, trainable: set[str], donor=None) -> None:
    """Every tensor that did not train is bit-identical to the trained model's, and a donor's frozen encoder to the
    donor's (a fresh swapped encoder's tensors have no counterpart and are skipped)."""
    base_params = dict(base.named_parameters())
    if donor is not None:
        encoder = "model.encoder."
        base_params = {n: p for n, p in base_params.items() if not n.startswith(encoder)}
        base_params |= {encoder + n: p for n, p in donor.model.encoder.named_parameters()}
    changed = [
        n
        for n, p in model.named_parameters()
        if n not in trainable
        and n in base_params
        and p.shape == base_params[n].shape
        and not torch.equal(p, base_params[n])
    ]
    if changed:
        raise FrozenTensorChanged(f"frozen tensors changed during retraining: {changed[:5]}")


class TrainedReference:
    """What the trained model gives on the fixed validation set, computed at most once per job and shared by its
    cells: its validation loss (the damage of a cell that resets nothing) and each layer's outputs on the CKA tokens.
    """

    def __init__(self, base, job: setup.Setup, confirm_batches: list[dict] | None = None):
        self.base, self.job = base, job
        self.confirm_batches = confirm_batches
        self._loss: float | None = None
        self._outputs: dict = {}
        self._per_sequence: torch.Tensor | None = None

    def per_sequence(self) -> torch.Tensor:
        """The trained model's loss on each confirmation sequence."""
        if self._per_sequence is None:
            self._per_sequence = evaluation.per_sequence(self.base, self.job.family, self.confirm_batches)
        return self._per_sequence

    def val_loss(self) -> float:
        if self._loss is None:
            self._loss = evaluate(self.base, self.job.family, self.job.val_batches)
        return self._loss

    def layer_outputs(self, layer) -> torch.Tensor:
        key = (layer.stack, layer.index)
        if key not in self._outputs:
            self._outputs[key] = similarity.layer_outputs(self.base, self.job.family, layer, self.job.val_batches)
        return self._outputs[key]


def heal_cell(
    base,
    job: setup.Setup,
    train_seqs,
    model_cfg: dict,
    cell: Cell,
    theta0,
    baseline: float,
    pre: PretrainSummary,
    cache: PrefixCache | None,
    folder: str | None,
    control_examples: int | None = None,
    reference: TrainedReference | None = None,
    budget: Budget | None = None,
    donor=None,
    control_lr: float | None = None,
):
    """Reset, measure the damage, retrain: one cell on a copy of the trained ``base``; returns its damage, record,
    curve and race (``retrain.retrain``). ``folder``: the cell's work folder (its copies' checkpoints, extension
    points and records); ``reference``: the trained model's loss and layer outputs, shared by the cells of a job (a
    cell that resets nothing reuses them); ``budget``: the network's (``heal.budget``); ``donor``: the trained model
    whose encoder a ``swap-<model>`` cell swaps in; ``control_lr``: a matched control's lr."""
    reference = reference or TrainedReference(base, job)
    setup.seed_everything(cell.seed)
    model = copy.deepcopy(base)
    names = reset.draw(model, job.family, cell.target, cell.policy, cell.init, cell.seed, theta0, donor)
    untouched = cell.init == grid.TRAINED or cell.target == grid.NONE  # the weights are the trained ones, bit for bit
    damaged = reference.val_loss() if untouched else evaluate(model, job.family, job.val_batches)
    layer = job.family.layer(model, cell.target) if cell.parsed_target.is_layer else None
    if layer is not None:
        original = reference.layer_outputs(layer)
        reset_outputs = original if untouched else similarity.layer_outputs(model, job.family, layer, job.val_batches)
        floor = similarity.linear_cka(original, reset_outputs)
    params = dict(model.named_parameters())
    damage = Damage(
        model=cell.model,
        target=cell.target,
        policy=cell.policy,
        init=cell.init,
        seed=cell.seed,
        reset_tensors=len(names),
        reset_params=int(sum(params[n].numel() for n in names)),
        damaged_loss=damaged,
        pretrain_seed=cell.pretrain_seed,
    )
    log.info(
        "reset %s %s/%s/%s seed %d: %d tensors, damaged val loss %.4f",
        cell.model,
        cell.target,
        cell.policy,
        cell.init,
        cell.seed,
        len(names),
        damaged,
    )
    result, curve, race = retrain.retrain(
        model,
        job.family,
        job,
        train_seqs,
        model_cfg,
        cell,
        names,
        baseline,
        damaged,
        pre,
        cache,
        folder,
        control_examples,
        budget,
        control_lr,
    )
    check_frozen(model, base, {n for n, p in model.named_parameters() if p.requires_grad}, donor)
    if layer is not None:
        result.cka_floor = floor
        result.cka = similarity.linear_cka(
            original, similarity.layer_outputs(model, job.family, layer, job.val_batches)
        )
    if reference.confirm_batches:
        confirm(model, job, reference, result)
    return damage, result, curve, race


def confirm(model, job: setup.Setup, reference: TrainedReference, result) -> None:
    """The cell's final weights and the trained network on the confirmation sequences, sequence by sequence: both
    losses there, and the standard error of their mean difference at the size of the fixed validation set."""
    cell = evaluation.per_sequence(model, job.family, reference.confirm_batches)
    base = reference.per_sequence()
    diff = cell - base
    val_count = sum(int(b["input_ids"].shape[0]) for b in job.val_batches)
    result.confirm_sequences = int(diff.numel())
    result.confirm_loss = float(cell.mean())
    result.confirm_baseline_loss = float(base.mean())
    result.val_diff_se = float(diff.std(unbiased=True) / math.sqrt(val_count)) if diff.numel() > 1 else None


def _order(cells: list[Cell], depths: dict) -> list[Cell]:
    """Cells without a prefix cache first, then by cache depth (each cache is built once, on the shallower one before
    it, and freed after its last cell); within each, the matched controls after the cells they are matched with."""
    return sorted(cells, key=lambda c: (depths.get(c, -1), c.is_matched_control))


def run(
    model_cfg: dict,
    eval_cfg: dict,
    cells: list[dict],
    tokens_path: str,
    trained_dir: str,
    theta0_dir: str | None,
    baseline_path: str,
    pretrain_summary_path: str,
    out_dir: str,
    work_dir: str,
    threads: int = 1,
    unit_cells: list[dict] | None = None,
    pretrain_curve_path: str | None = None,
    donors: dict[str, str] | None = None,
) -> None:
    """Heal every cell of one unit, or some of them, each into its folder (``layout.CELL_IN_UNIT``) inside
    ``out_dir``, staged in the same folder inside ``work_dir``. ``unit_cells``: every cell of the unit, where only
    some are healed here: the prefix caches are planned over them, as in the
    grid's job, so the numbers are the grid's.
    ``pretrain_curve_path``: the network's pretraining curve (None for a downloaded model healed as downloaded),
    whose from-scratch cost sets the budget under ``retrain.budget_scratch``. ``donors``: each donor model's
    trained folder (the donor network ``grid.donor_network`` picks for this one), for the ``swap-<model>`` cells."""
    cells = [Cell(**c) for c in cells]
    unit_cells = cells if unit_cells is None else [Cell(**c) for c in unit_cells]
    setup.seed_everything(0, threads)
    base = models.load(trained_dir)
    job = setup.prepare(base, model_cfg, eval_cfg, tokens_path)
    base.requires_grad_(False)
    train_seqs = setup.train_sequences(model_cfg, tokens_path)
    theta0 = reset.load_theta0(theta0_dir) if any(c.init == "original" for c in cells) else None
    baseline = records.read(baseline_path, Baseline).val_loss
    pre = records.read(pretrain_summary_path, PretrainSummary)
    if cells and pre.off_plateau(baseline, min(model_cfg["retrain"]["thresholds"])):
        log.warning(
            "%s (pretraining seed %d) is not fully trained: more pretraining lowers its loss %.4f by %.4f, more than "
            "eps_min x loss / 4; its cells leave every estimate (fix its pretraining before healing it)",
            pre.model,
            pre.pretrain_seed,
            baseline,
            pre.still_falls(baseline),
        )
    budget = budgets.of(model_cfg["retrain"], pre, baseline, pretrain_curve_path, train_seqs.shape[0])
    log.info(
        "budget %d examples: %g x %s (%.0f examples)",
        budget.examples,
        budget.multiple,
        budget.unit,
        budget.unit_examples,
    )
    val_count = sum(b["input_ids"].shape[0] for b in job.val_batches)
    mb = prefix_cache.footprint_mb(train_seqs.shape[0] + val_count, train_seqs.shape[1], base.config.hidden_size)
    mine = set(cells)
    planned = prefix_cache.plan(model_cfg, unit_cells, mb, budget.examples / train_seqs.shape[0])
    depths = {c: d for c, d in planned.items() if c in mine}
    if depths:
        log.info("prefix caches at depths %s: %.1f MB each, one at a time", sorted(set(depths.values())), mb)
    elif any(prefix_cache.cache_depth(model_cfg, c.target, c.policy, c.regime) for c in cells):
        log.info("no prefix cache: %.1f MB each exceeds retrain.prefix_cache_mb or does not pay", mb)
    donors = {d: (donors or {})[d] for d in grid.donors(cells)}  # those these cells swap in
    donor_models = {d: models.load(path).requires_grad_(False) for d, path in donors.items()}
    # a cell's inputs: the network's files, and a swap's donor (so a swap added to the cells changes no other
    # cell's fingerprint: one job per cell and one per unit stage the same cells)
    base_inputs = [p for p in (tokens_path, trained_dir, theta0_dir, baseline_path, pretrain_summary_path) if p]
    inputs_of = {None: staging.digest(base_inputs)} | {d: staging.digest([*base_inputs, p]) for d, p in donors.items()}
    work = Path(work_dir)
    cache = None
    spent: dict[Cell, int] = {}  # examples each reset cell's primary copy trained for: its matched control's length
    lrs: dict[Cell, float | None] = {}  # each reset cell's primary lr: its matched control's lr
    confirm_count = eval_cfg.get("confirm_sequences")
    confirm_batches = (
        None
        if confirm_count == 0
        else job.objective.val_batches(
            streams.val_sequences(tokens_path, model_cfg["context"], confirm_count), eval_cfg["batch_size"]
        )
    )
    reference = TrainedReference(base, job, confirm_batches)
    for cell in _order(cells, depths):
        folder = work / layout.CELL_IN_UNIT.format(**cell.as_dict())
        fingerprint = _fingerprint(model_cfg, eval_cfg, cell, inputs_of[cell.parsed_target.donor])
        depth = depths.get(cell)
        longest = max((c for c in spent if cell.matches(c)), key=spent.get, default=None)  # the first of the longest
        control_examples = spent.get(longest)
        control_lr = (lrs.get(longest) or model_cfg["recipe"]["lrs"][0]) if cell.is_matched_control else None
        length = budgets.run_examples(budget, cell.is_matched_control, control_examples)
        if staging.is_staged(folder, fingerprint, layout.CELL_FILES) and _keep(
            folder, length, depth, budget, control_lr
        ):
            log.info("cell %s finished in an earlier run of this job: kept", cell.as_dict())
            spent[cell] = int(pd.read_parquet(folder / layout.CURVE)["examples"].max())
            lrs[cell] = records.read(folder / layout.RECOVERY, records.CellResult).lr
            (folder / budgets.STAMP).write_text(budgets.stamp(model_cfg))
            continue
        if depth is None:
            cache = None
        elif cache is None or cache.depth != depth:  # deeper than the last one (``_order``): built on it, then freed
            cache = PrefixCache.build(base, job.family, train_seqs, job.val_batches, depth, job.device, cache)
        staging.begin(folder, fingerprint, layout.CELL_FILES, plan.cell_settings(model_cfg, eval_cfg, cell.as_dict()))
        damage, result, curve, race = heal_cell(
            base,
            job,
            train_seqs,
            model_cfg,
            cell,
            theta0,
            baseline,
            pre,
            cache,
            str(folder),
            control_examples,
            reference,
            budget,
            donor=donor_models.get(cell.parsed_target.donor),
            control_lr=control_lr,
        )
        spent[cell] = int(curve["examples"].max())
        lrs[cell] = result.lr
        records.write(folder / layout.DAMAGE, damage)
        results_io.write_parquet(folder / layout.CURVE, curve)
        results_io.write_parquet(folder / layout.RACE, race)
        (folder / budgets.STAMP).write_text(budgets.stamp(model_cfg))
        records.write(folder / layout.RECOVERY, result)  # last: its presence marks the cell finished
        retrain.remove_checkpoints(folder)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for cell in cells:  # the outputs are hard links to the staged copies, which stay for this job's next run
        name = layout.CELL_IN_UNIT.format(**cell.as_dict())
        for o in layout.CELL_FILES:
            staging.link(work / name / o, out / name / o)
    log.info("healed %d cells of %s", len(cells), cells[0].unit if cells else "an empty unit")
