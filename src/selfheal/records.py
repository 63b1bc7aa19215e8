"""The per-job result records, written by one job and read by the next through the same dataclass.

Each record is a JSON file (atomic write, ``results_io``); ``write(path, record)`` and ``read(path, Type)`` are
the only way they are made and read, so a field added here is added for writer and reader at once. A field added
later has a default (None for a measurement), so records written before it read with that default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from selfheal import results_io


@dataclass
class PretrainSummary:
    """``pretrain.json`` of a model pretrained here (or imported: then S, E and the curve fields are None). The
    network is the best checkpoint of the winning copy of its lr race (``training.pretrain``): ``examples``,
    ``tokens``, ``steps`` and ``final_val_loss`` are that checkpoint's, ``epochs`` (E) is examples / S."""

    model: str
    arch: str
    n_layer: int
    d_model: int
    params: int
    train_sequences: int | None = None  # S (None for a downloaded model)
    epochs: float | None = None  # E: the epochs to the best checkpoint (examples / S; may be fractional)
    source: str = "scratch"
    pretrain_seed: int = 0  # which network of this model size (seeds the step-0 weights and the data)
    name_or_path: str | None = None
    n_head: int | None = None
    context: int | None = None
    trainable_params: int | None = None
    frozen_params: int = 0
    frozen_components: list[str] = field(default_factory=list)  # left at θ0 and frozen ([] when all train)
    base_model: str | None = None
    examples: int | None = None  # at the best checkpoint
    tokens: int | None = None
    steps: int | None = None
    wall_s: float | None = None  # the whole race: every copy
    initial_val_loss: float | None = None
    final_val_loss: float | None = None
    # How much val loss still fell over the last quarter of pretraining: near zero means converged.
    last_quarter_val_drop: float | None = None
    # The plateau check: the kept copy trained on past its best checkpoint, where the patience rule stopped it (at
    # least pretrain.plateau_check x its best checkpoint's examples), and its validation loss there; None when not
    # checked (max_epochs or divergence stopped it first, or a downloaded model).
    plateau_examples: int | None = None
    plateau_val_loss: float | None = None
    # The lr race: the winning copy's lr, every lr raced (the grid and its edge extensions), whether the winner is
    # still at an edge of them, how the kept copy stopped (patience, max_epochs or diverged) and where, and the
    # examples every copy trained together (the race's cost)
    lr: float | None = None
    lrs: list[float] = field(default_factory=list)
    lr_at_edge: bool | None = None
    stopped_by: str | None = None
    unfinished_lr: float | None = (
        None  # a copy cut by max_epochs below the network's loss (``pretrain.unfinished_lower``)
    )
    unfinished_val_loss: float | None = None
    stop_examples: int | None = None
    race_examples: int | None = None

    @property
    def pretrain_examples(self) -> int | None:
        """S x E: the examples at the best checkpoint (None when unknown: a downloaded model)."""
        if not self.epochs:
            return None
        return self.examples if self.examples is not None else round(self.train_sequences * self.epochs)

    def still_falls(self, val_loss: float) -> float | None:
        """How much lower more pretraining would take the validation loss ``val_loss`` (the network's baseline): the
        plateau check's gain, else the drop over the last quarter of pretraining (None: neither known)."""
        return val_loss - self.plateau_val_loss if self.plateau_val_loss is not None else self.last_quarter_val_drop

    def off_plateau(self, val_loss: float, eps_min: float) -> bool:
        """Not fully trained: more pretraining would lower ``val_loss`` by more than eps_min x val_loss / 4."""
        falls = self.still_falls(val_loss)
        return falls is not None and falls > eps_min * val_loss / 4


@dataclass
class Baseline:
    """``baselines/{model}.json``: the trained model on the fixed validation set."""

    model: str
    val_loss: float
    perplexity: float
    val_sequences: int
    context: int
    pretrain_seed: int = 0
    # cross-entropy of the validation targets under the train split's token counts (data/ngrams.py): a model not
    # clearly below them has learned nothing a frequency table does not know (analysis/tables.py, ``degenerate``)
    unigram_loss: float | None = None  # add-one smoothed unigram
    # the bigram interpolated with the unigram, its weight tuned on the validation set; None for masked LMs (and
    # in records written before it replaced the Dirichlet-smoothed bigram, read with bigram_weight None)
    bigram_loss: float | None = None
    bigram_weight: float | None = None  # λ of the bigram's maximum-likelihood term
    bigram_margin: float | None = None  # bigram_loss - val_loss (nats; positive: the network beats the bigram)


@dataclass
class Damage:
    """``damage.json`` of a reset: what was reset and the validation loss right after."""

    model: str
    target: str
    policy: str
    init: str
    seed: int
    reset_tensors: int
    reset_params: int
    damaged_loss: float
    pretrain_seed: int = 0


@dataclass
class Recovery:
    """Where a recovery curve first reaches one threshold (or, censored, where it ended). The crossing lies in
    (examples_lo, examples] when recovered: examples_lo is the last evaluation above the threshold (equal to
    examples when reached at the first evaluation); censored, examples = examples_lo = the end of the run."""

    threshold: float
    recovered: bool
    examples: int
    tokens: int
    steps: int
    wall_s: float
    val_loss: float
    examples_lo: int = 0
    tokens_lo: int = 0
    steps_lo: int = 0
    # the lr of the copy this row is read from (``heal.retrain``'s race): the winner (first to cross) when
    # recovered, else the cell's primary copy; ``lr_at_edge``: the winner is the lowest or highest lr raced, alone,
    # after the grid was extended as far as it may (``recipe.max_lr_extensions``) or to a copy that diverged (None:
    # censored, or not raced)
    lr: float | None = None
    lr_at_edge: bool | None = None


@dataclass
class CellResult:
    """``recovery.json`` of one retrain cell."""

    model: str
    target: str
    policy: str
    init: str
    regime: str
    seed: int
    stack: str | None
    layer: int | None
    depth: int | None
    arch: str
    n_layer: int
    d_model: int
    pretrain_examples: int | None
    budget_examples: int
    baseline_loss: float
    damaged_loss: float
    final_loss: float
    trainable_tensors: int
    trainable_params: int
    reset_tensors: int
    recoveries: list[Recovery]
    diverged_step: int | None
    prefix_cache_depth: int | None
    train_tokens_per_s: float
    eval_share: float
    pretrain_seed: int = 0
    n_params: int = 0
    replay_share: float = 0.0  # share of the cell's wall time spent replaying intervals to locate crossings
    cka: float | None = None  # linear CKA (unbiased) of the healed layer's output with the original's
    cka_floor: float | None = None  # the same for the freshly reset layer, before any training
    # The confirmation (eval.confirm_sequences): the cell's final weights and the trained network evaluated again
    # on that many validation sequences (the whole split by default), sequence by sequence
    confirm_sequences: int | None = None
    confirm_loss: float | None = None  # the cell's final weights there
    confirm_baseline_loss: float | None = None  # the trained network there
    # standard error of the mean per-sequence (cell - baseline) difference on eval.val_sequences sequences, the
    # set the curve is evaluated on: its resolution of a threshold
    val_diff_se: float | None = None
    # the budget (heal.budget): what budget_examples is a multiple of (scratch_cost, pretrain_examples or
    # train_sequences), the multiple, and the examples the network's pretraining needed to first reach baseline x
    # (1 + eps_min) (None where it has no from-scratch curve). A matched control's budget_examples is its length.
    budget_unit: str = "pretrain_examples"
    budget_multiple: float | None = None
    scratch_cost: float | None = None
    # where every copy of the cell's race stopped at a regular evaluation by a rule that reads no budget (every
    # threshold met, the race's dropping rule, stalled): the last of those; a run with any budget at least this is
    # the same run (None: a copy ran to its budget or diverged, or a control)
    settled_examples: int | None = None
    # retrain.stop_stalled in examples (None: off) and, where the stall rule stopped the cell's primary copy, that
    # evaluation's examples
    stop_examples: int | None = None
    stalled_examples: int | None = None
    # the lr race (``heal.retrain``): the lrs raced (ascending) and the primary copy's lr, whose curve, final loss,
    # weights and stops are the cell's (the winner of its smallest reached threshold, else its lowest final loss)
    lrs: list[float] = field(default_factory=list)
    lr: float | None = None


_NESTED = {(CellResult, "recoveries"): Recovery}


def write(path, record) -> None:
    results_io.write_json(path, dataclasses.asdict(record))


def read(path, cls):
    """A record of type ``cls`` from its JSON file; unknown keys are an error (a file of another type)."""
    raw = results_io.read_json(path)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ValueError(f"{path}: not a {cls.__name__} record (unexpected keys {unknown[:5]})")
    for (owner, key), item in _NESTED.items():
        if owner is cls and key in raw:
            raw[key] = [item(**r) for r in raw[key]]
    return cls(**raw)
