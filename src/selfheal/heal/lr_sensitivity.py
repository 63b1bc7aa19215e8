"""The lr-sensitivity check (``retrain.lr_sensitivity``, off by default): how much a cell's cost moves when the
retraining lr is a multiple of the chosen one. For each model's first network (its first pretraining seed), the
first and the last layer of the grid's first regime, policy, init and retrain seed (``cells``: cells of the grid,
so each has its cost at the chosen lr in summary.parquet) are healed again at ``retrain.lr`` x each multiplier, by
``unit.run`` with only the lr changed: the same budget, thresholds, evaluation cadence, crossing location, prefix
caches (planned over the grid's unit, as the grid's job plans them) and staging. These runs are a side
measurement in their own folders: no cell, table row or estimate of the grid reads them; the ``lr_sensitivity_table``
rule puts them beside the grid's cost (``analysis.lr_sensitivity``).
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

from selfheal import grid
from selfheal.grid import Cell
from selfheal.lazy import Module

# training, imported when a run is made: the Snakefile names the lr check's cells at every start
job = Module("selfheal.heal.job")
unit = Module("selfheal.heal.unit")

log = logging.getLogger("selfheal")


def cells(config: dict, model: dict) -> list[Cell]:
    """The cells of ``model`` healed again at other lrs: of its first network, the grid's first regime, policy, init
    and retrain seed, the shallowest and the deepest one-layer target (one cell for a one-layer model; none where the
    key is off or the first policy resets no single layer), then each of ``retrain.lr_sensitivity_targets`` (a
    target the grid has no such cell of is refused by the config check, ``missing_targets``)."""
    if not model["retrain"].get("lr_sensitivity"):
        return []
    first = first_cells(config, model)
    layers = [c for c in first if c.parsed_target.is_layer]
    by_depth = sorted(layers, key=lambda c: c.parsed_target.depth(model))
    ends = [by_depth[0], by_depth[-1]] if by_depth else []
    extra = [c for t in model["retrain"].get("lr_sensitivity_targets", []) for c in first if c.target == t]
    return list(dict.fromkeys(ends + extra))


def first_cells(config: dict, model: dict) -> list[Cell]:
    """The grid's cells of ``model``'s first network in the grid's first regime, policy, init and retrain seed."""
    spec = config["grid"]
    first = (model["name"], model["pretrain"]["seeds"][0], spec["regimes"][0], spec["policies"][0])
    return [
        c
        for c in grid.cells(config)
        if (c.model, c.pretrain_seed, c.regime, c.policy) == first
        and c.init == spec["inits"][0]
        and c.seed == spec["seeds"][0]
    ]


def missing_targets(config: dict, model: dict) -> list[str]:
    """The ``retrain.lr_sensitivity_targets`` of ``model`` that name no cell of ``first_cells``."""
    have = {c.target for c in first_cells(config, model)}
    return [t for t in model["retrain"].get("lr_sensitivity_targets", []) if t not in have]


def label(multiplier: float) -> str:
    """A multiplier as its folder names it (``x3``, ``x0.3333``)."""
    return f"x{multiplier:g}"


def run(
    source: str,
    network_cfg: dict,
    eval_cfg: dict,
    multipliers: list[float],
    cells: list[dict],
    unit_cells: list[dict],
    tokens_path: str,
    start_dir: str | None,
    imported_summary: str | None,
    network_dir: str,
    baseline: str,
    out_dir: str,
    work_dir: str,
    layout: dict[str, str],
    threads: int = 1,
    donors: dict[str, str] | None = None,
) -> None:
    """Heal ``cells`` (one unit's) at ``network_cfg``'s retrain lr times each of ``multipliers``, on the network its
    training job made (``network_dir``, ``baseline``), into ``out_dir`` (staged in ``work_dir``): per multiplier,
    the folder ``layout["run"]`` spells (over ``multiplier``, its ``label``, and the unit's fields) and in it each
    cell's (``selfheal.layout.CELL_IN_UNIT``). ``unit_cells``: every cell of the grid's unit, over which the prefix caches are
    planned as in the grid's job. ``donors``: each donor's trained folder, for a swap among the cells
    (``retrain.lr_sensitivity_targets``)."""
    trained, theta0, summary, curve = job.network_inputs(source, network_dir, start_dir, imported_summary)
    chosen = network_cfg["retrain"]["lr"]
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for multiplier in multipliers:
        cfg = copy.deepcopy(network_cfg)
        cfg["retrain"]["lr"] = chosen * multiplier
        log.info("lr x %g: retrain.lr %g, %d cells", multiplier, cfg["retrain"]["lr"], len(cells))
        for u in grid.units([Cell(**c) for c in cells]):
            folder = layout["run"].format(multiplier=label(multiplier), pretrain_seed=u.pretrain_seed, regime=u.regime)
            unit.run(
                cfg,
                eval_cfg,
                [c for c in cells if Cell(**c).unit == u],
                tokens_path,
                trained,
                theta0,
                baseline,
                summary,
                out_dir=str(Path(out_dir) / folder),
                work_dir=str(Path(work_dir) / folder),
                threads=threads,
                unit_cells=[c for c in unit_cells if Cell(**c).unit == u],
                pretrain_curve_path=curve,
                donors=donors,
            )
