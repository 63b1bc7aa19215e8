"""Never lose work: the real workflow, its training job SIGKILLed four times at points chosen from its own progress
(after checkpoints in pretraining and in retraining) and re-run, ends with exactly the numbers of an uninterrupted
run. The jobs run on the CPU (bit-exact numbers)."""

import os
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import psutil
import pytest
import torch
import yaml
from snakemake_helpers import ROOT, snakemake, pythonpath

pytestmark = pytest.mark.e2e

CONFIG = {
    "corpus": {"source": "shakespeare"},
    "tokenizer": {"vocab_size": 300},
    "models": [{"name": "k", "n_layer": 2, "d_model": 16, "n_head": 2, "context": 32}],
    "pretrain": {
        # 4 copies of 2 epochs at most (up to 128 steps each) of pretraining, then 128 steps of retraining
        "max_epochs": 2,
        "patience": 1,
        "train_sequences": 1024,
        "eval_every_examples": 1024,
        "seeds": [0],
        "checkpoint_every_steps": 3,
    },
    "eval": {"val_sequences": 32, "batch_size": 32},
    "grid": {"layers": [1], "seeds": [0], "controls": False, "matched_controls": "none"},
    "recipe": {"lrs": [3.0e-3, 1.0e-2, 3.0e-2, 1.0e-1], "max_lr_extensions": 0, "batch_size": 16, "warmup_steps": 5},
    "retrain": {
        "eval_every_examples": 64,
        "budget_fraction": 1.0,
        "thresholds": [0.001],
        "checkpoint_every_steps": 3,
    },
    "hardware": {"device": "cpu"},
}
NUMBERS = ["recovered", "examples", "tokens", "steps", "baseline_loss", "damaged_loss", "final_loss"]
# What the test compares: every run here makes these two tables (and what they need), not the plots or the answer page
TABLES = ["results/summary.parquet", "results/curves.parquet"]


def _start(workdir, stderr=subprocess.DEVNULL):
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        "--cores",
        "1",
        "--rerun-incomplete",
        *TABLES,
    ]
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=stderr, env={**os.environ, "PYTHONPATH": pythonpath()}
    )


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


# Where the kills land, chosen from the job's own progress: each kill waits for a checkpoint of its phase at a
# later step than the last kill of that phase saw (so after the first, each proves the job resumed and went on):
# twice in pretraining, twice in retraining (the model job pretrains, then retrains its cells).
KILLS = ["pretrain", "pretrain", "retrain", "retrain"]


def _checkpoint_step(workdir, phase: str) -> tuple[str, int] | None:
    """The place and step of a checkpoint of ``phase`` in ``workdir``, if one is there (written atomically)."""
    try:
        for path in (workdir / "results").rglob(f"{phase}.ckpt"):
            return str(path), int(torch.load(path, weights_only=True)["position"]["steps"])
    except (FileNotFoundError, RuntimeError, EOFError):  # replaced or removed while read (a finished copy's
        return None  # folder too): look again
    return None


def _logs(workdir) -> str:
    return "".join(p.read_text() for p in (workdir / "results" / "logs").rglob("*.log"))


def _kill_at_checkpoint(workdir, phase: str, after: tuple[str, int] | None) -> tuple[tuple[str, int], str]:
    """Start the workflow and SIGKILL its training job once a ``phase`` checkpoint newer than ``after`` exists (past
    its step, or another cell's or network's: a resumed run that finished its cell and went on to the next is past
    it too); returns that checkpoint and the job logs as they were at the kill (a restarted job rewrites its log).
    Fails if the job ends without writing one."""
    proc = _start(workdir)
    deadline = time.time() + 600
    while proc.poll() is None and time.time() < deadline:
        found = _checkpoint_step(workdir, phase)
        job = _training_job(proc)
        newer = found is not None and (after is None or found[0] != after[0] or found[1] > after[1])
        if newer and job is not None:
            try:
                # frozen first: the checkpoint must still be there when the job dies (a copy that stops drops its
                # checkpoint for its record, and a step takes milliseconds)
                job.suspend()
                found = _checkpoint_step(workdir, phase)
                if found is None or not (after is None or found[0] != after[0] or found[1] > after[1]):
                    job.resume()
                    continue
                job.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                break
            proc.wait(timeout=120)
            # the checkpoint the kill left (the job may have written a newer one between the look and the kill): the
            # next kill of this phase waits for one newer than it, so the run it stops has resumed and gone on
            return _checkpoint_step(workdir, phase) or found, _logs(workdir)
        time.sleep(0.02)
    proc.kill()
    proc.wait(timeout=60)
    pytest.fail(f"the workflow ended (or ran 600 s) before a {phase} checkpoint newer than {after}")


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
        seen = {"pretrain": None, "retrain": None}
        logs = []
        for phase in KILLS:
            seen[phase], log = _kill_at_checkpoint(killed, phase, seen[phase])
            logs.append(log)
        final = snakemake(killed, killed / "config.yaml", "--rerun-incomplete", *TABLES)
        assert final.returncode == 0, final.stderr[-3000:]
        assert uninterrupted.wait(timeout=600) == 0, reference_log.read_text()[-3000:]
    finally:
        if uninterrupted.poll() is None:  # the test failed first: do not leave the reference running
            uninterrupted.kill()

    # every run after a kill resumed from the checkpoint that kill left: the runs the next kills stopped, and the last
    logs.append(_logs(killed))
    for phase, log in zip(KILLS, logs[1:]):
        resumed = re.findall(r"resumed from \S+", log)
        assert any(line.endswith(f"{phase}.ckpt") for line in resumed), (phase, resumed)
    want = pd.read_parquet(reference / "results" / "summary.parquet")[NUMBERS]
    got = pd.read_parquet(killed / "results" / "summary.parquet")[NUMBERS]
    pd.testing.assert_frame_equal(got, want)
    want_curves = pd.read_parquet(reference / "results" / "curves.parquet")
    got_curves = pd.read_parquet(killed / "results" / "curves.parquet")
    pd.testing.assert_series_equal(got_curves["val_loss"], want_curves["val_loss"])
    # checkpoints are dropped once a job finishes (a censored cell's extension point stays, for a larger budget)
    assert not [p for p in (killed / "results").rglob("*.ckpt") if p.name != "extend.ckpt"]
