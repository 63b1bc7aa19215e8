"""The finished part of a study that is still running (config key ``partial: true``): the models whose every file
the aggregate reads is there (each network's pretraining record and baseline, each cell's result and curve), with
their lr check where its runs are there too. The workflow then reads only those, writes its tables, figures and
page beside the study's (``{results_dir}/partial/``) and trains nothing; the page names what it leaves out.
``partial: networks`` reads finer: each network whose record, baseline and every cell are there, so a model with
some of its networks finished is read with those (``keep_networks``), and the page names the networks left out.

A job writes the files the aggregate reads last (a cell's ``recovery.json`` is staged last and its outputs are
linked once it ends), so a file that is there belongs to a finished job.
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from selfheal import results_io
from selfheal.config.errors import ConfigError


NETWORKS = "networks"  # partial: networks, the finished networks of every model


@dataclass(frozen=True)
class Finished:
    """What ``partial: true`` reads: ``models``, the finished models (config order); ``left_out``, the others;
    ``lr_left_out``, the finished models whose lr check has not finished (read without it). With ``partial:
    networks`` the networks left out are ``keep_networks``'s."""

    models: list[str]
    left_out: list[str]
    lr_left_out: list[str]


def with_seeds(config: dict, model: str, seeds: list[int]) -> dict:
    """``config`` with ``model``'s pretraining seeds (its networks) set to ``seeds``."""
    out = copy.deepcopy(config)
    for m in out["models"]:
        if m["name"] == model:
            m["pretrain"]["seeds"] = list(seeds)
    return out


def keep_networks(config: dict, finished: dict[str, list[int]]) -> tuple[dict, tuple[tuple[str, int], ...]]:
    """``partial: networks``: ``config`` with each model's networks narrowed to ``finished`` (per model, the seeds
    whose network, baseline and every cell are there), and the (model, seed) of each network so left out. A model
    none of whose networks has finished keeps them all, so that ``select`` leaves it out whole."""
    out = copy.deepcopy(config)
    left = []
    for m in out["models"]:
        done = [s for s in m["pretrain"]["seeds"] if s in finished.get(m["name"], [])]
        if done and len(done) < len(m["pretrain"]["seeds"]):
            left += [(m["name"], s) for s in m["pretrain"]["seeds"] if s not in done]
            m["pretrain"]["seeds"] = done
    return out, tuple(left)


def select(
    read_files: dict[str, list[str]],
    lr_files: dict[str, list[str]],
    heals: dict[str, bool],
    exists: Callable[[str], bool] = os.path.exists,
) -> Finished:
    """The finished part: ``read_files``, per model (config order), the files the aggregate reads for it;
    ``lr_files``, per model, its lr check's results (empty where the check is off); ``heals``, per model, whether
    the grid heals it (a donor pretrained only is read too, but does not make a page). Raises a ConfigError
    where no model that heals has finished, naming ``partial`` (there is nothing to read yet)."""
    models = [m for m, files in read_files.items() if all(exists(f) for f in files)]
    if not any(heals[m] for m in models):
        raise ConfigError(
            "partial",
            "no model of the config that heals has finished (every network, baseline and cell of one; with "
            "`partial: networks`, of one network): there is nothing to read yet; run the study, or leave partial out",
        )
    lr_left_out = [m for m in models if lr_files.get(m) and not all(exists(f) for f in lr_files[m])]
    return Finished(models, [m for m in read_files if m not in models], lr_left_out)


def restrict(config: dict, finished: Finished) -> dict:
    """``config`` with only the finished models, and without the lr check of those whose check has not finished."""
    out = copy.deepcopy(config)
    out["models"] = [m for m in out["models"] if m["name"] in finished.models]
    for m in out["models"]:
        if m["name"] in finished.lr_left_out:
            m["retrain"]["lr_sensitivity"] = []
    return out


LEFT_OUT_COLUMNS = ("model", "part")  # the left-out table's schema (docs/outputs.md)


def network_part(seed: int) -> str:
    """The left-out table's ``part`` of one network not finished: 'network p<seed>'."""
    return f"network p{seed}"


def left_out_table(left_out: list[str], lr_left_out: list[str], networks_left_out=()) -> pd.DataFrame:
    """What ``partial`` leaves out, one row each: a model not finished (``part`` "model"), a network not finished
    of a model read with its others (``part`` "network p<seed>", ``partial: networks``), or the lr check of a
    finished model (``part`` "lr check"). The answer page names them; zero rows: every model has finished."""
    rows = (
        [(m, "model") for m in left_out]
        + [(m, network_part(s)) for m, s in networks_left_out]
        + [(m, "lr check") for m in lr_left_out]
    )
    return pd.DataFrame(rows, columns=list(LEFT_OUT_COLUMNS)).astype(str)


def write_left_out(path: str, left_out: list[str], lr_left_out: list[str], networks_left_out=()) -> None:
    results_io.write_parquet(path, left_out_table(left_out, lr_left_out, networks_left_out))


def stamp(files: list[str]) -> str:
    """The read files' sizes and modification times as one hash."""
    h = hashlib.sha256()
    for f in files:
        st = os.stat(f)
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def write_stamp(path: str, value: str) -> str:
    """Writes a ``stamp`` to ``path`` when it differs from what is there, else leaves the file (and its
    modification time) alone; returns ``path``. The readout (which waits for no job's outputs) reads the file and
    takes the stamp as a param too, so a finished file that changes (a cell healed again, a network finished since)
    makes it again under Snakemake's mtime trigger (alone, as the study runs, or among the default triggers) and
    under its params trigger, as its inputs would where it waits for the jobs."""
    content = value + "\n"
    target = Path(path)
    if not target.exists() or target.read_text() != content:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(content)
        os.replace(tmp, target)
    return path
