"""A training job's plan, told before it runs: how many networks and cells it will train and how many it keeps.

The rules give each training job a short tracked param (``digest``: counts and a hash of the settings, so that a
dry run's reason after a grid edit names counts, not every cell) and a message (``summary``: what it trains and
what it keeps). A piece is kept when it is staged in the job's work folder (``staging``) under the same settings;
the job checks the content of its inputs too, so a piece whose inputs changed is trained although the plan counted
it as kept. The job's log starts with the same summary.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from selfheal import records
from selfheal.grid import Cell
from selfheal.heal import budget, staging

NETWORK_MADE = {  # what making a network stages, by source (``job.MADE``)
    "scratch": ("theta0", "trained", "pretrain_curve.parquet", "pretrain.json", "baseline.json"),
    "adapt": ("trained", "pretrain_curve.parquet", "pretrain.json", "baseline.json"),
    "as_downloaded": ("baseline.json",),
}
CELL_OUTPUTS = ("damage.json", "recovery.json", "curve.parquet")  # ``unit.OUTPUTS``


def network_settings(network_cfg: dict, eval_cfg, source: str) -> str:
    """The settings a made network depends on (its retrain settings left out: editing them keeps the network)."""
    settings = {k: v for k, v in network_cfg.items() if k != "retrain"}
    return staging.fingerprint(model=settings, eval=eval_cfg, source=source)


def cell_settings(network_cfg: dict, eval_cfg, cell: dict) -> str:
    """The settings a healed cell depends on (its budget left out: a cell staged under another budget is kept or
    continued, ``heal.unit``)."""
    return staging.fingerprint(model=budget.without_budget(network_cfg), eval=eval_cfg, cell=cell)


def digest(networks: list[dict], cells: list[dict], eval_cfg) -> str:
    """A short text that changes whenever a job's work does: its counts and a hash of every setting."""
    blob = json.dumps({"networks": networks, "cells": cells, "eval": eval_cfg}, sort_keys=True, default=str)
    sha = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return f"{len(networks)} networks, {len(cells)} cells, settings {sha}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def summary(
    source: str,
    networks: list[dict],
    eval_cfg,
    cells: list[dict],
    work_dir: str,
    layout: dict[str, str],
    makes_networks: bool = True,
) -> str:
    """What a job will do: the networks (``networks``: each one's settings) and cells it trains and those it keeps
    (staged under the same settings in ``work_dir``, at the places ``layout`` spells: ``network_work``, ``unit`` and
    ``cell``), and those staged under another budget that it continues (``_continued``). ``makes_networks``: False
    for a cell's own job, whose network another job made."""
    work = Path(work_dir)
    by_seed = {n["pretrain"]["seed"]: n for n in networks}
    kept_networks = (
        sum(
            staging.has_settings(
                work / layout["network_work"].format(pretrain_seed=seed),
                network_settings(cfg, eval_cfg, source),
                NETWORK_MADE[source],
            )
            for seed, cfg in by_seed.items()
        )
        if makes_networks
        else 0
    )
    staged = [
        c
        for c in cells
        if staging.has_settings(
            cell_folder(work, layout, c), cell_settings(by_seed[c["pretrain_seed"]], eval_cfg, c), CELL_OUTPUTS
        )
    ]
    continued = len(_continued(staged, cells, work, layout, by_seed))
    kept_cells = len(staged) - continued
    if not makes_networks and len(cells) == 1:
        if continued and Cell(**cells[0]).is_matched_control:
            # its length is its cells' (the job's inputs), known once they have run: kept where it is unchanged
            return "staged under another budget: kept, or continued as far as the cells it matches now train"
        return (
            "kept (staged with the same settings)"
            if kept_cells
            else "continues it (staged under another budget)"
            if continued
            else "heals it"
        )
    parts = []
    if networks and makes_networks:
        parts.append(f"trains {_count(len(networks) - kept_networks, 'network')} (keeps {kept_networks})")
    if cells or not parts:
        parts.append(
            f"heals {_count(len(cells) - kept_cells, 'cell')} (keeps {kept_cells}"
            + (f", continues {continued} staged under another budget" if continued else "")
            + ")"
        )
    return ", ".join(parts)


def _continued(staged: list[dict], cells: list[dict], work: Path, layout: dict[str, str], by_seed: dict) -> list:
    """The staged cells a job continues rather than keeps (``heal.unit``): staged with the same settings under other
    budget keys, and not settled (every threshold met at a regular evaluation); a matched control where a cell it is
    matched with among the job's is continued (it trains as long as the longest of them)."""

    def moved(c: dict) -> bool:
        folder = cell_folder(work, layout, c)
        stamp = folder / budget.STAMP
        return (
            stamp.exists()
            and stamp.read_text() != budget.stamp(by_seed[c["pretrain_seed"]])
            and records.read(folder / "recovery.json", records.CellResult).settled_examples is None
        )

    all_cells = [Cell(**c) for c in cells]
    out = []
    for c in staged:
        cell = Cell(**c)
        matched = [m for m in all_cells if cell.matches(m)] if cell.is_matched_control else []
        if any(m.as_dict() in staged and moved(m.as_dict()) or m.as_dict() not in staged for m in matched) or (
            not matched and moved(c)
        ):
            out.append(cell)
    return out


def cell_folder(work: Path, layout: dict[str, str], cell: dict) -> Path:
    """A cell's staging folder in its job's work folder."""
    return work / layout["unit"].format(**cell) / layout["cell"].format(**cell)
