"""The networks of one model of the frozen-random experiment (``frozen_random``): a derived model's, or its base
model's all-trainable references, one per pretraining seed, in turn in one job (its start-up paid once). Each is
pretrained as the core makes a network built here (``heal.job.make_network``: staged in the work folder under its
fingerprint, so a re-run with the same settings and token streams keeps it, an added seed trains only the new
network, and a killed job resumes from its checkpoint), then linked into its folder in ``out_dir`` (``network``:
the pattern of a network's folder; ``theta0/``, ``trained/``, ``pretrain_curve.parquet``, ``pretrain.json``)."""

from __future__ import annotations

from pathlib import Path

from selfheal import layout
from selfheal.heal import job, staging


def make(
    networks: list[dict], eval_cfg: dict, tokens_path: str, out_dir: str, work_dir: str, network: str, threads: int = 1
) -> None:
    inputs = staging.digest([tokens_path])
    for network_cfg in networks:
        folder = network.format(pretrain_seed=network_cfg["pretrain"]["seed"])
        staged = Path(work_dir) / folder
        job.make_network("scratch", network_cfg, eval_cfg, tokens_path, None, inputs, staged, threads)
        for name in layout.NETWORK_MADE["scratch"]:
            if name != layout.STAGED_BASELINE:  # the experiment compares validation losses, not baselines
                staging.link(staged / name, Path(out_dir) / folder / name)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
