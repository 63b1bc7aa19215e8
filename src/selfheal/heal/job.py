"""A training job: one per network (a model and a pretraining seed). In one process (imports and start-up paid
once), the network is made, then every heal unit of it (``grid.Unit``: a retrain regime, all retrain seeds) is
healed (``unit.run``).

Making a network depends on the model's source: pretrained here from its step-0 weights (``scratch``, the
frozen-random variants too, which make no cells), adapted to the corpus from a downloaded model (``adapt``), or
a downloaded model healed as downloaded, whose baseline is evaluated (``as_downloaded``). Its outputs go where the
rule declares them (``selfheal.layout``): the network's folder (``theta0/``, ``trained/``, ``pretrain_curve.parquet``,
``pretrain.json``), its baseline, and its cells folder (a unit's folder per regime, then each cell's).

Work is never lost (``staging``): the made network is staged in the work folder with a fingerprint of its settings
(``grid.covered``), the evaluation settings and the content of its inputs, and the outputs are hard links to it. So
a job re-run because a retrain seed or cell was added keeps the network and every finished cell, and a killed job
resumes (the network from its pretraining checkpoint, a unit from its finished cells and the checkpoint of the cell
in progress).
"""

from __future__ import annotations

import logging
from pathlib import Path

from selfheal import grid, layout
from selfheal.grid import Cell
from selfheal.heal import plan, staging, unit
from selfheal.training import evaluation, pretrain

log = logging.getLogger("selfheal")

SOURCES = tuple(layout.NETWORK_MADE)  # scratch, adapt, as_downloaded


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
    settings = grid.covered("network", network_cfg)
    fingerprint = staging.fingerprint(model=settings, eval=eval_cfg, source=source, inputs=inputs_digest)
    made = layout.NETWORK_MADE[source]
    if staging.is_staged(folder, fingerprint, made):
        log.info(
            "network %s (pretraining seed %d) made in an earlier run of this job: kept",
            network_cfg["name"],
            network_cfg["pretrain"]["seed"],
        )
        return
    staging.begin(folder, fingerprint, made, plan.network_settings(network_cfg, eval_cfg, source))
    baseline = str(folder / layout.STAGED_BASELINE)
    if source == "as_downloaded":
        evaluation.baseline(settings, eval_cfg, tokens_path, start_dir, baseline, threads=threads)
        return
    pretrain.pretrain(
        network_cfg,  # the whole config: the plateau check reads the retrain thresholds
        eval_cfg,
        tokens_path,
        theta0_dir=str(folder / "theta0") if source == "scratch" else None,
        trained_dir=str(folder / "trained"),
        curve_path=str(folder / layout.PRETRAIN_CURVE),
        summary_path=str(folder / layout.PRETRAIN),
        threads=threads,
        start_dir=start_dir if source == "adapt" else None,
        baseline_path=baseline,
    )


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
        imported_summary if as_downloaded else str(network / layout.PRETRAIN),
        None if as_downloaded else str(network / layout.PRETRAIN_CURVE),
    )


def run(
    source: str,
    network_cfg: dict,
    eval_cfg: dict,
    cells: list[dict],
    tokens_path: str,
    start_dir: str | None,
    imported_summary: str | None,
    network_dir: str,
    baseline: str,
    cells_dir: str,
    work_dir: str,
    threads: int = 1,
    donors: dict[str, str] | None = None,
) -> None:
    """Make one network (``network_cfg``: its settings, ``pretrain.seed`` set) into ``network_dir`` and
    ``baseline``, and heal its ``cells`` into ``cells_dir``, staging each piece in ``work_dir``. ``start_dir``: a
    downloaded model's folder (``adapt``, ``as_downloaded``); ``imported_summary``: its ``pretrain.json`` (the
    pretraining record of a model healed as downloaded). ``donors``: the trained folder of each donor whose encoder
    the swap cells take."""
    if source not in SOURCES:
        raise ValueError(f"source {source!r}: expected one of {SOURCES}")
    log.info("job: %s", plan.summary(source, network_cfg, eval_cfg, cells, work_dir))
    work = Path(work_dir)
    inputs = staging.digest([p for p in (tokens_path, start_dir) if p])  # once: a downloaded model can be large
    staged = work / layout.NETWORK_IN_WORK
    make_network(source, network_cfg, eval_cfg, tokens_path, start_dir, inputs, staged, threads)
    network = Path(network_dir)
    for name in layout.NETWORK_MADE[source]:
        if name != layout.STAGED_BASELINE:
            staging.link(staged / name, network / name)
    network.mkdir(parents=True, exist_ok=True)  # (empty for a model healed as downloaded)
    staging.link(staged / layout.STAGED_BASELINE, Path(baseline))
    trained, theta0, summary, curve = network_inputs(source, network_dir, start_dir, imported_summary)
    Path(cells_dir).mkdir(parents=True, exist_ok=True)  # (empty for a model that makes no cells)
    cells = [Cell(**c) for c in cells]
    for u in grid.units(cells):
        folder = layout.UNIT_IN_NETWORK.format(regime=u.regime)
        unit.run(
            network_cfg,
            eval_cfg,
            [c.as_dict() for c in grid.cells_of(cells, u)],
            tokens_path,
            trained,
            theta0,
            baseline,
            summary,
            out_dir=str(Path(cells_dir) / folder),
            work_dir=str(work / folder),
            threads=threads,
            pretrain_curve_path=curve,
            donors=donors,
        )
    log.info("job done: 1 network, %d cells", len(cells))
