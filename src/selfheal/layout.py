"""Where the workflow writes, under a config's ``results_dir``: every folder pattern and file name, spelled once. The
rules (workflow/rules/common.smk) join them to the results_dir; the training job (``heal.job``, ``heal.unit``) and
the readout of a study still running (``selfheal.partial``) use the same names.

One training job per network (a model and a pretraining seed) writes three places: the network (``NETWORK``), its
baseline (``BASELINE``) and its cells (``CELLS``: a heal unit's folder per regime, then each cell's, holding
``CELL_FILES``), and stages each piece in its work folder (``WORK``) laid out the same way, so that a re-run keeps it.
"""

from __future__ import annotations

from selfheal import grid

CORPUS = "corpus"  # works.parquet, tokenizer.json
TOKENS = "corpus/{tokenizer}/tokens.safetensors"
IMPORTED = "pretrained/{model}"  # a downloaded model as imported: trained/, pretrain.json
NETWORK = "models/{model}/p{pretrain_seed}"  # a network made here: theta0/, trained/, PRETRAIN_CURVE, PRETRAIN
BASELINE = "baselines/{model}/p{pretrain_seed}.json"
CELLS = "cells/{model}/p{pretrain_seed}"  # a network's cells: UNIT_IN_NETWORK / CELL_IN_UNIT / CELL_FILES
WORK = "work/{model}/p{pretrain_seed}"  # a network job's staged pieces: NETWORK_IN_WORK, and the cells as in CELLS
UNIT_IN_NETWORK = "{regime}"  # a heal unit's folder (grid.Unit), in its network's cells and work folders
CELL_IN_UNIT = "s{seed}/{target}-{policy}-{init}"  # a cell's folder in its unit's
NETWORK_IN_WORK = "network"  # the staged network, in its work folder
LOGS = "logs"
PARTIAL = "partial"  # the readout of a study still running (selfheal.partial): the tables, figures and page

DAMAGE, RECOVERY, CURVE = "damage.json", "recovery.json", "curve.parquet"  # a cell's files (heal.unit)
RACE = "race.parquet"  # a cell's lr race: every copy's curve, its lr and why it stopped (heal.retrain)
CELL_FILES = (DAMAGE, RECOVERY, CURVE, RACE)
# in a cell's work folder, beside its staged files: each copy of its race in its own folder (its checkpoint,
# extension point and finished record) and the weights of its primary copy (heal.retrain)
COPIES = "race"
COPY_IN_CELL = COPIES + "/lr{lr:.6g}"
PRIMARY_WEIGHTS = COPIES + "/primary.pt"
PRETRAIN, PRETRAIN_CURVE = "pretrain.json", "pretrain_curve.parquet"  # a network's record and pretraining curve
STAGED_BASELINE = "baseline.json"  # a staged network's baseline (linked to BASELINE)
NETWORK_MADE = {  # what making a network stages, by source (heal.job.SOURCES)
    "scratch": ("theta0", "trained", PRETRAIN_CURVE, PRETRAIN, STAGED_BASELINE),
    "adapt": ("trained", PRETRAIN_CURVE, PRETRAIN, STAGED_BASELINE),
    "as_downloaded": (STAGED_BASELINE,),
}

CELL = f"{CELLS}/{UNIT_IN_NETWORK}/{CELL_IN_UNIT}"


def cell_path(cell: grid.Cell, name: str, results: str = "") -> str:
    """One file of a cell, under ``results``."""
    return _join(results, f"{CELL.format(**cell.as_dict())}/{name}")


def network_path(network: grid.Network, name: str, results: str = "") -> str:
    """One file of a network made here, under ``results``."""
    return _join(results, f"{NETWORK.format(**vars(network))}/{name}")


def read_files(config: dict, cells: list[grid.Cell], results: str = "") -> dict[str, list[str]]:
    """The files the aggregate reads for the models of ``config`` and ``cells`` (of the grid), by kind: each
    network's pretraining record and curve (those made here) and baseline, each cell's result and curve, and a model
    used as downloaded its import record."""
    models = config["models"]
    unadapted = [m["name"] for m in models if m["source"] == "pretrained" and not m["adapt"]]
    every = grid.networks(config)
    made = [n for n in every if n.model not in unadapted]
    names = {m["name"] for m in models}
    mine = [c for c in cells if c.model in names]
    return {
        "pretrain": [network_path(n, PRETRAIN, results) for n in made],
        "pretrain_curves": [network_path(n, PRETRAIN_CURVE, results) for n in made],
        "baselines": [_join(results, BASELINE.format(**vars(n))) for n in every],
        "recoveries": [cell_path(c, RECOVERY, results) for c in mine],
        "curves": [cell_path(c, CURVE, results) for c in mine],
        "unadapted": [_join(results, f"{IMPORTED.format(model=m)}/{PRETRAIN}") for m in unadapted],
    }


def _join(results: str, path: str) -> str:
    return f"{results.rstrip('/')}/{path}" if results else path
