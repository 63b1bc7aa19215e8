"""Shim: gather every finetuning and probing score into the transfer tables."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.experiments.transfer import tables

logs.to_file(snakemake.log[0])
tables.aggregate(
    snakemake.params.conditions,
    list(snakemake.input.runs),
    list(snakemake.input.probes),
    snakemake.output.scores,
    snakemake.output.summary,
)
