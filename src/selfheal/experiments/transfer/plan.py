"""What the ``transfer:`` section asks for, at run time: the finetuning runs (task, size, trial, spec), the
probing runs, and the settings a finetuning run depends on."""

from __future__ import annotations

from dataclasses import dataclass

from selfheal.experiments.transfer import experiments

# What a finetuning run depends on; only these are its Snakemake params, so adding an experiment or a
# permutation re-runs nothing that already exists.
RUN_KEYS = (
    "model",
    "max_length",
    "lr",
    "batch_size",
    "eval_batch_size",
    "weight_decay",
    "warmup_fraction",
    "grad_clip",
    "init",
    "init_std",
    "test_examples",
    "epochs",
    "small_data_epochs",
    "small_data_max_examples",
)


@dataclass(frozen=True)
class Run:
    """One finetuning run: a spec on one task, data size and trial."""

    task: str
    size: int
    trial: int
    spec: str


def epochs_for(cfg: dict, size: int) -> int:
    """The paper trains 3 epochs, 5 for its 500-example runs."""
    return cfg["small_data_epochs"] if size <= cfg["small_data_max_examples"] else cfg["epochs"]


def conditions(cfg: dict) -> list[experiments.Condition]:
    return experiments.conditions(cfg["n_layer"], cfg)


def runs(cfg: dict) -> list[Run]:
    specs = experiments.specs(conditions(cfg))
    return [
        Run(task["name"], size, trial, spec)
        for task in cfg["tasks"]
        for size in task["sizes"]
        for trial in range(cfg["trials"])
        for spec in specs
    ]


@dataclass(frozen=True)
class Probe:
    """One probing run: every layer of the frozen encoder on one task, data size and trial."""

    task: str
    size: int
    trial: int


def probes(cfg: dict) -> list[Probe]:
    if "probing" not in cfg["experiments"]:
        return []
    return [
        Probe(task["name"], size, trial)
        for task in cfg["tasks"]
        for size in task["sizes"]
        for trial in range(cfg["trials"])
    ]


def run_settings(cfg: dict) -> dict:
    return {k: cfg[k] for k in RUN_KEYS}


def task_by_name(cfg: dict, name: str) -> dict:
    return next(t for t in cfg["tasks"] if t["name"] == name)
