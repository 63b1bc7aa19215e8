"""The workflow on a real SLURM cluster (Debian's slurmctld + slurmd + munge, one node on this machine), submitted
through snakemake-executor-plugin-slurm with the project's profile: its groups make few, full sbatch jobs (counted
here), an added seed submits only its own unit, and the results must match a local run.

Needs root and the Debian packages (`.ci/run` installs them); skipped with a reason elsewhere.
"""

import os
import shutil
import subprocess
import sys
from collections import Counter

import pandas as pd
import pytest
import yaml
from snakemake_helpers import ROOT, pythonpath

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"
NUMBERS = [
    "model",
    "target",
    "threshold",
    "recovered",
    "examples",
    "steps",
    "baseline_loss",
    "damaged_loss",
    "final_loss",
]


def _slurm_env() -> dict[str, str]:
    """The environment for the cluster and the submissions: tests/conftest.py points SLURM_CONF at an empty file for
    every other Snakemake run; here SLURM reads the /etc/slurm/slurm.conf that tests/slurm/cluster.sh writes."""
    return {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "starting slurmctld/slurmd/munged needs root"
    missing = [b for b in ("slurmctld", "slurmd", "munged", "sbatch", "squeue") if shutil.which(b) is None]
    if missing:
        return (
            f"SLURM is not installed ({', '.join(missing)} missing; apt-get install slurmctld slurmd "
            f"slurm-client munge)"
        )
    import importlib.util

    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e .[slurm])"
    return None


@pytest.fixture(scope="module")
def cluster():
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    already = {
        d
        for d in ("munged", "slurmctld", "slurmd")
        if subprocess.run(["pgrep", "-x", d], capture_output=True).returncode == 0
    }
    subprocess.run(["bash", str(CLUSTER), "start"], check=True, timeout=120, env=_slurm_env())
    yield
    for daemon in ("slurmd", "slurmctld", "munged"):  # stop only what this test started
        if daemon not in already:
            subprocess.run(["pkill", "-x", daemon])


def _profile(tmp_path):
    """profiles/slurm as shipped (its groups included; no conda: its jobs run in the environment snakemake starts
    from), minus what this one-node test cluster lacks: GPUs (no GRES) and big nodes (requests scaled to 1 CPU,
    2 GB per job, 2 cores per group job), plus fast status polling."""
    config = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    assert "software-deployment-method" not in config  # a cluster without conda runs the profile as it is
    for resources in config["set-resources"].values():
        resources.pop("gpu", None)
        resources.update(cpus_per_task=1, mem_mb=min(resources.get("mem_mb", 2000), 2000))  # a 2-core node
    config.pop("set-threads")  # one thread per job, as in the local run, so the numbers match exactly
    config.update(
        {
            "jobs": 4,
            "cores": 2,
            "latency-wait": 5,
            "slurm-no-account": True,
            "slurm-keep-successful-logs": True,
            "slurm-init-seconds-before-status-checks": 1,
            "seconds-between-status-checks": 2,
        }
    )
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump(config))
    return profile


def _submissions(workdir) -> dict[str, int]:
    """sbatch submissions so far, by group (or rule): the plugin writes one log per SLURM job, named by its id,
    under .snakemake/slurm_logs/group_<group>_<its rules>/ (or rule_<rule>/)."""
    logs = list((workdir / ".snakemake" / "slurm_logs").rglob("*.log"))
    assert all(p.stem.isdigit() for p in logs), logs
    return dict(Counter(p.relative_to(workdir / ".snakemake" / "slurm_logs").parts[0].split("_")[1] for p in logs))


def _jobs(workdir) -> int:
    """Snakemake jobs run so far: every rule writes one log under results/logs."""
    return len(list((workdir / "results" / "logs").rglob("*.log")))


def test_grouped_workflow_runs_through_slurm_and_matches_a_local_run(cluster, tmp_path, request):
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    config["models"] = [config["models"][1]]  # tinyB: one layer
    config["grid"]["seeds"] = [0, 1]  # two retrain seeds: one heal unit (the network's), in its network's job
    local, remote = tmp_path / "local", tmp_path / "slurm"
    for workdir in (local, remote):
        workdir.mkdir()
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    # The local reference runs while SLURM works (the SLURM run mostly waits on submissions and polling), and only
    # what the comparison reads: from the session's finished data stages (same corpus and tokenizer) to the summary
    # table (the network's job, which pretrains the network, writes its baseline and heals its unit; aggregate). The
    # SLURM run is the whole workflow.
    request.getfixturevalue("corpus_seed")(local)  # asked for here, so that a machine without SLURM skips first
    local_run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(ROOT / "Snakefile"),
            "--directory",
            str(local),
            "--configfile",
            str(local / "config.yaml"),
            "--cores",
            "1",
            "results/summary.parquet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": pythonpath()},
    )
    profile = _profile(tmp_path)

    def submit(*targets):
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(ROOT / "Snakefile"),
            "--directory",
            str(remote),
            "--configfile",
            str(remote / "config.yaml"),
            "--profile",
            str(profile),
            *targets,
        ]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, env={**_slurm_env(), "PYTHONPATH": pythonpath()}
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    submit()
    _, err = local_run.communicate(timeout=600)
    assert local_run.returncode == 0, err[-3000:]
    # 7 Snakemake jobs (corpus, tokenizer, tokenize, network, aggregate, plots, answer) in 3 sbatch submissions:
    # data, the network's job (pretraining and its heal unit), report; the local reference ran the 2 of them between
    # the data stages and the summary
    assert _jobs(remote) == 7 and _jobs(local) == 2
    assert _submissions(remote) == {"data": 1, "network": 1, "report": 1}

    want = pd.read_parquet(local / "results" / "summary.parquet")[NUMBERS]
    got = pd.read_parquet(remote / "results" / "summary.parquet")[NUMBERS]
    pd.testing.assert_frame_equal(got, want)

    # an added retrain seed submits the network's job again (it keeps the staged network: no pretraining) and the
    # report; the unit keeps the cells of seeds 0 and 1 (their staged files, untouched) and trains only seed 2's
    pretrained = sorted(
        p.stat().st_mtime_ns
        for p in (remote / "results" / "models").rglob("*")
        if p.is_file() and p.name != ".snakemake_timestamp"
    )
    cells = remote / "results" / "cells"
    kept = {p: p.stat().st_mtime_ns for p in cells.rglob("recovery.json")}
    config["grid"]["seeds"] = [0, 1, 2]
    (remote / "config.yaml").write_text(yaml.safe_dump(config))
    # up to the summary, which is what the rest compares (the figures and the page were made and submitted above)
    submit("results/summary.parquet")
    assert _jobs(remote) == 7  # the same jobs' logs, rewritten
    assert _submissions(remote) == {"data": 1, "network": 2, "report": 2}  # the report group: its aggregate job
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    assert {p.parent.parent.name for p in set(cells.rglob("recovery.json")) - set(kept)} == {"s2"}
    assert (
        sorted(
            p.stat().st_mtime_ns
            for p in (remote / "results" / "models").rglob("*")
            if p.is_file() and p.name != ".snakemake_timestamp"
        )
        == pretrained
    )
    got = pd.read_parquet(remote / "results" / "summary.parquet")
    assert sorted(got["seed"].unique()) == [0, 1, 2]
    pd.testing.assert_frame_equal(got[got["seed"] < 2][NUMBERS].reset_index(drop=True), want)
