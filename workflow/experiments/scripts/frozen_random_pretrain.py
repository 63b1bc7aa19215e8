"""Shim: pretrain the networks of one model of the frozen-random experiment (a derived model, or its base's
all-trainable references), one per pretraining seed."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.experiments import frozen_pretrain

logs.to_file(snakemake.log[0])
frozen_pretrain.make(
    snakemake.params.networks,
    snakemake.params.eval,
    snakemake.input.tokens,
    snakemake.output[0],
    snakemake.params.work,
    snakemake.params.network,
    threads=snakemake.threads,
)
