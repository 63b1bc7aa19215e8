"""A training job's plan, told before it runs: whether it trains its network and how many cells it heals and keeps.

The rules give each training job a short tracked param (``digest``: counts and a hash of the settings, so that a
dry run's reason after a grid edit names counts, not every cell) and a message (``summary``). A piece counts as
kept when it is staged in the job's work folder (``staging``) under the same settings; the job checks the content
of its inputs too, so a piece whose inputs changed is trained although the plan counted it as kept. Whether a cell
staged under another budget is kept or continued is the job's decision (``heal.unit``): the plan only counts them.
The job's log starts with the same summary.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from selfheal import grid, layout
from selfheal.heal import budget, staging


def network_settings(network_cfg: dict, eval_cfg, source: str) -> str:
    """The settings a made network depends on (``grid.covered``), as a staged piece's settings stamp."""
    return staging.fingerprint(model=grid.covered("network", network_cfg), eval=eval_cfg, source=source)


def cell_settings(network_cfg: dict, eval_cfg, cell: dict) -> str:
    """The settings a healed cell depends on (``grid.covered``: its budget left out), as its settings stamp."""
    return staging.fingerprint(model=grid.covered("cell", network_cfg), eval=eval_cfg, cell=cell)


def digest(network_cfg: dict, cells: list[dict], eval_cfg) -> str:
    """A short text that changes whenever a job's work does: its cell count and a hash of every setting."""
    blob = json.dumps({"network": network_cfg, "cells": cells, "eval": eval_cfg}, sort_keys=True, default=str)
    return f"{len(cells)} cells, settings {hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def cell_folder(work: Path, cell: dict) -> Path:
    """A cell's staging folder in its network's work folder."""
    return work / layout.UNIT_IN_NETWORK.format(**cell) / layout.CELL_IN_UNIT.format(**cell)


def summary(source: str, network_cfg: dict, eval_cfg, cells: list[dict], work_dir: str) -> str:
    """What a network's job will do: train its network or keep it, and heal its ``cells`` but those it keeps (staged
    under the same settings in ``work_dir``); those staged under another budget are counted apart."""
    work = Path(work_dir)
    kept = staging.has_settings(
        work / layout.NETWORK_IN_WORK, network_settings(network_cfg, eval_cfg, source), layout.NETWORK_MADE[source]
    )
    staged = [
        c
        for c in cells
        if staging.has_settings(cell_folder(work, c), cell_settings(network_cfg, eval_cfg, c), layout.CELL_FILES)
    ]
    stamp = budget.stamp(network_cfg)
    other = sum(_read(cell_folder(work, c) / budget.STAMP) != stamp for c in staged)
    text = f"{'keeps' if kept else 'trains'} the network, heals {len(cells) - len(staged)} cells"
    return (
        text
        + f" (keeps {len(staged) - other}"
        + (f", and keeps or continues {other} staged under another budget)" if other else ")")
    )


def _read(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None
