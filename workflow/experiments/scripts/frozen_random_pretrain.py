"""Shim: pretrain one network of the frozen-random experiment (a derived model, or its base's reference)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.experiments import frozen_pretrain

logs.to_file(snakemake.log[0])
frozen_pretrain.make(
    snakemake.params.network,
    snakemake.params.eval,
    snakemake.input.tokens,
    snakemake.output[0],
    snakemake.params.work,
    threads=snakemake.threads,
)
