"""One network of the frozen-random experiment (``frozen_random``): a derived model or its base model's
all-trainable reference, pretrained as the core makes a network built here (``heal.job.make_network``: staged in a
work folder under its fingerprint, so a re-run with the same settings and token streams keeps it and a killed job
resumes from its checkpoint), then linked into its output folder (``theta0/``, ``trained/``,
``pretrain_curve.parquet``, ``pretrain.json``)."""

from __future__ import annotations

from pathlib import Path

from selfheal.heal import job, staging


def make(network_cfg: dict, eval_cfg: dict, tokens_path: str, network_dir: str, work_dir: str, threads: int = 1):
    staged = Path(work_dir)
    inputs = staging.digest([tokens_path])
    job.make_network("scratch", network_cfg, eval_cfg, tokens_path, None, inputs, staged, threads)
    for name in job.MADE["scratch"]:
        if name != job.BASELINE:  # the experiment compares validation losses, not baselines
            staging.link(staged / name, Path(network_dir) / name)
