"""End to end: the real Snakemake workflow on a tiny config, in a temporary directory. The finished run is the
session's shared one (tests/conftest.py: tests/tiny.yaml's GPT-2 models tinyA and tinyB, plus the other families,
which tests/test_workflow_families.py checks); the tests here look at tinyA and tinyB unless they say otherwise."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from conftest import FAMILY_MODELS, GPT2_MODELS
from selfheal.analysis.tables import CURVE_COLUMNS, NETWORK_COLUMNS, SUMMARY_COLUMNS
from snakemake_helpers import snakemake

SUMMARY = "results/summary.parquet"

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def finished(tiny_run):
    return tiny_run


def _gpt2(table: pd.DataFrame) -> pd.DataFrame:
    """tests/tiny.yaml's models' rows."""
    return table[table["model"].isin(GPT2_MODELS)]


def test_tables_have_the_documented_schema(finished):
    workdir, _ = finished
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    curves = pd.read_parquet(workdir / "results" / "curves.parquet")
    networks = pd.read_parquet(workdir / "results" / "networks.parquet")
    assert list(summary.columns) == SUMMARY_COLUMNS
    assert list(curves.columns) == CURVE_COLUMNS
    assert list(networks.columns) == NETWORK_COLUMNS
    # one network per model (one pretraining seed), in the order of their names
    assert list(zip(networks["model"], networks["pretrain_seed"])) == [
        (m, 0) for m in sorted(GPT2_MODELS + FAMILY_MODELS)
    ]
    gpt2 = _gpt2(summary)
    # tinyA: L0, L1, none, all and the matched controls of L0, L1; tinyB: L0, none, all and L0's matched control;
    # one seed; four thresholds each
    assert len(gpt2) == (6 + 4) * 4
    assert set(gpt2[gpt2["init"] == "trained"]["target"]) == {"L0", "L1"}
    assert set(summary["threshold"]) == {0.01, 0.02, 0.05, 0.10}
    assert set(curves["kind"]) == {"pretrain", "recovery"}
    assert summary["recovered"].dtype == bool


def test_the_pretraining_job_writes_the_baseline_of_the_saved_weights(finished):
    """No baseline job for a network trained here: its pretraining job's last evaluation is the baseline, and it
    equals, bit for bit, an evaluation of the saved weights on the fixed validation set (as a baseline job made it)."""
    from selfheal import models, records
    from selfheal.training import setup
    from selfheal.training.evaluation import evaluate

    workdir, configfile = finished
    config = yaml.safe_load(configfile.read_text())
    assert not (workdir / "results" / "logs" / "tinyA" / "p0" / "baseline.log").exists()
    threads = torch.get_num_threads()
    torch.set_num_threads(config.get("threads", 1))  # as the jobs ran
    for name in ("tinyA", "tinyBert"):
        model_cfg = next(m for m in config["models"] if m["name"] == name)
        model_cfg = {
            **model_cfg,
            "pretrain": {**config["pretrain"], **model_cfg.get("pretrain", {}), "seed": 0},
            "hardware": config["hardware"],  # the jobs' device (the CPU), also where a GPU is visible
        }
        model = models.load(workdir / "results" / "models" / name / "p0" / "trained")
        tokens = workdir / "results" / "corpus" / "bpe" / "tokens.safetensors"
        job = setup.prepare(model, model_cfg, config["eval"], str(tokens))
        baseline = records.read(workdir / "results" / "baselines" / name / "p0.json", records.Baseline)
        loss = evaluate(model, job.family, job.val_batches)
        assert baseline.val_loss == loss, name
    torch.set_num_threads(threads)


def test_controls(finished):
    workdir, _ = finished
    summary = _gpt2(pd.read_parquet(workdir / "results" / "summary.parquet"))
    none = summary[summary["target"] == "none"]
    assert none["recovered"].all() and (none["examples"] == 0).all()
    assert (none["damaged_loss"] == none["baseline_loss"]).all()
    every = summary[summary["target"] == "all"]
    assert (every["damaged_loss"] > every["baseline_loss"]).all()
    censored = summary[~summary["recovered"]]
    assert (censored["examples"] == censored["budget_examples"]).all()


def test_pretraining_learned(finished):
    workdir, _ = finished
    for model in ("tinyA", "tinyB"):
        pre = json.loads((workdir / "results" / "models" / model / "p0" / "pretrain.json").read_text())
        assert pre["final_val_loss"] < pre["initial_val_loss"] - 0.5
        assert (workdir / "results" / "models" / model / "p0" / "trained" / "model.safetensors").is_file()
        assert not list((workdir / "results" / "models" / model / "p0" / "trained").glob("*.bin"))


def test_plots_and_logs_written(finished):
    workdir, _ = finished
    for plot in ("recovery_cost", "recovery_examples", "recovery_curves", "damage"):
        html = workdir / "results" / "plots" / f"{plot}.html"
        png = workdir / "results" / "plots" / f"{plot}.png"
        assert "vega" in html.read_text().lower()
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    log = (workdir / "results" / "logs" / "tinyA" / "p0" / "network.log").read_text()
    assert "examples 512/512" in log and "val" in log


def test_frozen_random_table_and_plot(finished):
    """tinyA's frozen-random variants: pretrained (no cells), frozen tensors still at θ0, one table row each plus
    the all-trainable reference, and the plot."""
    from safetensors.torch import load_file

    from selfheal.experiments.frozen_random import COLUMNS

    workdir, _ = finished
    table = pd.read_parquet(workdir / "results" / "frozen_random.parquet")
    assert list(table.columns) == COLUMNS
    table = table[table["model"].str.startswith("tinyA")]  # tinyBart's rows: tests/test_workflow_families.py
    assert list(zip(table["model"], table["frozen"])) == [
        ("tinyA", "none"),
        ("tinyA.frozen-embeddings", "embeddings"),
        ("tinyA.frozen-attention-ffn", "attention+ffn"),
    ]
    assert (table["base_model"] == "tinyA").all() and table["delta_loss"].iloc[0] == 0
    assert (table["frozen_params"].iloc[1:] > 0).all() and table["frozen_params"].iloc[0] == 0
    variant = workdir / "results" / "frozen_random" / "networks" / "tinyA.frozen-embeddings" / "p0"  # the module's
    theta0 = load_file(str(variant / "theta0" / "model.safetensors"))
    trained = load_file(str(variant / "trained" / "model.safetensors"))
    assert torch.equal(theta0["transformer.wte.weight"], trained["transformer.wte.weight"])
    assert not torch.equal(theta0["transformer.h.0.attn.c_attn.weight"], trained["transformer.h.0.attn.c_attn.weight"])
    base_theta0 = load_file(str(workdir / "results" / "models" / "tinyA" / "p0" / "theta0" / "model.safetensors"))
    assert all(torch.equal(base_theta0[k], theta0[k]) for k in theta0)  # same seed: the same θ0 as its base
    # the experiment's own all-trainable reference is the grid's tinyA network again: the same loss, bit for bit
    grid_network = json.loads((workdir / "results" / "models" / "tinyA" / "p0" / "pretrain.json").read_text())
    assert table["val_loss"].iloc[0] == grid_network["final_val_loss"]
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    # the variants make no cells, nor does the swap donor (heal: false)
    assert set(summary["model"]) == set(GPT2_MODELS + FAMILY_MODELS) - {"tinyBart16"}
    assert "frozen" in (workdir / "results" / "plots" / "frozen_random.html").read_text()
    assert (workdir / "results" / "plots" / "frozen_random.png").read_bytes()[:4] == b"\x89PNG"


def test_report(finished):
    workdir, configfile = finished
    proc = snakemake(workdir, configfile, "--report", "results/report.html")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (workdir / "results" / "report.html").read_text()
    # every output the rules mark for the report is in it, under its category
    from selfheal.analysis import answer_plots, plots

    for name in [*plots.FIGURES, *answer_plots.FIGURES, "answer", "frozen_random"]:
        assert f"{name}.html" in report, name
    assert "Recovery" in report and "1. Answer" in report


def test_editing_one_models_retrain_reruns_only_its_cells(finished):
    workdir, configfile = finished
    mtimes = {p: p.stat().st_mtime_ns for p in (workdir / "results").rglob("*") if p.is_file()}
    config = yaml.safe_load(configfile.read_text())
    config["models"][1]["retrain"] = {"eval_every_examples": 32}
    configfile.write_text(yaml.safe_dump(config))

    # up to the summary (the figures and the page read the tables; they re-run after it as after any table change)
    proc = snakemake(workdir, configfile, SUMMARY)
    assert proc.returncode == 0, proc.stderr[-4000:]
    changed = sorted(
        str(p.relative_to(workdir / "results")) for p, t in mtimes.items() if p.exists() and p.stat().st_mtime_ns != t
    )
    # work/: the outputs' staged copies; .snakemake_timestamp: Snakemake's marker in a directory() output it re-made;
    # the re-run job's baseline, which Snakemake touches after the job as it touches every file output (its bytes
    # are the staged ones, checked below)
    baseline = "baselines/tinyB/p0.json"
    changed = [
        c for c in changed if not c.startswith(("logs/", "work/")) and ".snakemake_timestamp" not in c and c != baseline
    ]
    assert (workdir / "results" / baseline).samefile(
        workdir / "results" / "work" / "tinyB" / "p0" / "network" / "baseline.json"
    )
    retrained = {c for c in changed if c.endswith("recovery.json")}
    assert retrained == {  # tinyB's one heal unit (network and regime), every cell of it, in tinyB's job
        "cells/tinyB/p0/frozen/s0/L0-full-fresh/recovery.json",
        "cells/tinyB/p0/frozen/s0/L0-full-trained/recovery.json",
        "cells/tinyB/p0/frozen/s0/none-none-none/recovery.json",
        "cells/tinyB/p0/frozen/s0/all-full-fresh/recovery.json",
    }
    assert not any(c.startswith(("models/", "pretrained/", "baselines/", "corpus/")) for c in changed)
    assert not any(c.startswith("cells/") and not c.startswith("cells/tinyB/") for c in changed)
    # a finished model job leaves its networks and finished cells staged for its next run, and no checkpoint
    assert not [p for p in (workdir / "results" / "work").rglob("*.ckpt") if p.name != "extend.ckpt"]  # (the
    # extension points of cells that trained to their budget stay, for a larger budget to continue from)
    assert "summary.parquet" in changed

    # and with nothing changed, nothing runs
    proc = snakemake(workdir, configfile, "-n", SUMMARY)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_adding_a_pretraining_seed_trains_only_the_new_network(finished, tmp_path):
    """The unit of work is the network: an added pretraining seed adds that network's job (and re-runs the
    report); the network and cells of the seed the model had are left alone, bit for bit."""
    workdir, configfile = finished
    copy = tmp_path / "copy"  # (the module's other tests keep the finished run as it is)
    shutil.copytree(workdir, copy, symlinks=True)
    config = yaml.safe_load(configfile.read_text())
    config["models"][1]["pretrain"] = {"seeds": [0, 1]}  # a second network of tinyB
    added = copy / "added.yaml"
    added.write_text(yaml.safe_dump(config))
    proc = snakemake(copy, added, "-n")  # one dry run of the whole workflow: its job stats table
    assert proc.returncode == 0 and "Job stats:" in proc.stdout, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.split("Job stats:")[1].splitlines()]
    jobs = {r[0]: r[1] for r in rows if len(r) == 2 and r[0] in {"network", "import_pretrained", "aggregate", "plots"}}
    assert jobs == {"network": "1", "aggregate": "1", "plots": "1"}, proc.stdout
    # the job's message names the network and what it trains and keeps
    assert "network tinyB p1: trains the network, heals 4 cells (keeps 0)" in proc.stdout, proc.stdout
    assert "network tinyB p0" not in proc.stdout and "network tinyA" not in proc.stdout, proc.stdout

    results = copy / "results"
    old = [
        p
        for d in ("models/tinyB/p0", "baselines/tinyB", "cells/tinyB/p0")
        for p in (results / d).rglob("*")
        if p.is_file() and p.name != ".snakemake_timestamp"
    ]
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in old}
    proc = snakemake(copy, added, SUMMARY)  # what the checks below read (the report's re-run is the dry run's)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in old} == before
    assert (results / "models" / "tinyB" / "p1" / "pretrain.json").is_file()
    assert (results / "baselines" / "tinyB" / "p1.json").is_file()
    assert len(list((results / "cells" / "tinyB" / "p1").rglob("recovery.json"))) == 4
    assert sorted(pd.read_parquet(results / "summary.parquet").query("model == 'tinyB'")["pretrain_seed"].unique()) == [
        0,
        1,
    ]


def test_crossings_are_intervals_within_the_resolution(finished):
    """Every recovered threshold is an interval (lo, hi] of at most retrain.resolution x hi (or one step), located
    by replaying the interval; a censored one has no hi."""
    workdir, _ = finished
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    rec = summary[summary["recovered"]]
    assert (rec["examples"] == rec["examples_hi"]).all()
    at_start = rec["examples_hi"] == 0
    assert (rec.loc[at_start, "examples_lo"] == 0).all()
    moving = rec[~at_start]
    assert len(moving) and (moving["examples_lo"] < moving["examples_hi"]).all()
    width = moving["examples_hi"] - moving["examples_lo"]
    assert ((width <= 0.1 * moving["examples_hi"]) | (moving["steps_hi"] - moving["steps_lo"] <= 1)).all()
    assert summary.loc[~summary["recovered"], "examples_hi"].isna().all()


def test_bad_config_fails_before_any_job(tmp_path):
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    config["grid"]["layers"] = [0, 5]
    configfile = tmp_path / "bad.yaml"
    configfile.write_text(yaml.safe_dump(config))
    proc = snakemake(tmp_path, configfile)
    assert proc.returncode != 0
    assert "config key 'grid.layers[1]'" in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()


def test_finished_cells_survive_a_failure_elsewhere(tmp_path, corpus_seed):
    """One model's pretraining fails at run time (it asks for more sequences than the corpus has); with
    --keep-going every cell of the other model still finishes, and nothing of the failed one is taken as done."""
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    # more than the 106,911 blocks of 32 tokens the 300-token BPE makes of the train split, yet within the pre-run
    # bound (a token is at least one byte: 145,290 blocks), so only the model's job can know it is too many
    config["models"][0]["pretrain"] = {"train_sequences": 120_000}
    del config["models"][0]["frozen_random"]  # its variants would only fail the same way
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(config))
    corpus_seed(tmp_path)  # same corpus and tokenizer: the data stages are done
    proc = snakemake(tmp_path, configfile, "--keep-going")
    assert proc.returncode != 0
    assert "train_sequences" in (tmp_path / "results" / "logs" / "tinyA" / "p0" / "network.log").read_text()
    done = sorted(p.parent.name for p in (tmp_path / "results" / "cells").rglob("recovery.json"))
    assert done == ["L0-full-fresh", "L0-full-trained", "all-full-fresh", "none-none-none"]  # tinyB's cells
    assert not (tmp_path / "results" / "models" / "tinyA" / "p0" / "pretrain.json").exists()
    assert not (tmp_path / "results" / "cells" / "tinyA").exists()
    assert not (tmp_path / "results" / "summary.parquet").exists()
