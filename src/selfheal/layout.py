"""Where the workflow writes, under a config's ``results_dir``: every folder pattern and file name, spelled once. The
rules (workflow/rules/common.smk) join them to the results_dir; the training job (``heal.job``, ``heal.unit``) and
the readout of a study still running (``selfheal.partial``) use the same names.

One training job per network (a model and a pretraining seed) writes three places: the network (``NETWORK``), its
baseline (``BASELINE``) and its cells (``CELLS``: a heal unit's folder per regime, then each cell's, holding
``CELL_FILES``), and stages each piece in its work folder (``WORK``) laid out the same way, so that a re-run keeps it.
"""

from __future__ import annotations

from selfheal import grid
from selfheal.heal import lr_sensitivity

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
LR_SENSITIVITY = "lr_sensitivity/{model}"  # the lr check's runs: LR_RUN / CELL_IN_UNIT (heal.lr_sensitivity)
LR_RUN = "{multiplier}/p{pretrain_seed}/{regime}"
LR_SENSITIVITY_WORK = "work/{model}/lr_sensitivity"
PARTIAL = "partial"  # the readout of a study still running (selfheal.partial): the tables, figures and page

DAMAGE, RECOVERY, CURVE = "damage.json", "recovery.json", "curve.parquet"  # a cell's files (heal.unit)
CELL_FILES = (DAMAGE, RECOVERY, CURVE)
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


def lr_runs(config: dict, results: str = "") -> dict[str, list[dict]]:
    """Each run of the lr-sensitivity check (a cell of the grid at a multiple of the lr; heal.lr_sensitivity), per
    model of ``config``: its ``recovery`` file under ``results``, its ``multiplier`` and the ``chosen_lr``."""
    return {
        m["name"]: [
            {
                "recovery": _join(
                    results,
                    f"{LR_SENSITIVITY}/{LR_RUN}/{CELL_IN_UNIT}/{RECOVERY}".format(
                        multiplier=lr_sensitivity.label(x), **c.as_dict()
                    ),
                ),
                "multiplier": x,
                "chosen_lr": m["retrain"]["lr"],
            }
            for x in m["retrain"]["lr_sensitivity"]
            for c in lr_sensitivity.cells(config, m)
        ]
        for m in config["models"]
    }


def _join(results: str, path: str) -> str:
    return f"{results.rstrip('/')}/{path}" if results else path
