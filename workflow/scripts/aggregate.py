"""Shim: gather every cell and network into the summary, curves and networks tables."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.analysis import tables

logs.to_file(snakemake.log[0])
tables.write(
    snakemake.params.files,  # inside the training jobs' outputs (snakemake.input)
    snakemake.params.thresholds,
    summary_out=snakemake.output.summary,
    curves_out=snakemake.output.curves,
    networks_out=snakemake.output.networks,
    pretraining_tokens=snakemake.params.pretraining_tokens,
)
