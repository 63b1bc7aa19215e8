"""Never lose work: the real workflow, its job processes SIGKILLed at random points several times and re-run,
ends with exactly the numbers of an uninterrupted run."""

import os
import random
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import psutil
import pytest
import yaml
from snakemake_helpers import ROOT, snakemake

pytestmark = pytest.mark.e2e

CONFIG = {
    "corpus": {"source": "shakespeare"},
    "tokenizer": {"vocab_size": 300},
    "models": [{"name": "k", "n_layer": 2, "d_model": 16, "n_head": 2, "context": 32}],
    "pretrain": {"epochs": 4, "train_sequences": 2048, "batch_size": 16, "lr": 1.0e-2, "eval_every_examples": 1024,
                 "seeds": [0],
                 "checkpoint_every_steps": 3},
    "eval": {"val_sequences": 32, "batch_size": 32},
    "grid": {"layers": [1], "seeds": [0], "controls": False, "matched_controls": "none"},
    "retrain": {"batch_size": 16, "lr": 1.0e-2, "eval_every_examples": 64, "budget_fraction": 1.0,
                "thresholds": [0.001], "checkpoint_every_steps": 3},
}
NUMBERS = ["recovered", "examples", "tokens", "steps", "baseline_loss", "damaged_loss", "final_loss"]
# What the test compares: every run here makes these two tables (and what they need), not the plots or the answer page
TABLES = ["results/summary.parquet", "results/curves.parquet"]


def _start(workdir, stderr=subprocess.DEVNULL):
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "1", "--rerun-incomplete", *TABLES]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def _training_job(proc):
    """The running model job process (it pretrains, then retrains) under a snakemake process, if any."""
    try:
        for child in psutil.Process(proc.pid).children(recursive=True):
            cmdline = child.cmdline()
            script = cmdline[1] if len(cmdline) > 1 else ""
            # the python process itself, not the bash wrapper Snakemake starts it with
            if "python" in child.name() and ".snakemake/scripts" in script and script.endswith("train.py"):
                return child
    except psutil.NoSuchProcess:
        pass
    return None


def _is_training(workdir, since: float) -> bool:
    for log in (workdir / "results" / "logs").rglob("*.log"):
        if log.stat().st_mtime >= since and re.search(r"train step [1-9]", log.read_text()):
            return True
    return False


def _kill_a_training_job(workdir, rng) -> bool:
    """Start the workflow, SIGKILL the first training job at a random moment; True if a kill happened."""
    proc = _start(workdir)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        job = _training_job(proc)
        # once the job is training (its log shows progress past step 0), at a random moment after that
        if job is not None and _is_training(workdir, job.create_time()):
            time.sleep(rng.uniform(0.0, 2.0))
            try:
                job.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                continue
            proc.wait(timeout=120)
            return True
        time.sleep(0.05)
    proc.wait(timeout=300)
    return False


def test_killed_jobs_resume_to_identical_results(tmp_path, corpus_seed):
    reference = tmp_path / "reference"
    killed = tmp_path / "killed"
    for workdir in (reference, killed):
        workdir.mkdir()
        (workdir / "config.yaml").write_text(yaml.safe_dump(CONFIG))
        corpus_seed(workdir)  # tests/tiny.yaml's corpus and tokenizer: the data stages are done
    # the uninterrupted reference runs on the other core while the kill loop below works on one
    reference_log = tmp_path / "reference.stderr"
    with reference_log.open("w") as stderr:
        uninterrupted = _start(reference, stderr)

    try:
        rng = random.Random(7)
        kills = sum(_kill_a_training_job(killed, rng) for _ in range(4))
        final = snakemake(killed, killed / "config.yaml", "--rerun-incomplete", *TABLES)
        assert final.returncode == 0, final.stderr[-3000:]
        assert kills >= 3
        assert uninterrupted.wait(timeout=600) == 0, reference_log.read_text()[-3000:]
    finally:
        if uninterrupted.poll() is None:  # the test failed first: do not leave the reference running
            uninterrupted.kill()

    logs = "".join(p.read_text() for p in (killed / "results" / "logs").rglob("*.log"))
    assert "resumed from" in logs  # at least one kill landed after a checkpoint, and was resumed from it
    want = pd.read_parquet(reference / "results" / "summary.parquet")[NUMBERS]
    got = pd.read_parquet(killed / "results" / "summary.parquet")[NUMBERS]
    pd.testing.assert_frame_equal(got, want)
    want_curves = pd.read_parquet(reference / "results" / "curves.parquet")
    got_curves = pd.read_parquet(killed / "results" / "curves.parquet")
    pd.testing.assert_series_equal(got_curves["val_loss"], want_curves["val_loss"])
    # checkpoints are dropped once a job finishes (a censored cell's extension point stays, for a larger budget)
    assert not [p for p in (killed / "results").rglob("*.ckpt") if p.name != "extend.ckpt"]
