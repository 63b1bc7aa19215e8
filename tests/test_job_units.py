"""One training job per network (rule network: the network made, then every cell of it healed, in one process),
whatever the cores or the cluster; a job waits only for the networks it needs; and a dry run after a grid edit is
short and names what each job trains and keeps."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from snakemake_helpers import dag_jobs, snakemake

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
TRAINING = {"network"}
DEFAULT_RULES = {"corpus", "tokenizer", "tokenize", "network", "aggregate", "plots", "answer", "all"}


@pytest.mark.parametrize("cores, nodes", [(2, 0), (8, 0), (2, 200)], ids=["2 cores", "8 cores", "a cluster"])
def test_every_network_is_one_job_whatever_the_cores(tmp_path, cores, nodes):
    # the default grid: 2 models x 3 pretraining seeds
    jobs = dag_jobs(tmp_path, cores, nodes)
    networks = sorted((j["wildcards"]["model"], j["wildcards"]["pretrain_seed"]) for j in jobs if j["rule"] in TRAINING)
    want = sorted((m["name"], str(s)) for m in DEFAULT["models"] for s in DEFAULT["pretrain"]["seeds"])
    assert networks == want and len(want) == 6
    assert {j["rule"] for j in jobs} == DEFAULT_RULES


def test_an_encoder_decoders_network_waits_for_its_donors_network_only(tmp_path):
    """The receiving BART's job (whose swap cells take the donor's trained encoder) waits for the donor's network;
    the donor, which receives nothing, waits for no other network."""
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    bart = {"arch": "bart", "n_layer": 1, "n_dec_layer": 1, "n_head": 2, "context": 32}
    config["models"] = [
        {"name": "tinyBart", "d_model": 32, **bart},
        {"name": "tinyBart16", "d_model": 16, "heal": False, **bart},
    ]
    config["grid"].update({"policies": ["full", "cross_attn"], "targets": ["all"], "encoder_swap": ["tinyBart16"]})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    jobs = dag_jobs(tmp_path, 2, configfiles=(tmp_path / "config.yaml",))
    networks = {j["wildcards"]["model"]: i for i, j in enumerate(jobs) if j["rule"] == "network"}
    assert set(networks) == {"tinyBart", "tinyBart16"}
    assert networks["tinyBart16"] in jobs[networks["tinyBart"]]["deps"]
    assert networks["tinyBart"] not in jobs[networks["tinyBart16"]]["deps"]


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
def finished(tmp_path_factory, corpus_seed):
    workdir = tmp_path_factory.mktemp("finished")
    corpus_seed(workdir)
    proc = _run(workdir, _tiny())
    assert proc.returncode == 0, proc.stderr[-4000:]
    return workdir


@pytest.mark.e2e
@pytest.mark.parametrize(
    "edit, says",
    [
        ({"grid": {"seeds": [0, 1]}}, "network tinyA p0: keeps the network, heals 3 cells (keeps 4)"),
        ({"grid": {"layers": [0, 1]}}, "network tinyA p0: keeps the network, heals 2 cells (keeps 4)"),
        ({"pretrain": {"seeds": [0, 1]}}, "network tinyA p1: trains the network, heals 4 cells (keeps 0)"),
    ],
    ids=["retrain seed", "layer", "pretraining seed"],
)
def test_a_dry_run_after_a_grid_edit_names_the_counts(finished, tmp_path, edit, says):
    """After a retrain seed, a layer or a pretraining seed is added, `snakemake -n` is short (the job's recorded
    params are counts and a digest, not the cell list) and says what the job trains and keeps; an added network
    leaves the other network's job alone."""
    log = (finished / "results" / "logs" / "tinyA" / "p0" / "network.log").read_text()
    assert "trains the network, heals 4 cells (keeps 0)" in log
    workdir = tmp_path / "run"
    shutil.copytree(finished, workdir, symlinks=True)
    config = _tiny()
    for section, values in edit.items():
        config[section] = {**config.get(section, {}), **values}
    proc = _run(workdir, config, "-n")
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = proc.stdout + proc.stderr
    assert says in text, text
    if "pretrain" in edit:  # a new job (its reason lists its missing outputs); the other network's is not re-run
        assert "network tinyA p0" not in text, text
    else:
        assert "Params have changed" in text and "cells, settings" in text
        assert len(text) < 4000, text
