"""The workflow on a real SLURM cluster (Debian's slurmctld + slurmd + munge, one node on this machine), submitted
through snakemake-executor-plugin-slurm with the project's profile; results must match a local run.

Needs root and the Debian packages (`.ci/run` installs them); skipped with a reason elsewhere.
"""

import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from test_workflow import ROOT, snakemake

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"
NUMBERS = ["model", "target", "threshold", "recovered", "examples", "steps", "baseline_loss", "damaged_loss",
           "final_loss"]


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "starting slurmctld/slurmd/munged needs root"
    missing = [b for b in ("slurmctld", "slurmd", "munged", "sbatch", "squeue") if shutil.which(b) is None]
    if missing:
        return f"SLURM is not installed ({', '.join(missing)} missing; apt-get install slurmctld slurmd " \
               f"slurm-client munge)"
    import importlib.util

    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e .[slurm])"
    return None


@pytest.fixture(scope="module")
def cluster():
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    already = {d for d in ("munged", "slurmctld", "slurmd")
               if subprocess.run(["pgrep", "-x", d], capture_output=True).returncode == 0}
    subprocess.run(["bash", str(CLUSTER), "start"], check=True, timeout=120)
    yield
    for daemon in ("slurmd", "slurmctld", "munged"):  # stop only what this test started
        if daemon not in already:
            subprocess.run(["pkill", "-x", daemon])


def _profile(tmp_path):
    """profiles/slurm as shipped, minus what this one-node test cluster lacks: GPUs (no GRES), conda channels
    (unreachable here) and big nodes (requests scaled to 1 CPU, 2 GB), plus fast status polling."""
    config = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    config.pop("software-deployment-method")
    for resources in config["set-resources"].values():
        resources.pop("gpu", None)
        resources.update(cpus_per_task=1, mem_mb=min(resources.get("mem_mb", 2000), 2000))  # a 2-core node
    config.pop("set-threads")  # one thread per job, as in the local run, so the numbers match exactly
    config.update({"jobs": 4, "latency-wait": 5, "slurm-no-account": True, "slurm-keep-successful-logs": True,
                   "slurm-init-seconds-before-status-checks": 1, "seconds-between-status-checks": 2})
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump(config))
    return profile


def test_workflow_runs_through_slurm_and_matches_a_local_run(cluster, tmp_path):
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    config["models"] = [config["models"][1]]  # tinyB: one layer, three cells with the controls
    local, remote = tmp_path / "local", tmp_path / "slurm"
    for workdir in (local, remote):
        workdir.mkdir()
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    proc = snakemake(local, local / "config.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]

    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(remote),
           "--configfile", str(remote / "config.yaml"), "--profile", str(_profile(tmp_path))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    # every job went through SLURM: one sbatch log per job, named by its SLURM job id
    slurm_logs = list((remote / ".snakemake" / "slurm_logs").rglob("*.log"))
    n_jobs = len(list((remote / "results" / "logs").rglob("*.log")))
    assert n_jobs >= 12 and len(slurm_logs) == n_jobs, (len(slurm_logs), n_jobs)
    assert all(p.stem.isdigit() for p in slurm_logs)

    want = pd.read_parquet(local / "results" / "summary.parquet")[NUMBERS]
    got = pd.read_parquet(remote / "results" / "summary.parquet")[NUMBERS]
    pd.testing.assert_frame_equal(got, want)
