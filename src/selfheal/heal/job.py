"""A training job: one per model (``job_unit: model``), per network (``network``), or per network then per cell
(``cell``: ``make_network`` makes the network, each ``cell`` job heals one cell); ``auto`` picks one from the cores
and the grid (docs/configuration.md). In one process (imports and start-up paid once), for each of the job's
networks (pretraining seeds) in turn: the network is made, then every heal unit of it (``grid.Unit``: a retrain
regime, all retrain seeds) is healed (``unit.run``), or the job's one cell.

Making a network depends on the model's source: pretrained here from its step-0 weights (``scratch``, the
frozen-random variants too, which make no cells), adapted to the corpus from a downloaded model (``adapt``), or
a downloaded model healed as downloaded, whose baseline is evaluated (``as_downloaded``). Its outputs go to three
folders the rule declares: the networks (``p{pretrain_seed}/``: ``theta0/``, ``trained/``,
``pretrain_curve.parquet``, ``pretrain.json``), their baselines (``p{pretrain_seed}.json``) and their cells
(``p{pretrain_seed}/{regime}/`` + the cell folder). ``layout`` spells those patterns (the rules own every path). A
network job writes its network's part of the same folders.

Work is never lost (``staging``): each made network is staged in the work folder with a fingerprint of its
pretraining settings, the evaluation settings and the content of its inputs, and the outputs are hard links to
it. So a job re-run because a pretraining seed was added trains only the new network, one re-run because a retrain
seed or cell was added keeps every network and finished cell, and a killed job resumes (a network from its
pretraining checkpoint, a unit from its finished cells and the checkpoint of the cell in progress).
"""

from __future__ import annotations

import logging
from pathlib import Path

from selfheal import grid
from selfheal.grid import Cell
from selfheal.heal import plan, staging, unit
from selfheal.training import evaluation, pretrain

log = logging.getLogger("selfheal")

SOURCES = ("scratch", "adapt", "as_downloaded")
BASELINE = "baseline.json"  # a staged network's baseline (linked to the baselines folder)
CURVE = "pretrain_curve.parquet"  # a network's pretraining curve (its from-scratch cost sets a budget_scratch)
MADE = plan.NETWORK_MADE  # what making a network stages, by source


def make_network(
    source: str,
    network_cfg: dict,
    eval_cfg: dict,
    tokens_path: str,
    start_dir: str | None,
    inputs_digest: str,
    folder: Path,
    threads: int,
) -> None:
    """Pretrain, adapt or evaluate one network into ``folder``, unless it is staged there under the same
    fingerprint (settings, evaluation, ``inputs_digest``: the content of the token streams and start folder)."""
    settings = {k: v for k, v in network_cfg.items() if k != "retrain"}  # retrain edits keep the network
    fingerprint = staging.fingerprint(model=settings, eval=eval_cfg, source=source, inputs=inputs_digest)
    made = MADE[source]
    if staging.is_staged(folder, fingerprint, made):
        log.info(
            "network %s (pretraining seed %d) made in an earlier run of this job: kept",
            settings["name"],
            settings["pretrain"]["seed"],
        )
        return
    staging.begin(folder, fingerprint, made, plan.network_settings(network_cfg, eval_cfg, source))
    if source == "as_downloaded":
        evaluation.baseline(settings, eval_cfg, tokens_path, start_dir, str(folder / BASELINE), threads=threads)
        return
    pretrain.pretrain(
        network_cfg,  # the whole config: the plateau check reads the retrain thresholds
        eval_cfg,
        tokens_path,
        theta0_dir=str(folder / "theta0") if source == "scratch" else None,
        trained_dir=str(folder / "trained"),
        curve_path=str(folder / CURVE),
        summary_path=str(folder / "pretrain.json"),
        threads=threads,
        start_dir=start_dir if source == "adapt" else None,
        baseline_path=str(folder / BASELINE),
    )


def run(
    source: str,
    networks: list[dict],
    eval_cfg: dict,
    cells: list[dict],
    tokens_path: str,
    start_dir: str | None,
    imported_summary: str | None,
    networks_dir: str,
    baselines_dir: str,
    cells_dir: str,
    work_dir: str,
    layout: dict[str, str],
    threads: int = 1,
    donors: dict[int, dict[str, str]] | None = None,
) -> None:
    """Make the networks of one job (``networks``: each one's settings, ``pretrain.seed`` set) and heal their
    cells. ``start_dir``: a downloaded model's folder (``adapt``, ``as_downloaded``); ``imported_summary``: its
    ``pretrain.json`` (the pretraining record of a model healed as downloaded). ``layout``: the patterns of a
    network's folder (``network``), its baseline (``baseline``), a unit's folder (``unit``), a cell's folder in its
    unit (``cell``) and a network's staging folder in ``work_dir`` (``network_work``). ``donors``: per pretraining
    seed, the trained folder of each donor whose encoder that network's swap cells take."""
    if source not in SOURCES:
        raise ValueError(f"source {source!r}: expected one of {SOURCES}")
    log.info(
        "job: %d networks, %d cells: %s",
        len(networks),
        len(cells),
        plan.summary(source, networks, eval_cfg, cells, work_dir, layout),
    )
    cells = [Cell(**c) for c in cells]
    work = Path(work_dir)
    inputs = staging.digest([p for p in (tokens_path, start_dir) if p])  # once: a downloaded model can be large
    for network_cfg in networks:
        seed = network_cfg["pretrain"]["seed"]
        staged = work / layout["network_work"].format(pretrain_seed=seed)
        make_network(source, network_cfg, eval_cfg, tokens_path, start_dir, inputs, staged, threads)
        network = Path(networks_dir) / layout["network"].format(pretrain_seed=seed)
        for name in MADE[source]:
            if name != BASELINE:
                staging.link(staged / name, network / name)
        network.mkdir(parents=True, exist_ok=True)  # (empty for a model healed as downloaded)
        baseline = Path(baselines_dir) / layout["baseline"].format(pretrain_seed=seed)
        staging.link(staged / BASELINE, baseline)
        trained = start_dir if source == "as_downloaded" else str(network / "trained")
        theta0 = str(network / "theta0") if source == "scratch" else None
        summary = imported_summary if source == "as_downloaded" else str(network / "pretrain.json")
        (Path(cells_dir) / layout["network"].format(pretrain_seed=seed)).mkdir(parents=True, exist_ok=True)
        mine = [c for c in cells if c.pretrain_seed == seed]
        for u in grid.units(mine):
            folder = layout["unit"].format(pretrain_seed=seed, regime=u.regime)
            unit.run(
                network_cfg,
                eval_cfg,
                [c.as_dict() for c in grid.cells_of(mine, u)],
                tokens_path,
                trained,
                theta0,
                str(baseline),
                summary,
                out_dir=str(Path(cells_dir) / folder),
                work_dir=str(work / folder),
                cell_folder=layout["cell"],
                threads=threads,
                pretrain_curve_path=None if source == "as_downloaded" else str(network / CURVE),
                donors=(donors or {}).get(seed),
            )
    Path(cells_dir).mkdir(parents=True, exist_ok=True)  # (empty for a model that makes no cells)
    Path(baselines_dir).mkdir(parents=True, exist_ok=True)
    Path(networks_dir).mkdir(parents=True, exist_ok=True)
    log.info("job done: %d networks, %d cells", len(networks), len(cells))


def network_inputs(
    source: str, network_dir: str, start_dir: str | None, imported_summary: str | None
) -> tuple[str, str | None, str, str | None]:
    """What healing reads of a made network, by source: its trained weights, step-0 weights (None unless built
    here), pretraining record and pretraining curve (None for a model healed as downloaded)."""
    network = Path(network_dir)
    as_downloaded = source == "as_downloaded"
    return (
        start_dir if as_downloaded else str(network / "trained"),
        str(network / "theta0") if source == "scratch" else None,
        imported_summary if as_downloaded else str(network / "pretrain.json"),
        None if as_downloaded else str(network / CURVE),
    )


def heal(
    source: str,
    network_cfg: dict,
    eval_cfg: dict,
    cell: dict,
    unit_cells: list[dict],
    earlier: list[tuple[dict, str]],
    tokens_path: str,
    start_dir: str | None,
    imported_summary: str | None,
    network_dir: str,
    baseline: str,
    unit_dir: str,
    unit_work_dir: str,
    cell_folder: str,
    threads: int = 1,
    donors: dict[str, str] | None = None,
) -> None:
    """One cell's own job (``job_unit: cell``): the network another job made (``network_dir``, ``baseline``), then
    the cell healed as its unit's job would heal it (``unit.run``: the prefix caches planned over ``unit_cells``; a
    matched control as long as the longest of the cells it is matched with, ``earlier``: each with its curve).
    ``donors``: the trained folder of the donor whose encoder a swap cell takes."""
    if source not in SOURCES:
        raise ValueError(f"source {source!r}: expected one of {SOURCES}")
    trained, theta0, summary, curve = network_inputs(source, network_dir, start_dir, imported_summary)
    log.info(
        "cell %s: %s",
        cell,
        plan.summary(
            source,
            [network_cfg],
            eval_cfg,
            [cell],
            unit_work_dir,
            {"unit": "", "cell": cell_folder},
            makes_networks=False,
        ),
    )
    unit.run(
        network_cfg,
        eval_cfg,
        [cell],
        tokens_path,
        trained,
        theta0,
        baseline,
        summary,
        out_dir=unit_dir,
        work_dir=unit_work_dir,
        cell_folder=cell_folder,
        threads=threads,
        unit_cells=unit_cells,
        earlier=earlier,
        pretrain_curve_path=curve,
        donors=donors,
    )
