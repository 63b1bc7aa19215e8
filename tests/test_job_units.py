"""The job unit follows the resources (job_unit: auto picks model, network or cell jobs from the cores or cluster
jobs and the grid), every unit makes the same numbers, and a dry run after a grid edit is short and names what
each job trains and keeps."""

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from selfheal import config as cfg
from selfheal import grid
from snakemake_helpers import dag_jobs, snakemake

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def _timing(key: str) -> bool:
    """A measured time (seconds, a rate per second, a share of time): the only things that may differ."""
    return key.endswith("_s") or key.endswith("_share")


def _unit(config: dict, workers: int | None) -> str:
    resolved = cfg.resolve(config)
    models = resolved["models"] + grid.frozen_random_models(resolved)
    return grid.job_unit(resolved, models, grid.cells(resolved), workers)


def test_auto_picks_the_unit_from_the_workers_and_the_grid():
    # the default grid: 2 models, 6 networks, 36 cells
    assert DEFAULT["job_unit"] == "auto"
    assert _unit(DEFAULT, 1) == "model"  # one worker: the least start-up
    assert _unit(DEFAULT, 2) == "network"  # as before auto: six networks pack 2 cores
    assert _unit(DEFAULT, 8) == "cell"  # 6 networks cannot fill 8 workers twice over
    assert _unit(DEFAULT, None) == "model"
    wide = {**DEFAULT, "models": [{**m, "name": f"{m['name']}-{i}"} for i in range(4) for m in DEFAULT["models"]]}
    assert _unit(wide, 2) == "model"  # 8 models: at least two jobs per core already
    assert _unit(wide, 8) == "network"  # 24 networks
    assert _unit({**DEFAULT, "job_unit": "network"}, 8) == "network"  # an explicit unit is kept


def test_jobs_at_once_count_each_jobs_threads():
    assert grid.concurrent_jobs(None, 2, 1) == 2
    assert grid.concurrent_jobs(None, 2, 2) == 1  # config/pretrained.yaml on 2 cores: one job at a time -> model
    assert grid.concurrent_jobs(None, 8, 3) == 2
    assert grid.concurrent_jobs(None, 1, 4) == 1  # Snakemake gives a job at most every core
    assert grid.concurrent_jobs(16, 2, 2) == 16  # a cluster profile's --jobs: each job has its own allocation
    assert grid.concurrent_jobs(None, None, 1) is None


TRAINING = {"model", "network", "make_network", "cell"}


def _waves(cores: int, tmp_path: Path) -> list[list[str]]:
    """The default config's DAG as waves: the jobs whose dependencies all ran in an earlier wave (what unlimited
    workers could run at once), as rule names."""
    jobs = dag_jobs(tmp_path, cores)
    done: set[int] = set()
    waves = []
    while len(done) < len(jobs):
        ready = [i for i, job in enumerate(jobs) if i not in done and set(job["deps"]) <= done]
        waves.append([jobs[i]["rule"] for i in ready])
        done |= set(ready)
    return waves


def test_eight_cores_get_at_least_eight_training_jobs_at_once(tmp_path):
    waves = _waves(8, tmp_path)
    training = [[r for r in wave if r in TRAINING] for wave in waves]
    assert max(len(w) for w in training) >= 8, training
    assert sum(w.count("cell") for w in waves) == len(grid.cells(cfg.resolve(DEFAULT)))  # every cell a job


def test_two_cores_keep_one_job_per_network(tmp_path):
    jobs = [r for wave in _waves(2, tmp_path) for r in wave if r in TRAINING]
    assert jobs == ["network"] * (len(DEFAULT["models"]) * len(DEFAULT["pretrain"]["seeds"]))  # 6 networks


def test_an_encoder_decoders_network_does_not_wait_for_its_donors(tmp_path):
    """With one job per cell, making the receiving BART's network depends on no donor's network; only its swap
    cells wait for the donor whose trained encoder they take."""
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    bart = {"arch": "bart", "n_layer": 1, "n_dec_layer": 1, "n_head": 2, "context": 32}
    config["models"] = [
        {"name": "tinyBart", "d_model": 32, **bart},
        {"name": "tinyBart16", "d_model": 16, "heal": False, **bart},
    ]
    config["grid"].update({"policies": ["full", "cross_attn"], "targets": ["all"], "encoder_swap": ["tinyBart16"]})
    config["job_unit"] = "cell"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    jobs = dag_jobs(tmp_path, 2, configfiles=(tmp_path / "config.yaml",))
    networks = {j["wildcards"]["model"]: i for i, j in enumerate(jobs) if j["rule"] == "make_network"}
    assert set(networks) == {"tinyBart", "tinyBart16"}
    assert networks["tinyBart16"] not in jobs[networks["tinyBart"]]["deps"]
    swaps = [j for j in jobs if j["rule"] == "cell" and j["wildcards"]["target"] == "swap-tinyBart16"]
    assert swaps and all({networks["tinyBart"], networks["tinyBart16"]} <= set(j["deps"]) for j in swaps)


def test_the_lr_check_waits_only_for_the_network_it_heals(tmp_path):
    """With one job per network or cell, the lr-sensitivity check depends on the first network's job (the one it
    heals), not on the model's other networks."""
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    config["models"] = [{**config["models"][0], "retrain": {"lr_sensitivity": [3.0]}}]
    config["models"][0].pop("frozen_random", None)
    config["pretrain"]["seeds"] = [0, 1, 2]
    config["job_unit"] = "cell"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    jobs = dag_jobs(tmp_path, 2, configfiles=(tmp_path / "config.yaml",))
    networks = {int(j["wildcards"]["pretrain_seed"]): i for i, j in enumerate(jobs) if j["rule"] == "make_network"}
    assert set(networks) == {0, 1, 2}
    (check,) = [j for j in jobs if j["rule"] == "lr_sensitivity"]
    assert networks[0] in check["deps"] and not {networks[1], networks[2]} & set(check["deps"])


# ---- real runs on a tiny grid: tinyA alone, its layer 1 (a prefix cache, a matched control), nothing else ----


def _tiny(**grid_edits) -> dict:
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    config["models"] = [config["models"][0]]
    del config["models"][0]["frozen_random"]
    config["grid"]["layers"] = [1]
    config["grid"].update(grid_edits)
    return config


def _run(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return snakemake(workdir, workdir / "config.yaml", "results/summary.parquet", *args)


@pytest.fixture(scope="module")
def by_model(tmp_path_factory, corpus_seed):
    workdir = tmp_path_factory.mktemp("by_model")
    corpus_seed(workdir)
    proc = _run(workdir, {**_tiny(), "job_unit": "model"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return workdir


def _files(results: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(results)): p.read_bytes()
        for part in ("models", "baselines", "cells")
        for p in sorted((results / part).rglob("*"))
        if p.is_file() and not p.name.startswith(".snakemake")
    }


def _without_timing(record):
    if isinstance(record, list):
        return [_without_timing(r) for r in record]
    if isinstance(record, dict):
        return {k: _without_timing(v) for k, v in record.items() if not _timing(k)}
    return record


@pytest.mark.e2e
def test_one_job_per_cell_makes_the_same_files(by_model, tmp_path, corpus_seed):
    """job_unit: cell (a network's job, then a job per cell; the matched control's waits for its cell's) writes
    the same files under the same paths as one job per model: the networks and damages bit for bit, the recovery
    records and tables equal but for measured times."""
    corpus_seed(tmp_path)
    proc = _run(tmp_path, {**_tiny(), "job_unit": "cell"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout + proc.stderr
    assert "cell tinyA p0 frozen s0 L1-full-trained: heals it" in out  # the dry run and the log name each cell
    want, got = _files(by_model / "results"), _files(tmp_path / "results")
    assert sorted(got) == sorted(want)
    for name, content in want.items():
        if name.endswith("recovery.json") or name.endswith("pretrain.json"):
            assert _without_timing(json.loads(got[name])) == _without_timing(json.loads(content)), name
        elif not name.endswith(".parquet"):
            assert got[name] == content, name
    for table in ("summary", "curves", "networks"):
        a, b = (pd.read_parquet(d / "results" / f"{table}.parquet") for d in (by_model, tmp_path))
        numbers = [c for c in a.columns if not _timing(c)]
        pd.testing.assert_frame_equal(a[numbers], b[numbers])
    log = (tmp_path / "results" / "logs" / "tinyA" / "p0" / "frozen" / "s0" / "L1-full-trained.log").read_text()
    assert "heals it" in log


@pytest.mark.e2e
@pytest.mark.parametrize(
    "edit, says",
    [
        ({"grid": {"seeds": [0, 1]}}, "model tinyA: trains 0 networks (keeps 1), heals 3 cells (keeps 4)"),
        ({"grid": {"layers": [0, 1]}}, "model tinyA: trains 0 networks (keeps 1), heals 2 cells (keeps 4)"),
        ({"pretrain": {"seeds": [0, 1]}}, "model tinyA: trains 1 network (keeps 1), heals 4 cells (keeps 4)"),
    ],
    ids=["retrain seed", "layer", "pretraining seed"],
)
def test_a_dry_run_after_a_grid_edit_names_the_counts(by_model, tmp_path, edit, says):
    """After a retrain seed, a layer or a pretraining seed is added, `snakemake -n` is short (the job's recorded
    params are counts and a digest, not the cell list) and says what the job trains and keeps."""
    assert "heals 4 cells (keeps 0)" in (by_model / "results" / "logs" / "tinyA" / "model.log").read_text()
    workdir = tmp_path / "run"
    shutil.copytree(by_model, workdir, symlinks=True)
    config = {**_tiny(), "job_unit": "model"}
    for section, values in edit.items():
        config[section] = {**config.get(section, {}), **values}
    proc = _run(workdir, config, "-n")
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = proc.stdout + proc.stderr
    assert says in text, text
    assert "Params have changed" in text and "cells, settings" in text
    assert len(text) < 4000, text
