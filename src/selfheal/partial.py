"""The finished part of a study that is still running, as a command (it starts no job and reads only finished
files):

    python -m selfheal.partial config/config.yaml config/full.yaml [--networks]

The config files are those the workflow runs with, merged in order as Snakemake merges them (the default
config/config.yaml, then each ``--configfile``). It reads the models whose every file the aggregate reads is there
(each network's pretraining record and baseline, each cell's result and curve), with their lr check where its runs
are there too, and writes their tables, figures and answer page under ``{results_dir}/partial/`` (the names of a
whole run's, beside them; a whole run's own are never touched); the page names first what it leaves out
(``answer/left_out.parquet``). ``--networks`` reads finer: each network whose record, baseline and every cell are
there, so a model with some of its networks finished is read with those (``keep_networks``), and the page names the
networks left out.

A network job writes the files the aggregate reads last (a cell's ``recovery.json`` is staged last and its outputs
are linked once it ends), so a file that is there belongs to a finished cell.
"""

from __future__ import annotations

import argparse
import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml
from snakemake.utils import update_config

from selfheal import config as cfg
from selfheal import grid, layout, results_io
from selfheal.analysis import answer, plots, tables


class NothingFinished(RuntimeError):
    """No model of the config that heals has finished: there is nothing to read yet."""


@dataclass(frozen=True)
class Finished:
    """What the readout reads: ``models``, the finished models (config order); ``left_out``, the others;
    ``lr_left_out``, the finished models whose lr check has not finished (read without it). With ``--networks`` the
    networks left out are ``keep_networks``'s."""

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
    """``--networks``: ``config`` with each model's networks narrowed to ``finished`` (per model, the seeds whose
    network, baseline and every cell are there), and the (model, seed) of each network so left out. A model none of
    whose networks has finished keeps them all, so that ``select`` leaves it out whole."""
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
    the grid heals it (a donor pretrained only is read too, but does not make a page). Raises ``NothingFinished``
    where no model that heals has finished."""
    models = [m for m, files in read_files.items() if all(exists(f) for f in files)]
    if not any(heals[m] for m in models):
        raise NothingFinished(
            "no model of the config that heals has finished (every network, baseline and cell of one; with "
            "--networks, of one network): there is nothing to read yet"
        )
    lr_left_out = [m for m in models if lr_files.get(m) and not all(exists(f) for f in lr_files[m])]
    return Finished(models, [m for m in read_files if m not in models], lr_left_out)


def restrict(config: dict, finished: Finished) -> dict:
    """``config`` with only the finished models, and without the lr check of those whose check has not finished."""
    out = copy.deepcopy(config)
    out["models"] = [m for m in out["models"] if m["name"] in finished.models]
    return out


LEFT_OUT_COLUMNS = ("model", "part")  # the left-out table's schema (docs/outputs.md)


def left_out_table(left_out: list[str], lr_left_out: list[str], networks_left_out=()) -> pd.DataFrame:
    """What the readout leaves out, one row each: a model not finished (``part`` "model"), a network not finished
    of a model read with its others (``part`` "network p<seed>", ``--networks``), or the lr check of a finished
    model (``part`` "lr check"). The answer page names them; zero rows: every model has finished."""
    rows = (
        [(m, "model") for m in left_out]
        + [(m, f"network p{s}") for m, s in networks_left_out]
        + [(m, "lr check") for m in lr_left_out]
    )
    return pd.DataFrame(rows, columns=list(LEFT_OUT_COLUMNS)).astype(str)


def _files_of(config: dict, results: str, model: str) -> list[str]:
    one = {**config, "models": [m for m in config["models"] if m["name"] == model]}
    return sum(layout.read_files(one, grid.cells(one), results).values(), [])


def finished_part(config: dict, networks: bool = False) -> tuple[dict, Finished, tuple]:
    """The resolved ``config`` narrowed to its finished part, what it leaves out, and (``networks``) the networks
    left out, reading only whether the files are there."""
    results = config["results_dir"]
    left = ()
    if networks:
        done = {
            m["name"]: [
                s
                for s in m["pretrain"]["seeds"]
                if all(map(os.path.exists, _files_of(with_seeds(config, m["name"], [s]), results, m["name"])))
            ]
            for m in config["models"]
        }
        config, left = keep_networks(config, done)
    finished = select(
        {m["name"]: _files_of(config, results, m["name"]) for m in config["models"]},
        {},
        {m["name"]: m.get("heal", True) for m in config["models"]},
    )
    return restrict(config, finished), finished, left


def read(config: dict, networks: bool = False, workers: int = 1) -> Path:
    """Write the readout of the finished part of ``config`` (resolved) under its results_dir's ``partial/``: the
    tables, the figures, the lr check's table where one has finished, what it leaves out and the answer page.
    Returns that folder."""
    narrowed, finished, left = finished_part(config, networks)
    results = config["results_dir"]
    out = Path(results) / layout.PARTIAL
    (out / "answer").mkdir(parents=True, exist_ok=True)
    (out / "plots").mkdir(exist_ok=True)
    files = layout.read_files(narrowed, grid.cells(narrowed), results)
    table = {name: str(out / f"{name}.parquet") for name in ("summary", "curves", "networks")}
    tables.write(
        files,
        {m["name"]: m["retrain"]["thresholds"] for m in narrowed["models"]},
        summary_out=table["summary"],
        curves_out=table["curves"],
        networks_out=table["networks"],
        pretraining_tokens={m["name"]: m.get("pretraining_tokens") for m in narrowed["models"]},
    )
    names = list(plots.FIGURES)
    plots.write_all(
        table["summary"],
        table["curves"],
        names,
        [str(out / "plots" / f"{n}.html") for n in names],
        [str(out / "plots" / f"{n}.png") for n in names],
    )
    left_out = str(out / "answer" / "left_out.parquet")
    results_io.write_parquet(left_out, left_out_table(finished.left_out, finished.lr_left_out, left))
    answer.write_in(out, workers, None, left_out)
    return out


def load_config(paths: list[str]) -> dict:
    """The config files merged in order, as Snakemake merges ``--configfile`` over the Snakefile's, resolved."""
    merged: dict = {}
    for path in paths:
        update_config(merged, yaml.safe_load(Path(path).read_text()) or {})
    return cfg.resolve(merged)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m selfheal.partial", description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", help="config/config.yaml, then each --configfile the study runs with")
    parser.add_argument("--networks", action="store_true", help="read each finished network, not only whole models")
    parser.add_argument("--workers", type=int, default=1, help="the scaling fit's parallel refits (default 1)")
    a = parser.parse_args(argv)
    try:
        out = read(load_config(a.configs), a.networks, a.workers)
    except NothingFinished as e:
        parser.exit(1, f"{parser.prog}: {e}\n")
    print(f"read the finished part into {out}")


if __name__ == "__main__":
    main()
